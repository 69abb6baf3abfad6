import Foundation

/// An operation that produces a value: its `output`, available once it finished successfully.
///
/// Subclass it and call `finish(producing:)` (or `finish(with:)` with a `Result`) when the value
/// is ready, or create one from a block with `ResultBlockOperation`.
///
/// ```swift
/// final class FetchUser: ResultOperation<User>, @unchecked Sendable {
///     let id: Int
///
///     init(id: Int) {
///         self.id = id
///         super.init()
///     }
///
///     override func execute() {
///         api.user(id) { result in self.finish(with: result) }
///     }
/// }
/// ```
///
/// `output` is `nil` until the operation finishes with a value; `result` is the verdict, which
/// counts a cancellation or an error as a failure even when a value was produced.
// @unchecked Sendable: the output lives in the lifecycle, reached only under its lock.
open class ResultOperation<Output: Sendable>: AsyncOperation, @unchecked Sendable {
    /// Creates an operation that will produce an `Output`.
    public override init() {
        super.init()
    }

    /// The value the operation produced; `nil` until it finished with one.
    public final var output: Output? {
        // Checked before the cast: cast to an optional `Output`, nothing would read as a produced `nil`.
        guard let produced = lifecycle.output else { return nil }
        return produced as? Output
    }

    /// The operation's outcome once it finished, exactly what `value` and `runAndWait()` give:
    /// its only error as it is, several as `AsyncOperationError.multipleErrors`; otherwise
    /// `CancellationError` if it was cancelled (even if it produced a value before it noticed);
    /// otherwise its output, or `AsyncOperationError.finishedWithoutOutput` if it finished without
    /// producing one. `nil` while it has not finished.
    public final var result: Result<Output, any Error>? {
        guard isFinished else { return nil }
        return outcome
    }

    /// Finishes the operation with `output` as its value. Ignored (like any late finish) once the
    /// operation has finished: the `.finishedTwice` diagnostic then names this call's file and
    /// line, and the type of the value it dropped.
    public final func finish(producing output: Output, file: StaticString = #fileID, line: UInt = #line) {
        finish(producing: output, by: .produce(CallSite(file: file, line: line), valueType: Output.self, method: "finish(producing:)"))
    }

    /// Finishes the operation with `output` as its value: `finish(producing:file:line:)` as a
    /// function value (`completion: operation.finish(producing:)`), which has no call site to
    /// report.
    @_disfavoredOverload
    public final func finish(producing output: Output) {
        finishProducing(output)
    }

    /// Finishes the operation with the value or the error in `result`; also a function value
    /// (`completion: operation.finish(with:)`). Ignored once the operation has finished: the
    /// `.finishedTwice` diagnostic then names what it dropped (not where it was called, which a
    /// function value cannot tell).
    public final func finish(with result: Result<Output, any Error>) {
        switch result {
        case let .success(output): finish(producing: output, by: .produce(nil, valueType: Output.self, method: "finish(with:)"))
        case let .failure(error): finish(errors: [error])
        }
    }

    /// The framework's own finish with a value (a block's, a task's): a late one names no call site.
    final func finishProducing(_ output: Output) {
        finish(producing: output, by: .produce(nil, valueType: Output.self, method: "finish(producing:)"))
    }

    private func finish(producing output: Output, by call: FinishCall) {
        withExtendedLifetime(self) {
            let action = lifecycle.finish(producing: output)
            if case .reportDuplicate = action {
                reportIgnoredFinish(call, dropping: [])
            } else {
                perform(action)
            }
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
            finishProducing(try block())
        } catch {
            finish(with: error)
        }
    }

    override func releaseResources() {
        let released = work.withLock { $0.take() }
        _ = released // the block's captures are released outside the lock
    }
}
