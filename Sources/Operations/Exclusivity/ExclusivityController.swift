/// Process-wide mutual exclusion for operation categories.
///
/// An operation asks for its categories once it is otherwise free to run: its dependencies
/// finished, its conditions passed, and its queue has its turn and a slot for it. It then takes
/// its place in the line of each of its categories, by the order operations were added to queues;
/// a group's children stand where their outermost group stands (see `LinePlace`), so an operation
/// waiting for a group's category never shuts out the group's own children. It is granted its
/// categories when none is held and it is first in each of its lines. An operation still waiting
/// for anything else has no place yet, so nothing it waits for is ever stuck behind it.
///
/// Because every line is ordered by the same places, the lowest place in line is first in all of
/// its lines, so overlapping categories never deadlock. Waiting happens here, outside
/// Foundation's queue, so a waiting operation occupies no concurrency slot.
final class ExclusivityController: Sendable {
    private let state = Locked<ExclusivityState>.make(ExclusivityState())

    /// Asks for `categories` for `operation`, which is free to run (its conditions passed, its
    /// queue has a slot for it).
    func acquire(_ categories: [String], for operation: AsyncOperation, place: LinePlace) -> ExclusivityState.Acquisition {
        let answer = state.withLock { $0.acquire(ExclusivityState.Request(place: place, operation: operation, categories: categories)) }
        switch answer {
        case let .granted(letIn), let .waits(letIn):
            grant(letIn) // others; the asking operation goes on when this returns
        }
        return answer
    }

    /// Gives `categories` back and lets the next operations in.
    func release(_ categories: [String]) {
        grant(state.withLock { $0.release(categories) })
    }

    /// Takes an operation out of line (it finished, or its queue was suspended, while in line);
    /// `false` if it was not in line (it was granted its categories meanwhile, say).
    @discardableResult
    func withdraw(place: LinePlace, from categories: [String]) -> Bool {
        switch state.withLock({ $0.withdraw(place: place, from: categories) }) {
        case .notInLine:
            return false
        case let .withdrew(granted):
            grant(granted)
            return true
        }
    }

    /// Where the waiter at `place` stands in each of `categories`' lines, for inspection.
    func standings(of place: LinePlace, in categories: [String]) -> [CategoryStanding] {
        state.withLock { $0.standings(of: place, in: categories) }
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
            Trampoline.run(with: (operation, self)) { $0.0.categoriesWereGranted(by: $0.1, whileAsking: false) }
        case let .several(operations):
            Trampoline.run(with: (operations, self)) { operations, controller in
                for operation in operations {
                    operation.categoriesWereGranted(by: controller, whileAsking: false)
                }
            }
        }
    }
}

/// The operations a release, a withdrawal or a new waiter let in, to be told outside the lock.
/// One is the common case, and needs no array.
enum Granted: Equatable {
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

    static func == (lhs: Granted, rhs: Granted) -> Bool {
        lhs.all.map(ObjectIdentifier.init) == rhs.all.map(ObjectIdentifier.init)
    }

    var all: [AsyncOperation] {
        switch self {
        case .none: []
        case let .one(operation): [operation]
        case let .several(operations): operations
        }
    }
}
