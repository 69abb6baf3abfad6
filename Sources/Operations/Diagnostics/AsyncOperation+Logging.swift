import Foundation

extension AsyncOperation {
    /// Attaches `queue`'s logger as the operation is added to it (only one not yet on a queue
    /// takes it). A group shares it with its children. Once the add is decided, the queue calls
    /// `logAdded(_:)` with the attachment (`.notAttached` if it would hear nothing).
    func attach(_ logger: any OperationLogger, from queue: AsyncOperationQueue) -> OperationLifecycle.LoggerAttachment {
        guard logger.minimumLevel < .error else { return .notAttached } // it would hear nothing
        let binding = makeLogBinding(logger, on: queue)
        let attachment = lifecycle.attachLogger(binding, observer: binding)
        (self as? GroupOperation)?.shareLogging()
        return attachment
    }

    /// Attaches the logger its group's queue gained after it was added there (the group joined
    /// a logging queue), and logs its `.added` then.
    func adopt(_ logger: any OperationLogger, from queue: AsyncOperationQueue) {
        let binding = makeLogBinding(logger, on: queue)
        let attachment = lifecycle.adoptLogger(binding, observer: binding)
        guard attachment.isAttached else { return }
        binding.logAdded(of: self, missedCancel: attachment.missedCancel)
        logWaiting(through: binding) // for its group to start, as a child added before its group joined says
        (self as? GroupOperation)?.shareLogging()
    }

    /// Logs `.added` through the logger `attachment` attached, and, for an operation cancelled
    /// before that logger joined, the `.cancelled` its observers told without it, so that a
    /// logger hears every cancellation once, in order. `refused`: the add was refused after the
    /// logger joined (the operation went elsewhere meanwhile): the missed `.cancelled` and what
    /// was kept waiting for `.added` are heard, without it.
    func logAdded(_ attachment: OperationLifecycle.LoggerAttachment, refused: Bool = false) {
        guard attachment.isAttached, let binding = logBinding else { return }
        binding.logAdded(of: self, missedCancel: attachment.missedCancel, refused: refused)
    }

    private func makeLogBinding(_ logger: any OperationLogger, on queue: AsyncOperationQueue) -> LoggingObserver {
        LoggingObserver(
            logger: logger,
            queue: queue.mention,
            operationID: .next(),
            groupID: queue.group?.logBinding?.operationID,
            dependencyIDs: dependencies.compactMap(Self.logID(of:))
        )
    }

    /// The identity in log events of `dependency`, if its events are heard: an `AsyncOperation`
    /// on a logging queue, or a plain operation whose add a logger heard.
    private static func logID(of dependency: Operation) -> OperationID? {
        if let dependency = dependency as? AsyncOperation {
            return dependency.logBinding?.operationID
        }
        return PlainOperationRegistry.existingLogID(of: dependency)
    }

    /// What the operation logs through, if its queue has a logger.
    var logBinding: LoggingObserver? {
        lifecycle.logger
    }

    /// Logs `kind` if the operation's queue has a logger.
    func logIfLogging(_ kind: OperationLogEvent.Kind) {
        logBinding?.log(kind, of: self)
    }

    /// Logs what the operation waits for now, if its queue has a logger (and it waits at all).
    func logWaiting() {
        if let binding = logBinding {
            logWaiting(through: binding)
        }
    }

    /// Logs what the operation waits for now through `binding`, which an answer of its
    /// lifecycle carried.
    func logWaiting(through binding: LoggingObserver) {
        guard binding.minimumLevel <= .debug else { return } // a snapshot only if it will be heard
        let mark = binding.eventsMade // the wait may end before the event is made
        let reasons = snapshot().waitsFor
        guard !reasons.isEmpty else { return }
        binding.log(.waiting(reasons), of: self, madeSince: mark)
    }
}

extension GroupOperation {
    /// The group joined a logging queue: its children's queue logs to the same logger, and the
    /// children it already has adopt it (they cannot have started: the group has not executed).
    func shareLogging() {
        guard let binding = logBinding, binding.minimumLevel < .error else { return }
        guard queue.adoptLoggerUnlessLogging(binding.logger) else { return }
        for child in queue.allOperations {
            if let child = child as? AsyncOperation {
                child.adopt(binding.logger, from: queue)
            } else {
                binding.logger.log(.added, of: child, on: queue)
            }
        }
    }
}
