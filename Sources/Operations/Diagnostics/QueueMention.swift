import Foundation

/// A queue as messages and log events name it: what an operation remembers of the queue it is
/// on, or ran on, without keeping that queue alive.
///
/// Every `AsyncOperationQueue` owns one and keeps it up to date with its `name` and its group.
/// Operations hold it strongly. A weak reference to the queue itself would do the same job, but
/// the first one gives the queue a side table, and from then on every retain and release of the
/// queue (several per operation, most of them Foundation's) takes Swift's slow path: about 5% of
/// a trivial operation's instructions.
final class QueueMention: Sendable {
    private struct Names {
        var name: String?
        /// Whether `name` was given (set through `name`), rather than Foundation's default name,
        /// which holds the queue's address.
        var isGiven = false
        /// The group whose children the queue runs, if any: it names the queue after itself.
        weak var group: GroupOperation?
        /// That group's type, which names the queue once the group is gone.
        var groupType: GroupOperation.Type?
    }

    private let names: Locked<Names>
    /// What the queue is called when it has no name: its type. Spelled out only then, since the
    /// first `String(describing:)` of a process looks up conformances (millions of instructions)
    /// and a queue nearly always has a name (Foundation gives it one).
    private let queueType: OperationQueue.Type

    /// The mention of a queue of ours, named `name`, whose type is `type`.
    init(name: String?, type: OperationQueue.Type) {
        names = Locked.make(Names(name: name))
        queueType = type
    }

    /// What is known now of a queue that is not ours (a plain `OperationQueue` that started an
    /// operation): its name as it is now. Reads `queue.name`, which a subclass may override:
    /// call it outside every lock.
    convenience init(describing queue: OperationQueue) {
        self.init(name: queue.name, type: type(of: queue))
        rename(queue.name) // whether it was given or is Foundation's default cannot be told
    }

    /// The mention of any queue: its own, if it is one of ours; otherwise what is known of it now
    /// (reads its `name`: call it outside every lock).
    static func of(_ queue: OperationQueue) -> QueueMention {
        (queue as? AsyncOperationQueue)?.mention ?? QueueMention(describing: queue)
    }

    /// The queue's `name`, as it was last set.
    var name: String? {
        names.withLock { $0.name }
    }

    /// The name the queue was given, if it was given one: `nil` while it has Foundation's default
    /// name (`NSOperationQueue 0x…`, one per queue), which would give every unnamed queue a log
    /// field, a trace attribute and a metrics label of its own.
    var givenName: String? {
        names.withLock { $0.isGiven ? $0.name : nil }
    }

    /// The queue's name, or its type when it has none; a group's own queue is called after its
    /// group.
    var displayName: String {
        groupQueueName ?? names.withLock { $0.name } ?? String(describing: queueType)
    }

    /// What a group's own queue is called, after its group; `nil` for any other queue.
    var groupQueueName: String? {
        let (group, groupType) = names.withLock { ($0.group, $0.groupType) }
        if let group {
            return "children of \(group.displayName)" // reads the group's name: outside the lock
        }
        return groupType.map { "children of \($0)" }
    }

    /// The queue's `name` was set to `name`.
    func rename(_ name: String?) {
        names.withLock { names in
            names.name = name
            names.isGiven = true
        }
    }

    /// The queue starts with Foundation's default name, `name`.
    func startNamed(_ name: String?) {
        names.withLock { names in
            names.name = name
            names.isGiven = false
        }
    }

    func attach(to group: GroupOperation) {
        let groupType = type(of: group)
        names.withLock { names in
            names.group = group
            names.groupType = groupType
        }
    }
}
