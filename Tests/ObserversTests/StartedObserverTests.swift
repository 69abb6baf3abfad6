import Foundation
import Observers
import Operations
import Testing
import TestSupport

@Suite("StartedObserver")
struct StartedObserverTests {
    @Test func isCalledOnce_withTheOperation_beforeItExecutes() {
        // Given
        let log = Recorder<String>()
        let operation = AsyncBlockOperation { log.append("executed") }
        operation.addObserver(StartedObserver { started in
            log.append(started === operation ? "started" : "started: wrong operation")
        })

        // When
        let finished = run(operation)

        // Then
        #expect(finished)
        #expect(log.all == ["started", "executed"])
    }

    @Test func isNotCalled_whenCancelledBeforeStarting() {
        let starts = Counter()
        let operation = AsyncBlockOperation {}
        operation.addObserver(StartedObserver { _ in starts.increment() })
        operation.cancel()

        #expect(run(operation))
        #expect(starts.current == 0)
    }

    @Test func isNotCalled_whenAConditionFails() {
        let starts = Counter()
        let operation = AsyncBlockOperation {}
        operation.addObserver(StartedObserver { _ in starts.increment() })
        operation.addCondition(NeverSatisfied())

        #expect(run(operation))
        #expect(starts.current == 0)
        #expect(operation.isFailed)
    }
}

private struct NeverSatisfied: OperationCondition {
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(.failed(StubError("refused")))
    }
}

private func run(_ operation: Operation) -> Bool {
    let queue = AsyncOperationQueue()
    queue.addOperation(operation)
    return withExtendedLifetime(queue) { waitUntilFinished([operation]) }
}
