import Foundation

/// Where an operation stands in one category's line, for inspection.
struct CategoryStanding {
    let category: String
    let holder: AsyncOperation?
    /// Waiters ahead of it in the category's line; `nil` if it is not in that line.
    let waitersAhead: Int?
}

/// The rules of mutual exclusion, without threads: which categories are held, who is in line.
///
/// Each category keeps its waiters in a line ordered by `LinePlace`; an operation needing several
/// categories stands in each of their lines. Only operations free to run (dependencies finished,
/// conditions passed, a slot on their queue) ask, so the line orders exactly those. The common
/// case, one category, touches the category table once per call (this is the hot path of every
/// exclusive operation).
struct ExclusivityState: Sendable {
    struct Request {
        let place: LinePlace
        let operation: AsyncOperation
        let categories: [String]
    }

    /// The answer to a request.
    enum Acquisition: Equatable {
        /// Every category is held for it now.
        case granted
        /// It waits in its categories' lines; a release or withdrawal grants it later.
        case waits
    }

    /// The answer to a withdrawal.
    enum Withdrawal {
        /// It stood in none of the lines (it was granted meanwhile, say).
        case notInLine
        /// It left the lines; `granted` were let in behind it.
        case withdrew(granted: Granted)
    }

    private struct Waiter {
        let operation: AsyncOperation
        let categories: [String]
    }

    private struct Category {
        /// The operation holding the category, if any (kept until it releases the category, so
        /// an inspector can name it).
        var holder: AsyncOperation?
        var line = TicketLine<Waiter>()

        var isHeld: Bool { holder != nil }
    }

    private var categories: [String: Category] = [:]

    var heldCategories: Set<String> {
        Set(categories.filter { $0.value.isHeld }.keys)
    }

    /// Where the waiter at `place` stands in each of `names`' lines: who holds the category, and
    /// how many waiters are ahead of it (`nil` if it is not in that line).
    func standings(of place: LinePlace, in names: [String]) -> [CategoryStanding] {
        names.map { name in
            let category = categories[name]
            return CategoryStanding(category: name, holder: category?.holder, waitersAhead: category?.line.countAhead(of: place))
        }
    }

    /// An operation free to run asks for its categories: granted if every one is free and
    /// nobody stands ahead of it in their lines; otherwise it takes its place in them.
    mutating func acquire(_ request: Request) -> Acquisition {
        if request.categories.count == 1 {
            return acquireAlone(request)
        }
        if isClearAhead(of: request) {
            hold(request.categories, for: request.operation)
            return .granted
        }
        enterLines(request)
        guard canGrant(place: request.place, categories: request.categories) else { return .waits }
        grant(request.categories, to: request.operation) // it stood first already: asked twice
        return .granted
    }

    mutating func release(_ names: [String]) -> Granted {
        if names.count == 1 {
            return releaseAlone(names[0])
        }
        for name in names {
            categories[name]?.holder = nil
        }
        return Granted(grantWaiters(in: names))
    }

    /// Takes the waiter at `place` out of `names`' lines (it finished, or its queue was
    /// suspended), and lets in whoever that frees.
    mutating func withdraw(place: LinePlace, from names: [String]) -> Withdrawal {
        var wasInLine = false
        for name in names {
            if categories[name]?.line.remove(place: place) != nil { wasInLine = true }
        }
        return wasInLine ? .withdrew(granted: Granted(grantWaiters(in: names))) : .notInLine
    }

    // MARK: One category: a single lookup

    private mutating func acquireAlone(_ request: Request) -> Acquisition {
        withCategory(request.categories[0]) { category in
            if !category.isHeld {
                guard let first = category.line.first else {
                    category.holder = request.operation
                    return .granted
                }
                if request.place <= first.place {
                    if request.place == first.place { category.line.removeFirst() } // asked twice
                    category.holder = request.operation
                    return .granted
                }
            }
            if category.line.position(of: request.place) == nil {
                category.line.insert(Waiter(operation: request.operation, categories: request.categories), place: request.place)
            }
            return .waits
        }
    }

    private mutating func releaseAlone(_ name: String) -> Granted {
        var needsOtherCategories = false
        let granted = withCategory(name) { category -> AsyncOperation? in
            category.holder = nil
            guard let (_, first) = category.line.first else { return nil }
            guard first.categories.count == 1 else {
                needsOtherCategories = true
                return nil
            }
            category.line.removeFirst()
            category.holder = first.operation
            return first.operation
        }
        if needsOtherCategories {
            return Granted(grantWaiters(in: [name]))
        }
        return granted.map(Granted.one) ?? .none
    }

    /// Runs `body` on the named category, creating it if needed and dropping it afterwards if it
    /// is neither held nor waited for, with one hash lookup.
    private mutating func withCategory<Result>(_ name: String, _ body: (inout Category) -> Result) -> Result {
        Self.update(&categories[name], body)
    }

    private static func update<Result>(_ entry: inout Category?, _ body: (inout Category) -> Result) -> Result {
        if entry == nil { entry = Category() }
        let result = body(&entry!)
        if let category = entry, !category.isHeld, category.line.isEmpty { entry = nil }
        return result
    }

    // MARK: Several categories

    private mutating func enterLines(_ request: Request) {
        for name in request.categories {
            withCategory(name) { category in
                if category.line.position(of: request.place) == nil {
                    category.line.insert(Waiter(operation: request.operation, categories: request.categories), place: request.place)
                }
            }
        }
    }

    /// No category held, and nobody ahead in any of the lines.
    private func isClearAhead(of request: Request) -> Bool {
        request.categories.allSatisfy { name in
            guard let category = categories[name] else { return true }
            guard !category.isHeld else { return false }
            guard let first = category.line.first else { return true }
            return request.place < first.place
        }
    }

    /// Every category free, and the waiter at `place` first in each line.
    private func canGrant(place: LinePlace, categories names: [String]) -> Bool {
        names.allSatisfy { name in
            guard let category = categories[name], !category.isHeld else { return false }
            return category.line.first?.place == place
        }
    }

    /// Takes the first waiter out of each of `names`' lines and holds the categories for it.
    private mutating func grant(_ names: [String], to operation: AsyncOperation) {
        for name in names {
            withCategory(name) { category in
                if !category.line.isEmpty { category.line.removeFirst() }
                category.holder = operation
            }
        }
    }

    private mutating func hold(_ names: [String], for operation: AsyncOperation) {
        for name in names {
            withCategory(name) { $0.holder = operation }
        }
    }

    private mutating func grantWaiters(in names: [String]) -> [AsyncOperation] {
        var granted: [AsyncOperation] = []
        for name in names {
            guard let (place, first) = categories[name]?.line.first,
                  canGrant(place: place, categories: first.categories)
            else { continue }
            grant(first.categories, to: first.operation)
            granted.append(first.operation)
        }
        for name in names {
            withCategory(name) { _ in }
        }
        return granted
    }
}
