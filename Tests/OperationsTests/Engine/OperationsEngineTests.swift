import Conditions
import Foundation
@testable import Operations
import Testing
import TestSupport

// The engine as one value: queues built with an engine of their own share categories, tickets
// and the rest with each other only, so a test runs its scenario with nothing else reaching in,
// and reads the engine's state at the end.

@Suite struct OperationsEngineTests {
    @Test func queuesOfOneEngine_excludeEachOther() {
        // Given two queues of one fresh engine, and an operation holding X on the first
        let engine = OperationsEngine()
        let first = AsyncOperationQueue(engine: engine)
        let second = AsyncOperationQueue(engine: engine)
        let held = TestSupport.HeldOperations()
        let holder = held.make("holder")
        holder.addCondition(ExclusiveCategory("X"))
        first.addOperation(holder)
        #expect(held.waitUntilStarted("holder"))

        // When an operation needing X is added to the second
        let waiter = AsyncBlockOperation {}
        waiter.addCondition(ExclusiveCategory("X"))
        second.addOperation(waiter)

        // Then it waits, as X is held in that engine, and runs once X is free
        #expect(engine.exclusivity.heldCategories == ["X"])
        #expect(waiter.snapshot().waitsFor.contains { if case .category("X", "holder", _) = $0 { true } else { false } })
        held.finish("holder")
        #expect(waitUntilFinished([holder, waiter]))
        #expect(waitUntil { engine.exclusivity.heldCategories.isEmpty })
    }

    @Test func queuesOfTwoEngines_shareNoCategory() {
        // Given an operation holding X on a queue of one engine
        let (one, other) = (OperationsEngine(), OperationsEngine())
        let held = TestSupport.HeldOperations()
        let holder = held.make("holder")
        holder.addCondition(ExclusiveCategory("X"))
        AsyncOperationQueue(engine: one).addOperation(holder)
        #expect(held.waitUntilStarted("holder"))

        // When an operation needing X is added to a queue of another engine
        let elsewhere = AsyncBlockOperation {}
        elsewhere.addCondition(ExclusiveCategory("X"))
        AsyncOperationQueue(engine: other).addOperation(elsewhere)

        // Then it runs: the engines are separate worlds
        #expect(waitUntilFinished([elsewhere]))
        #expect(one.exclusivity.heldCategories == ["X"])
        #expect(!OperationsEngine.shared.exclusivity.heldCategories.contains("X"))
        held.finish("holder")
        #expect(waitUntilFinished([holder]))
    }

    @Test func aGroupBuiltForAnEngine_runsItsChildrenInIt() {
        // Given a group of a fresh engine, whose child needs X, held on another queue of it
        let engine = OperationsEngine()
        let held = TestSupport.HeldOperations()
        let holder = held.make("holder")
        holder.addCondition(ExclusiveCategory("X"))
        AsyncOperationQueue(engine: engine).addOperation(holder)
        #expect(held.waitUntilStarted("holder"))
        let child = AsyncBlockOperation {}
        child.addCondition(ExclusiveCategory("X"))
        let group = GroupOperation(operations: [child], engine: engine)

        // When the group runs
        AsyncOperationQueue(engine: engine).addOperation(group)

        // Then its child waits for X in that engine, and finishes once X is free
        #expect(waitUntil { child.snapshot().state == .waitingForCategories })
        held.finish("holder")
        #expect(waitUntilFinished([holder, group]))
    }

    @Test func ticketsOfAnEngine_countItsAddsOnly() {
        let engine = OperationsEngine()
        let queue = AsyncOperationQueue(engine: engine)
        queue.isSuspended = true
        queue.addOperations([AsyncBlockOperation {}, AsyncBlockOperation {}], waitUntilFinished: false)
        #expect(engine.tickets.next() == 3) // the two adds took 1 and 2
        queue.isSuspended = false
        queue.waitUntilAllOperationsAreFinished()
    }
}
