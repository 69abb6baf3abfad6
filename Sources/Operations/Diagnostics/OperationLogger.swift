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
    }

    /// The operation's `name`, or its type's name.
    public let operationName: String
    /// The name of the queue the operation was added to, if it has one.
    public let queueName: String?
    /// What happened.
    public let kind: Kind

    /// Creates an event; the framework makes these, loggers and tests read them.
    public init(operationName: String, queueName: String?, kind: Kind) {
        self.operationName = operationName
        self.queueName = queueName
        self.kind = kind
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
/// finished. Each event comes once, in the order it happened for its operation, on the thread
/// where it happened.
///
/// Send the events to your own logging with a few lines; a queue without a logger (the
/// default) makes no events at all.
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
    /// Called for each event at or above `minimumLevel`, on the thread where it happened.
    func log(_ event: OperationLogEvent)
}

extension OperationLogger {
    public var minimumLevel: OperationLogLevel { .trace }
}

extension OperationLogger {
    /// Logs `kind` for `operation` if the level is wanted.
    func log(_ kind: OperationLogEvent.Kind, of operation: Operation, on queue: OperationQueue?) {
        guard OperationLogEvent.level(of: kind) >= minimumLevel else { return }
        log(OperationLogEvent(operationName: operation.displayName, queueName: queue?.name, kind: kind))
    }
}

/// The observer a queue with a logger adds to each `AsyncOperation`: it turns the observer
/// events (started, cancelled, produced, finished) into log events, with the observers'
/// guarantees of order and of exactly once.
struct LoggingObserver: OperationObserver {
    let logger: any OperationLogger
    weak var queue: AsyncOperationQueue?

    func operationDidStart(_ operation: AsyncOperation) {
        logger.log(.started, of: operation, on: queue)
    }

    func operationDidCancel(_ operation: AsyncOperation) {
        logger.log(.cancelled, of: operation, on: queue)
    }

    func operation(_ operation: AsyncOperation, didProduce newOperation: Operation) {
        logger.log(.produced(newOperation.displayName), of: operation, on: queue)
    }

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        logger.log(.finished(errors: errors.map { "\($0)" }), of: operation, on: queue)
    }
}
