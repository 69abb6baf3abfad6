import Foundation

/// How much a lifecycle event matters, from the chattiest to the most serious (the levels of
/// swift-log and of `os.Logger` map onto these one to one or nearly).
public enum OperationLogLevel: Int, Sendable, Hashable, Comparable, CaseIterable, CustomStringConvertible {
    /// Everything, in detail.
    case trace
    /// The way to execution: added, waiting, conditions answered, categories granted, produced.
    case debug
    /// Started, and finished without errors.
    case info
    /// Cancelled.
    case notice
    /// Finished with errors.
    case warning
    /// The most serious level (the framework's own events never use it).
    case error

    /// Whether `lhs` is less serious than `rhs`.
    public static func < (lhs: OperationLogLevel, rhs: OperationLogLevel) -> Bool {
        lhs.rawValue < rhs.rawValue
    }

    /// The level's name, such as `debug`.
    public var description: String {
        switch self {
        case .trace: "trace"
        case .debug: "debug"
        case .info: "info"
        case .notice: "notice"
        case .warning: "warning"
        case .error: "error"
        }
    }
}

/// One event in an operation's life, as an `OperationLogger` hears it.
///
/// Besides what happened (`kind`) and a readable `description`, an event says who it is about,
/// so that tools can follow one operation and relate it to others: `operationID` (the same in
/// every event of the operation), `groupID` (the group whose child it is), `dependencyIDs` (the
/// operations it waited for, as a chain's links do), and, when it was cancelled or finished,
/// its `errors` themselves.
public struct OperationLogEvent: Sendable, Hashable, CustomStringConvertible {
    /// What happened.
    public enum Kind: Sendable, Hashable {
        /// Added to a queue.
        case added
        /// Started waiting, for what the reasons say (dependencies, conditions, categories, a
        /// suspended queue, its turn on a serial queue).
        case waiting([OperationSnapshot.Reason])
        /// Every condition answered; `failures` of them failed.
        case conditionsAnswered(failures: Int)
        /// Granted its mutually exclusive categories.
        case categoriesGranted([String])
        /// Started executing (its observers heard `operationDidStart`).
        case started
        /// Cancelled (its observers heard `operationDidCancel`).
        case cancelled
        /// Produced another operation, by name.
        case produced(String)
        /// Finished, with its errors (described).
        case finished(errors: [String])

        /// A stable name for the kind, for log metadata, metric labels and span events:
        /// `added`, `waiting`, `conditions_answered`, `categories_granted`, `started`,
        /// `cancelled`, `produced` or `finished`.
        public var name: String {
            switch self {
            case .added: "added"
            case .waiting: "waiting"
            case .conditionsAnswered: "conditions_answered"
            case .categoriesGranted: "categories_granted"
            case .started: "started"
            case .cancelled: "cancelled"
            case .produced: "produced"
            case .finished: "finished"
            }
        }
    }

    /// The operation's `name`, or its type's name.
    public let operationName: String
    /// The name given to the queue the operation was added to (its `name`), if it was given one:
    /// `nil` while the queue has Foundation's default name, which holds the queue's address and so
    /// differs for every queue. Read as the operation is added (a group's child: as its group
    /// joins a logging queue): every event of an operation carries the same name, also if the
    /// queue is named (or renamed) while the operation is on it. (The reasons of a `.waiting`
    /// event name the queue as it is then.)
    public let queueName: String?
    /// What happened.
    public let kind: Kind
    /// Who the operation is: the same in every event of its life (see `OperationID`).
    public let operationID: OperationID
    /// The `GroupOperation` (or composite) whose child the operation is, if that group's events
    /// are heard too: a child's span is a child of its group's.
    public let groupID: OperationID?
    /// The dependencies the operation had when it was added whose events are heard too, such as
    /// the link before it in a chain: its work follows theirs. Read as the operation is added: a
    /// dependency added to a logging queue after it (later in the same batch, say) is not named.
    public let dependencyIDs: [OperationID]
    /// The errors themselves: for `.finished`, the operation's final errors; for `.cancelled`,
    /// those it had when it was cancelled (the reason it was given, if any); empty otherwise.
    public let errors: [any Error]
    /// `true` for a plain Foundation operation (not an `AsyncOperation`), of which a logger
    /// hears only `.added`: Foundation does not tell when it starts or finishes.
    public let isFoundationOperation: Bool

    /// Creates an event; the framework makes these, loggers and tests read them.
    public init(
        operationName: String,
        queueName: String?,
        kind: Kind,
        operationID: OperationID = OperationID(rawValue: 0),
        groupID: OperationID? = nil,
        dependencyIDs: [OperationID] = [],
        errors: [any Error] = [],
        isFoundationOperation: Bool = false
    ) {
        self.operationName = operationName
        self.queueName = queueName
        self.kind = kind
        self.operationID = operationID
        self.groupID = groupID
        self.dependencyIDs = dependencyIDs
        self.errors = errors
        self.isFoundationOperation = isFoundationOperation
    }

