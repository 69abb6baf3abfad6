import Foundation
import Operations
import Testing
import TestSupport

@Suite struct BarrierTests {
    @Test func barrier_waitsForOperationsStillWaitingInTheScheduler() {
        // Given an operation held back by a dependency that has not run yet
        let queue = AsyncOperationQueue()
        let events = Recorder<String>()
        let gate = Signal()
        let first = AsyncBlockOperation { _ = gate.wait(); events.append("first") }
        let waiting = AsyncBlockOperation { events.append("waiting") }
        waiting.addDependency(first)
        queue.addOperations([first, waiting], waitUntilFinished: false)

        // When a barrier is added and then another operation
        queue.addBarrierBlock { events.append("barrier") }
        let after = AsyncBlockOperation { events.append("after") }
        queue.addOperation(after)
        gate.signal()

        // Then the barrier runs after both earlier operations and before the later one
        queue.waitUntilAllOperationsAreFinished()
        #expect(events.all == ["first", "waiting", "barrier", "after"])
    }

    @Test func barrier_onEmptyQueue_runs() {
        let queue = AsyncOperationQueue()
        let ran = Signal()
        queue.addBarrierBlock { ran.signal() }
        #expect(ran.wait())
    }
}
