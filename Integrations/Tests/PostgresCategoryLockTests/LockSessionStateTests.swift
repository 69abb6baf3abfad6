import Foundation
import Operations
@testable import PostgresCategoryLock
import Testing

/// The rules of one acquisition by a `PostgresCategoryLock`, without a server: driven event by
/// event, with a real waiter that each test settles.
@Suite struct LockSessionStateTests {
    private struct Unreachable: Error {}
    private final class Lease: CategoryLease {
        let fencingToken: UInt64 = 1
        func release() {}
    }
    private struct NotSettled: Error {}

    private func noTask() -> Task<Void, Never> { Task {} }

    /// Runs `body` with a state whose waiter is `waiter`, then returns what the waiter got.
    private func withWaiter(_ body: @escaping (inout LockSessionState, LockSessionState.Waiter) -> Void) async -> Result<any CategoryLease, any Error> {
        do {
            let lease = try await withCheckedThrowingContinuation { (waiter: LockSessionState.Waiter) in
                var state = LockSessionState()
                body(&state, waiter)
            }
            return .success(lease)
        } catch {
            return .failure(error)
        }
    }

    /// `withWaiter`, the waiter waiting and the session's tasks started before `body` runs.
    private func withStartedSession(_ body: @escaping (inout LockSessionState, LockSessionState.Waiter) -> Void) async -> Result<any CategoryLease, any Error> {
        await withWaiter { state, waiter in
            guard case .start = state.wait(with: waiter) else {
                Issue.record("expected the session to start")
                waiter.resume(throwing: NotSettled())
                return
            }
            _ = state.started(holder: noTask(), timer: noTask())
            body(&state, waiter)
        }
    }

    @Test func aCancellationThatComesBeforeTheWait_failsTheWaiterAtOnce_andStartsNothing() async {
        let result = await withWaiter { state, waiter in
            guard case .none = state.abandon(with: CancellationError()) else {
                Issue.record("nothing waits yet: nothing to fail")
                return
            }
            switch state.wait(with: waiter) {
            case let .fail(waiter, error):
                waiter.resume(throwing: error)
            case .start:
                Issue.record("a cancelled request must not start a session")
                waiter.resume(throwing: NotSettled())
            }
        }
        guard case let .failure(error) = result else {
            Issue.record("expected a failure")
            return
        }
        #expect(error is CancellationError)
    }

    @Test func failuresThatAlternateWithConnections_stillGiveUpOnceTheyLastTheTimeout() async {
        let result = await withStartedSession { state, waiter in
            var gaveUp: (any Error)?
            for second in 0..<20 where gaveUp == nil {
                let now = UInt64(second) * 1_000_000_000
                let connected = state.connected(now: now)
                #expect(connected)
                if case let .giveUp(error) = state.attemptFailed(Unreachable(), now: now, unavailableTimeout: 10) {
                    gaveUp = error
                    #expect(second == 10)
                }
            }
            guard let gaveUp, case let .fail(waiter, error, _) = state.abandon(with: gaveUp) else {
                Issue.record("expected to give up after 10 s of failures")
                waiter.resume(throwing: NotSettled())
                return
            }
            waiter.resume(throwing: error)
        }
        guard case let .failure(error) = result else { return }
        #expect(error is Unreachable)
    }

    @Test func aServerThatAnswers_startsTheTimeoutAgain() async {
        let result = await withStartedSession { state, waiter in
            for second in 0..<30 {
                let now = UInt64(second) * 1_000_000_000
                let connected = state.connected(now: now)
                #expect(connected)
                if second % 5 == 4 { state.serverAnswered(now: now) }
                if case .giveUp = state.attemptFailed(Unreachable(), now: now, unavailableTimeout: 10) {
                    Issue.record("gave up at \(second) s although the server answered every 5 s")
                }
            }
            guard case let .fail(waiter, error, _) = state.abandon(with: CancellationError()) else { return }
            waiter.resume(throwing: error)
        }
        guard case let .failure(error) = result else { return }
        #expect(error is CancellationError)
    }

