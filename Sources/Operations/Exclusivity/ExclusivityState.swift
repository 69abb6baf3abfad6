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
///
/// One exception to the order keeps groups from deadlocking: an operation of a group's tree may go
/// ahead of a waiter that cannot be granted before that group finishes, because it needs a
/// category the tree holds, or stands behind such a waiter in one of its lines (see
/// `waitersHeldUp(byTreeOf:)`). Since any change may make such a waiter (a new one in line, a
/// release, a withdrawal), every change that leaves a free category with waiters looks again at
/// every such category (`letInWhoeverMayGo()`).
struct ExclusivityState: Sendable {
    struct Request {
        let place: LinePlace
        let operation: AsyncOperation
        let categories: [String]
    }

    /// The answer to a request.
    enum Acquisition: Equatable {
        /// Every category is held for it now. Held by a group's tree, they may have let in others:
        /// members of that tree that may now go ahead of waiters the grant holds up.
        case granted(letIn: Granted)
        /// It waits in its categories' lines; a release or withdrawal grants it later. Standing in
        /// line, it may have let in others: members of a group's tree that may now go ahead of it.
        case waits(letIn: Granted)

        /// It holds them, and let nobody in.
        static let granted = Acquisition.granted(letIn: .none)
        /// It waits, and let nobody in.
        static let waits = Acquisition.waits(letIn: .none)
    }

    /// The answer to a withdrawal.
    enum Withdrawal {
        /// It stood in none of the lines (it was granted meanwhile, say).
        case notInLine
        /// It left the lines; `granted` were let in behind it.
        case withdrew(granted: Granted)
    }

    private struct Waiter {
        let place: LinePlace
        let operation: AsyncOperation
        let categories: [String]

        init(_ request: Request) {
            place = request.place
            operation = request.operation
            categories = request.categories
        }
    }

    private struct Category {
        /// The operation holding the category, if any (kept until it releases the category, so
        /// an inspector can name it), and the root of its place (its outermost group's ticket).
        var holder: AsyncOperation?
        var holderRoot: UInt64 = 0
        var line = TicketLine<Waiter>()

        var isHeld: Bool { holder != nil }
        /// Neither held nor waited for: it can leave the table.
        var isIdle: Bool { holder == nil && line.isEmpty }
    }

    private var categories = CategoryTable<Category>()

    var heldCategories: Set<String> {
        Set(categories.names { $0.isHeld })
    }

    /// Where the waiter at `place` stands in each of `names`' lines: who holds the category, and
    /// how many waiters are ahead of it (`nil` if it is not in that line).
    func standings(of place: LinePlace, in names: [String]) -> [CategoryStanding] {
        names.map { name in
            let category = categories[name]
            return CategoryStanding(category: name, holder: category?.holder, waitersAhead: category?.line.countAhead(of: place))
        }
    }

    /// An operation free to run asks for its categories: granted if every one is free and it may
    /// go ahead of whoever stands in their lines (see `mayGoAhead`); otherwise it takes its place
    /// in them.
    mutating func acquire(_ request: Request) -> Acquisition {
        if request.categories.count == 1 {
            return acquireAlone(request)
        }
        if canGrant(place: request.place, categories: request.categories) {
            grant(request.categories, to: request.operation, at: request.place)
            return .granted(letIn: Granted(lettingIn(afterChangeBy: request.place)))
        }
        enterLines(request)
        return .waits(letIn: Granted(letInWhoeverMayGo()))
    }

    mutating func release(_ names: [String]) -> Granted {
        if names.count == 1 {
            return releaseAlone(names[0])
        }
        for name in names {
            categories.update(name) { $0?.holder = nil }
        }
        return Granted(grantWaiters(in: names) + letInWhoeverMayGo())
    }

    /// Takes the waiter at `place` out of `names`' lines (it finished, or its queue was
    /// suspended), and lets in whoever that frees.
    mutating func withdraw(place: LinePlace, from names: [String]) -> Withdrawal {
        var wasInLine = false
        for name in names {
            if categories.update(name, { $0?.line.remove(place: place) }) != nil { wasInLine = true }
        }
        return wasInLine ? .withdrew(granted: Granted(grantWaiters(in: names) + letInWhoeverMayGo())) : .notInLine
    }

    // MARK: Who may go ahead

