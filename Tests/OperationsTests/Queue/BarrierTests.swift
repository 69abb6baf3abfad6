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

    /// A condition added while its operation waits for a dependency, after a barrier was placed
    /// behind the operation: the condition's dependency counts as added with its operation, so it
    /// does not wait for the barrier, which waits for the operation. (It did, and the cycle check
    /// failed it: it never ran.)
    @Test func conditionAddedWhileItsOperationWaitsBeforeABarrier_bringsADependencyThatRuns() {
        // Given an operation waiting for a dependency, and a barrier placed after it
        let setting = OperationWaitingBeforeABarrier()
        let (queue, events, gate, operation) = (setting.queue, setting.events, setting.gate, setting.operation)

        // When a condition that brings a dependency is added to the waiting operation
        let dependency = AsyncBlockOperation { events.append("dependency") }
        operation.addCondition(StubCondition.satisfied(bringing: dependency))
        let later = AsyncBlockOperation { events.append("later") }
        queue.addOperation(later)

        // Then the dependency runs at once, and the operation, the barrier and the later one after
        #expect(waitUntilFinished([dependency]))
        gate.signal()
        #expect(waitUntilFinished([operation, later]))
        #expect(events.all == ["dependency", "first", "operation", "barrier", "later"])
        #expect(dependency.errors.isEmpty, "\(dependency.errors)")
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    /// ...and it still waits for the barrier its operation waits for, placed before both. (This
    /// held before the fix too: it guards against exempting the dependency from every barrier.)
    @Test func conditionAddedWhileItsOperationWaitsForABarrier_bringsADependencyThatWaitsForIt() {
        // Given a barrier that holds on, and an operation added after it
        let queue = AsyncOperationQueue()
        let events = Recorder<String>()
        let gate = Signal()
        queue.addBarrierBlock { _ = gate.wait(); events.append("barrier") }
        let operation = AsyncBlockOperation { events.append("operation") }
        queue.addOperation(operation)

        // When a condition that brings a dependency is added to the waiting operation
        let dependency = AsyncBlockOperation { events.append("dependency") }
        operation.addCondition(StubCondition.satisfied(bringing: dependency))

        // Then the dependency waits for the barrier, and they and the operation run in order
        #expect(dependency.dependencies.contains { $0.name == "barrier" && !$0.isFinished })
        gate.signal()
        #expect(waitUntilFinished([operation]))
        #expect(events.all == ["barrier", "dependency", "operation"])
    }

    /// With a barrier before the operation and one after it, the dependency waits for the first
    /// (as its operation does) and not for the second (which waits for its operation).
    @Test func conditionAddedWhileItsOperationWaitsBetweenTwoBarriers_bringsADependencyThatWaitsForTheFirst() {
        // Given a barrier that holds on, an operation added after it, and a second barrier
        let queue = AsyncOperationQueue()
        let events = Recorder<String>()
        let gate = Signal()
        queue.addBarrierBlock { _ = gate.wait(); events.append("first barrier") }
        let operation = AsyncBlockOperation { events.append("operation") }
        queue.addOperation(operation)
        queue.addBarrierBlock { events.append("second barrier") }

        // When a condition that brings a dependency is added to the waiting operation
        let dependency = AsyncBlockOperation { events.append("dependency") }
        operation.addCondition(StubCondition.satisfied(bringing: dependency))

        // Then the dependency waits for the first barrier only, and all run in order
        let barriersOfTheOperation = operation.dependencies.filter { $0 !== dependency }.map(ObjectIdentifier.init)
        #expect(dependency.dependencies.map(ObjectIdentifier.init) == barriersOfTheOperation)
        gate.signal()
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { queue.snapshot().operations.isEmpty }) // `allOperations` leaves out a waiting barrier, as Foundation does
        #expect(events.all == ["first barrier", "dependency", "operation", "second barrier"])
        #expect(dependency.errors.isEmpty, "\(dependency.errors)")
    }

    /// Two conditions that bring the same dependency: the second leaves it as the first attached
    /// it, so the dependency does not come to wait for the barrier placed after its operation
    /// (which would close a cycle through it).
    @Test func twoConditionsAddedWhileTheirOperationWaits_bringingOneDependency_runItOnce() {
        // Given a barrier that holds on, an operation added after it, and a second barrier
        let queue = AsyncOperationQueue()
        let events = Recorder<String>()
        let gate = Signal()
        queue.addBarrierBlock { _ = gate.wait(); events.append("first barrier") }
        let operation = AsyncBlockOperation { events.append("operation") }
        queue.addOperation(operation)
        queue.addBarrierBlock { events.append("second barrier") }

        // When two conditions that bring the same dependency are added to the waiting operation
        let dependency = AsyncBlockOperation { events.append("dependency") }
        operation.addCondition(StubCondition.satisfied(bringing: dependency))
        operation.addCondition(StubCondition.satisfied(bringing: dependency))

        // Then it runs once, between the barriers, before the operation
        gate.signal()
        #expect(waitUntil { queue.snapshot().operations.isEmpty }) // `allOperations` leaves out a waiting barrier, as Foundation does
        #expect(events.all == ["first barrier", "dependency", "operation", "second barrier"])
        #expect(dependency.errors.isEmpty, "\(dependency.errors)")
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    /// A plain Foundation operation as the dependency goes the same way.
    @Test func conditionAddedWhileItsOperationWaitsBeforeABarrier_bringsAPlainDependencyThatRuns() {
        // Given an operation waiting for a dependency, and a barrier placed after it
        let setting = OperationWaitingBeforeABarrier()
        let (queue, events, gate, operation) = (setting.queue, setting.events, setting.gate, setting.operation)

        // When a condition that brings a plain dependency is added to the waiting operation
        let dependency = BlockOperation { events.append("dependency") }
        operation.addCondition(StubCondition.satisfied(bringing: dependency))

        // Then it runs at once, and the operation and the barrier after it
        #expect(waitUntilFinished([dependency]))
        gate.signal()
        #expect(waitUntil { queue.snapshot().operations.isEmpty }) // `allOperations` leaves out a waiting barrier, as Foundation does
        #expect(events.all == ["dependency", "first", "operation", "barrier"])
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    /// A condition's dependency that its operation does not wait for after all (the operation
    /// finished meanwhile, here cancelled by the condition's own code) is an ordinary add to the
    /// operation's queue: it waits for the barrier placed before it.
    @Test func conditionDependencyOfAnOperationCancelledMeanwhile_waitsForTheBarrierPlacedBeforeIt() {
        // Given an operation waiting for a dependency, and a barrier placed after it
        let setting = OperationWaitingBeforeABarrier()
        let (queue, events, gate, operation) = (setting.queue, setting.events, setting.gate, setting.operation)

        // When a condition is added whose code cancels the operation as it brings a dependency
        let dependency = AsyncBlockOperation { events.append("dependency") }
        operation.addCondition(StubCondition(name: "CancelsItsOperation", dependency: { added in
            added.cancel()
            return dependency
        }) { _, completion in completion(.satisfied) })

        // Then the dependency waits for the barrier, which waits for the first operation
        #expect(dependency.dependencies.contains { $0.name == "barrier" && !$0.isFinished })
        gate.signal()
        #expect(waitUntil { queue.snapshot().operations.isEmpty }) // `allOperations` leaves out a waiting barrier, as Foundation does
        #expect(events.all == ["first", "barrier", "dependency"])
        #expect(dependency.errors.isEmpty, "\(dependency.errors)")
        #expect(operation.isCancelled)
    }

    /// An operation added a second time after a barrier was placed behind it: the add is refused
    /// and leaves it as it was. (It made the operation wait for the barrier, which waits for it,
    /// and the cycle check failed it.)
    @Test func operationAddedAgainAfterABarrier_isLeftAsItWas_andRuns() {
        // Given an operation waiting on a queue for a first one, and a barrier placed after both
        let setting = OperationWaitingBeforeABarrier()
        let (queue, events, gate, operation) = (setting.queue, setting.events, setting.gate, setting.operation)

        // When it is added again
        queue.addOperation(operation)

        // Then it does not wait for the barrier, and all run in order
        #expect(!operation.dependencies.contains { $0.name == "barrier" })
        gate.signal()
        #expect(waitUntil { queue.snapshot().operations.isEmpty }) // `allOperations` leaves out a waiting barrier, as Foundation does
        #expect(events.all == ["first", "operation", "barrier"])
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    @Test func barrier_onEmptyQueue_runs() {
        let queue = AsyncOperationQueue()
        let ran = Signal()
        queue.addBarrierBlock { ran.signal() }
        #expect(ran.wait())
    }
}

/// An operation that waits for a first one, which holds on until `gate` opens, on a queue with a
/// barrier placed after both: where a condition is added while its operation waits.
private struct OperationWaitingBeforeABarrier {
    let queue = AsyncOperationQueue()
    let events = Recorder<String>()
    let gate = Signal()
    let operation: AsyncBlockOperation

    init() {
        let (events, gate) = (self.events, self.gate)
        let first = AsyncBlockOperation { _ = gate.wait(); events.append("first") }
        operation = AsyncBlockOperation { events.append("operation") }
        operation.addDependency(first)
        queue.addOperations([first, operation], waitUntilFinished: false)
        queue.addBarrierBlock { events.append("barrier") }
    }
}
