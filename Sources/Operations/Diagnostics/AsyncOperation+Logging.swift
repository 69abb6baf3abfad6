import Foundation

extension AsyncOperation {
    /// Attaches `queue`'s logger as the operation is added to it.
    func attach(_ logger: any OperationLogger, from queue: AsyncOperationQueue) {
        let observer = LoggingObserver(logger: logger, queue: queue)
        lifecycle.withLock { $0.attachLogger(logger, observer: observer) }
    }

    /// Logs `kind` if the operation's queue has a logger.
    func logIfLogging(_ kind: OperationLogEvent.Kind) {
        guard let (logger, queue) = lifecycle.withLock({ state in state.logger.map { ($0, state.queue) } }) else { return }
        logger.log(kind, of: self, on: queue)
    }

    /// Logs what the operation waits for now, if its queue has a logger (and it waits at all).
    func logWaiting() {
        guard let (logger, queue) = lifecycle.withLock({ state in state.logger.map { ($0, state.queue) } }),
              logger.minimumLevel <= .debug else { return } // a snapshot only if it will be heard
        let reasons = snapshot().waitsFor
        guard !reasons.isEmpty else { return }
        logger.log(.waiting(reasons), of: self, on: queue)
    }
}