    @Test func aConnectionLostWhileWaitingInLine_isGivenUpOn_onceNoneCameForTheTimeout() async {
        let result = await withStartedSession { state, waiter in
            let seconds: (UInt64) -> UInt64 = { $0 * 1_000_000_000 }
            let giveUp: ((any Error)?) -> any Error = { $0 ?? Unreachable() }
            _ = state.connected(now: 0)
            state.serverAnswered(now: seconds(9)) // waiting in line: the lock is held elsewhere
            guard case .checkAgain(after: 9) = state.timerFired(now: seconds(10), unavailableTimeout: 10, giveUp) else {
                Issue.record("a session the server answers keeps being watched")
                waiter.resume(throwing: NotSettled())
                return
            }
            // The connection drops at 12 s, and the client never hands out another (nor an error).
            guard case .retry = state.attemptFailed(Unreachable(), now: seconds(12), unavailableTimeout: 10) else {
                Issue.record("a fresh failure is retried")
                waiter.resume(throwing: NotSettled())
                return
            }
            guard case .checkAgain(after: 8) = state.timerFired(now: seconds(14), unavailableTimeout: 10, giveUp) else {
                Issue.record("expected a look again when the failures will have lasted the timeout")
                waiter.resume(throwing: NotSettled())
                return
            }
            guard case let .giveUp(.fail(waiter, error, _)) = state.timerFired(now: seconds(22), unavailableTimeout: 10, giveUp) else {
                Issue.record("expected to give up 10 s after the connection was lost")
                waiter.resume(throwing: NotSettled())
                return
            }
            waiter.resume(throwing: error)
        }
        guard case let .failure(error) = result else { return }
        #expect(error is Unreachable)
    }

    @Test func aConnectedSessionTheServerFallsSilentTo_isGivenUpOn_onceSilentForTheTimeout() async {
        let result = await withStartedSession { state, waiter in
            let seconds: (UInt64) -> UInt64 = { $0 * 1_000_000_000 }
            _ = state.connected(now: seconds(1))
            state.serverAnswered(now: seconds(3))
            guard case .checkAgain(after: 8) = state.timerFired(now: seconds(5), unavailableTimeout: 10, { _ in Unreachable() }) else {
                Issue.record("expected a look again 10 s after the last answer")
                waiter.resume(throwing: NotSettled())
                return
            }
            // The server stops at 4 s: the statement in flight never returns, and never fails.
            guard case let .giveUpAndCloseConnection(.fail(waiter, error, cancel)) = state.timerFired(now: seconds(13), unavailableTimeout: 10, { last in
                #expect(last == nil, "a silent server is no failure the client saw")
                return Unreachable()
            }) else {
                Issue.record("expected to give up 10 s after the server's last answer, closing the connection")
                waiter.resume(throwing: NotSettled())
                return
            }
            #expect(cancel.count == 1, "only the timer: a session with a connection ends by itself")
            waiter.resume(throwing: error)
        }
        guard case let .failure(error) = result else { return }
        #expect(error is Unreachable)
    }

    @Test func aClockReadBeforeTheLastAnswerWasRecorded_countsAsNoSilence() async {
        let result = await withStartedSession { state, waiter in
            _ = state.connected(now: 5_000_000_000)
            state.serverAnswered(now: 9_000_000_000)
            // The timer read the clock at 8.9 s, before the answer of 9 s took the lock.
            guard case .checkAgain = state.timerFired(now: 8_900_000_000, unavailableTimeout: 10, { _ in Unreachable() }) else {
                Issue.record("a reading older than the last answer must not count as a long silence")
                waiter.resume(throwing: NotSettled())
                return
            }
            guard case .retry = state.attemptFailed(Unreachable(), now: 9_500_000_000, unavailableTimeout: 10),
                  case .retry = state.attemptFailed(Unreachable(), now: 9_400_000_000, unavailableTimeout: 10) else {
                Issue.record("a failure read before the first one must not give up")
                waiter.resume(throwing: NotSettled())
                return
            }
            guard case let .fail(waiter, error, _) = state.abandon(with: CancellationError()) else { return }
            waiter.resume(throwing: error)
        }
        guard case let .failure(error) = result else { return }
        #expect(error is CancellationError)
    }

