import Conditions
import Foundation
import Operations
import Testing
import TestSupport

@Suite("SilentCondition")
struct SilentConditionTests {
    @Test func doesNotProduceTheInnerDependency() {
        // Given an inner condition with a dependency
        let log = Recorder<String>()
        let operation = AsyncBlockOperation { log.append("executed") }
        operation.addCondition(SilentCondition(Prepared(passes: true, log: log)))

        // When
        let finished = run(operation)

        // Then the inner condition is evaluated, but its dependency is never made nor run
        #expect(finished)
        #expect(log.all == ["evaluated", "executed"])
        #expect(operation.errors.isEmpty)
    }

    @Test func dependency_isNil() {
        let log = Recorder<String>()
        #expect(SilentCondition(Prepared(passes: true, log: log)).dependency(for: AsyncBlockOperation {}) == nil)
        #expect(log.all.isEmpty)
    }

    @Test func innerConditionFailed_failsTheOperationWithTheInnerError() {
        let log = Recorder<String>()
        let operation = AsyncBlockOperation { log.append("executed") }
        operation.addCondition(SilentCondition(Prepared(passes: false, log: log)))

        #expect(run(operation))
        #expect(!log.all.contains("executed"))
        #expect(operation.errors.asStubErrors == [.notPrepared])
    }

    @Test func keepsTheInnerCategories() {
        let category = uniqueName("category")
        #expect(SilentCondition(ExclusiveCategory(category)).mutuallyExclusiveCategories == [category])
    }

    @Test func excludesOperationsOfTheInnerCategory() {
        let category = uniqueName("category")
        let overlapped = startsWhileAnotherExecutes(
            first: [SilentCondition(ExclusiveCategory(category))],
            second: [ExclusiveCategory(category)],
            patience: 0.3
        )
        #expect(overlapped == false)
    }

    @Test func name_saysItWrapsTheInnerCondition() {
        #expect(SilentCondition(Prepared(passes: true, log: Recorder())).name == "Silent<Prepared>")
    }
}

/// A condition that needs a preparation operation to run first, and logs what happens to it.
private struct Prepared: OperationCondition {
    var passes: Bool
    let log: Recorder<String>

    func dependency(for operation: AsyncOperation) -> Operation? {
        log.append("dependency made")
        let log = self.log
        return BlockOperation { log.append("dependency ran") }
    }

    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        log.append("evaluated")
        completion(passes ? .satisfied : .failed(StubError.notPrepared))
    }
}

private extension StubError {
    static let notPrepared = StubError("notPrepared")
}

private func run(_ operation: Operation) -> Bool {
    let queue = AsyncOperationQueue()
    queue.addOperation(operation)
    return withExtendedLifetime(queue) { waitUntilFinished([operation]) }
}
