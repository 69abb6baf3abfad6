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
}
