import Foundation

extension AsyncOperation {
    /// Waits, without blocking a thread, until the operation has finished; throws its errors.
    ///
    /// It does not run the operation: add it to a queue, before or after starting to wait. It
    /// returns once `isFinished` is true, at once if it already is; any number of tasks may wait
    /// for the same operation.
    ///
    /// Cancelling the waiting task cancels the operation and ends the wait at once, whatever the
    /// operation does: the call throws `CancellationError` (or the operation's errors, if the
    /// cancellation finished it on the spot). The operation finishes on its own, promptly unless
    /// its `execute()` ignores cancellation or its queue is suspended. On no queue, nothing would
    /// ever finish it, so the wait also reports `.awaitedOffQueue`; the operation stays cancelled
    /// and finishes once started, or once its queue gets to it (at once on a running queue). An operation still on no queue
    /// a second after the wait began is reported as `.awaitedOffQueue` too (to add and await in
    /// one call, use `AsyncOperationQueue.run(_:)`). An operation waiting on a plain Foundation
    /// `OperationQueue` is invisible to the package: it is reported the same way, and the wait
    /// still ends when it finishes there.
    ///
    /// - Throws: the operation's only error as it is; `AsyncOperationError.multipleErrors` if it
    ///   collected several; `CancellationError` if it was cancelled without an error.
    ///
    /// ```swift
    /// queue.addOperation(upload)
    /// try await upload.finished()
    /// ```
    public final func finished() async throws {
        guard await suspendUntilFinished() else { throw CancellationError() }
        if let failure { throw failure }
    }

    /// Suspends until the operation has finished, and returns `true`; cancelling the task cancels
    /// the operation and returns `false` at once, unless that cancellation finished it on the
    /// spot. A wait whose caller gives up ends, even for an operation that ignores cancellation.
    final func suspendUntilFinished() async -> Bool {
        // Finished already: its outcome, even for a task that was cancelled before it asked.
        if isFinished { return true }
        let wait = FinishWait()
        warnIfStillOffQueue(after: 1, while: wait)
        let listener = FinishListener()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                wait.suspend(continuation)
                listener.listen(to: self) { wait.end(finished: true) }
            }
        } onCancel: {
            self.cancel()
            self.abandon(wait)
        }
        listener.stop() // also keeps the listener alive until here: the operation holds it weakly
        return wait.endedWithFinish
    }

    /// The waiting task was cancelled, and so the operation: ends the wait now (a finish that the
    /// cancellation caused on the spot has ended it already). On no queue, nothing would finish the
    /// operation until it is added, which is reported.
    private func abandon(_ wait: FinishWait) {
        guard wait.end(finished: false) else { return }
        guard lifecycle.phase == .initialized else { return }
        OperationDiagnostics.report(.awaitedOffQueue, self, "the task awaiting the operation was cancelled while the operation was on no queue: the wait ended at once with CancellationError; the operation stays cancelled and finishes once started, or once its queue gets to it")
    }

    /// Awaiting an operation that nobody adds to a queue would wait forever, silently: if it is on
    /// no queue now and still `delay` seconds later, with the wait still on, report it.
    private func warnIfStillOffQueue(after delay: TimeInterval, while wait: FinishWait) {
        guard lifecycle.phase == .initialized else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [weak self] in
            guard let self, !wait.hasEnded, lifecycle.phase == .initialized else { return }
            OperationDiagnostics.report(.awaitedOffQueue, self, "the operation is awaited but is on no queue of this package: it finishes only once it is added to one (or started); AsyncOperationQueue.run(_:) adds and awaits in one call (on a plain OperationQueue, which the package cannot see, it finishes there as usual)")
        }
    }
}

extension ResultOperation {
    /// The operation's output, once it has finished; waits without blocking a thread.
    ///
    /// Like `finished()`, it does not run the operation, and cancelling the waiting task cancels
    /// the operation (and ends the wait at once, throwing `CancellationError`, if the operation is
    /// on no queue).
    ///
    /// - Throws: what `finished()` throws; an operation that finished without errors, without
    ///   being cancelled and without an output throws `AsyncOperationError.finishedWithoutOutput`.
    ///   A cancelled operation throws `CancellationError` even if it produced an output before
    ///   it noticed; the answer is always the one `result` gives.
    ///
    /// ```swift
    /// let fetch = FetchUser(id: 42)
    /// queue.addOperation(fetch)
    /// let user = try await fetch.value
    /// ```
    public final var value: Output {
        get async throws {
            guard await suspendUntilFinished() else { throw CancellationError() }
            return try outcome.get()
        }
    }
}

extension AsyncOperationQueue {
    /// Adds `operation` and waits, without blocking a thread, until it has finished; throws its
    /// errors as `AsyncOperation.finished()` does. Cancelling the task cancels the operation.
    ///
    /// ```swift
    /// try await queue.run(upload)
    /// ```
    @_disfavoredOverload
    public func run(_ operation: AsyncOperation) async throws {
        addOperation(operation)
        try await operation.finished()
    }

    /// Adds `operation` and returns its output once it has finished, without blocking a thread;
    /// throws as `ResultOperation.value` does. Cancelling the task cancels the operation.
    ///
    /// ```swift
    /// let user = try await queue.run(FetchUser(id: 42))
    /// ```
    @discardableResult
    public func run<Output>(_ operation: ResultOperation<Output>) async throws -> Output {
        addOperation(operation)
        return try await operation.value
    }
}
