import Conditions
import Foundation
import Operations
import Testing
import TestSupport

@Suite("NegatedCondition")
struct NegatedConditionTests {
    @Test func innerConditionSatisfied_failsTheOperation() {
        // Given
        let log = Recorder<String>()
        let operation = loggingOperation(log)
        operation.addCondition(NegatedCondition(Prepared(passes: true, log: log)))

        // When
        let finished = run(operation)

        // Then
        #expect(finished)
        #expect(!log.all.contains("executed"))
        #expect(operation.errors.map { $0 as? ConditionError } == [.negatedConditionSatisfied("Prepared")])
    }

    @Test func innerConditionFailed_letsTheOperationExecute() {
        let log = Recorder<String>()
        let operation = loggingOperation(log)
        operation.addCondition(NegatedCondition(Prepared(passes: false, log: log)))

        #expect(run(operation))
        #expect(log.all.contains("executed"))
        #expect(operation.errors.isEmpty)
    }

    @Test func innerAnswerGivenLater_isInvertedToo() {
        let log = Recorder<String>()
        let operation = loggingOperation(log)
        operation.addCondition(NegatedCondition(Prepared(passes: false, answersLater: true, log: log)))

        #expect(run(operation))
        #expect(log.all.contains("executed"))
        #expect(operation.errors.isEmpty)
    }

    @Test func keepsTheInnerDependency_whichRunsBeforeEvaluation() {
        // Given an inner condition with a dependency
        let log = Recorder<String>()
        let operation = loggingOperation(log)
        operation.addCondition(NegatedCondition(Prepared(passes: false, log: log)))

        // When
        let finished = run(operation)

        // Then the dependency was produced and ran first
        #expect(finished)
        #expect(log.all == ["dependency made", "dependency ran", "evaluated", "executed"])
    }

    @Test func dependency_isTheInnerConditionsDependency() {
        let log = Recorder<String>()
        let dependency = NegatedCondition(Prepared(passes: true, log: log)).dependency(for: AsyncBlockOperation {})
        #expect(dependency?.name == "preparation")
        #expect(NegatedCondition(BlockCondition { true }).dependency(for: AsyncBlockOperation {}) == nil)
    }

    @Test func name_saysItNegatesTheInnerCondition() {
        #expect(NegatedCondition(Prepared(passes: true, log: Recorder())).name == "Not<Prepared>")
    }

    @Test func doesNotCarryTheInnerCategories() {
        #expect(NegatedCondition(ExclusiveCategory("printer")).mutuallyExclusiveCategories.isEmpty)
    }
}

/// A condition that needs a preparation operation to run first, and logs what happens to it.
private struct Prepared: OperationCondition {
    var passes: Bool
    var answersLater = false
    let log: Recorder<String>

    func dependency(for operation: AsyncOperation) -> Operation? {
        log.append("dependency made")
        let log = self.log
        let preparation = BlockOperation { log.append("dependency ran") }
        preparation.name = "preparation"
        return preparation
    }

    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        log.append("evaluated")
        let result: ConditionResult = passes ? .satisfied : .failed(StubError("notPrepared"))
        if answersLater {
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { completion(result) }
        } else {
            completion(result)
        }
    }
}

private func loggingOperation(_ log: Recorder<String>) -> AsyncBlockOperation {
    AsyncBlockOperation { log.append("executed") }
}

private func run(_ operation: Operation) -> Bool {
    let queue = AsyncOperationQueue()
    queue.addOperation(operation)
    return withExtendedLifetime(queue) { waitUntilFinished([operation]) }
}
