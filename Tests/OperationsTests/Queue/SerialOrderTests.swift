import Foundation
import Operations
import Testing
import TestSupport

// A serial queue (contract, "Semantics clients rely on" 9): with `maxConcurrentOperationCount = 1`
// it starts the operations whose dependencies have finished in the order they were added,
// whatever their conditions or categories, also across a suspension.

@Suite("Serial queue order")
struct SerialOrderTests {
    init() {
        _ = DiagnosticsLog.shared // capture diagnostics before any test reports one
    }

    @Test(arguments: [true, false])
    func serialQueue_resumed_startsReadyOperationsInAddOrder(conditionAnswersLater: Bool) {
        // Given a suspended serial queue holding, in this order, an operation with a condition,
        // one without, one in a free category and a plain one
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.isSuspended = true
        let log = Recorder<String>()
        let answer = conditionAnswersLater ? HeldCallback<ConditionResult>() : nil
        let operations = operationsOfEveryKind(log: log, heldAnswer: answer)
        queue.addOperations(operations, waitUntilFinished: false)

        // When the queue resumes (and the condition, if held, answers a while later)
        queue.isSuspended = false
        #expect(answerAfterAChanceToGoWrong(answer)) // the condition, if held, answers now

        // Then they run in the order they were added
        #expect(waitUntilFinished(operations))
        #expect(log.all == ["A", "B", "C", "D"])
    }

    @Test(arguments: [true, false])
    func serialQueue_running_startsReadyOperationsInAddOrder(conditionAnswersLater: Bool) {
        // Given a serial queue busy with an operation
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let held = HeldOperations()
        let first = held.make("first")
        queue.addOperation(first)
        #expect(held.waitUntilStarted("first"))

        // When an operation with a condition, one without, one in a free category and a plain one
        // are added one by one, and the busy one then finishes (and the condition, if held,
        // answers a while later)
        let log = Recorder<String>()
        let answer = conditionAnswersLater ? HeldCallback<ConditionResult>() : nil
        let operations = operationsOfEveryKind(log: log, heldAnswer: answer)
        for operation in operations {
            queue.addOperation(operation)
        }
        held.finish("first")
        #expect(answerAfterAChanceToGoWrong(answer)) // the condition, if held, answers now

        // Then they run in the order they were added
        #expect(waitUntilFinished([first] + operations))
        #expect(log.all == ["A", "B", "C", "D"])
    }

    @Test func serialQueue_resumed_startsReadyOperationsInAddOrder_addedOneByOne() {
        // Given a suspended serial queue given the same four kinds of operations one by one
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.isSuspended = true
        let log = Recorder<String>()
        let operations = operationsOfEveryKind(log: log)
        for operation in operations {
            queue.addOperation(operation)
        }

        // When the queue resumes
        queue.isSuspended = false

        // Then they run in the order they were added
        #expect(waitUntilFinished(operations))
        #expect(log.all == ["A", "B", "C", "D"])
    }
}
