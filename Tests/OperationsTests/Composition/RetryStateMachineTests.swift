import Foundation
@testable import Operations
import Testing
import TestSupport

// The rules of a retry operation's attempts, without threads: each event and what it returns.

@Suite struct RetryStateMachineTests {
    private func machine() -> RetryStateMachine<AsyncBlockOperation> {
        RetryStateMachine(makeAttempt: { _ in AsyncBlockOperation {} }, shouldRetry: nil)
    }

    private func number(_ due: RetryStateMachine<AsyncBlockOperation>.AttemptDue) -> Int? {
        guard case let .make(_, number) = due else { return nil }
        return number
    }

    @Test func attemptsAreNumberedFromOne_andARejectedOneDoesNotCount() {
        var state = machine()
        #expect(number(state.attemptDue()) == 1)
        #expect(number(state.attemptDue()) == 2)
        _ = state.attemptRejected()
        #expect(state.attemptCount == 1)
        #expect(number(state.attemptDue()) == 2)
    }

    @Test func roles_tellTheLatestAttempt_theWait_andAnythingElse() {
        var state = machine()
        let first = AsyncBlockOperation {}
        let second = AsyncBlockOperation {}
        let wait = DelayOperation(0)
        _ = state.attemptMade(first)
        _ = state.backoffStarted(wait, after: [StubError("first failed")])
        let replaced = state.attemptMade(second)
        #expect(replaced.previousAttempt === first) // released by the caller, outside the lock
        #expect(state.role(of: second) == .attempt)
        #expect(state.role(of: first) == .other) // only the latest attempt counts
        #expect(state.role(of: wait) == .backoffWait)
        #expect(state.lastAttempt === second)
    }

    @Test func theWaitFinishing_handsBackItsErrorsOnce() {
        var state = machine()
        let wait = DelayOperation(0)
        _ = state.backoffStarted(wait, after: [StubError("first failed")])
        guard case let .waited(pending, released) = state.backoffFinished() else { return }
        #expect(pending.asStubErrors == [StubError("first failed")])
        #expect(released.backoffWait === wait)
        #expect(state.role(of: wait) == .other)
        guard case let .waited(pendingAgain, _) = state.backoffFinished() else { return }
        #expect(pendingAgain.isEmpty)
    }

    @Test func afterRelease_noAttemptIsDue_andTheClosuresLeave() {
        var state = RetryStateMachine<AsyncBlockOperation>(makeAttempt: { _ in AsyncBlockOperation {} }, shouldRetry: { _ in true })
        let released = state.release()
        #expect(released.makeAttempt != nil && released.shouldRetry != nil)
        #expect(number(state.attemptDue()) == nil)
        #expect(state.shouldRetry == nil)
    }
}