    @Test func aTimerThatWentOffLate_looksAgainBeforeGivingUp_aBoundedNumberOfTimes() async {
        let result = await withStartedSession { state, waiter in
            let seconds: (Double) -> UInt64 = { UInt64($0 * 1_000_000_000) }
            _ = state.connected(now: seconds(1))
            state.serverAnswered(now: seconds(2))
            // The process was too busy to run its tasks from 2 s to 6 s: the timer, due at 3 s,
            // goes off 3 s late, and the session could not ask the server meanwhile.
            guard case .checkAgain(after: LockSessionState.lookAgainAfterLateness) = state.timerFired(now: seconds(6), lateBy: 3, unavailableTimeout: 1, { _ in Unreachable() }) else {
                Issue.record("a late timer looks again first")
                waiter.resume(throwing: NotSettled())
                return
            }
            state.serverAnswered(now: seconds(6.2)) // the session asked, and the server answered
            guard case .checkAgain = state.timerFired(now: seconds(6.5), unavailableTimeout: 1, { _ in Unreachable() }) else {
                Issue.record("an answered session keeps waiting")
                waiter.resume(throwing: NotSettled())
                return
            }
            // Late every time after that, with no answer: it looks again only so many times in a
            // row (the answer at 6.2 s started the count again).
            var now = 10.0
            for _ in 0..<LockSessionState.lateLooksAllowed {
                guard case .checkAgain = state.timerFired(now: seconds(now), lateBy: 1, unavailableTimeout: 1, { _ in Unreachable() }) else {
                    Issue.record("expected another look")
                    waiter.resume(throwing: NotSettled())
                    return
                }
                now += 1
            }
            guard case let .giveUpAndCloseConnection(.fail(waiter, error, _)) = state.timerFired(now: seconds(now), lateBy: 1, unavailableTimeout: 1, { _ in Unreachable() }) else {
                Issue.record("expected to give up once the late looks are used up")
                waiter.resume(throwing: NotSettled())
                return
            }
            waiter.resume(throwing: error)
        }
        guard case let .failure(error) = result else { return }
        #expect(error is Unreachable)
    }

    @Test func aSessionThatNeverConnected_isGivenUpOn_whenTheTimerFirstFires() async {
        let result = await withStartedSession { state, waiter in
            guard case let .giveUp(.fail(waiter, error, _)) = state.timerFired(now: 10_000_000_000, unavailableTimeout: 10, { _ in Unreachable() }) else {
                Issue.record("expected to give up")
                waiter.resume(throwing: NotSettled())
                return
            }
            waiter.resume(throwing: error)
        }
        guard case let .failure(error) = result else { return }
        #expect(error is Unreachable)
    }

    @Test func aLeaseLostOnce_isReportedOnce_andNotAfterItsRelease() async {
        let result = await withStartedSession { state, waiter in
            let connected = state.connected(now: 0)
            #expect(connected)
            guard case let .resume(waiter, _) = state.granted() else {
                Issue.record("expected the lease to be handed out")
                return
            }
            #expect(state.isHeld)
            guard case .report = state.lost() else {
                Issue.record("expected the loss to be reported")
                waiter.resume(throwing: NotSettled())
                return
            }
            if case .report = state.lost() { Issue.record("a loss is reported once") }
            let sleeperAfterLoss = state.released()
            #expect(sleeperAfterLoss == nil)
            waiter.resume(returning: Lease())
        }
        guard case .success = result else {
            Issue.record("expected the lease")
            return
        }
    }

    @Test func aReleasedLease_isNeverReportedLost() async {
        let result = await withStartedSession { state, waiter in
            let connected = state.connected(now: 0)
            #expect(connected)
            guard case let .resume(waiter, _) = state.granted() else { return }
            let sleeper = noTask()
            let pausing = state.pausing(with: sleeper)
            #expect(pausing)
            let woken = state.released()
            #expect(woken != nil)
            if case .report = state.lost() { Issue.record("a released lease was reported lost") }
            let pausingAgain = state.pausing(with: noTask())
            #expect(!pausingAgain)
            waiter.resume(returning: Lease())
        }
        guard case .success = result else {
            Issue.record("expected the lease")
            return
        }
    }
}
