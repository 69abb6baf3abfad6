import Foundation
@testable import Operations
import Testing

// The rules of mutual exclusion, without threads.

@Suite struct ExclusivityStateTests {
    private func request(_ ticket: UInt64, _ categories: [String]) -> ExclusivityState.Request {
        ExclusivityState.Request(place: LinePlace(root: ticket, ticket: ticket), operation: AsyncBlockOperation {}, categories: categories)
    }

    @Test func freeCategory_isGrantedAtOnce_andHeld() {
        var state = ExclusivityState()
        let first = state.acquire(request(1, ["a"]))
        #expect(first == .granted)
        let second = state.acquire(request(2, ["a"]))
        #expect(second == .waits)
        #expect(state.heldCategories == ["a"])
    }

    @Test func release_grantsTheNextInTicketOrder() {
        var state = ExclusivityState()
        let first = request(1, ["a"])
        let third = request(3, ["a"])
        let second = request(2, ["a"])
        _ = state.acquire(first)
        _ = state.acquire(third)
        _ = state.acquire(second) // arrives late but was added earlier: goes ahead of 3
        let afterFirst = state.release(["a"])
        #expect(afterFirst.all.map(ObjectIdentifier.init) == [ObjectIdentifier(second.operation)])
        let afterSecond = state.release(["a"])
        #expect(afterSecond.all.map(ObjectIdentifier.init) == [ObjectIdentifier(third.operation)])
    }

    @Test func overlappingCategories_neverDeadlock() {
        var state = ExclusivityState()
        let holder = request(1, ["a", "b"])
        let needsB = request(2, ["b", "c"])
        let needsCA = request(3, ["c", "a"])
        _ = state.acquire(holder)
        let needsBAnswer = state.acquire(needsB)
        #expect(needsBAnswer == .waits)
        let needsCAAnswer = state.acquire(needsCA)
        #expect(needsCAAnswer == .waits)
        // Releasing a and b lets 2 in (b, c); 3 waits for c, and gets it when 2 lets go.
        let afterHolder = state.release(["a", "b"])
        #expect(afterHolder.all.map(ObjectIdentifier.init) == [ObjectIdentifier(needsB.operation)])
        let afterNeedsB = state.release(["b", "c"])
        #expect(afterNeedsB.all.map(ObjectIdentifier.init) == [ObjectIdentifier(needsCA.operation)])
        let afterNeedsCA = state.release(["c", "a"])
        #expect(afterNeedsCA.all.isEmpty)
        #expect(state.heldCategories.isEmpty)
    }

    @Test func withdrawal_letsTheNextWaiterIn() {
        var state = ExclusivityState()
        let holder = request(1, ["a"])
        let early = request(2, ["a"])
        let late = request(3, ["a"])
        _ = state.acquire(holder)
        _ = state.acquire(early)
        _ = state.acquire(late)
        let released = state.release(["a"]) // early is granted
        #expect(released.all.map(ObjectIdentifier.init) == [ObjectIdentifier(early.operation)])
        let notInLine = state.withdraw(place: LinePlace(root: 2, ticket: 2), from: ["a"])
        guard case .notInLine = notInLine else {
            Issue.record("a granted operation was still in line")
            return
        }
        _ = state.release(["a"])
        #expect(state.heldCategories == ["a"]) // late holds it now
    }

    @Test func withdrawingTheFirstWaiter_grantsTheNext() {
        var state = ExclusivityState()
        let holder = request(1, ["a", "b"])
        let first = request(2, ["a"])
        let second = request(3, ["b"])
        _ = state.acquire(holder)
        _ = state.acquire(first)
        _ = state.acquire(second)
        _ = state.release(["a", "b"]) // both granted
        let third = request(4, ["a"])
        _ = state.acquire(third)
        guard case let .withdrew(granted) = state.withdraw(place: LinePlace(root: 4, ticket: 4), from: ["a"]) else {
            Issue.record("the waiter was not in line")
            return
        }
        #expect(granted.all.isEmpty) // "a" is still held by the first
    }

    @Test func groupChild_standsWhereItsGroupStands_aheadOfLaterOperations() {
        var state = ExclusivityState()
        let holder = request(1, ["b"])
        let later = request(7, ["b"])                  // added after the group
        _ = state.acquire(holder)
        _ = state.acquire(later)
        let child = ExclusivityState.Request(place: LinePlace(root: 5, ticket: 9), operation: AsyncBlockOperation {}, categories: ["b"])
        _ = state.acquire(child)                       // the group (ticket 5) came first
        let afterHolder = state.release(["b"])
        #expect(afterHolder.all.map(ObjectIdentifier.init) == [ObjectIdentifier(child.operation)])
    }
}
