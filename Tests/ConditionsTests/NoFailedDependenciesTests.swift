import Conditions
import Foundation
import Operations
import Testing
import TestSupport

@Suite("NoFailedDependencies")
struct NoFailedDependenciesTests {
    @Test func isSatisfied_whenEveryDependencySucceeded() {
        // Given
        let first = AsyncBlockOperation {}
        let second = AsyncBlockOperation {}
        let (operation, ran) = guardedOperation(dependingOn: [first, second])

        // When
        let finished = run([first, second, operation])

        // Then
        #expect(finished)
        #expect(ran.current == 1)
        #expect(operation.errors.isEmpty)
    }

    @Test func isSatisfied_withoutDependencies() {
        let (operation, ran) = guardedOperation(dependingOn: [])
        #expect(run([operation]))
        #expect(ran.current == 1)
        #expect(operation.errors.isEmpty)
    }

    @Test func fails_whenADependencyFailed_namingIt() {
        // Given a dependency named "download" that throws
        let download = AsyncBlockOperation { throw StubError.offline }
        download.name = "download"
        let (operation, ran) = guardedOperation(dependingOn: [download])

        // When
        let finished = run([download, operation])

        // Then the operation never executes and its error names the dependency
        #expect(finished)
        #expect(ran.current == 0)
        #expect(operation.errors.map { $0 as? ConditionError } == [.dependenciesFailed(["download"])])
    }

    @Test func fails_namingEveryFailedDependency_andOnlyThose() {
        // Given
        let first = AsyncBlockOperation { throw StubError.offline }
        first.name = "first"
        let fine = AsyncBlockOperation {}
        fine.name = "fine"
        let third = AsyncBlockOperation { finish in finish(StubError.offline) }
        third.name = "third"
        let (operation, ran) = guardedOperation(dependingOn: [first, fine, third])

        // When
        let finished = run([first, fine, third, operation])

        // Then
        #expect(finished)
        #expect(ran.current == 0)
        #expect(operation.errors.map { $0 as? ConditionError } == [.dependenciesFailed(["first", "third"])])
    }

    @Test func fails_whenADependencyWasCancelledWithAnError() {
        // Given
        let dependency = AsyncBlockOperation {}
        dependency.name = "cancelled"
        dependency.cancel(with: StubError.offline)
        let (operation, ran) = guardedOperation(dependingOn: [dependency])

        // When
        let finished = run([dependency, operation])

        // Then
        #expect(finished)
        #expect(ran.current == 0)
        #expect(operation.errors.map { $0 as? ConditionError } == [.dependenciesFailed(["cancelled"])])
    }

    @Test func unnamedFailedDependency_isNamedByItsType() {
        let dependency = AsyncBlockOperation { throw StubError.offline }
        let (operation, _) = guardedOperation(dependingOn: [dependency])
        #expect(run([dependency, operation]))
        #expect(operation.errors.map { $0 as? ConditionError } == [.dependenciesFailed(["AsyncBlockOperation"])])
    }

    @Test func isSatisfied_whenAPlainFoundationDependencyRan() {
        let dependency = BlockOperation {}
        let (operation, ran) = guardedOperation(dependingOn: [dependency])
        #expect(run([dependency, operation]))
        #expect(ran.current == 1)
        #expect(operation.errors.isEmpty)
    }
}

private extension StubError {
    static let offline = StubError("offline")
}

private func guardedOperation(dependingOn dependencies: [Operation]) -> (AsyncBlockOperation, Counter) {
    let ran = Counter()
    let operation = AsyncBlockOperation { ran.increment() }
    dependencies.forEach(operation.addDependency)
    operation.addCondition(NoFailedDependencies())
    return (operation, ran)
}

private func run(_ operations: [Operation]) -> Bool {
    let queue = AsyncOperationQueue()
    queue.addOperations(operations, waitUntilFinished: false)
    return withExtendedLifetime(queue) { waitUntilFinished(operations) }
}
