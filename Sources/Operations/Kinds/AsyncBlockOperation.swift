import Foundation

/// An operation built from a block, with conditions, observers and errors.
///
/// Two kinds of block:
///
/// ```swift
/// // Finishes when the block returns; a thrown error becomes the operation's error.
/// let save = AsyncBlockOperation { try store.save() }
///
/// // Finishes when the block calls `finish`, from any thread, with an optional error.
/// let fetch = AsyncBlockOperation { finish in
///     client.fetch { error in finish(error) }
/// }
/// ```
///
/// Calling the continuation a second time does nothing (and reports `.continuationCalledTwice`).
/// Cancelling the operation while its continuation is pending finishes it at once; a later call
/// of the continuation is ignored. The block is released when the operation finishes.
// @unchecked Sendable: `body` lives in a `Locked` value; the rest is `AsyncOperation`'s.
open class AsyncBlockOperation: AsyncOperation, @unchecked Sendable {
    /// The function that finishes an operation created with a continuation block: call it once,
    /// with `nil` on success or the error that made the work fail.
    public typealias Continuation = @Sendable ((any Error)?) -> Void

    private enum Body {
        case throwing(@Sendable () throws -> Void)
        case continuation(@Sendable (_ finish: @escaping Continuation) -> Void)
    }

    private struct BlockState {
        var body: Body?
        var pendingContinuation: ContinuationGate?
    }

    private let block: Locked<BlockState>

    /// Creates an operation that runs `block` and finishes when it returns. An error it throws
    /// becomes the operation's error.
    public init(_ block: @escaping @Sendable () throws -> Void) {
        self.block = Locked.make(BlockState(body: .throwing(block)))
        super.init()
    }

    /// Creates an operation that runs `block` and finishes when `block` calls its `finish`
    /// continuation, with an optional error.
    public init(_ block: @escaping @Sendable (_ finish: @escaping Continuation) -> Void) {
        self.block = Locked.make(BlockState(body: .continuation(block)))
        super.init()
    }

    /// Runs the block. Subclasses rarely override this.
    open override func execute() {
        if isCancelled {
            finish()
            return
        }
        let body = block.withLock { $0.body }
        switch body {
        case nil:
            finish()
        case let .throwing(work)?:
            do {
                try work()
                finish()
            } catch {
                finish(with: error)
            }
        case let .continuation(work)?:
            let gate = ContinuationGate(operation: self)
            block.withLock { $0.pendingContinuation = gate }
            // Checked again now that the continuation is pending: a cancel that landed after the
            // first check saw no continuation to cut short, and must not be lost.
            if isCancelled {
                finish()
                return
            }
            work { error in gate.resume(error) }
        }
    }

    override func cancellationDuringExecution() {
        let pending = block.withLock { $0.pendingContinuation }
        if pending != nil {
            finish()
        }
    }

    override func releaseResources() {
        let released = block.exchange(with: BlockState()) // the block's captures are released after unlocking
        released.pendingContinuation?.operationFinished()
    }
}

/// Lets a continuation through once; holds its operation only until the operation finishes.
final class ContinuationGate: Sendable {
    private struct State {
        var operation: AsyncBlockOperation?
        var wasCalled = false
    }

    private let state: Locked<State>
    /// What names the operation in a diagnostic once the gate has let go of it.
    private let operationName: String?
    private let operationType: AsyncBlockOperation.Type

    init(operation: AsyncBlockOperation) {
        state = Locked.make(State(operation: operation))
        operationName = operation.name
        operationType = type(of: operation)
    }

    func resume(_ error: (any Error)?) {
        let (operation, calledBefore) = state.withLock { state -> (AsyncBlockOperation?, Bool) in
            defer {
                state.wasCalled = true
                state.operation = nil
            }
            return (state.operation, state.wasCalled)
        }
        if calledBefore {
            OperationDiagnostics.handler(OperationDiagnostic(
                kind: .continuationCalledTwice,
                operationName: operationName ?? String(describing: operationType),
                message: "the continuation was called a second time; the call was ignored"
            ))
            return
        }
        operation?.finish(with: error)
    }

    /// The operation finished (for instance, cancelled): drop it, so a late call does nothing.
    func operationFinished() {
        let released = state.withLock { $0.operation.take() }
        _ = released
    }
}
