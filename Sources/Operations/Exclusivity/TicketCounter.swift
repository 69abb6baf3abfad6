/// The order in which operations are added to an engine's queues (`OperationsEngine.tickets`).
///
/// Mutual exclusion starts operations of a category in ticket order, on every queue.
final class TicketCounter: Sendable {
    private let counter = Locked<UInt64>.make(0)

    /// The next ticket: greater than every one handed out before.
    func next() -> UInt64 {
        counter.withLock { value in
            value += 1
            return value
        }
    }
}
