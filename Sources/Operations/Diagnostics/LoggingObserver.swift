import Foundation

/// What an operation on a logging queue carries: the queue's logger, and who the operation is.
///
/// The lifecycle keeps it as the operation's `logger` (for the events on the way to execution)
/// and among its observers (for the observer events: started, cancelled, produced, finished,
/// with the observers' guarantees of order and of exactly once). Every event it makes carries
/// the operation's identity, and the logger hears them in the order they were made
/// (`LogEventOrder`).
///
/// A class, so that the lifecycle's answers can carry it as one reference (`nil` on a queue
/// without a logger, the common case) and the operation need not take its lock again to log.
final class LoggingObserver: OperationObserver {
    /// The queue's logger.
    let logger: any OperationLogger
    /// The name given to the queue the operation was added to, as it was then: every event of
    /// the operation carries the same (a queue named meanwhile would split one operation's
    /// events, and a metrics logger's gauges, over two names).
    let queueName: String?
    /// The operation's identity in log events.
    let operationID: OperationID
    /// The identity of the group it is a child of, if any.
    let groupID: OperationID?
    /// The identities of its dependencies that log, as they were when it was added.
    let dependencyIDs: [OperationID]
    private let order = Locked.make(LogEventOrder(waitsForAdded: true)) // `.added` is logged next

    /// Binds `logger` to one operation, named by `operationID`, on `queue`.
    init(logger: any OperationLogger, queue: QueueMention?, operationID: OperationID, groupID: OperationID?, dependencyIDs: [OperationID]) {
        self.logger = logger
        self.queueName = queue?.givenName
        self.operationID = operationID
        self.groupID = groupID
        self.dependencyIDs = dependencyIDs
    }

    var minimumLevel: OperationLogLevel { logger.minimumLevel }

    /// The mark of a snapshot about to be taken, for `log(_:of:madeSince:)`.
    var eventsMade: UInt64 {
        order.withLock { $0.eventsMade }
    }

    /// Logs `kind` for `operation` if the level is wanted; `errors` is read only then.
    /// `mark`: `kind` describes a snapshot taken after `eventsMade` read `mark`; it is dropped if
    /// another event was made since.
    func log(_ kind: OperationLogEvent.Kind, of operation: Operation, errors: @autoclosure () -> [any Error] = [], madeSince mark: UInt64? = nil) {
        guard let event = event(kind, of: operation, errors: errors()) else { return }
        guard order.withLock({ $0.made(event, madeSince: mark) }) == .deliver else { return }
        logger.log(event)
        deliverMadeMeanwhile()
    }

    /// Logs `.added` for `operation` (its first event), then `missedCancel`'s `.cancelled` (the
    /// errors of a cancellation before the add, which the observers told before this logger
    /// joined), then the events made meanwhile, each if its level is wanted. With `refused`, the
    /// add did not happen after all: `.added` is left out, the rest is heard.
    func logAdded(of operation: Operation, missedCancel: [any Error]?, refused: Bool = false) {
        let added = refused ? nil : event(.added, of: operation, errors: [])
        let cancelled = missedCancel.flatMap { event(.cancelled, of: operation, errors: $0) }
        guard order.withLock({ $0.added(added, thenMissed: cancelled) }) == .deliver else { return }
        deliverMadeMeanwhile()
    }

    /// The event of `kind`, or `nil` if the logger does not hear its level.
    private func event(_ kind: OperationLogEvent.Kind, of operation: Operation, errors: @autoclosure () -> [any Error]) -> OperationLogEvent? {
        guard OperationLogEvent.level(of: kind) >= logger.minimumLevel else { return nil }
        return OperationLogEvent(
            operationName: operation.displayName,
            queueName: queueName,
            kind: kind,
            operationID: operationID,
            groupID: groupID,
            dependencyIDs: dependencyIDs,
            errors: errors()
        )
    }

    /// The deliverer hears what was made meanwhile, until nothing is left.
    private func deliverMadeMeanwhile() {
        while case let .items(madeMeanwhile) = order.withLock({ $0.delivered() }) {
            madeMeanwhile.forEach(logger.log)
        }
    }

    func operationDidStart(_ operation: AsyncOperation) {
        log(.started, of: operation)
    }

    func operationDidCancel(_ operation: AsyncOperation) {
        log(.cancelled, of: operation, errors: operation.errors)
    }

    func operation(_ operation: AsyncOperation, didProduce newOperation: Operation) {
        log(.produced(newOperation.displayName), of: operation)
    }

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        guard logger.minimumLevel <= (errors.isEmpty ? .info : .warning) else { return }
        log(.finished(errors: errors.map { "\($0)" }), of: operation, errors: errors)
    }
}
