import Foundation

extension AsyncOperation {
    /// Runs the operation and blocks the calling thread until it has finished, throwing its
    /// errors: for tests and scripts that need asynchronous work straightened out.
    ///
    /// The operation runs on `queue`, or on a private `AsyncOperationQueue` when `queue` is `nil`,
    /// with its dependencies, conditions, categories and observers honoured as usual. One that is
    /// already on a queue of this package (or was started by hand) is not added again: the call
    /// waits for it where it is. The call returns once `isFinished` is true. (One waiting on a
    /// plain Foundation `OperationQueue` is invisible to the package, which adds it again, and
    /// Foundation traps, as it does for any operation added to two queues: await it with
    /// `finished()` instead.)
    ///
    /// - Throws: the operation's only error as it is; `AsyncOperationError.multipleErrors` if it
    ///   collected several; `CancellationError` if it was cancelled without an error.
    ///   `AsyncOperationError.waitTimedOut` if it has not finished `timeout` seconds after the call:
    ///   it is then cancelled with that error and may still be finishing. One whose finish had
    ///   begun is not cancelled: the error is thrown, not added to its errors. The cancel is
    ///   delivered (to its `operationDidCancel` observers; a group cancels its children) on a
    ///   thread of its own, and that delivery, like a finish being delivered, is waited for a
    ///   moment (0.1 s) only: the call returns at its timeout whatever the operation's observers
    ///   do. A group finished by hand that waits for its children is not waited for at all. And, before anything
    ///   is started, `AsyncOperationError.waitWouldDeadlock` where the wait could never end: on
    ///   the main thread for an operation on the main queue, inside an operation of `queue`
    ///   when every concurrency slot of `queue` is held by an operation waiting like this, or on
    ///   the thread delivering this operation's own finish (in an observer's
    ///   `operationDidFinish`, say). An operation that waits for itself from its own `execute()`
    ///   is not detected (another thread may finish it): `timeout` bounds that wait.
    ///
    /// ```swift
    /// let sync = AsyncBlockOperation { finish in
    ///     DispatchQueue.global().async { finish(nil) }   // finished from anywhere, later
    /// }
    /// try sync.runAndWait(timeout: 5)
    /// ```
    // Disfavoured so that on a `ResultOperation` the overload returning its output is chosen.
    @_disfavoredOverload
    @available(*, noasync, message: "runAndWait() blocks its thread; await finished() instead")
    public final func runAndWait(on queue: OperationQueue? = nil, timeout: TimeInterval = .infinity) throws {
        try blockUntilFinished(on: queue, timeout: timeout)
        if let failure { throw failure }
    }

    /// `runAndWait(on:timeout:)` with a `Duration`.
    @_disfavoredOverload
    @available(macOS 13, iOS 16, tvOS 16, watchOS 9, *)
    @available(*, noasync, message: "runAndWait() blocks its thread; await finished() instead")
    public final func runAndWait(on queue: OperationQueue? = nil, timeout: Duration) throws {
        try runAndWait(on: queue, timeout: timeout.timeInterval)
    }

    /// Adds the operation to `queue` (or a private queue) unless it is on one already, and blocks
    /// until it has finished or `timeout` has passed.
    final func blockUntilFinished(on queue: OperationQueue?, timeout: TimeInterval) throws {
        let start = lifecycle.waitStart
        if start.phase == .finished { return }
        if start.phase == .finishing, PerThreadState.current.finishing.contains(ObjectIdentifier(self)) {
            throw AsyncOperationError.waitWouldDeadlock(
                operation: displayName,
                reason: "this thread is delivering its finish (to an observer, or to its progress's observers), which completes only once the wait returns; its errors are final: read them instead"
            )
        }
        let isNew = start.phase == .initialized
        let target = isNew ? (queue ?? privateQueue()) : start.queue
        let waits = engine.blockingWaits
        let registration = try target.map {
            try waits.begin(waitingFor: self, on: $0, needsSlot: start.isBeforeExecution)
        }
        defer { registration.map(waits.end) }

        let finished = DispatchSemaphore(value: 0)
        let listener = FinishListener()
        listener.listen(to: self) { finished.signal() }
        if isNew, let target {
            target.addOperation(self)
        }
        if finished.wait(timeout: Self.deadline(after: timeout)) == .success {
            return
        }
        let timedOut = AsyncOperationError.waitTimedOut(operation: displayName, after: timeout)
        // The cancel is recorded here, and delivered on a thread of its own (a group cancels its
        // children there): its `operationDidCancel` observers may take any time, or wait for this
        // very thread, so the delivery is waited for a moment only, as is a finish being
        // delivered (one that began just before the cancel). Not on Dispatch's global queue,
        // whose threads may all be taken by then, the operation's own among them: a timeout is
        // rare, a thread cheap.
        let graceEnd = DispatchTime.now() + Self.deliveryGrace
        let cancel = recordCancel(with: timedOut)
        if case .cancel = cancel {
            let delivered = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                self.deliverCancel(cancel)
                delivered.signal()
            }
            _ = delivered.wait(timeout: graceEnd)
        }
        while case .waitForFinishBeingDelivered = lifecycle.afterWaitTimedOut(timedOut), DispatchTime.now() < graceEnd {
            if finished.wait(timeout: .now() + Self.finishDeliveryCheckInterval) == .success {
                return
            }
        }
        listener.stop()
        throw timedOut
    }

    /// How often a wait past its timeout looks again at a finish being delivered.
    private static let finishDeliveryCheckInterval: TimeInterval = 0.01
    /// How long past its timeout a wait waits for its cancel, or a finish, to be delivered (an
    /// observer told of either may block).
    private static let deliveryGrace: TimeInterval = 0.1

    private func privateQueue() -> AsyncOperationQueue {
        let queue = AsyncOperationQueue()
        queue.name = "runAndWait(\(displayName))"
        return queue
    }

    private static func deadline(after timeout: TimeInterval) -> DispatchTime {
        // Beyond ~30 years (or infinite, or not a number) is forever; it also keeps the
        // conversion to nanoseconds from overflowing.
        guard timeout < 1e9 else { return .distantFuture }
        return .now() + max(timeout, 0)
    }
}

extension ResultOperation {
    /// Runs the operation, blocks the calling thread until it has finished, and returns its
    /// output; the same as `AsyncOperation.runAndWait(on:timeout:)` otherwise.
    ///
    /// - Throws: what `AsyncOperation.runAndWait(on:timeout:)` throws; an operation that finished
    ///   without errors, without being cancelled and without an output throws
    ///   `AsyncOperationError.finishedWithoutOutput`. A cancelled operation throws
    ///   `CancellationError` even if it produced an output; the answer is always the one
    ///   `result` gives.
    ///
    /// ```swift
    /// let answer = try ResultBlockOperation { 6 * 7 }.runAndWait()   // 42
    /// ```
    @available(*, noasync, message: "runAndWait() blocks its thread; await value instead")
    @discardableResult
    public final func runAndWait(on queue: OperationQueue? = nil, timeout: TimeInterval = .infinity) throws -> Output {
        try blockUntilFinished(on: queue, timeout: timeout)
        return try outcome.get()
    }

    /// `runAndWait(on:timeout:)` with a `Duration`; returns the output.
    @available(macOS 13, iOS 16, tvOS 16, watchOS 9, *)
    @available(*, noasync, message: "runAndWait() blocks its thread; await value instead")
    @discardableResult
    public final func runAndWait(on queue: OperationQueue? = nil, timeout: Duration) throws -> Output {
        try runAndWait(on: queue, timeout: timeout.timeInterval)
    }
}