    /// Whether two events say the same: every property but `errors`, which `kind` describes.
    public static func == (lhs: OperationLogEvent, rhs: OperationLogEvent) -> Bool {
        lhs.operationID == rhs.operationID && lhs.kind == rhs.kind && lhs.operationName == rhs.operationName
            && lhs.queueName == rhs.queueName && lhs.groupID == rhs.groupID
            && lhs.dependencyIDs == rhs.dependencyIDs && lhs.isFoundationOperation == rhs.isFoundationOperation
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(operationID)
        hasher.combine(kind)
        hasher.combine(operationName)
        hasher.combine(queueName)
        hasher.combine(groupID)
        hasher.combine(dependencyIDs)
        hasher.combine(isFoundationOperation)
    }

    /// `.debug` for the way to execution, `.info` for starting and finishing, `.notice` for a
    /// cancellation, `.warning` for a finish with errors.
    public var level: OperationLogLevel {
        Self.level(of: kind)
    }

    static func level(of kind: Kind) -> OperationLogLevel {
        switch kind {
        case .added, .waiting, .conditionsAnswered, .categoriesGranted, .produced: .debug
        case .started: .info
        case .cancelled: .notice
        case let .finished(errors): errors.isEmpty ? .info : .warning
        }
    }

    /// A sentence for a log line, such as `save: waiting for category 'Database' (held by 'migrate'; 1st in line)`.
    public var description: String {
        let what: String
        switch kind {
        case .added:
            what = "added" + (queueName.map { " to '\($0)'" } ?? "")
        case let .waiting(reasons):
            what = "waiting for " + reasons.map(\.description).joined(separator: ", ")
        case let .conditionsAnswered(failures):
            what = failures == 0 ? "conditions passed" : "conditions answered, \(failures) failed"
        case let .categoriesGranted(categories):
            what = "granted " + categories.map { "'\($0)'" }.joined(separator: ", ")
        case .started:
            what = "started"
        case .cancelled:
            what = "cancelled"
        case let .produced(name):
            what = "produced '\(name)'"
        case let .finished(errors):
            what = errors.isEmpty ? "finished" : "finished with errors: " + errors.joined(separator: "; ")
        }
        return "\(operationName): \(what)"
    }
}

/// Hears the lifecycle of every operation on a queue that has it as its `logger`: added, waiting
/// (and for what), conditions answered, categories granted, started, cancelled, produced,
/// finished. Each event comes once. An operation's events come one at a time, in the order they
/// were made, each on the thread where it happened; an event made while another of the same
/// operation is being heard comes after it (and after any made before it), on that thread, so
/// the operation may have moved on by then. A `waiting` event is a snapshot: it is left out when
/// another event of the operation was made between the snapshot and its turn to be heard.
///
/// `log(_:)` may block (on a lock of its own, a file write), but must not wait for another
/// event of the same operation: that event would be left to the blocked thread.
///
/// Send the events to your own logging with a few lines; a queue without a logger (the
/// default) makes no events at all, and neither does a logger whose `minimumLevel` is `.error`
/// (the framework's own events are never that serious): its queue does not even attach it.
///
/// ```swift
/// struct ServiceLogger: OperationLogger {
///     let write: @Sendable (OperationLogLevel, String) -> Void   // swift-log, os.Logger, ...
///     var minimumLevel: OperationLogLevel { .info }
///     func log(_ event: OperationLogEvent) { write(event.level, event.description) }
/// }
/// queue.logger = ServiceLogger { level, line in print("[\(level)] \(line)") }
/// ```
public protocol OperationLogger: Sendable {
    /// Events below this level are not even made. The default is `.trace` (everything).
    var minimumLevel: OperationLogLevel { get }
    /// Called for each event at or above `minimumLevel`, on the thread where it happened (or,
    /// when another event of the same operation was being heard then, after that one, on its
    /// thread).
    func log(_ event: OperationLogEvent)
}

extension OperationLogger {
    public var minimumLevel: OperationLogLevel { .trace }
}

extension OperationLogger {
    /// Logs `kind` for a plain Foundation `operation` (of which only `.added` is heard) if the
    /// level is wanted. An `AsyncOperation`'s events go through its `LoggingObserver`.
    func log(_ kind: OperationLogEvent.Kind, of operation: Operation, on queue: OperationQueue?) {
        guard OperationLogEvent.level(of: kind) >= minimumLevel else { return }
        log(OperationLogEvent(
            operationName: operation.displayName,
            queueName: (queue as? AsyncOperationQueue).map { $0.mention.givenName } ?? queue?.name,
            kind: kind,
            operationID: PlainOperationRegistry.logID(of: operation),
            groupID: (queue as? AsyncOperationQueue)?.group?.logBinding?.operationID,
            isFoundationOperation: true
        ))
    }
}
