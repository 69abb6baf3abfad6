import Foundation

/// Remembers the plain Foundation operations given to any `AsyncOperationQueue` until they are
/// released: the order they were added in (so `allOperations` can list everything in add order),
/// that they are on a queue (so a second add is refused instead of reaching Foundation, which
/// would trap), and their identity in log events, once a logger heard of them.
enum PlainOperationRegistry {
    private struct Entry {
        weak var operation: Operation?
        let ticket: UInt64
        /// The queue it was given to, for messages.
        let queue: QueueMention
        /// Its identity in log events, given once a logger heard of it.
        var logID: OperationID?
    }

    private struct Table {
        var entries: [ObjectIdentifier: Entry] = [:]
        var pruneThreshold = 1024
    }

    private static let table = Locked.make(Table())

    /// Why a plain operation cannot be given to a queue.
    enum Refusal {
        /// It was given to an `AsyncOperationQueue` before (Foundation takes an operation once in
        /// its life).
        case alreadyAdded
    }

    /// Records `operation` as added to `queue` with `ticket`, in one step under the lock, so that of several
    /// threads adding the same operation at once exactly one succeeds. Once recorded, an operation
    /// is refused for as long as it lives: Foundation traps on an operation that is on a queue,
    /// executing or finished.
    static func register(_ operation: Operation, on queue: AsyncOperationQueue, ticket: UInt64) -> Refusal? {
        let id = ObjectIdentifier(operation)
        return table.withLock { table -> Refusal? in
            if let previous = table.entries[id]?.operation, previous === operation {
                return .alreadyAdded
            }
            table.entries[id] = Entry(operation: operation, ticket: ticket, queue: queue.mention)
            if table.entries.count >= table.pruneThreshold {
                table.entries = table.entries.filter { $0.value.operation != nil }
                table.pruneThreshold = max(1024, table.entries.count * 2)
            }
            return nil
        }
    }

    /// The ticket `operation` was added with, if it went through an `AsyncOperationQueue`.
    static func ticket(of operation: Operation) -> UInt64? {
        let id = ObjectIdentifier(operation)
        return table.withLock { table in
            guard let entry = table.entries[id], entry.operation === operation else { return nil }
            return entry.ticket
        }
    }

    /// The identity of `operation` in log events: the one it was given when a logger first
    /// heard of it, or a new one (kept for its next events, and for its dependents' `dependencyIDs`
    /// if it went through an `AsyncOperationQueue`).
    static func logID(of operation: Operation) -> OperationID {
        if let known = existingLogID(of: operation) {
            return known
        }
        let new = OperationID.next() // outside the table's lock: it takes a lock of its own
        let id = ObjectIdentifier(operation)
        return table.withLock { table in
            guard let entry = table.entries[id], entry.operation === operation else { return new }
            if let given = entry.logID {
                return given // another thread gave it one meanwhile
            }
            table.entries[id]?.logID = new
            return new
        }
    }

    /// The identity `operation` was given in log events, if a logger heard of it.
    static func existingLogID(of operation: Operation) -> OperationID? {
        let id = ObjectIdentifier(operation)
        return table.withLock { table in
            guard let entry = table.entries[id], entry.operation === operation else { return nil }
            return entry.logID
        }
    }

    /// The queue `operation` was given to, if it went through an `AsyncOperationQueue`.
    static func queue(of operation: Operation) -> QueueMention? {
        let id = ObjectIdentifier(operation)
        return table.withLock { table in
            guard let entry = table.entries[id], entry.operation === operation else { return nil }
            return entry.queue
        }
    }
}
