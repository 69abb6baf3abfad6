import Foundation
@testable import Operations
import Testing

// Single events of the queue's scheduler, without threads (the exploration tests walk every
// order of events).

@Suite struct QueueSchedulerTests {
    @Test func batchAddedToASuspendedQueue_reservesItsTableOnce_andABatchRefusedLeavesNoTable() {
        var scheduler = QueueScheduler()
        _ = scheduler.setSuspended(true)
        guard case let .admit(generation, _) = scheduler.beginAdmission(counting: 5_000) else {
            Issue.record("expected the add to begin")
            return
        }
        #expect(scheduler.held.tableSize >= 10_000, "room for the whole batch, reserved when the add begins")
        // Every operation of the batch was refused (none reached the scheduler): they leave again.
        for _ in 0..<5_000 {
            _ = scheduler.operationLeft()
        }
        _ = scheduler.endAdmission(generation: generation)
        #expect(scheduler.held.isEmpty && scheduler.held.tableSize == 0, "the unused room is given back when the add ends")
    }

    /// An add that joins one in flight (a condition's dependency, added as its operation is) is
    /// part of it: a barrier placed since waits for both, and its gate opens once both ended.
    @Test func addJoiningOneInFlight_isWaitedForByABarrierPlacedSince_andKeepsItsGateClosed() {
        var scheduler = QueueScheduler()
        guard case let .admit(generation, nil) = scheduler.beginAdmission(counting: 1) else {
            Issue.record("expected the add to begin, with no barrier")
            return
        }
        let barrier = AsyncOperation()
        let gate = AsyncOperation()
        guard case .place(needsGate: true, previous: nil) = scheduler.placeBarrier(barrier, gate: gate) else {
            Issue.record("expected the barrier to wait for the add in flight")
            return
        }
        scheduler.joinAdmission(of: generation, counting: 1)
        for (end, opensGate) in [("the joined add", false), ("the add it joined", true)] {
            guard case let .joinBarrier(joined) = scheduler.endAdmission(generation: generation), joined === barrier else {
                Issue.record("expected the barrier to wait for the operations of \(end)")
                return
            }
            guard case let .ended(gates) = scheduler.endAdmission(generation: generation, joined: true) else {
                Issue.record("expected \(end) to end")
                return
            }
            #expect(gates.count == (opensGate ? 1 : 0) && gates.allSatisfy { $0 === gate }, "as \(end) ends")
        }
        #expect(scheduler.admissions.isEmpty && scheduler.pendingBarriers.isEmpty, "nothing is left in flight")
    }
}
