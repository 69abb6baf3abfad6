@testable import Operations
import Testing

// The rules of one operation's categories held beyond its process, driven without threads or locks.

@Suite struct CategoryLockGateStateTests {
    private final class Lease: CategoryLease {
        let fencingToken: UInt64
        init(_ token: UInt64) { fencingToken = token }
        func release() {}
    }

    private func startedRound(_ state: inout CategoryLockGateState) -> UInt64 {
        guard case let .acquire(round) = state.begin() else {
            Issue.record("expected a round to start")
            return 0
        }
        return round
    }

    private func isLost(_ action: CategoryLockGateState.OutcomeAction, category: String) -> Bool {
        guard case let .releaseAndFail(_, error) = action, case let .lost(lost)? = error as? CategoryLockError else { return false }
        return lost == category
    }

    @Test func aRoundThatGetsEveryLease_proceeds_andHandsOutTheirTokens() {
        var state = CategoryLockGateState()
        let round = startedRound(&state)
        #expect(state.nowAcquiring("a", with: CategoryLockRequest(category: "a"), round: round) == .ask)
        #expect(state.awaitedCategory == "a")
        guard case .proceed = state.acquired(["a": Lease(7)], round: round) else {
            Issue.record("expected .proceed")
            return
        }
        #expect(state.fencingToken(for: "a") == 7)
        #expect(state.awaitedCategory == nil)
    }

    @Test func aWaitIsReported_onlyWhileTheSameRoundStillAwaitsTheSameCategory() {
        var state = CategoryLockGateState()
        let round = startedRound(&state)
        #expect(state.nowAcquiring("a", with: CategoryLockRequest(category: "a"), round: round) == .ask)
        #expect(isReport(state.waitChecked("a", round: round)))
        #expect(!isReport(state.waitChecked("a", round: round + 1))) // a later round asks for itself
        #expect(state.nowAcquiring("b", with: CategoryLockRequest(category: "b"), round: round) == .ask)
        #expect(!isReport(state.waitChecked("a", round: round))) // answered: the round moved on
        _ = state.acquired(["a": Lease(1), "b": Lease(2)], round: round)
        #expect(!isReport(state.waitChecked("b", round: round)))
    }

    private func isReport(_ check: CategoryLockGateState.WaitCheck) -> Bool {
        if case .reportWaiting = check { true } else { false }
    }

    @Test func aLeaseLostWhileLaterOnesAreAwaited_endsTheRound_andTheOperationNeverRuns() {
        var state = CategoryLockGateState()
        let round = startedRound(&state)
        #expect(state.nowAcquiring("a", with: CategoryLockRequest(category: "a"), round: round) == .ask)
        let second = CategoryLockRequest(category: "b")
        #expect(state.nowAcquiring("b", with: second, round: round) == .ask)

        guard case let .endRound(request) = state.lost("a", round: round) else {
            Issue.record("expected the round to end")
            return
        }
        #expect(request === second)
        guard case let .fail(error) = state.failed(CancellationError(), round: round),
              case .lost("a")? = error as? CategoryLockError else {
            Issue.record("expected the round to fail with .lost(a)")
            return
        }
        #expect(state.fencingToken(for: "a") == nil)
    }

    @Test func aLeaseLostBeforeTheLastGrantArrives_failsTheRoundWithLost_insteadOfProceeding() {
        var state = CategoryLockGateState()
        let round = startedRound(&state)
        #expect(state.nowAcquiring("a", with: CategoryLockRequest(category: "a"), round: round) == .ask)
        _ = state.lost("a", round: round) // the session ended right after it handed out the lease
        #expect(isLost(state.acquired(["a": Lease(1)], round: round), category: "a"))
        #expect(state.fencingToken(for: "a") == nil)
    }

    @Test func aLeaseLostAfterTheRoundEnded_cancelsTheHolder_andTakesItsTokenOnly() {
        var state = CategoryLockGateState()
        let round = startedRound(&state)
        #expect(state.nowAcquiring("a", with: CategoryLockRequest(category: "a"), round: round) == .ask)
        #expect(state.nowAcquiring("b", with: CategoryLockRequest(category: "b"), round: round) == .ask)
        _ = state.acquired(["a": Lease(1), "b": Lease(2)], round: round)
        guard case .cancel(.lost("a")) = state.lost("a", round: round) else {
            Issue.record("expected the holder to be cancelled with .lost(a)")
            return
        }
        #expect(state.fencingToken(for: "a") == nil) // stale: a resource must not be shown it
        #expect(state.fencingToken(for: "b") == 2)
        guard case let .release(leases) = state.finished() else {
            Issue.record("the lost lease is given back with the others")
            return
        }
        #expect(leases.count == 2)
    }

    @Test func aLeaseOfAStaleRound_isIgnored() {
        var state = CategoryLockGateState()
        let round = startedRound(&state)
        #expect(state.nowAcquiring("a", with: CategoryLockRequest(category: "a"), round: round) == .ask)
        _ = state.suspended()
        let next = startedRound(&state)
        #expect(next != round)
        guard case .none = state.lost("a", round: round) else {
            Issue.record("a stale round's loss must change nothing")
            return
        }
        #expect(state.nowAcquiring("a", with: CategoryLockRequest(category: "a"), round: round) == .endRound)
        #expect(state.nowAcquiring("a", with: CategoryLockRequest(category: "a"), round: next) == .ask)
    }

    @Test func aRoundWhoseOperationFinished_givesItsLeasesBack_andItsCategoriesToo() {
        var state = CategoryLockGateState()
        let round = startedRound(&state)
        let request = CategoryLockRequest(category: "a")
        #expect(state.nowAcquiring("a", with: request, round: round) == .ask)
        guard case let .cancel(cancelled) = state.finished() else {
            Issue.record("expected the request to be cancelled")
            return
        }
        #expect(cancelled === request)
        guard case let .releaseAndGiveBackLocally(leases) = state.acquired(["a": Lease(1)], round: round) else {
            Issue.record("expected the late lease to go back")
            return
        }
        #expect(leases.count == 1)
        guard case .giveBackLocally = state.begin() else {
            Issue.record("a finished operation starts no round")
            return
        }
    }
}

