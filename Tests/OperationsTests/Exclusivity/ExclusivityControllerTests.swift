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
        let firstGranted = state.acquire(request(1, ["a"]))
        #expect(firstGranted)
        let secondGranted = state.acquire(request(2, ["a"]))
        #expect(!secondGranted)
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
        let needsBGranted = state.acquire(needsB)
        #expect(!needsBGranted)
        let needsCAGranted = state.acquire(needsCA)
        #expect(!needsCAGranted)
        // Releasing a and b lets 2 in (b, c); 3 waits for c, and gets it when 2 lets go.
        let afterHolder = state.release(["a", "b"])
        #expect(afterHolder.all.map(ObjectIdentifier.init) == [ObjectIdentifier(needsB.operation)])
        let afterNeedsB = state.release(["b", "c"])
        #expect(afterNeedsB.all.map(ObjectIdentifier.init) == [ObjectIdentifier(needsCA.operation)])
        let afterNeedsCA = state.release(["c", "a"])
        #expect(afterNeedsCA.all.isEmpty)
        #expect(state.heldCategories.isEmpty)
    }

    @Test func reservation_holdsALaterOperationBack_untilWithdrawn() {
        var state = ExclusivityState()
        let early = request(1, ["a"])
        let late = request(2, ["a"])
        state.reserve(early)               // still evaluating its conditions
        let overtook = state.acquire(late)
        #expect(!overtook)                 // may not overtake it
        let afterWithdrawal = state.withdraw(place: LinePlace(root: 1, ticket: 1), from: ["a"])
        #expect(afterWithdrawal.wasInLine)
        #expect(afterWithdrawal.granted.all.map(ObjectIdentifier.init) == [ObjectIdentifier(late.operation)])
    }

    @Test func groupChild_standsWhereItsGroupStands_aheadOfLaterOperations() {
        var state = ExclusivityState()
        let later = request(7, ["b"])
        state.reserve(later)                           // added after the group, still evaluating
        let child = ExclusivityState.Request(place: LinePlace(root: 5, ticket: 9), operation: AsyncBlockOperation {}, categories: ["b"])
        let granted = state.acquire(child)             // the group (ticket 5) came first
        #expect(granted)
    }
}
