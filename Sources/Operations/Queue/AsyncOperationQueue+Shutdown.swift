import Foundation

extension AsyncOperationQueue {
    /// Shuts the queue down gracefully and returns once every operation on it has finished.
    ///
    /// From the moment it is called the queue takes no new operation: one added later finishes
    /// at once without executing, cancelled with `AsyncOperationError.queueShutDown` (its
    /// observers hear `operationDidCancel` and `operationDidFinish`), and a plain Foundation
    /// operation added later is cancelled. Operations already executing may finish during
    /// `gracePeriod`; every operation still waiting (for dependencies, conditions, categories, a
    /// slot, or a suspended queue) is cancelled with `AsyncOperationError.queueShutDown` and
    /// finishes without executing. Once the grace period is over, the operations still running
    /// are cancelled with the same error too. Each operation that was on the queue finishes
    /// exactly once, and the call returns when the queue is empty. Other queues are unaffected.
    ///
    /// ```swift
    /// let queue = AsyncOperationQueue()
    /// queue.addOperation(AsyncBlockOperation { try store.save() })
    /// await queue.shutDown(gracePeriod: 10)    // on SIGTERM, say
    /// ```
    ///
    /// A suspended queue is resumed, so that the operations it cancelled can finish (none of
    /// them executes). Cancellation is cooperative for a running operation: one that ignores it
    /// keeps this call waiting; give it a `TimeoutObserver`.
    ///
    /// Nothing blocks a thread while it waits: this call suspends, and the queue is watched
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
    /// cancelled operation. One already on a queue of the package (or finished, or executing) is
    /// left alone, to run where it is: this queue reports the misuse (`.addedTwice`,
    /// `.addedAfterFinishing`) as it would while running. (One waiting on a plain
    /// `OperationQueue` looks unused: it is cancelled, and a plain one then reaches Foundation,
    /// which traps, as on any operation added twice.)
    func refuseAfterShutDown(_ operations: [Operation]) {
        var unused: [Operation] = []
        for operation in operations {
            guard operation.looksUnused else {
                reportRefusedUsedOperation(operation)
                continue
            }
            if let operation = operation as? AsyncOperation {
                operation.cancel(with: AsyncOperationError.queueShutDown)
            } else {
                operation.cancel()
            }
            unused.append(operation)
        }
        engine.fallbackQueue.addOperations(unused, waitUntilFinished: false)
    }

    /// Reports the refused add of an operation that is on a queue already, or finished, or
    /// executing, naming this queue.
    private func reportRefusedUsedOperation(_ operation: Operation) {
        if operation.isFinished || operation.isExecuting {
            reportRefusedAdd(.addedAfterFinishing, of: operation, RefusedAddReason.finishedOrExecuting)
        } else {
            reportRefusedAdd(.addedTwice, of: operation, RefusedAddReason.alreadyOnAQueue)
        }
    }
}
