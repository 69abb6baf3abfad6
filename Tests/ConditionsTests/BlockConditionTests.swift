import Conditions
import Foundation
import Operations
import Testing
import TestSupport

@Suite("BlockCondition")
struct BlockConditionTests {
    @Test func returningTrue_letsTheOperationExecute() {
        let (operation, ran) = guardedOperation(BlockCondition { true })
        #expect(run([operation]))
        #expect(ran.current == 1)
        #expect(operation.errors.isEmpty)
    }

    @Test func returningFalse_failsTheOperationWithoutExecuting() {
        let (operation, ran) = guardedOperation(BlockCondition { false })
        #expect(run([operation]))
        #expect(ran.current == 0)
        #expect(operation.errors.map { $0 as? ConditionError } == [.blockConditionFailed])
    }

    @Test func throwing_failsTheOperationWithTheThrownError() {
        let (operation, ran) = guardedOperation(BlockCondition { throw StubError.unreadable })
        #expect(run([operation]))
        #expect(ran.current == 0)
        #expect(operation.errors.asStubErrors == [.unreadable])
    }

    @Test func check_runsOnce_afterTheDependenciesFinished() {
        // Given a dependency that finishes later, and a check that records what it sees
        let dependency = AsyncBlockOperation { finish in
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) { finish(nil) }
        }
        let sawDependencyFinished = Recorder<Bool>()
        let (operation, ran) = guardedOperation(BlockCondition {
            sawDependencyFinished.append(dependency.isFinished)
            return true
        })
        operation.addDependency(dependency)

        // When
        let finished = run([dependency, operation])

        // Then
        #expect(finished)
        #expect(sawDependencyFinished.all == [true])
        #expect(ran.current == 1)
    }
}

private extension StubError {
    static let unreadable = StubError("unreadable")
}

private func guardedOperation(_ condition: BlockCondition) -> (AsyncBlockOperation, Counter) {
    let ran = Counter()
    let operation = AsyncBlockOperation { ran.increment() }
    operation.addCondition(condition)
    return (operation, ran)
}

private func run(_ operations: [Operation]) -> Bool {
    let queue = AsyncOperationQueue()
    queue.addOperations(operations, waitUntilFinished: false)
    return withExtendedLifetime(queue) { waitUntilFinished(operations) }
}