    /// Whether an operation at `place` may have `category`, free, before the waiters in its line:
    /// none stands ahead of it, or every one ahead is held up by the operation's own tree (see
    /// `waitersHeldUp(byTreeOf:)`). Such a waiter could not run before the tree's group finishes,
    /// and that group may be waiting for this very operation, its child: making the child wait
    /// for the waiter would close a circle. (Waiters added after the group stand behind its
    /// children anyway: see `LinePlace`.)
    private func mayGoAhead(in category: Category, place: LinePlace, heldUpByTree: inout [UInt64: Set<LinePlace>]) -> Bool {
        guard let firstPlace = category.line.firstPlace, firstPlace < place else { return true }
        let heldUp = heldUpByTree[place.root] ?? waitersHeldUp(byTreeOf: place.root)
        heldUpByTree[place.root] = heldUp
        return category.line.allAhead(of: place) { heldUp.contains($0.place) }
    }

    /// The waiters that cannot be granted before the tree rooted at `root` (a group and
    /// everything inside it) finishes. A waiter is held up so when
    /// - a category it needs is held by an operation of that tree;
    /// - or held by an operation of another tree, one of whose waiters is held up so (a group
    ///   keeps its categories until every child finished);
    /// - or, in the line of a category it needs, a waiter ahead of it is held up so (lines grant
    ///   in order, so it would wait for that one).
    /// The soak found each of these circles: a group holding A whose child waits in B's line
    /// behind X, which needs B and C and waits in C's line behind Y, which needs A; or a group
    /// holding A whose child waits for C behind X, which needs B, held by a group whose child
    /// needs D, held by the first group. The rules refer to each other, so the answer is built up
    /// until nothing more is added (a search that stopped at a circle of its own would miss some).
    private func waitersHeldUp(byTreeOf root: UInt64) -> Set<LinePlace> {
        // Nothing is held up by a tree that holds nothing: the common case, one look per category.
        guard categories.containsValue(where: { $0.isHeld && $0.holderRoot == root }) else { return [] }
        var waiters: [LinePlace: Waiter] = [:]
        categories.forEachValue { category in
            for waiter in category.line.elements { waiters[waiter.place] = waiter }
        }
        var heldUp = Set<LinePlace>()
        var treesHeldUp: Set<UInt64> = [root]
        var added = true
        while added {
            added = false
            for (place, waiter) in waiters where !heldUp.contains(place) {
                guard isHeldUp(waiter, heldUp: heldUp, treesHeldUp: treesHeldUp) else { continue }
                heldUp.insert(place)
                treesHeldUp.insert(place.root)
                added = true
            }
        }
        return heldUp
    }

    private func isHeldUp(_ waiter: Waiter, heldUp: Set<LinePlace>, treesHeldUp: Set<UInt64>) -> Bool {
        waiter.categories.contains { name in
            guard let category = categories[name] else { return false }
            if category.isHeld, treesHeldUp.contains(category.holderRoot) { return true }
            return !category.line.allAhead(of: waiter.place) { !heldUp.contains($0.place) }
        }
    }

    /// Every category free, and the operation at `place` may go ahead in each line.
    private func canGrant(place: LinePlace, categories names: [String]) -> Bool {
        var heldUpByTree: [UInt64: Set<LinePlace>] = [:]
        return canGrant(place: place, categories: names, heldUpByTree: &heldUpByTree)
    }

    /// `heldUpByTree`: what `waitersHeldUp(byTreeOf:)` answered, while nothing changed.
    private func canGrant(place: LinePlace, categories names: [String], heldUpByTree: inout [UInt64: Set<LinePlace>]) -> Bool {
        names.allSatisfy { name in
            guard let category = categories[name] else { return true }
            return !category.isHeld && mayGoAhead(in: category, place: place, heldUpByTree: &heldUpByTree)
        }
    }

    // MARK: One category: a single lookup in the common case

    private enum LoneAnswer {
        case granted
        case waits
        /// Free, but others stand ahead: whether it may go ahead needs a look at other lines.
        case needsLook
    }

    private mutating func acquireAlone(_ request: Request) -> Acquisition {
        let name = request.categories[0]
        let answer = withCategory(name) { category -> LoneAnswer in
            guard !category.isHeld else {
                category.line.insert(Waiter(request), place: request.place)
                return .waits
            }
            guard let firstPlace = category.line.firstPlace, firstPlace < request.place else {
                category.line.remove(place: request.place) // it stood first already: asked twice
                category.holder = request.operation
                category.holderRoot = request.place.root
                return .granted
            }
            return .needsLook
        }
        switch answer {
        case .granted: return .granted(letIn: Granted(lettingIn(afterChangeBy: request.place)))
        case .waits: return .waits(letIn: Granted(lettingIn(afterChangeBy: request.place)))
        case .needsLook: break
        }
        if canGrant(place: request.place, categories: request.categories) {
            grant(request.categories, to: request.operation, at: request.place)
            return .granted(letIn: Granted(lettingIn(afterChangeBy: request.place)))
        }
        enterLines(request)
        return .waits(letIn: Granted(letInWhoeverMayGo()))
    }

