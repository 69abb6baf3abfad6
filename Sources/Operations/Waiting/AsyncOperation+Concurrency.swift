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
    /// queue yet finishes when it is added.
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
