import Foundation
import Operations
import Testing
import TestSupport

// A suspended queue takes no category (contract, "Semantics clients rely on" 10, with 2): an
// operation of a suspended queue never holds a mutually exclusive category, so it never blocks
// other queues; it takes its place in line again when its queue resumes. And a suspended queue
// evaluates no condition and starts nothing, also for operations whose dependencies finish
// while it is suspended.

@Suite("Suspended queue and exclusion")
struct SuspendedQueueExclusionTests {
    init() {
        _ = DiagnosticsLog.shared // capture diagnostics before any test reports one
    }

    @Test func suspendedQueue_waiterInLine_letsTheCategoryGoToAnotherQueue_andRunsAfterResume() throws {
        // Given a category held by an operation on one queue, and a waiter for it on a second queue
        let category = uniqueName("category")
        let held = HeldOperations()
        let probe = ConcurrencyProbe()
        let holder = exclusive(held, "holder", category, probe)
        let holderQueue = AsyncOperationQueue()
        holderQueue.addOperation(holder)
        #expect(held.waitUntilStarted("holder"))

        let inLine = Signal()
        let waiter = exclusive(held, "waiter", category, probe, evaluated: inLine)
        let suspendedQueue = AsyncOperationQueue()
        suspendedQueue.addOperation(waiter)
        #expect(inLine.wait()) // its conditions are evaluated: it stands in the category's line

        // When the waiter's queue is suspended, an operation of a third queue lines up behind it,
        // and the holder finishes
        suspendedQueue.isSuspended = true
        let other = exclusive(held, "other", category, probe)
        let otherQueue = AsyncOperationQueue()
        otherQueue.addOperation(other)
        probe.leave(category)
        held.finish("holder")

        // Then the category goes to the operation of the third queue, not to the suspended waiter
        try #require(held.waitUntilStarted("other"))
        #expect(held.startCount("waiter") == 0)

        // When the waiter's queue resumes, the waiter waits for the category's new holder
        suspendedQueue.isSuspended = false
        Thread.sleep(forTimeInterval: 0.1) // a chance to go wrong; nothing is timed
        #expect(held.startCount("waiter") == 0)
        probe.leave(category)
        held.finish("other")

        // Then it runs, after the new holder
        #expect(held.waitUntilStarted("waiter"))
        probe.leave(category)
        held.finish("waiter")
        #expect(waitUntilFinished([holder, waiter, other]))
        #expect(probe.maximum(category) == 1)
        #expect([holder, waiter, other].allSatisfy { $0.errors.isEmpty })
    }

    @Test func suspendedQueue_conditionAnsweredWhileSuspended_takesNoCategoryAndStartsNothing() throws {
        // Given an operation in a category whose condition is still answering
        let category = uniqueName("category")
        let held = HeldOperations()
        let probe = ConcurrencyProbe()
        let answer = HeldCallback<ConditionResult>()
        let waiter = held.make("waiter")
        waiter.addCondition(StubCondition(name: "Held", categories: [category]) { _, completion in
            answer.hold(completion)
        })
        waiter.addObserver(ProbeEntry(probe: probe, key: category))
        let suspendedQueue = AsyncOperationQueue()
        suspendedQueue.addOperation(waiter)
        #expect(answer.waitUntilHeld())

        // When its queue is suspended, the condition answers, and an operation of another queue
        // asks for the category
        suspendedQueue.isSuspended = true
        answer.call(.satisfied)
        let other = exclusive(held, "other", category, probe)
        AsyncOperationQueue().addOperation(other)

        // Then the other operation gets the category; the suspended one does not start
        try #require(held.waitUntilStarted("other"))
        #expect(held.startCount("waiter") == 0)

        // When the queue resumes and the other operation finishes, the waiter runs
        suspendedQueue.isSuspended = false
        probe.leave(category)
        held.finish("other")
        #expect(held.waitUntilStarted("waiter"))
        probe.leave(category)
        held.finish("waiter")
        #expect(waitUntilFinished([waiter, other]))
        #expect(probe.maximum(category) == 1)
        #expect(waiter.errors.isEmpty)
    }

    @Test func suspendedQueue_freeCategory_isNotTakenWhileSuspended() throws {
        // Given a suspended queue holding an operation in a free category
        let category = uniqueName("category")
        let held = HeldOperations()
        let probe = ConcurrencyProbe()
        let suspendedQueue = AsyncOperationQueue()
        suspendedQueue.isSuspended = true
        let waiter = exclusive(held, "waiter", category, probe)
        suspendedQueue.addOperation(waiter)

        // When an operation of another queue asks for the category
        let other = exclusive(held, "other", category, probe)
        AsyncOperationQueue().addOperation(other)

        // Then it gets it, and the suspended one runs after it once its queue resumes
        try #require(held.waitUntilStarted("other"))
        suspendedQueue.isSuspended = false
        probe.leave(category)
        held.finish("other")
        #expect(held.waitUntilStarted("waiter"))
        probe.leave(category)
        held.finish("waiter")
        #expect(waitUntilFinished([waiter, other]))
        #expect(probe.maximum(category) == 1)
    }

    @Test func suspendedQueue_dependencyFinishingMeanwhile_evaluatesNoConditionAndStartsNothing() {
        // Given an operation with a condition waiting on a queue for a dependency on another queue
        let held = HeldOperations()
        let dependency = held.make("dependency")
        AsyncOperationQueue().addOperation(dependency)
        #expect(held.waitUntilStarted("dependency"))
        let evaluated = Counter()
        let started = Counter()
        let operation = AsyncBlockOperation { started.increment() }
        operation.addCondition(StubCondition(name: "Counted") { _, completion in
            evaluated.increment()
            completion(.satisfied)
        })
        operation.addDependency(dependency)
        let queue = AsyncOperationQueue()
        queue.addOperation(operation)

        // When its queue is suspended and the dependency then finishes
        queue.isSuspended = true
        held.finish("dependency")
        #expect(waitUntilFinished([dependency]))

        // Then the condition is not evaluated and nothing starts until the queue resumes
        Thread.sleep(forTimeInterval: 0.1) // a chance to go wrong; nothing is timed
        #expect(evaluated.current == 0)
        #expect(started.current == 0)
        #expect(!operation.isFinished)
        queue.isSuspended = false
        #expect(waitUntilFinished([operation]))
        #expect(evaluated.current == 1)
        #expect(started.current == 1)
    }

    /// A held operation named `key` in `category`, that enters `probe` under the category when it
    /// starts (the test leaves it before finishing it), and signals `evaluated` when its condition
    /// is evaluated.
    private func exclusive(
        _ held: HeldOperations,
        _ key: String,
        _ category: String,
        _ probe: ConcurrencyProbe,
        evaluated: Signal? = nil
    ) -> AsyncBlockOperation {
        let operation = held.make(key)
        operation.addCondition(StubCondition(name: "Exclusive", categories: [category]) { _, completion in
            evaluated?.signal()
            completion(.satisfied)
        })
        operation.addObserver(ProbeEntry(probe: probe, key: category))
        return operation
    }
}

/// Enters `probe` under `key` when the operation starts.
private struct ProbeEntry: OperationObserver {
    let probe: ConcurrencyProbe
    let key: String

    func operationDidStart(_ operation: AsyncOperation) {
        probe.enter(key)
    }
}
