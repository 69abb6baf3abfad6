import Foundation
import Observers
import Operations
import Testing
import TestSupport

@Suite("FinishedObserver")
struct FinishedObserverTests {
    @Test func isCalledOnce_withNoErrors_whenTheOperationSucceeds() {
        let calls = Recorder<[String]>()
        let operation = AsyncBlockOperation {}
        operation.addObserver(FinishedObserver { _, errors in calls.append(errors.map { "\($0)" }) })

        #expect(run(operation))
        #expect(calls.all == [[]])
    }

    @Test func receivesTheThrownError() {
        let calls = Recorder<[StubError?]>()
        let operation = AsyncBlockOperation { throw StubError.thrown }
        operation.addObserver(FinishedObserver { _, errors in calls.append(errors.asStubErrors) })

        #expect(run(operation))
        #expect(calls.all == [[.thrown]])
    }

    @Test func receivesTheErrorOfAFailedCondition_withoutTheOperationExecuting() {
        let calls = Recorder<[StubError?]>()
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.addCondition(Refuses())
        operation.addObserver(FinishedObserver { _, errors in calls.append(errors.asStubErrors) })

        #expect(run(operation))
        #expect(calls.all == [[.refused]])
        #expect(ran.current == 0)
    }

    @Test func receivesTheCancellationError() {
        let calls = Recorder<[StubError?]>()
        let operation = AsyncBlockOperation {}
        operation.addObserver(FinishedObserver { _, errors in calls.append(errors.asStubErrors) })
        operation.cancel(with: StubError.cancelled)

        #expect(run(operation))
        #expect(calls.all == [[.cancelled]])
    }

    @Test func errorsReceived_areTheOperationsFinalErrors() {
        // Given
        let seen = Recorder<Bool>()
        let operation = AsyncBlockOperation { finish in finish(StubError.thrown) }
        operation.name = uniqueName("finished late") // the late finish below is reported to the test's log
        operation.addObserver(FinishedObserver { finished, errors in
            seen.append(finished === operation && finished.errors.asStubErrors == errors.asStubErrors)
        })

        // When
        let finished = run(operation)
        operation.finish(with: StubError.cancelled) // too late: ignored

        // Then
        #expect(finished)
        #expect(seen.all == [true])
        #expect(operation.errors.asStubErrors == [.thrown])
        #expect(DiagnosticsLog.shared.kinds(about: operation.name!) == [.finishedTwice])
    }
}

private extension StubError {
    static let thrown = StubError("thrown")
    static let refused = StubError("refused")
    static let cancelled = StubError("cancelled")
}

private struct Refuses: OperationCondition {
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(.failed(StubError.refused))
    }
}

private func run(_ operation: Operation) -> Bool {
    let queue = AsyncOperationQueue()
    queue.addOperation(operation)
    return withExtendedLifetime(queue) { waitUntilFinished([operation]) }
}
