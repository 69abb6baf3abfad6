import Foundation
import Operations
import Testing
import TestSupport

// A serial group (contract, "Semantics clients rely on" 9): a `GroupOperation` with
// `maxConcurrentOperationCount = 1` starts its children in the order they were added, conditions
// and categories included.

@Suite("Serial group order")
struct GroupSerialOrderTests {
    init() {
        _ = DiagnosticsLog.shared // capture diagnostics before any test reports one
    }

    @Test(arguments: [true, false])
    func serialGroup_runsChildrenInAddOrder(conditionAnswersLater: Bool) {
        // Given a serial group whose children are, in this order, an operation with a condition,
        // one without, one in a free category and a plain one
        let log = Recorder<String>()
        let answer = conditionAnswersLater ? HeldCallback<ConditionResult>() : nil
        let children = operationsOfEveryKind(log: log, heldAnswer: answer)
        let group = GroupOperation(operations: children)
        group.maxConcurrentOperationCount = 1

        // When it runs (and the condition, if held, answers a while later)
        AsyncOperationQueue().addOperation(group)
        #expect(answerAfterAChanceToGoWrong(answer)) // the condition, if held, answers now

        // Then the children ran in the order they were added
        #expect(waitUntilFinished([group]))
        #expect(log.all == ["A", "B", "C", "D"])
        #expect(group.errors.isEmpty)
    }

    @Test(arguments: [true, false])
    func serialGroup_running_runsChildrenAddedLaterInAddOrder(conditionAnswersLater: Bool) {
        // Given a running serial group busy with a first child
        let held = HeldOperations()
        let first = held.make("first")
        let group = GroupOperation(operations: [first])
        group.maxConcurrentOperationCount = 1
        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted("first"))

        // When the four kinds of children are added one by one, and the first child then finishes
        // (and the condition, if held, answers a while later)
        let log = Recorder<String>()
        let answer = conditionAnswersLater ? HeldCallback<ConditionResult>() : nil
        let children = operationsOfEveryKind(log: log, heldAnswer: answer)
        for child in children {
            group.addChild(child)
        }
        held.finish("first")
        #expect(answerAfterAChanceToGoWrong(answer)) // the condition, if held, answers now

        // Then they ran in the order they were added
        #expect(waitUntilFinished([group]))
        #expect(log.all == ["A", "B", "C", "D"])
        #expect(group.errors.isEmpty)
    }
}
