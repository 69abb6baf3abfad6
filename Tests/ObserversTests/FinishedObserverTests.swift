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
        let calls = Recorder<[FinishError?]>()
        let operation = AsyncBlockOperation { throw FinishError.thrown }
        operation.addObserver(FinishedObserver { _, errors in calls.append(errors.map { $0 as? FinishError }) })

        #expect(run(operation))
        #expect(calls.all == [[.thrown]])
    }

    @Test func receivesTheErrorOfAFailedCondition_withoutTheOperationExecuting() {
        let calls = Recorder<[FinishError?]>()
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.addCondition(Refuses())
        operation.addObserver(FinishedObserver { _, errors in calls.append(errors.map { $0 as? FinishError }) })

        #expect(run(operation))
        #expect(calls.all == [[.refused]])
        #expect(ran.current == 0)
    }

    @Test func receivesTheCancellationError() {
        let calls = Recorder<[FinishError?]>()
        let operation = AsyncBlockOperation {}
        operation.addObserver(FinishedObserver { _, errors in calls.append(errors.map { $0 as? FinishError }) })
        operation.cancel(with: FinishError.cancelled)

        #expect(run(operation))
        #expect(calls.all == [[.cancelled]])
    }

    @Test func errorsReceived_areTheOperationsFinalErrors() {
        // Given
        let seen = Recorder<Bool>()
        let operation = AsyncBlockOperation { finish in finish(FinishError.thrown) }
        operation.addObserver(FinishedObserver { finished, errors in
            seen.append(finished === operation && finished.errors.map { $0 as? FinishError } == errors.map { $0 as? FinishError })
        })

        // When
        let finished = run(operation)
        operation.finish(with: FinishError.cancelled) // too late: ignored

        // Then
        #expect(finished)
        #expect(seen.all == [true])
        #expect(operation.errors.map { $0 as? FinishError } == [.thrown])
    }
}

private enum FinishError: Error, Equatable {
    case thrown
    case refused
    case cancelled
}

private struct Refuses: OperationCondition {
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(.failed(FinishError.refused))
    }
}

private func run(_ operation: Operation) -> Bool {
    let queue = AsyncOperationQueue()
    queue.addOperation(operation)
    return withExtendedLifetime(queue) { waitUntilFinished([operation]) }
}
