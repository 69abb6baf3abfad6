import Foundation

/// Remembers the plain Foundation operations given to any `AsyncOperationQueue` until they are
/// released: the order they were added in (so `allOperations` can list everything in add order)
/// and that they are on a queue (so a second add is refused instead of reaching Foundation,
/// which would trap).
enum PlainOperationRegistry {
    private struct Entry {
        weak var operation: Operation?
        let ticket: UInt64
    }

    private struct Table {
        var entries: [ObjectIdentifier: Entry] = [:]
        var pruneThreshold = 1024
    }

    private static let table = Locked.make(Table())

    /// Records `operation` as added with `ticket`; `false` if it is already on a queue.
    static func register(_ operation: Operation, ticket: UInt64) -> Bool {
        let id = ObjectIdentifier(operation)
        let previous = table.withLock { $0.entries[id]?.operation }
        if let previous, previous === operation, !previous.isFinished {
            return false
        }
        table.withLock { table in
            table.entries[id] = Entry(operation: operation, ticket: ticket)
            if table.entries.count >= table.pruneThreshold {
                table.entries = table.entries.filter { $0.value.operation != nil }
                table.pruneThreshold = max(1024, table.entries.count * 2)
            }
        }
        return true
    }

    /// The ticket `operation` was added with, if it went through an `AsyncOperationQueue`.
    static func ticket(of operation: Operation) -> UInt64? {
        let id = ObjectIdentifier(operation)
        return table.withLock { table in
            guard let entry = table.entries[id], entry.operation === operation else { return nil }
            return entry.ticket
        }
    }
}
