import Foundation

extension AsyncOperationQueue {
    /// Shuts the queue down gracefully and returns once every operation on it has finished.
    ///
    /// From the moment it is called the queue takes no new operation: one added later finishes
    /// at once without executing, cancelled with `AsyncOperationError.queueShutDown` (its
    /// observers hear `operationDidCancel` and `operationDidFinish`), and a plain Foundation
    /// operation added later is cancelled. (One already on another queue, or finished, is left
    /// as it is, and the add is reported as any refused add is: `.addedTwice`,
    /// `.addedAfterFinishing`.) Operations already executing may finish during
    /// `gracePeriod`; every operation still waiting (for dependencies, conditions, categories, a
    /// slot, or a suspended queue) is cancelled with `AsyncOperationError.queueShutDown` as the
    /// call begins, on the calling thread (where its observers hear `operationDidCancel`), and
    /// finishes without executing. Once the grace period is over, the operations still running
    /// are cancelled with the same error too. Each operation that was on the queue finishes
    /// exactly once, and the call returns when the queue is empty. Other queues are unaffected.
    /// An add already under way on another thread as the call begins completes: its operations
    /// count as added before the shut-down (those that wait are cancelled; one that needs nothing
    /// may start, as a running one, within the grace period).
    ///
    /// ```swift
    /// let queue = AsyncOperationQueue()
    /// queue.addOperation(AsyncBlockOperation { try store.save() })
    /// await queue.shutDown(gracePeriod: 10)    // on SIGTERM, say
    /// ```
    ///
    /// An operation that waits for nothing but a slot (or its turn on a serial queue) is
    /// cancelled at once but finishes, without executing, when the queue gets to it, as with
    /// `cancelAllOperations()` and on Foundation's own queue: while the running operations keep
    /// every slot through the grace period, it finishes once they let one go.
    ///
    /// A suspended queue is resumed, so that the operations it cancelled can finish (none of
    /// them executes); suspending it again meanwhile holds them back, and this call with them,
    /// until it resumes. Cancellation is cooperative for a running operation: one that ignores it
    /// keeps this call waiting; give it a `TimeoutObserver`.
    ///
    /// Nothing blocks a thread while it waits (the waiting operations are cancelled on the calling
    /// thread as it begins, which runs their observers there): this call suspends, and the queue is watched
    /// through the operations' own finish events. **Cancelling the calling task** ends the grace
    /// period at once: every operation still running is cancelled, and the call still returns
    /// only once all of them have finished (so a service that is told to stop now still leaves
    /// nothing half done behind it, as far as its operations honour cancellation).
    ///
    /// Calling it again, or calling `shutDownAndWait(gracePeriod:)` meanwhile, joins the shut-down
    /// under way; a shorter grace period ends it sooner. A negative or zero grace period (or NaN)
    /// cancels the running operations at once; `.infinity` lets them run to their end.
    public func shutDown(gracePeriod: TimeInterval) async {
        let shutdown = beginShutDown(gracePeriod: gracePeriod)
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                shutdown.whenComplete { continuation.resume() }
            }
        } onCancel: {
            shutdown.endGracePeriod()
        }
    }

    /// Shuts the queue down gracefully and returns once every operation on it has finished; see
    /// `shutDown(gracePeriod:)`, which this forwards to.
    @available(macOS 13, iOS 16, tvOS 16, watchOS 9, *)
    public func shutDown(gracePeriod: Duration) async {
        await shutDown(gracePeriod: gracePeriod.timeInterval)
    }

    /// Shuts the queue down gracefully, blocking the calling thread until every operation on it
    /// has finished: the blocking twin of `shutDown(gracePeriod:)`, for code that is not `async`
    /// (a signal handler's dispatch source, a command-line tool's last line).
    ///
    /// Do not call it from an operation running on this queue, which would wait for itself: use
    /// `shutDown(gracePeriod:)` from a task, or call it from another thread.
    public func shutDownAndWait(gracePeriod: TimeInterval) {
        let shutdown = beginShutDown(gracePeriod: gracePeriod)
        let complete = DispatchSemaphore(value: 0)
        shutdown.whenComplete { complete.signal() }
        complete.wait()
    }

    /// Whether `shutDown(gracePeriod:)` (or `shutDownAndWait(gracePeriod:)`) has been called:
    /// from then on the queue refuses new operations. It stays `true`; a queue cannot be started
    /// again.
    public var isShutDown: Bool {
        shutDownUnderWay != nil
    }

    /// Sets the queue's shut-down, or joins the one under way, and starts the grace period.
    private func beginShutDown(gracePeriod: TimeInterval) -> QueueShutdown {
        let shutdown: QueueShutdown
        switch startOrJoinShutdown() {
        case let .began(new):
            shutdown = new
            shutdown.begin()
        case let .joined(underWay):
            shutdown = underWay
        }
        shutdown.endGracePeriod(after: gracePeriod)
        return shutdown
    }

    /// An add after the shut-down began: the operations finish at once without executing,
    /// cancelled with `AsyncOperationError.queueShutDown`. They finish on the framework's
    /// fallback queue, so that their observers and anyone waiting for them hear it as for any
    /// cancelled operation. One that is on a queue of the package already, or was started by
    /// hand, or finished, is not touched: this queue reports the refused add as it does while it
    /// runs (`.addedTwice`, `.addedAfterFinishing`). (One waiting on a plain `OperationQueue`
    /// looks unused: it is cancelled, and a plain one then reaches Foundation, which traps, as
    /// on any operation added twice.)
    func refuseAfterShutDown(_ operations: [Operation]) {
        var unused: [Operation] = []
        for operation in operations {
            if let operation = operation as? AsyncOperation {
                switch operation.lifecycle.addAcceptance {
                case .acceptable:
                    operation.cancel(with: AsyncOperationError.queueShutDown)
                    unused.append(operation)
                case let .refused(kind, message):
                    reportRefusedAdd(kind, of: operation, message)
                }
            } else if !operation.looksUnused {
                reportRefusedPlainOperation(operation)
            } else {
                operation.cancel()
                unused.append(operation)
            }
        }
        if !unused.isEmpty {
            engine.fallbackQueue.addOperations(unused, waitUntilFinished: false)
        }
    }

    /// Reports the refused add of a plain operation that is on a queue already, or finished, or
    /// executing, as `addOperation(_:)` does.
    private func reportRefusedPlainOperation(_ operation: Operation) {
        if operation.isFinished || operation.isExecuting {
            reportRefusedAdd(.addedAfterFinishing, of: operation, RefusedAddReason.finishedOrExecuting)
        } else {
            reportRefusedAdd(.addedTwice, of: operation, RefusedAddReason.alreadyOnAQueue)
        }
    }
}
