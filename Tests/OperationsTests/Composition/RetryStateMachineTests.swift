import Foundation
@testable import Operations
import Testing
import TestSupport

// The rules of a retry operation's attempts, without threads: each event and what it returns.

@Suite struct RetryStateMachineTests {
    private func machine() -> RetryStateMachine<AsyncBlockOperation> {
        RetryStateMachine(makeAttempt: { _ in AsyncBlockOperation {} }, shouldRetry: nil)
    }

    @Test func attemptsAreNumberedFromOne_andARejectedOneDoesNotCount() {
        var state = machine()
        #expect(state.attemptDue()?.number == 1)
        #expect(state.attemptDue()?.number == 2)
        state.attemptRejected()
        #expect(state.attemptCount == 1)
        #expect(state.attemptDue()?.number == 2)
    }

    @Test func roles_tellTheLatestAttempt_theWait_andAnythingElse() {
        var state = machine()
        let first = AsyncBlockOperation {}
        let second = AsyncBlockOperation {}
        let wait = DelayOperation(0)
        state.attemptMade(first)
        state.backoffStarted(wait, after: [StubError("first failed")])
        state.attemptMade(second)
        #expect(state.role(of: second) == .attempt)
        #expect(state.role(of: first) == .other) // only the latest attempt counts
        #expect(state.role(of: wait) == .backoffWait)
        #expect(state.lastAttempt === second)
    }

    @Test func theWaitFinishing_handsBackItsErrorsOnce() {
        var state = machine()
        let wait = DelayOperation(0)
        state.backoffStarted(wait, after: [StubError("first failed")])
        let (pending, finished) = state.backoffFinished()
        #expect(pending.asStubErrors == [StubError("first failed")])
        #expect(finished === wait)
        #expect(state.role(of: wait) == .other)
        #expect(state.backoffFinished().pendingErrors.isEmpty)
    }

    @Test func afterRelease_noAttemptIsDue_andTheClosuresLeave() {
        var state = RetryStateMachine<AsyncBlockOperation>(makeAttempt: { _ in AsyncBlockOperation {} }, shouldRetry: { _ in true })
        let released = state.release()
        #expect(released.makeAttempt != nil && released.shouldRetry != nil)
        #expect(state.attemptDue() == nil)
        #expect(state.shouldRetry == nil)
    }
}
