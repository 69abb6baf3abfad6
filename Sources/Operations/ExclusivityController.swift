/// Process-wide mutual exclusion for operation categories.
///
/// An operation takes its place in the line of each of its categories when its dependencies have
/// finished and its conditions start being evaluated (a *reservation*), in the order operations
/// were added to queues; a group's children stand where their outermost group stands (see
/// `LinePlace`), so an operation waiting for a group's category never shuts out the group's own
/// children. Once its conditions pass it becomes *eligible*, and it is
/// granted its categories when none is held and it is first in each of its lines. An operation
/// still waiting for its dependencies has no place yet, so a later operation it depends on is
/// never stuck behind it.
///
/// Because every line is ordered by the same places, the lowest place in line is first in all of
/// its lines, so overlapping categories never deadlock. Waiting happens here, outside
/// Foundation's queue, so a waiting operation occupies no concurrency slot.
final class ExclusivityController: Sendable {
    static let shared = ExclusivityController()

    private let state = Locked<ExclusivityState>.make(ExclusivityState())

    /// Takes `operation`'s place in line while its conditions are evaluated, unless it has
    /// already moved on (its conditions answered, or it finished) in the meantime.
    func reserve(for operation: AsyncOperation) {
        state.withLock { state in
            // The operation's lock is taken inside this one; nothing takes them the other way round.
            guard let (place, categories) = operation.enterLineIfStillEvaluating() else { return }
            state.reserve(ExclusivityState.Request(place: place, operation: operation, categories: categories))
        }
    }

    /// Asks for `categories` for `operation`, whose conditions passed: `true` if granted now;
    /// otherwise `categoriesWereGranted()` is called later.
    func acquire(_ categories: [String], for operation: AsyncOperation, place: LinePlace) -> Bool {
        state.withLock { $0.acquire(ExclusivityState.Request(place: place, operation: operation, categories: categories)) }
    }

    /// Gives `categories` back and lets the next operations in.
    func release(_ categories: [String]) {
        grant(state.withLock { $0.release(categories) })
    }

    /// Takes an operation out of line (it finished, or its queue was suspended, while in line).
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

/// The rules of mutual exclusion, without threads: which categories are held, who is in line.
struct ExclusivityState {
    struct Request {
        let place: LinePlace
        let operation: AsyncOperation
        let categories: [String]
        var isEligible = false

        var ticket: UInt64 { place.ticket }
    }

    private struct Category {
        var isHeld = false
        var line = TicketLine<UInt64>() // tickets, in line order
    }

    private var categories: [String: Category] = [:]
    /// Everyone in line, by ticket.
    private var requests: [UInt64: Request] = [:]

    var heldCategories: Set<String> {
        Set(categories.filter { $0.value.isHeld }.keys)
    }

    mutating func reserve(_ request: Request) {
        guard requests[request.ticket] == nil else { return }
        requests[request.ticket] = request
        for name in request.categories {
            categories[name, default: Category()].line.insert(request.ticket, place: request.place)
        }
    }

    mutating func acquire(_ request: Request) -> Bool {
        if requests[request.ticket] == nil {
            if isClearAhead(of: request) {
                hold(request.categories)
                return true
            }
            reserve(request)
        }
        requests[request.ticket]?.isEligible = true
        guard let waiting = requests[request.ticket], canGrant(waiting) else { return false }
        grant(waiting)
        return true
    }

    mutating func release(_ names: [String]) -> [AsyncOperation] {
        for name in names {
            categories[name]?.isHeld = false
        }
        return grantWaiters(in: names)
    }

    mutating func withdraw(ticket: UInt64, from names: [String]) -> [AsyncOperation] {
        guard let request = requests.removeValue(forKey: ticket) else { return [] }
        for name in names {
            categories[name]?.line.remove(place: request.place)
        }
        return grantWaiters(in: names)
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

    private func canGrant(_ request: Request) -> Bool {
        request.isEligible && request.categories.allSatisfy { name in
            guard let category = categories[name], !category.isHeld else { return false }
            return category.line.first?.element == request.ticket
        }
    }

    private mutating func grant(_ request: Request) {
        requests[request.ticket] = nil
        for name in request.categories {
            categories[name]?.line.removeFirst()
        }
        hold(request.categories)
    }

    private mutating func hold(_ names: [String]) {
        for name in names {
            categories[name, default: Category()].isHeld = true
        }
    }

    private mutating func grantWaiters(in names: [String]) -> [AsyncOperation] {
        var granted: [AsyncOperation] = []
        for name in names {
            guard let ticket = categories[name]?.line.first?.element,
                  let candidate = requests[ticket], canGrant(candidate)
            else { continue }
            grant(candidate)
            granted.append(candidate.operation)
        }
        for name in names where categories[name].map({ !$0.isHeld && $0.line.isEmpty }) == true {
            categories[name] = nil
        }
        return granted
    }
}