    /// Whoever may go now that the operation at `place` was granted a category, or lined up
    /// behind one that another tree holds, with no line of a free category changed. Done by a
    /// group's child, either holds up waiters elsewhere through a group's tree (the waiters for
    /// what it was granted; or, lining up, its own group and the waiters for that group's
    /// categories), and members of the other tree may then go ahead of them: look again. A
    /// top-level operation's tree has nobody else in line (its children, if it is a group, ask
    /// only once it executes), so its change leaves every answer as it was.
    private mutating func lettingIn(afterChangeBy place: LinePlace) -> [AsyncOperation] {
        place.isInAGroup ? letInWhoeverMayGo() : []
    }

    private mutating func releaseAlone(_ name: String) -> Granted {
        var needsLook = false
        let granted = withCategory(name) { category -> (AsyncOperation, LinePlace)? in
            category.holder = nil
            guard let place = category.line.firstPlace else { return nil }
            guard category.line.firstSatisfies({ $0.categories.count == 1 }) else {
                needsLook = true
                return nil
            }
            let first = category.line.removeFirst()
            category.holder = first.operation
            category.holderRoot = place.root
            return (first.operation, place)
        }
        if needsLook {
            return Granted(grantWaiters(in: [name]) + letInWhoeverMayGo())
        }
        guard let (operation, place) = granted else { return .none }
        let others = lettingIn(afterChangeBy: place)
        return others.isEmpty ? .one(operation) : Granted([operation] + others)
    }

    /// Runs `body` on the named category, creating it if needed and dropping it afterwards if it
    /// is neither held nor waited for, with one lookup.
    private mutating func withCategory<Result>(_ name: String, _ body: (inout Category) -> Result) -> Result {
        categories.update(name) { Self.update(&$0, body) }
    }

    private static func update<Result>(_ entry: inout Category?, _ body: (inout Category) -> Result) -> Result {
        if entry == nil { entry = Category() }
        let result = body(&entry!)
        if entry?.isIdle == true { entry = nil } // read in place: `if let` would copy the category
        return result
    }

    // MARK: Several categories

    private mutating func enterLines(_ request: Request) {
        for name in request.categories {
            withCategory(name) { category -> Void in
                category.line.insert(Waiter(request), place: request.place)
            }
        }
    }

    /// Holds `names` for `operation` at `place`, taking it out of their lines if it stood there.
    private mutating func grant(_ names: [String], to operation: AsyncOperation, at place: LinePlace) {
        for name in names {
            withCategory(name) { category in
                category.line.remove(place: place)
                category.holder = operation
                category.holderRoot = place.root
            }
        }
    }

    /// Lets in, for each of `names` (just freed), the first waiter of its line that can have
    /// every category it needs now.
    private mutating func grantWaiters(in names: [String]) -> [AsyncOperation] {
        var granted: [AsyncOperation] = []
        for name in names {
            guard let line = categories[name]?.line, !line.isEmpty, categories[name]?.isHeld == false else { continue }
            guard let (place, waiter) = line.first(where: { place, waiter in
                canGrant(place: place, categories: waiter.categories)
            }) else { continue }
            grant(waiter.categories, to: waiter.operation, at: place)
            granted.append(waiter.operation)
        }
        for name in names {
            withCategory(name) { _ in }
        }
        return granted
    }

    /// Lets in, in every free category with waiters, the first waiter that can have every
    /// category it needs now, until nobody else can go. A waiter may become free to go ahead of
    /// others without any release of its categories (see `waitersHeldUp(byTreeOf:)`), so a change
    /// anywhere calls this. Free categories with waiters are rare (a line forms behind a holder),
    /// so this is usually one look at the table.
    private mutating func letInWhoeverMayGo() -> [AsyncOperation] {
        var granted: [AsyncOperation] = []
        var lookAgain = true
        while lookAgain {
            lookAgain = false
            let freeWithWaiters = categories.names { !$0.isHeld && !$0.line.isEmpty }
            var heldUpByTree: [UInt64: Set<LinePlace>] = [:] // valid until the next grant
            for name in freeWithWaiters {
                guard let line = categories[name]?.line, categories[name]?.isHeld == false else { continue }
                guard let (place, waiter) = line.first(where: { place, waiter in
                    canGrant(place: place, categories: waiter.categories, heldUpByTree: &heldUpByTree)
                }) else { continue }
                heldUpByTree = [:]
                grant(waiter.categories, to: waiter.operation, at: place)
                granted.append(waiter.operation)
                lookAgain = true
            }
        }
        return granted
    }
}
