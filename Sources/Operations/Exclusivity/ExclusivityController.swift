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

    /// Takes an operation out of line (it finished, or its queue was suspended, while in line);
    /// `false` if it was not in line (it was granted its categories meanwhile, say).
    @discardableResult
    func withdraw(place: LinePlace, from categories: [String]) -> Bool {
        let (wasInLine, granted) = state.withLock { $0.withdraw(place: place, from: categories) }
        grant(granted)
        return wasInLine
    }

    /// Where the waiter at `place` stands in each of `categories`' lines, for inspection.
    func standings(of place: LinePlace, in categories: [String]) -> [CategoryStanding] {
        state.withLock { $0.standings(of: place, in: categories) }
    }

    /// Takes an eligible waiter out of line (its queue was suspended); `false` if it was not in
    /// line or not eligible yet (see `ExclusivityState.withdrawIfEligible`).
    func withdrawIfEligible(place: LinePlace, from categories: [String]) -> Bool {
        let (wasInLine, granted) = state.withLock { $0.withdrawIfEligible(place: place, from: categories) }
        grant(granted)
        return wasInLine
    }

    /// The categories currently held, for tests and diagnostics.
    var heldCategories: Set<String> {
        state.withLock { $0.heldCategories }
    }

    private func grant(_ granted: Granted) {
        switch granted {
        case .none:
            break
        case let .one(operation):
            Trampoline.run(with: operation) { $0.categoriesWereGranted() }
        case let .several(operations):
            Trampoline.run(with: operations) { operations in
                for operation in operations {
                    operation.categoriesWereGranted()
                }
            }
        }
    }
}

/// The operations a release or a withdrawal let in, to be told outside the lock. One is the
/// common case, and needs no array.
enum Granted {
    case none
    case one(AsyncOperation)
    case several([AsyncOperation])

    init(_ operations: [AsyncOperation]) {
        switch operations.count {
        case 0: self = .none
        case 1: self = .one(operations[0])
        default: self = .several(operations)
        }
    }

    var all: [AsyncOperation] {
        switch self {
        case .none: []
        case let .one(operation): [operation]
        case let .several(operations): operations
        }
    }
}
