import Foundation
import Observers
import Operations
import Testing
import TestSupport

@Suite("TimeoutObserver")
struct TimeoutObserverTests {
    @available(macOS 13, iOS 16, tvOS 16, watchOS 9, *)
    @Test func durationTimeout_isTheSameAsSeconds() {
        #expect(TimeoutObserver(timeout: .milliseconds(1500)).timeout == 1.5)
    }

    @Test func continuationNeverCalled_finishesWithTimedOut() {
        // Given a block operation that never calls its continuation, with a timeout
        let operation = AsyncBlockOperation { _ in }
        operation.addObserver(TimeoutObserver(timeout: 0.2))
        let queue = AsyncOperationQueue()

        // When
        queue.addOperation(operation)

        // Then
        #expect(waitUntilFinished([operation]))
        #expect(operation.isCancelled)
        #expect(operation.errors.map { $0 as? AsyncOperationError } == [.timedOut(after: 0.2)])
    }

    @Test func operationThatTimesOut_doesNotBlockItsQueue() {
        // Given a serial queue whose first operation would never finish by itself
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let stuck = AsyncBlockOperation { _ in }
        stuck.addObserver(TimeoutObserver(timeout: 0.2))
        let ran = Counter()
        let next = AsyncBlockOperation { ran.increment() }

        // When
        queue.addOperations([stuck, next], waitUntilFinished: false)

        // Then
        #expect(waitUntilFinished([stuck, next]))
        #expect(ran.current == 1)
    }

    @Test func operationFinishingInTime_isNotCancelled() {
        // Given an operation that finishes at once, with a short timeout
        let cancels = Counter()
        let operation = AsyncBlockOperation {}
        operation.addObserver(TimeoutObserver(timeout: 0.3))
        operation.addObserver(CancelledObserver { _ in cancels.increment() })
        let queue = AsyncOperationQueue()

        // When it has finished and the timeout has long passed
        queue.addOperation(operation)
        #expect(waitUntilFinished([operation]))
        Thread.sleep(forTimeInterval: 0.6)

        // Then
        #expect(!operation.isCancelled)
        #expect(operation.errors.isEmpty)
        #expect(cancels.current == 0)
    }

    @Test func timeWaitingForDependencies_doesNotCount() {
        // Given an operation with a short timeout that waits longer than that for a dependency
        let release = Signal()
        let dependency = AsyncBlockOperation { _ = release.wait() }
        let operation = AsyncBlockOperation {}
        operation.addDependency(dependency)
        operation.addObserver(TimeoutObserver(timeout: 0.2))
        let queue = AsyncOperationQueue()

        // When
        queue.addOperations([dependency, operation], waitUntilFinished: false)
        Thread.sleep(forTimeInterval: 0.5)
        release.signal()

        // Then it finishes as it would without a timeout
        #expect(waitUntilFinished([dependency, operation]))
        #expect(!operation.isCancelled)
        #expect(operation.errors.isEmpty)
    }

    @Test func finishedOperation_isNotKeptAliveByItsTimer() {
        // Given an observer that outlives the operation, with a timeout far in the future
        let observer = TimeoutObserver(timeout: 600)

        // When the operation finishes and every other reference is dropped
        let probe = runAndRelease(AsyncBlockOperation {}, observer: observer)

        // Then
        #expect(probe.isReleased())
        withExtendedLifetime(observer) {}
    }

    @Test func timedOutOperation_isNotKeptAlive() {
        let observer = TimeoutObserver(timeout: 0.1)
        let probe = runAndRelease(AsyncBlockOperation { _ in }, observer: observer)
        #expect(probe.isReleased())
        withExtendedLifetime(observer) {}
    }

    @Test func observerSharedByOperations_givesEachItsOwnTimer() {
        // Given one observer on two operations that never finish by themselves and one that does
        let observer = TimeoutObserver(timeout: 0.3)
        let stuck = [AsyncBlockOperation { _ in }, AsyncBlockOperation { _ in }]
        let quick = AsyncBlockOperation {}
        let operations = stuck + [quick]
        operations.forEach { $0.addObserver(observer) }
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 3

        // When
        queue.addOperations(operations, waitUntilFinished: false)

        // Then each stuck one times out on its own timer; the quick one is untouched
        #expect(waitUntilFinished(operations))
        for operation in stuck {
            #expect(operation.errors.map { $0 as? AsyncOperationError } == [.timedOut(after: 0.3)])
        }
        #expect(quick.errors.isEmpty)
        #expect(!quick.isCancelled)
    }

    @Test func observerSharedByOperationsStartingAtDifferentTimes_timesOutEach() {
        // Given one observer on two stuck operations, the second starting after the first timed out
        let observer = TimeoutObserver(timeout: 0.2)
        let first = AsyncBlockOperation { _ in }
        let second = AsyncBlockOperation { _ in }
        second.addDependency(first)
        first.addObserver(observer)
        second.addObserver(observer)
        let queue = AsyncOperationQueue()

        // When
        queue.addOperations([first, second], waitUntilFinished: false)

        // Then
        #expect(waitUntilFinished([first, second]))
        #expect(first.errors.map { $0 as? AsyncOperationError } == [.timedOut(after: 0.2)])
        #expect(second.errors.map { $0 as? AsyncOperationError } == [.timedOut(after: 0.2)])
    }
}

/// Runs `operation` with `observer` to the end and returns a probe on it, having dropped it.
private func runAndRelease(_ operation: AsyncBlockOperation, observer: TimeoutObserver) -> WeakProbe<AsyncBlockOperation> {
    let queue = AsyncOperationQueue()
    operation.addObserver(observer)
    queue.addOperation(operation)
    _ = waitUntilFinished([operation])
    return WeakProbe(operation)
}
