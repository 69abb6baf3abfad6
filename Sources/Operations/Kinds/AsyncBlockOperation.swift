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
/// Cancelling the operation while its continuation is pending finishes it at once; cancelling it
/// while the block itself still runs finishes it when the block returns. Either way, a call of
/// the continuation after the cancel is ignored, even one made at once (from an
/// `operationDidCancel` observer, say). The block is released when the operation finishes.
// @unchecked Sendable: the block lives in the lifecycle, under its lock; the rest is `AsyncOperation`'s.
open class AsyncBlockOperation: AsyncOperation, @unchecked Sendable {
    /// The function that finishes an operation created with a continuation block: call it once,
    /// with `nil` on success or the error that made the work fail.
    public typealias Continuation = @Sendable ((any Error)?) -> Void

    /// Where a continuation block was created, for messages about its continuation.
    private let createdAt: CallSite?

    /// Creates an operation that runs `block` and finishes when it returns. An error it throws
    /// becomes the operation's error.
    public init(_ block: @escaping @Sendable () throws -> Void) {
        createdAt = nil
        super.init(block: .throwing(block))
    }

    /// Creates an operation that runs `block` and finishes when `block` calls its `finish`
    /// continuation, with an optional error.
    ///
    /// `file` and `line` say where the block was created: a diagnostic about its continuation
    /// (called twice, say) names that place.
    public init(_ block: @escaping @Sendable (_ finish: @escaping Continuation) -> Void, file: StaticString = #fileID, line: UInt = #line) {
        createdAt = CallSite(file: file, line: line)
        super.init(block: .continuation(block))
    }

    /// Creates an operation that runs `block` and finishes when `block` calls its `finish`
    /// continuation, with an optional error: `init(_:file:line:)` for a subclass that overrides
    /// this initializer, or a reference to it as a function value.
    @_disfavoredOverload
    public init(_ block: @escaping @Sendable (_ finish: @escaping Continuation) -> Void) {
        createdAt = nil
        super.init(block: .continuation(block))
    }

    /// Runs the block. Subclasses rarely override this.
    open override func execute() {
        switch lifecycle.beginBlock() {
        case .finishWithoutCalling:
            finish() // a cancel came first: the block is never called
        case let .call(.throwing(work)):
            do {
                try work()
                finish()
            } catch {
                finish(with: error)
            }
        case let .call(.continuation(work)):
            let gate = ContinuationGate(operation: self, createdAt: createdAt)
            lifecycle.awaitContinuation(through: gate)
            work { error in gate.resume(error) }
            if lifecycle.blockReturned() == .finishNow {
                finish() // cancelled while the block ran
            }
        }
    }

    /// A cancel while executing: before the block is called, it never is (`execute()`, on its way,
    /// finishes instead: so `operationDidStart` is still followed by `execute()`); while it is
    /// being called, the operation finishes once the call returns, and a continuation called
    /// meanwhile is ignored; after, a continuation still pending is cut short at once.
    override func cancellationDuringExecution() {
        switch lifecycle.blockCancelled() {
        case .nothing:
            break
        case .finishNow:
            finish()
        case let .ignoreContinuation(gate):
            gate.operationFinished() // a call from now on finds no operation to finish
        }
    }

    override func releaseResources() {
        let released = lifecycle.releaseBlock() // the block's captures are released after unlocking
        released?.pendingContinuation?.operationFinished()
    }
}

/// Lets a continuation through once; holds its operation only until the operation finishes.
final class ContinuationGate: Sendable {
    private struct State {
        var operation: AsyncBlockOperation?
        var wasCalled = false
    }

    private let state: Locked<State>
    /// The queue the operation runs on, for a diagnostic once the gate has let go of it.
    private let queue: QueueMention?
    /// What names the operation in a diagnostic once the gate has let go of it.
    private let operationName: String?
    private let operationType: AsyncBlockOperation.Type
    private let createdAt: CallSite?

    init(operation: AsyncBlockOperation, createdAt: CallSite?) {
        state = Locked.make(State(operation: operation))
        queue = operation.queueForMessages
        operationName = operation.name
        operationType = type(of: operation)
        self.createdAt = createdAt
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
            reportSecondCall(dropping: error.map { [$0] } ?? [])
            return
        }
        operation?.finish(errors: error.map { [$0] } ?? [], by: .continuation(createdAt: createdAt))
    }

    private func reportSecondCall(dropping errors: [any Error]) {
        let block = createdAt.map { " of the block created at \($0)" } ?? ""
        OperationDiagnostics.handler(OperationDiagnostic(
            kind: .continuationCalledTwice,
            operationName: operationName ?? String(describing: operationType),
            queueNames: queue.map { [$0.displayName] } ?? [],
            message: "the continuation\(block) was called a second time; the call was ignored \(AsyncOperation.whatWasLost(errors))"
        ))
    }

    /// The operation finished (for instance, cancelled): drop it, so a late call does nothing.
    func operationFinished() {
        let released = state.withLock { $0.operation.take() }
        _ = released
    }
}
