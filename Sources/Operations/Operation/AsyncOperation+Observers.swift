import Foundation

extension AsyncOperation {
    /// Adds an observer, told when the operation starts, is cancelled, produces an operation
    /// and finishes.
    ///
    /// Add observers before the operation starts to hear every event; one added later hears only
    /// what happens from then on. Added once the operation's finish has begun, it is reported as
    /// `.configuredTooLate` and ignored: that is also the case from `operationDidCancel` on for
    /// an operation cancelled before it executed, which begins finishing as it is cancelled
    /// (`isFinished` may still be `false` then).
    public final func addObserver(_ observer: any OperationObserver) {
        if lifecycle.addObserver(observer) == .tooLate {
            OperationDiagnostics.report(.configuredTooLate, self, "addObserver(_:) was called after the operation finished; the observer was ignored")
        }
    }

    /// Adds `operation` to the queue (or group) this operation runs in, and tells observers
    /// (unless this operation's finish has begun: they have heard, or are hearing, its last event).
    ///
    /// Use it to start follow-up work from inside `execute()`; a `GroupOperation` waits for
    /// operations its children produce. Called on an operation that is not on any queue, it
    /// reports `.producedWithoutQueue` and runs `operation` on a shared queue, so no work is lost.
    public final func produce(_ operation: Operation) {
        switch lifecycle.announceProduced() {
        case let .addOnly(queue):
            add(produced: operation, to: queue)
        case let .tell(observers, queue):
            add(produced: operation, to: queue)
            for observer in observers {
                observer.operation(self, didProduce: operation)
            }
            perform(lifecycle.notificationDelivered())
        }
    }

    private func add(produced operation: Operation, to queue: OperationQueue?) {
        if let queue {
            queue.addOperation(operation)
        } else {
            OperationDiagnostics.report(.producedWithoutQueue, self, "produce(_:) was called on an operation that is not on a queue; '\(operation.displayName)' runs on a shared queue instead")
            OperationsEngine.shared.fallbackQueue.addOperation(operation)
        }
    }
}
