import Foundation

/// One shut-down of an `AsyncOperationQueue`, from the moment it refuses new operations until
/// every operation it had has finished: `ShutdownStateMachine` under a lock, and the work its
/// actions ask for.
///
/// Nothing here blocks a thread for the grace period: finishes are heard through listeners, the
/// grace period is a timer, and the callers waiting for the end are completion handlers (an
/// `async` caller's continuation, or a semaphore). Only two short waits block a Dispatch thread
/// (never a caller's, never a cooperative one): for adds in flight when the shut-down began,
/// which take microseconds, and for the queue to let go of operations that have all finished.
/// The one step on the caller's thread is the cancellation of the operations waiting as it
/// begins (their observers, and the finishes of those that finish at once, run there).
// @unchecked Sendable: `machine`, `completions` and `queue` are reached only under `lock`.
final class QueueShutdown: @unchecked Sendable {
    private struct Storage {
        var machine = ShutdownStateMachine()
        /// Called once the shut-down is complete.
        var completions: [@Sendable () -> Void] = []
        /// The queue, held until the shut-down is complete (the queue holds this object too).
        var queue: AsyncOperationQueue?
        /// Keeps the finish listeners of the operations being drained.
        var listeners: [FinishListener] = []
    }

    private let storage: Locked<Storage>

    init(queue: AsyncOperationQueue) {
        storage = .make(Storage(queue: queue))
    }

    var isComplete: Bool {
        storage.withLock { $0.machine.isComplete }
    }

    // MARK: - Events

    /// Starts the shut-down: cancels what waits, then waits for the adds in flight and drains.
    /// Called once, by the caller that set this shut-down on the queue.
    func begin() {
        // At once, on the caller's thread: an operation waiting now must not start while the adds
        // in flight end (its dependency may finish meanwhile). The drain's sweep cancels what
        // those adds admit.
        cancelAll(evenIfRunning: false)
        DispatchQueue.global().async { [self] in
            awaitAdmissionsInFlight()
            perform(storage.withLock { $0.machine.admissionsEnded() })
        }
    }

    /// Ends the grace period `seconds` from now (at once for 0 or less, or NaN; never for
    /// infinity).
    func endGracePeriod(after seconds: TimeInterval) {
        guard seconds < .infinity || seconds.isNaN else { return }
        guard seconds > 0 else { return endGracePeriod() } // NaN too: a shutdown that cannot end is worse
        let nanoseconds = seconds >= 1e9 ? UInt64.max / 2 : UInt64(seconds * 1e9)
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: nanoseconds))) { [weak self] in
            self?.endGracePeriod()
        }
    }

    /// Ends the grace period now: running operations are cancelled.
    func endGracePeriod() {
        perform(storage.withLock { $0.machine.gracePeriodEnded() })
    }

    /// Calls `completion` once the shut-down is complete (at once if it is).
    func whenComplete(_ completion: @escaping @Sendable () -> Void) {
        let isComplete = storage.withLock { storage -> Bool in
            if storage.machine.isComplete { return true }
            storage.completions.append(completion)
            return false
        }
        if isComplete { completion() }
    }

    // MARK: - Doing what the machine says

    private func perform(_ action: ShutdownStateMachine.Action) {
        switch action {
        case .none:
            break
        case let .sweep(cancelRunning):
            sweep(cancelRunning: cancelRunning)
        case .cancelRunning:
            cancelAll(evenIfRunning: true)
        case .awaitEmptyQueue:
            DispatchQueue.global().async { [self] in awaitEmptyQueue() }
        }
    }

    private var queue: AsyncOperationQueue? {
        storage.withLock { $0.queue }
    }

    /// Adds that began before the shut-down admit their operations in microseconds; the queue
    /// refuses every add that begins after it.
    private func awaitAdmissionsInFlight() {
        guard let queue else { return }
        var pause: useconds_t = 50
        while queue.hasAdmissionsInFlight {
            usleep(pause)
            pause = min(pause * 2, 5_000)
        }
    }

    /// Listens for the finish of every operation on the queue, cancels those that wait, and lets
    /// them go on (the queue let nothing through since the shut-down began, and a suspended
    /// queue runs again) so that they can finish.
    private func sweep(cancelRunning: Bool) {
        guard let queue else { return }
        let operations = queue.allOperations(includingBarriers: true)
        for operation in operations {
            listen(to: operation, on: queue)
        }
        // Latest first, so that no dependent is let go by the cancellation of what it waits for.
        for operation in operations.reversed() {
            cancel(operation, evenIfRunning: cancelRunning)
        }
        if queue.isSuspended {
            queue.isSuspended = false // only cancelled operations are left to start: they finish at once
        }
        queue.shutDownSwept()
        perform(storage.withLock { $0.machine.sweepEnded() })
    }

    private func listen(to operation: Operation, on queue: AsyncOperationQueue) {
        storage.withLock { $0.machine.willListen() }
        let finished: @Sendable () -> Void = { [weak self] in
            guard let self else { return }
            perform(storage.withLock { $0.machine.operationFinished() })
        }
        if let operation = operation as? AsyncOperation {
            let listener = FinishListener()
            storage.withLock { $0.listeners.append(listener) }
            listener.listen(to: operation, finished)
        } else {
            _ = queue.engine.dependencyWatcher.watch(operation, report: finished)
        }
    }

    /// Cancels the queue's operations, latest first (as `sweep` does), running ones too if
    /// `evenIfRunning`.
    private func cancelAll(evenIfRunning: Bool) {
        guard let queue else { return }
        for operation in queue.allOperations(includingBarriers: true).reversed() {
            cancel(operation, evenIfRunning: evenIfRunning)
        }
    }

    /// Cancels `operation` with `AsyncOperationError.queueShutDown`, unless it runs (and
    /// `evenIfRunning` is false), or it was cancelled already: the shut-down's cancellations
    /// never run at the same time, so an operation it cancelled once is not given the error twice.
    private func cancel(_ operation: Operation, evenIfRunning: Bool) {
        guard !operation.isCancelled else { return }
        guard evenIfRunning else {
            operation.cancelUnlessExecuting(with: AsyncOperationError.queueShutDown)
            return
        }
        if let operation = operation as? AsyncOperation {
            operation.cancel(with: AsyncOperationError.queueShutDown)
        } else {
            operation.cancel()
        }
    }

    /// Every operation has finished; waits, on a Dispatch thread, for the queue to let go of
    /// them, then completes.
    private func awaitEmptyQueue() {
        queue?.waitUntilAllOperationsAreFinished()
        let (completions, released) = storage.withLock { storage in
            storage.machine.queueEmptied()
            defer {
                storage.completions = []
                storage.listeners = []
                storage.queue = nil
            }
            return (storage.completions, (storage.listeners, storage.queue))
        }
        _ = released // the queue and the listeners are let go outside the lock
        for completion in completions {
            completion()
        }
    }
}
