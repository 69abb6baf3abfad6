import Foundation

/// An operation that produces a value: its `output`, available once it finished successfully.
///
/// Subclass it and call `finish(producing:)` (or `finish(with:)` with a `Result`) when the value
/// is ready, or create one from a block with `ResultBlockOperation`.
///
/// ```swift
/// final class FetchUser: ResultOperation<User>, @unchecked Sendable {
///     override func execute() {
///         api.user(id) { result in self.finish(with: result) }
///     }
/// }
/// ```
///
/// `output` is `nil` until the operation finishes, and stays `nil` if it failed or was cancelled.
// @unchecked Sendable: `storedOutput` lives in a `Locked` value; the rest is `AsyncOperation`'s.
open class ResultOperation<Output: Sendable>: AsyncOperation, @unchecked Sendable {
    private struct OutputSlot {
        var value: Output?
        var isClaimed = false
    }

    private let storedOutput = Locked.make(OutputSlot())

    /// Creates an operation that will produce an `Output`.
    public override init() {
        super.init()
    }

    /// The value the operation produced; `nil` until it finished successfully.
    public final var output: Output? {
        storedOutput.withLock { $0.value }
    }

    /// The operation's outcome once it finished: its first error if it has any; otherwise
    /// `CancellationError` if it was cancelled (even if it produced a value before it noticed);
    /// otherwise its output, or `AsyncOperationError.finishedWithoutOutput` if it finished
    /// without producing one. `nil` while it has not finished.
    public final var result: Result<Output, any Error>? {
        guard isFinished else { return nil }
        if let error = errors.first { return .failure(error) }
        if isCancelled { return .failure(CancellationError()) }
        if let output { return .success(output) }
        return .failure(AsyncOperationError.finishedWithoutOutput(operation: displayName))
    }

    /// Finishes the operation with `output` as its value. Ignored (like any late finish) once the
    /// operation has finished.
    public final func finish(producing output: Output) {
        // The value is stored in the same locked step that accepts the finish, so a concurrent
        // finish(with: error) either wins outright or loses outright.
        let action = lifecycle.withLock { state -> OperationLifecycle.FinishAction in
            let accepted = state.phase < .finishing && !state.finishRequestedBeforeStart
            let action = state.finish(errors: [])
            if accepted {
                storedOutput.withLock { slot in
                    slot.isClaimed = true
                    slot.value = output
                }
            }
            return action
        }
        perform(action)
    }

    /// Finishes the operation with the value or the error in `result`.
    public final func finish(with result: Result<Output, any Error>) {
        switch result {
        case let .success(output): finish(producing: output)
        case let .failure(error): finish(with: error)
        }
    }
}

/// A `ResultOperation` built from a block that returns the value (or throws).
///
/// ```swift
/// let parse = ResultBlockOperation { try JSONDecoder().decode(Report.self, from: data) }
/// ```
// @unchecked Sendable: `work` lives in a `Locked` value and is released once the operation finished.
open class ResultBlockOperation<Output: Sendable>: ResultOperation<Output>, @unchecked Sendable {
    private let work: Locked<(@Sendable () throws -> Output)?>

    /// Creates an operation whose output is what `block` returns; an error it throws becomes the
    /// operation's error.
    public init(_ block: @escaping @Sendable () throws -> Output) {
        work = Locked.make(block)
        super.init()
    }

    /// Runs the block.
    open override func execute() {
        guard !isCancelled, let block = work.withLock({ $0 }) else {
            finish()
            return
        }
        do {
            finish(producing: try block())
        } catch {
            finish(with: error)
        }
    }

    override func releaseResources() {
        work.withLock { $0 = nil }
    }
}
