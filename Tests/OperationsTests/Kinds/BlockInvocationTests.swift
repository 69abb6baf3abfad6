@testable import Operations
import Testing

/// The rules of a block's one call, without threads: a cancel and the call never cross.
@Suite struct BlockInvocationTests {
    private func throwingBlock() -> BlockInvocation {
        BlockInvocation(.throwing {})
    }

    private func continuationBlock() -> BlockInvocation {
        BlockInvocation(.continuation { _ in })
    }

    /// A continuation block that was called and handed its continuation.
    private func blockAwaitingItsContinuation() -> BlockInvocation {
        var block = continuationBlock()
        _ = block.begin(isCancelled: false)
        block.awaitContinuation(through: ContinuationGate(operation: AsyncBlockOperation { _ in }, createdAt: nil))
        return block
    }

    private func calls(_ start: BlockInvocation.Start) -> Bool {
        if case .call = start { return true }
        return false
    }

    @Test func theBlockIsHandedOutOnce() {
        var block = throwingBlock()
        #expect(calls(block.begin(isCancelled: false)))
        #expect(!calls(block.begin(isCancelled: false)))
    }

    @Test func aCancelledOperation_neverCallsItsBlock() {
        var block = throwingBlock()
        #expect(!calls(block.begin(isCancelled: true)))

        var cancelledOnItsWay = throwingBlock()
        #expect(cancelledOnItsWay.cancelled() == .nothing) // execute() is on its way: it finishes
        #expect(!calls(cancelledOnItsWay.begin(isCancelled: false)))
    }

    @Test func aCancelWhileTheBlockRuns_finishesTheOperationOnceItReturns() {
        var block = continuationBlock()
        #expect(calls(block.begin(isCancelled: false)))
        #expect(block.cancelled() == .nothing)
        #expect(block.returned() == .finishNow)
    }

    @Test func aCancelWhileTheBlockRuns_ignoresItsContinuationFromThenOn() {
        var block = blockAwaitingItsContinuation() // its call has not returned yet
        guard case let .ignoreContinuation(gate) = block.cancelled() else {
            Issue.record("expected the continuation to be ignored from the cancel on")
            return
        }
        #expect(block.returned() == .finishNow)
        gate.operationFinished()
    }

    @Test func aBlockThatReturnedUncancelled_waitsForItsContinuation() {
        var block = continuationBlock()
        _ = block.begin(isCancelled: false)
        #expect(block.returned() == .nothing)
    }

    @Test func aCancelAfterTheBlockReturned_cutsAPendingContinuationShort() {
        var block = blockAwaitingItsContinuation()
        #expect(block.returned() == .nothing)
        #expect(block.cancelled() == .finishNow)

        var withoutContinuation = throwingBlock()
        _ = withoutContinuation.begin(isCancelled: false)
        _ = withoutContinuation.returned()
        #expect(withoutContinuation.cancelled() == .nothing)
    }

    @Test func aCancelWhileTheBlockRuns_finishesItAsItReturns_andTellsAGateHandedOut() {
        // The cancel came before the continuation was even handed out: there was no gate to tell.
        var beforeTheGate = continuationBlock()
        _ = beforeTheGate.begin(isCancelled: false)
        #expect(beforeTheGate.cancelled() == .nothing)
        #expect(beforeTheGate.returned() == .finishNow)
        #expect(beforeTheGate.cancelled() == .nothing) // a second cancel finishes nothing more

        // The cancel came with the gate handed out: the gate is told, after unlocking.
        var withTheGate = blockAwaitingItsContinuation()
        guard case let .ignoreContinuation(gate) = withTheGate.cancelled() else {
            Issue.record("expected the gate to be told of the cancel")
            return
        }
        #expect(withTheGate.returned() == .finishNow)
        gate.operationFinished()
    }

    @Test func aSecondCancelAfterACancelCutAPendingContinuationShort_finishesNothingMore() {
        var block = blockAwaitingItsContinuation()
        _ = block.returned()
        #expect(block.cancelled() == .finishNow)
        #expect(block.cancelled() == .nothing)
    }

    @Test func releasing_handsOverTheBlockAndItsContinuation_once() {
        var block = blockAwaitingItsContinuation()

        let first = block.release()
        #expect(first.body != nil)
        #expect(first.pendingContinuation != nil)
        let second = block.release()
        #expect(second.body == nil)
        #expect(second.pendingContinuation == nil)
        #expect(block.cancelled() == .nothing) // nothing left to cut short
        first.pendingContinuation?.operationFinished()
    }
}
