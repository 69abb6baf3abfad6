import Foundation

extension AsyncOperation {
    /// Waits, without blocking a thread, until the operation has finished; throws its errors.
    ///
    /// It does not run the operation: add it to a queue, before or after starting to wait. It
    /// returns once `isFinished` is true, at once if it already is; any number of tasks may wait
    /// for the same operation.
    ///
    /// Cancelling the waiting task cancels the operation, and the call still returns only once the
    /// operation has finished (as a cancelled operation on a queue does promptly, unless its
    /// `execute()` ignores cancellation), throwing `CancellationError`. An operation that is on no
    /// queue yet finishes when it is added; if it is still on none a second after the wait began,
    /// an `.awaitedOffQueue` diagnostic says so (to add and await in one call, use
    /// `AsyncOperationQueue.run(_:)`).
    ///
    /// - Throws: the operation's only error as it is; `AsyncOperationError.multipleErrors` if it
    ///   collected several; `CancellationError` if it was cancelled without an error.
    ///
    /// ```swift
    /// queue.addOperation(upload)
    /// try await upload.finished()
    /// ```
    public final func finished() async throws {
        await suspendUntilFinished()
        if let failure { throw failure }
    }

    /// Suspends until the operation has finished; cancelling the task cancels the operation.
    final func suspendUntilFinished() async {
        warnIfStillOffQueue(after: 1)
        let listener = FinishListener()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                listener.listen(to: self) { continuation.resume() }
            }
        } onCancel: {
            self.cancel()
        }
        listener.stop() // also keeps the listener alive until here: the operation holds it weakly
    }

    /// Awaiting an operation that nobody adds to a queue would wait forever, silently: if it is on
    /// no queue now and still `delay` seconds later, report it.
    private func warnIfStillOffQueue(after delay: TimeInterval) {
        guard lifecycle.withLock({ $0.phase == .initialized }) else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [weak self] in
            guard let self, lifecycle.withLock({ $0.phase == .initialized }) else { return }
            OperationDiagnostics.report(.awaitedOffQueue, self, "the operation is awaited but is on no queue: it finishes only once it is added to one (or started); AsyncOperationQueue.run(_:) adds and awaits in one call")
        }
    }
}

extension ResultOperation {
    /// The operation's output, once it has finished; waits without blocking a thread.
    ///
    /// Like `finished()`, it does not run the operation, and cancelling the waiting task cancels
    /// the operation.
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
            await suspendUntilFinished()
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
