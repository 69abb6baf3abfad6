/// Process-wide order in which operations are added to queues.
///
/// Mutual exclusion starts operations of a category in ticket order, on every queue.
enum Ticket {
    private static let counter = Locked<UInt64>.make(0)

    static func next() -> UInt64 {
        counter.withLock { value in
            value += 1
            return value
        }
    }
}
