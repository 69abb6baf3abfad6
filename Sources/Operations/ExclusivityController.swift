/// Process-wide mutual exclusion for operation categories.
///
/// An operation that needs categories either holds all of them or waits in every one of their
/// lines at once, in ticket order (the order operations were added to queues). It is granted its
/// categories when none is held and it is first in each line. Because every line is ordered by the
/// same tickets, the waiter with the lowest ticket is always first in all of its lines, so
/// overlapping categories can never deadlock. Waiting happens here, outside Foundation's queue,
/// so a waiting operation occupies no concurrency slot.
final class ExclusivityController: Sendable {
    static let shared = ExclusivityController()

    private let state = Locked<ExclusivityState>.make(ExclusivityState())

    /// Takes `categories` for `operation` now (`true`), or queues it and calls
    /// `categoriesWereGranted()` later (`false`).
    func acquire(_ categories: [String], for operation: AsyncOperation, ticket: UInt64) -> Bool {
        state.withLock { $0.acquire(ExclusivityState.Request(ticket: ticket, operation: operation, categories: categories)) }
    }

    /// Gives `categories` back and lets the next waiters in.
    func release(_ categories: [String]) {
        grant(state.withLock { $0.release(categories) })
    }

    /// Takes a waiting operation out of line (it finished while waiting).
    func withdraw(ticket: UInt64, from categories: [String]) {
        grant(state.withLock { $0.withdraw(ticket: ticket, from: categories) })
    }

    /// The categories currently held, for tests and diagnostics.
    var heldCategories: Set<String> {
        state.withLock { $0.heldCategories }
    }

    private func grant(_ granted: [AsyncOperation]) {
        guard !granted.isEmpty else { return }
        Trampoline.run {
            for operation in granted {
                operation.categoriesWereGranted()
            }
        }
    }
}

/// The rules of mutual exclusion, without threads: which categories are held, who waits.
struct ExclusivityState {
    struct Request {
        let ticket: UInt64
        let operation: AsyncOperation
        let categories: [String]
    }

    private struct Category {
        var isHeld = false
        var line = TicketLine<Request>()
    }

    private var categories: [String: Category] = [:]

    var heldCategories: Set<String> {
        Set(categories.filter { $0.value.isHeld }.keys)
    }

    mutating func acquire(_ request: Request) -> Bool {
        if canGrantImmediately(request) {
            for name in request.categories {
                categories[name, default: Category()].isHeld = true
            }
            return true
        }
        for name in request.categories {
            categories[name, default: Category()].line.insert(request, ticket: request.ticket)
        }
        return false
    }

    mutating func release(_ names: [String]) -> [AsyncOperation] {
        for name in names {
            categories[name]?.isHeld = false
        }
        return grantWaiters(in: names)
    }

    mutating func withdraw(ticket: UInt64, from names: [String]) -> [AsyncOperation] {
        for name in names {
            categories[name]?.line.remove(ticket: ticket)
        }
        return grantWaiters(in: names)
    }

    private func canGrantImmediately(_ request: Request) -> Bool {
        request.categories.allSatisfy { name in
            guard let category = categories[name] else { return true }
            guard !category.isHeld else { return false }
            guard let first = category.line.first else { return true }
            return first.ticket > request.ticket
        }
    }

    private func isFirstInEveryLine(_ request: Request) -> Bool {
        request.categories.allSatisfy { name in
            guard let category = categories[name], !category.isHeld else { return false }
            return category.line.first?.ticket == request.ticket
        }
    }

    private mutating func grantWaiters(in names: [String]) -> [AsyncOperation] {
        var granted: [AsyncOperation] = []
        for name in names {
            guard let candidate = categories[name]?.line.first?.element, isFirstInEveryLine(candidate) else { continue }
            for category in candidate.categories {
                categories[category]?.line.removeFirst()
                categories[category]?.isHeld = true
            }
            granted.append(candidate.operation)
        }
        for name in names where categories[name].map({ !$0.isHeld && $0.line.isEmpty }) == true {
            categories[name] = nil
        }
        return granted
    }
}
