import Conditions
import Foundation
import Operations
import Testing
import TestSupport

// The conditions of this package that answer on the spot are asked, not evaluated with a
// completion handler: what a user sees must not change.

@Suite("Conditions that answer at once")
struct AnswersAtOnceTests {
    @Test func theseConditions_answerAtOnce_andWrappersOfThemToo() {
        let atOnce: [any OperationCondition] = [
            BlockCondition { true }, NoFailedDependencies(), NoCancelledDependencies(),
            NegatedCondition(BlockCondition { false }), SilentCondition(NoFailedDependencies()),
        ]
        #expect(atOnce.allSatisfy { $0 is any AnswersAtOnce })
        let evaluated: [any OperationCondition] = [
            StubCondition.satisfied(), NegatedCondition(StubCondition.satisfied()), SilentCondition(StubCondition.satisfied()),
        ]
        #expect(!evaluated.contains { $0 is any AnswersAtOnce })
    }

    @Test(arguments: [false, true])
    func aNegatedCondition_answersAsItEvaluates(innerSatisfied: Bool) {
        let condition = NegatedCondition(BlockCondition { innerSatisfied })
        let operation = AsyncBlockOperation {}
        let evaluated = Recorder<Bool>()
        condition.evaluate(for: operation) { evaluated.append(isSatisfied($0)) }
        #expect(evaluated.all == [!innerSatisfied])
        #expect(isSatisfied(condition.answer(for: operation)) == !innerSatisfied)
    }

    /// One error per failed condition, in the conditions' order, whichever kind comes first.
    @Test(arguments: [false, true])
    func failures_keepTheConditionsOrder(atOnceFirst: Bool) {
        let operation = AsyncBlockOperation {}
        let atOnce = BlockCondition { throw StubError("at once") }
        let user = StubCondition.failing(StubError("user"))
        if atOnceFirst {
            operation.addCondition(atOnce)
            operation.addCondition(user)
        } else {
            operation.addCondition(user)
            operation.addCondition(atOnce)
        }
        let queue = AsyncOperationQueue()
        queue.addOperation(operation)

        #expect(waitUntilFinished([operation]))
        let expected = [StubError("at once"), StubError("user")]
        #expect(operation.errors.asStubErrors == (atOnceFirst ? expected : expected.reversed()))
    }

    @Test func anOperation_waitsForALaterAnswer_besideOneGivenAtOnce() {
        let checks = Counter()
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        let handedOut = Recorder<@Sendable (ConditionResult) -> Void>()
        operation.addCondition(BlockCondition { checks.increment(); return true })
        operation.addCondition(StubCondition { _, completion in handedOut.append(completion) })
        let queue = AsyncOperationQueue()
        queue.addOperation(operation)

        #expect(waitUntil { handedOut.all.count == 1 })
        #expect(!operation.isFinished && ran.current == 0)
        handedOut.all.first?(.satisfied)
        #expect(waitUntilFinished([operation]))
        #expect(ran.current == 1 && checks.current == 1)
        #expect(operation.errors.isEmpty)
    }

    @Test func aCancelDuringTheAnswer_winsOverIt() {
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.addCondition(BlockCondition { [unowned operation] in
            operation.cancel()
            return true
        })
        let queue = AsyncOperationQueue()
        queue.addOperation(operation)

        #expect(waitUntilFinished([operation]))
        #expect(ran.current == 0 && operation.isCancelled)
    }
}

private func isSatisfied(_ result: ConditionResult) -> Bool {
    if case .satisfied = result { return true }
    return false
}
