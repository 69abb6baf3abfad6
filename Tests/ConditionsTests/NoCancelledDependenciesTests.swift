import Conditions
import Foundation
import Operations
import Testing
import TestSupport

@Suite("NoCancelledDependencies")
struct NoCancelledDependenciesTests {
    @Test func isSatisfied_whenNoDependencyWasCancelled() {
        // Given
        let first = AsyncBlockOperation {}
        let second = BlockOperation {}
        let (operation, ran) = guardedOperation(dependingOn: [first, second])

        // When
        let finished = run([first, second, operation])

        // Then
        #expect(finished)
        #expect(ran.current == 1)
        #expect(operation.errors.isEmpty)
    }

    @Test func isSatisfied_whenADependencyFailedWithoutBeingCancelled() {
        let failed = AsyncBlockOperation { throw StubError("broken") }
        let (operation, ran) = guardedOperation(dependingOn: [failed])
        #expect(run([failed, operation]))
        #expect(ran.current == 1)
        #expect(operation.errors.isEmpty)
    }

    @Test func fails_whenADependencyWasCancelledBeforeItStarted_namingIt() {
        // Given a dependency named "upload", cancelled before it is queued
        let upload = AsyncBlockOperation {}
        upload.name = "upload"
        upload.cancel()
        let (operation, ran) = guardedOperation(dependingOn: [upload])

        // When
        let finished = run([upload, operation])

        // Then
        #expect(finished)
        #expect(ran.current == 0)
        #expect(operation.errors.map { $0 as? ConditionError } == [.dependenciesCancelled(["upload"])])
    }

    @Test func fails_whenADependencyWasCancelledWhileItExecuted() {
        // Given a dependency that executes and waits for its continuation
        let started = Signal()
        let upload = AsyncBlockOperation { _ in started.signal() }
        upload.name = "upload"
        let (operation, ran) = guardedOperation(dependingOn: [upload])
        let queue = AsyncOperationQueue()
        queue.addOperations([upload, operation], waitUntilFinished: false)
        #expect(started.wait())

        // When
        upload.cancel()

        // Then
        #expect(waitUntilFinished([upload, operation]))
        #expect(ran.current == 0)
        #expect(operation.errors.map { $0 as? ConditionError } == [.dependenciesCancelled(["upload"])])
    }

    @Test func fails_whenAPlainFoundationDependencyWasCancelled_namingEveryCancelledOne() {
        // Given
        let plain = BlockOperation {}
        plain.name = "plain"
        plain.cancel()
        let fine = AsyncBlockOperation {}
        fine.name = "fine"
        let cancelled = AsyncBlockOperation {}
        cancelled.name = "cancelled"
        cancelled.cancel()
        let (operation, ran) = guardedOperation(dependingOn: [plain, fine, cancelled])

        // When
        let finished = run([plain, fine, cancelled, operation])

        // Then
        #expect(finished)
        #expect(ran.current == 0)
        #expect(operation.errors.map { $0 as? ConditionError } == [.dependenciesCancelled(["plain", "cancelled"])])
    }
}

private func guardedOperation(dependingOn dependencies: [Operation]) -> (AsyncBlockOperation, Counter) {
    let ran = Counter()
    let operation = AsyncBlockOperation { ran.increment() }
    dependencies.forEach(operation.addDependency)
    operation.addCondition(NoCancelledDependencies())
    return (operation, ran)
}

private func run(_ operations: [Operation]) -> Bool {
    let queue = AsyncOperationQueue()
    queue.addOperations(operations, waitUntilFinished: false)
    return withExtendedLifetime(queue) { waitUntilFinished(operations) }
}
