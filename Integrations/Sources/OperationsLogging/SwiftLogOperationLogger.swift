import Logging
import Operations

/// Sends the lifecycle of every operation on a queue to swift-log: one record per event the
/// queue's `OperationLogger` hears, at the level the framework gives it.
///
/// ```swift
/// var logger = Logger(label: "jobs")
/// logger.logLevel = .info
/// queue.logger = SwiftLogOperationLogger(logger: logger)
/// // info jobs : operation.event=started operation.id=17 operation.name=charge queue.name=jobs [OperationsLogging] charge: started
/// ```
///
/// The levels: `debug` for the way to execution (added, waiting, conditions answered,
/// categories granted, produced), `info` for a start and a finish without errors, `notice` for a
/// cancellation, `warning` for a finish with errors. Events below the logger's `logLevel` are
/// not even made by the queue, so a quiet logger costs next to nothing.
///
/// Each record's message is the event's sentence (`charge: waiting for category 'acme' (held by
/// 'refund'; 1st in line)`), and its metadata follows swift-log's dot-separated convention, so
/// that a log aggregator can filter one operation's life:
///
/// | key | value |
/// |---|---|
/// | `operation.name` | the operation's name |
/// | `operation.id` | its `OperationID`, the same in every record of its life |
/// | `operation.event` | `added`, `waiting`, `conditions_answered`, `categories_granted`, `started`, `cancelled`, `produced`, `finished` |
/// | `operation.group_id` | the id of the group whose child it is, if any |
/// | `operation.dependency_ids` | the ids of the dependencies it was added with (a chain's previous link), if any |
/// | `operation.waits_for` | for `waiting`: what it waits for, one string per reason |
/// | `operation.categories` | for `categories_granted`: the categories |
/// | `operation.condition_failures` | for `conditions_answered`: how many failed |
/// | `operation.produced` | for `produced`: the name of the operation it produced |
/// | `operation.errors` | for `cancelled` and `finished`: its errors, described (the first is also the record's `error`) |
/// | `queue.name` | the name the queue was given, if any (not Foundation's default name) |
public struct SwiftLogOperationLogger: OperationLogger {
    /// The logger the records go to; its `logLevel` decides which events are made at all.
    public let logger: Logger

    /// Sends operation events to `logger`, at or above its `logLevel`.
    public init(logger: Logger) {
        self.logger = logger
    }

    /// The logger's `logLevel`, as an `OperationLogLevel`.
    public var minimumLevel: OperationLogLevel {
        OperationLogLevel(logger.logLevel)
    }

    /// Writes one record for `event`.
    public func log(_ event: OperationLogEvent) {
        logger.log(
            level: Logger.Level(event.level),
            "\(event.description)",
            error: event.errors.first,
            metadata: Self.metadata(of: event)
        )
    }

    /// The metadata of `event`'s record (see the table in the type's documentation).
    public static func metadata(of event: OperationLogEvent) -> Logger.Metadata {
        var metadata: Logger.Metadata = [
            "operation.name": .string(event.operationName),
            "operation.id": .stringConvertible(event.operationID),
            "operation.event": .string(event.kind.name),
        ]
        if let queueName = event.queueName {
            metadata["queue.name"] = .string(queueName)
        }
        if let groupID = event.groupID {
            metadata["operation.group_id"] = .stringConvertible(groupID)
        }
        if !event.dependencyIDs.isEmpty {
            metadata["operation.dependency_ids"] = .array(event.dependencyIDs.map { .stringConvertible($0) })
        }
        if !event.errors.isEmpty {
            metadata["operation.errors"] = .array(event.errors.map { .string("\($0)") })
        }
        switch event.kind {
        case let .waiting(reasons):
            metadata["operation.waits_for"] = .array(reasons.map { .string($0.description) })
        case let .categoriesGranted(categories):
            metadata["operation.categories"] = .array(categories.map { .string($0) })
        case let .conditionsAnswered(failures):
            metadata["operation.condition_failures"] = .stringConvertible(failures)
        case let .produced(name):
            metadata["operation.produced"] = .string(name)
        case let .finished(errors) where event.errors.isEmpty && !errors.isEmpty:
            metadata["operation.errors"] = .array(errors.map { .string($0) })
        case .added, .started, .cancelled, .finished:
            break
        }
        return metadata
    }
}

extension Logger.Level {
    /// The swift-log level of an operation event's level.
    public init(_ level: OperationLogLevel) {
        switch level {
        case .trace: self = .trace
        case .debug: self = .debug
        case .info: self = .info
        case .notice: self = .notice
        case .warning: self = .warning
        case .error: self = .error
        }
    }
}

extension OperationLogLevel {
    /// The operation level matching a swift-log level (`critical` is `error`, the most serious).
    public init(_ level: Logger.Level) {
        switch level {
        case .trace: self = .trace
        case .debug: self = .debug
        case .info: self = .info
        case .notice: self = .notice
        case .warning: self = .warning
        case .error, .critical: self = .error
        }
    }
}
