/// A logger that hands every event to several loggers, each at its own `minimumLevel`: how logs,
/// metrics and traces all hear one queue.
///
/// ```swift
/// queue.logger = MultiplexOperationLogger([auditLog, metricsLog])   // each hears every event it wants
/// ```
///
/// Its own `minimumLevel` is the lowest of theirs (read once, when it is made), so an event is
/// made if any of them wants it, and given only to those that do. The loggers are called one after another, in order, on the
/// thread that hands it the event.
public struct MultiplexOperationLogger: OperationLogger {
    /// The loggers, in the order they hear each event.
    public let loggers: [any OperationLogger]
    /// The lowest `minimumLevel` of `loggers` (`.error`, the quietest, if there are none).
    public let minimumLevel: OperationLogLevel
    private let levels: [OperationLogLevel]

    /// Hands every event to each of `loggers` that wants its level.
    public init(_ loggers: [any OperationLogger]) {
        self.loggers = loggers
        levels = loggers.map(\.minimumLevel)
        minimumLevel = levels.min() ?? .error
    }

    /// Gives `event` to every logger whose `minimumLevel` it reaches.
    public func log(_ event: OperationLogEvent) {
        let level = event.level
        for (logger, minimum) in zip(loggers, levels) where level >= minimum {
            logger.log(event)
        }
    }
}
