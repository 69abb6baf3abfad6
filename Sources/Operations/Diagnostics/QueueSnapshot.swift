/// A picture of an `AsyncOperationQueue` at one moment: whether it is suspended, and every
/// unfinished operation on it (those still held in its scheduler included), in add order, each
/// with what it waits for.
///
/// Take one with `AsyncOperationQueue.snapshot()`; the queue's `debugDescription` is its
/// `description`.
///
/// ```swift
/// print(queue.snapshot())
/// // AsyncOperationQueue 'sync': suspended, 2 unfinished operations
/// //   migrate: waiting in line; waits for its queue 'sync' to resume (suspended)
/// //   save: waiting for dependencies; waits for dependency 'migrate'
/// ```
public struct QueueSnapshot: Sendable, Hashable, CustomStringConvertible {
    /// The queue's `name`, if it has one.
    public let name: String?
    /// Whether the queue was suspended.
    public let isSuspended: Bool
    /// The queue's `maxConcurrentOperationCount` (1: serial).
    public let maxConcurrentOperationCount: Int
    /// Every unfinished operation, in the order they were added.
    public let operations: [OperationSnapshot]

    /// Creates a snapshot; the framework makes these, tools and tests read them.
    public init(name: String?, isSuspended: Bool, maxConcurrentOperationCount: Int, operations: [OperationSnapshot]) {
        self.name = name
        self.isSuspended = isSuspended
        self.maxConcurrentOperationCount = maxConcurrentOperationCount
        self.operations = operations
    }

    /// A header line, then one line per operation.
    public var description: String {
        var header = "AsyncOperationQueue" + (name.map { " '\($0)'" } ?? "") + ": "
        header += isSuspended ? "suspended" : "running"
        if maxConcurrentOperationCount == 1 { header += ", serial" }
        header += ", \(operations.count) unfinished operation\(operations.count == 1 ? "" : "s")"
        return ([header] + operations.map { "  \($0)" }).joined(separator: "\n")
    }
}
