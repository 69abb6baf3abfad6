import Foundation

/// A report of a misuse the framework detected and handled without crashing.
///
/// Diagnostics go to `OperationDiagnostics.handler`, which by default prints them to standard
/// error. Where the misuse means an operation cannot run, the operation also finishes with an
/// `AsyncOperationError` that says why.
public struct OperationDiagnostic: Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: String, Sendable, CaseIterable {
        /// An operation was added to a queue while already on one; the second add was ignored.
        case addedTwice
        /// A finished (or executing) operation was added to a queue; the add was ignored.
        case addedAfterFinishing
        /// An operation's dependencies form a cycle; it finishes with `.dependencyCycle`.
        case dependencyCycle
        /// `finish(with:)` (or `finish(producing:)`) was called on an operation that had already
        /// finished; the call was ignored.
        case finishedTwice
        /// An `AsyncBlockOperation`'s continuation was called a second time; the call was ignored.
        case continuationCalledTwice
        /// A condition released its completion without calling it; the operation fails.
        case conditionNeverAnswered
        /// A condition did not answer in time; the operation fails.
        case conditionTimedOut
        /// A dependency, condition or observer was added too late to take effect.
        case configuredTooLate
        /// `produce(_:)` was called on an operation that is not on a queue; the produced
        /// operation runs on a shared fallback queue instead.
        case producedWithoutQueue
        /// `start()` was called on an operation that a queue is managing, or before its
        /// dependencies finished.
        case startedOutOfTurn
        /// A child needs a mutually exclusive category its enclosing group holds; it fails with
        /// `AsyncOperationError.categoryHeldByEnclosingGroup` instead of waiting forever.
        case categoryHeldByEnclosingGroup
        /// An operation has waited (not executed) longer than its queue's
        /// `stallReportThreshold`; the message says what it waits for. Reported once per
        /// operation; nothing is changed.
        case stalled
        /// An operation was awaited (`finished()`, `value`) but was still on no queue a second
        /// later: it finishes only once it is added to one. Also reported when the awaiting task
        /// is cancelled while the operation is on no queue: the wait ends at once.
        case awaitedOffQueue
        /// A group API that means nothing for this kind of group was used: children added to a
        /// `RetryOperation` from outside (they finish cancelled), or its
        /// `maxConcurrentOperationCount` set (ignored).
        case notSupported
        /// An operation names a mutually exclusive category with a `CategoryLock` other than the
        /// one already naming it in this process; it finishes with
        /// `AsyncOperationError.categoryLockConflict` instead of executing without exclusion.
        case categoryLockConflict
    }

    /// What went wrong.
    public let kind: Kind
    /// The name of the operation involved (its `name`, or its type when it has none).
    public let operationName: String
    /// The names of the queues involved, most relevant first: the queue the operation is on (or
    /// ran on), then, for an add that was refused, the queue that refused it. Empty when the
    /// operation is on no queue.
    public let queueNames: [String]
    /// A sentence that explains what happened and what the framework did about it, naming what
    /// was lost (the error an ignored call passed, say) and where the ignored call was made.
    public let message: String

    /// Creates a diagnostic; the framework makes these, tests and custom handlers read them.
    public init(kind: Kind, operationName: String, message: String) {
        self.init(kind: kind, operationName: operationName, queueNames: [], message: message)
    }

    /// Creates a diagnostic that names the queues involved.
    public init(kind: Kind, operationName: String, queueNames: [String], message: String) {
        self.kind = kind
        self.operationName = operationName
        self.queueNames = queueNames
        self.message = message
    }

    /// One line: `[Operations] kind (operation, queue 'name'): message`.
    public var description: String {
        let queues = queueNames.map { "'\($0)'" }.joined(separator: ", ")
        let place = queueNames.isEmpty ? "" : (queueNames.count == 1 ? ", queue " : ", queues ") + queues
        return "[Operations] \(kind.rawValue) (\(operationName)\(place)): \(message)"
    }
}

/// Where the framework reports misuse it caught (see `OperationDiagnostic`).
///
/// ```swift
/// OperationDiagnostics.handler = { diagnostic in logger.warning("\(diagnostic)") }
/// ```
public enum OperationDiagnostics {
    /// The function that receives every diagnostic. It may be called on any thread. The default
    /// writes the diagnostic's `description` to standard error.
    public static var handler: @Sendable (OperationDiagnostic) -> Void {
        get { storage.withLock { $0 } }
        set { _ = storage.exchange(with: newValue) } // the old handler is released outside the lock
    }

    /// Restores the default handler, which prints to standard error.
    public static func resetHandler() {
        handler = printToStandardError
    }

    /// Reports a misuse about `operation`. The queues named are `queues` when given, otherwise
    /// the one `operation` is on (or last ran on), if any.
    static func report(_ kind: OperationDiagnostic.Kind, _ operation: Operation, _ message: String, queues: [QueueMention]? = nil) {
        let involved = queues ?? operation.queueForMessages.map { [$0] } ?? []
        let diagnostic = OperationDiagnostic(
            kind: kind,
            operationName: operation.displayName,
            queueNames: involved.map(\.displayName),
            message: message
        )
        handler(diagnostic)
    }

    private static let storage = Locked<@Sendable (OperationDiagnostic) -> Void>.make(printToStandardError)

    private static let printToStandardError: @Sendable (OperationDiagnostic) -> Void = { diagnostic in
        FileHandle.standardError.write(Data((diagnostic.description + "\n").utf8))
    }
}

extension Operation {
    /// The operation's name, or its type when it has none: what messages call it.
    var displayName: String {
        name ?? String(describing: type(of: self))
    }

    /// The queue the operation is on, or last ran on, as far as this package knows: for messages.
    /// Read outside every lock.
    var queueForMessages: QueueMention? {
        if let operation = self as? AsyncOperation {
            return operation.lifecycle.lastKnownQueue
        }
        return PlainOperationRegistry.queue(of: self)
    }
}

extension OperationQueue {
    /// The queue's name, or its type when it has none: what messages call it. A group's own
    /// queue is called after its group.
    var displayName: String {
        if let queue = self as? AsyncOperationQueue {
            return queue.mention.displayName
        }
        return name ?? String(describing: type(of: self))
    }
}
