@testable import Operations
import Testing
import TestSupport

/// An `AsyncBlockOperation`'s continuation as its lifecycle takes it, without threads: once the
/// block was called, a cancel always wins over a continuation called after it, decided in the
/// cancel's own step, whether or not the block has heard of the cancel yet.
@Suite struct OperationLifecycleBlockTests {
    private let queue = AsyncOperationQueue()

    /// A continuation block's lifecycle, started on a queue, its start heard and its block
    /// called; `handingOutTheContinuation`: the block was handed its continuation too.
    private func executingBlock(handingOutTheContinuation: Bool = true) -> OperationLifecycle {
        var state = OperationLifecycle(block: .continuation { _ in })
        _ = state.enqueue(on: queue, ticket: 1)
        guard case .execute = state.start() else {
            Issue.record("a block operation on a queue executes as it starts")
            return state
        }
        _ = state.notificationDelivered() // operationDidStart was heard
        guard case .call = state.beginBlock() else {
            Issue.record("nothing cancelled it: its block is called")
            return state
        }
        if handingOutTheContinuation {
            state.awaitContinuation(through: ContinuationGate(operation: AsyncBlockOperation { _ in }, createdAt: nil))
        }
        return state
    }

    private func isIgnored(_ action: OperationLifecycle.FinishAction) -> Bool {
        if case .none = action { return true }
        return false
    }

    @Test func aContinuationWithoutACancel_finishesTheOperationWithItsError() {
        var state = executingBlock()
        let error = StubError("from the continuation")
        #expect(!isIgnored(state.finishFromContinuation(errors: [error])))
        #expect(state.errors.asStubErrors == [error])
    }

    @Test func aContinuationCalledWhileTheCancelIsStillBeingHeard_isIgnored() {
        // The block has not heard of the cancel yet: operationDidCancel is being delivered.
        var state = executingBlock()
        _ = state.cancel(error: StubError("cancel"))
        #expect(isIgnored(state.finishFromContinuation(errors: [StubError("late")])))
        #expect(state.errors.asStubErrors == [StubError("cancel")])
    }

    @Test func aContinuationCalledAfterACancelThatCameBeforeItWasHandedOut_isIgnored() {
        var state = executingBlock(handingOutTheContinuation: false)
        _ = state.cancel(error: nil)
        _ = state.notificationDelivered()
        #expect(state.blockCancelled() == .nothing) // it finishes as the block returns
        #expect(isIgnored(state.finishFromContinuation(errors: [StubError("late")])))
        #expect(state.blockReturned() == .finishNow)
        #expect(isIgnored(state.finishFromContinuation(errors: [StubError("later")])))
        #expect(state.errors.isEmpty)
    }

    @Test func aContinuationCalledAfterACancelCutItShort_beforeTheCancelsFinishLanded_isIgnored() {
        var state = executingBlock()
        #expect(state.blockReturned() == .nothing)
        _ = state.cancel(error: nil)
        _ = state.notificationDelivered()
        #expect(state.blockCancelled() == .finishNow)
        #expect(isIgnored(state.finishFromContinuation(errors: [StubError("late")])))
        #expect(state.errors.isEmpty)
    }
}
