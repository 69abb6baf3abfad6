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

    /// A condition's dependency belongs to its operation's add: a barrier placed meanwhile (here
    /// from the condition's own `dependency(for:)`) waits for it, as for the operation, and it
    /// does not wait for the barrier. (It did, and the barrier, closing a cycle, never ran.)
    @Test func barrierPlacedWhileAConditionBringsItsDependency_waitsForIt_andRuns() {
        // Given an operation whose condition places a barrier as it brings its dependency
        let queue = AsyncOperationQueue()
        let events = Recorder<String>()
        let condition = StubCondition(name: "PlacesABarrier", dependency: { _ in
            queue.addBarrierBlock { events.append("barrier") }
            return AsyncBlockOperation { events.append("dependency") }
        }) { _, completion in completion(.satisfied) }
        let operation = AsyncBlockOperation { events.append("operation") }
        operation.addCondition(condition)

        // When it is added, and another operation after it
        queue.addOperation(operation)
        let later = AsyncBlockOperation { events.append("later") }
        queue.addOperation(later)

        // Then the dependency, the operation, the barrier and the later one run, in that order
        #expect(waitUntilFinished([operation, later])) // the later one waits for the barrier's end
        #expect(events.all == ["dependency", "operation", "barrier", "later"])
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    /// The same for a condition added while its operation is being added (here from another
    /// condition's `dependency(for:)`, after placing the barrier): its dependency joins the add.
    @Test func barrierPlacedBeforeAConditionIsAddedDuringTheAdd_waitsForItsDependency_andRuns() {
        // Given an operation whose condition places a barrier, then adds a second condition
        // that brings a dependency
        let queue = AsyncOperationQueue()
        let events = Recorder<String>()
        let operation = AsyncBlockOperation { events.append("operation") }
        let second = StubCondition(name: "BringsADependency", dependency: { _ in
            AsyncBlockOperation { events.append("dependency") }
        }) { _, completion in completion(.satisfied) }
        let first = StubCondition(name: "PlacesABarrier", dependency: { added in
            queue.addBarrierBlock { events.append("barrier") }
            added.addCondition(second)
            return nil
        }) { _, completion in completion(.satisfied) }
        operation.addCondition(first)

        // When it is added, and another operation after it
        queue.addOperation(operation)
        let later = AsyncBlockOperation { events.append("later") }
        queue.addOperation(later)

        // Then the dependency, the operation, the barrier and the later one run, in that order
        #expect(waitUntilFinished([operation, later]))
        #expect(events.all == ["dependency", "operation", "barrier", "later"])
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    @Test func barrier_onEmptyQueue_runs() {
        let queue = AsyncOperationQueue()
        let ran = Signal()
        queue.addBarrierBlock { ran.signal() }
        #expect(ran.wait())
    }
}
