import Foundation
import Observers
import Operations
import Testing
import TestSupport

@Suite("CancelledObserver")
struct CancelledObserverTests {
    @Test func isCalledOnce_withTheOperation_evenWhenCancelledTwice() {
        // Given an executing operation that waits for its continuation
        let cancels = Recorder<Bool>()
        let started = Signal()
        let operation = AsyncBlockOperation { _ in started.signal() }
        operation.addObserver(CancelledObserver { cancelled in cancels.append(cancelled === operation) })
        let queue = AsyncOperationQueue()
        queue.addOperation(operation)
        #expect(started.wait())

        // When
        operation.cancel()
        operation.cancel(with: StubError("again"))

        // Then
        #expect(waitUntilFinished([operation]))
        #expect(cancels.all == [true])
    }

    @Test func isCalled_whenCancelledBeforeStarting() {
        let cancels = Counter()
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.addObserver(CancelledObserver { _ in cancels.increment() })

        operation.cancel()
        let queue = AsyncOperationQueue()
        queue.addOperation(operation)

        #expect(waitUntilFinished([operation]))
        #expect(cancels.current == 1)
        #expect(ran.current == 0)
    }

    @Test func isNotCalled_whenTheOperationFinishesNormally() {
        let cancels = Counter()
        let operation = AsyncBlockOperation {}
        operation.addObserver(CancelledObserver { _ in cancels.increment() })
        let queue = AsyncOperationQueue()

        queue.addOperation(operation)
        #expect(waitUntilFinished([operation]))
        operation.cancel() // after finishing: no effect

        #expect(cancels.current == 0)
        #expect(!operation.isCancelled)
    }
}
