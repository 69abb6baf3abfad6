import Foundation
import Operations
import Testing
import TestSupport

@Suite struct AwaitingOperationsTests {
    // MARK: - finished()

    @Test func finished_returnsOnceTheOperationIsFinished() async throws {
        let operation = AsyncBlockOperation { finish in
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { finish(nil) }
        }
        AsyncOperationQueue().addOperation(operation)

        try await operation.finished()

        #expect(operation.isFinished)
    }

    @Test func finished_waitsForAnOperationAddedAfterwards() async throws {
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        async let waited: Void = operation.finished()
        try await Task.sleep(nanoseconds: 10_000_000)
        AsyncOperationQueue().addOperation(operation)
        try await waited
        #expect(ran.current == 1)
    }

    @Test func finished_ofAFinishedOperation_returnsAtOnce() async throws {
        let operation = AsyncBlockOperation {}
        AsyncOperationQueue().addOperation(operation)
        #expect(await eventually { operation.isFinished })
        try await operation.finished()
        try await operation.finished()
    }

    @Test func finished_throwsTheOnlyErrorAsIs() async {
        let operation = AsyncBlockOperation { throw StubError("1") }
        AsyncOperationQueue().addOperation(operation)
        await #expect(throws: StubError("1")) { try await operation.finished() }
    }

    @Test func finished_throwsSeveralErrorsTogether() async {
        let group = GroupOperation(operations: [
            AsyncBlockOperation { throw StubError("1") },
            AsyncBlockOperation { throw StubError("2") },
        ])
        group.maxConcurrentOperationCount = 1
        AsyncOperationQueue().addOperation(group)
        let expected = AsyncOperationError.multipleErrors(operation: "GroupOperation", errors: [StubError("1"), StubError("2")])
        await #expect(throws: expected) { try await group.finished() }
    }

    @Test func finished_ofAnOperationCancelledWithoutError_throwsCancellationError() async {
        let operation = AsyncBlockOperation {}
        operation.cancel()
        AsyncOperationQueue().addOperation(operation)
        await #expect(throws: CancellationError.self) { try await operation.finished() }
    }

    @Test func manyWaiters_areEachResumedOnce() async throws {
        let operation = AsyncBlockOperation { finish in
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { finish(nil) }
        }
        let resumed = Counter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    try await operation.finished()
                    resumed.increment()
                }
            }
            AsyncOperationQueue().addOperation(operation)
            try await group.waitForAll()
        }
        #expect(resumed.current == 50)
    }

    // MARK: - Task cancellation

    @Test func cancellingTheWaitingTask_cancelsTheOperation_whichFinishes() async {
        let started = Counter()
        let operation = AsyncBlockOperation { _ in started.increment() } // finishes only when cancelled
        AsyncOperationQueue().addOperation(operation)
        #expect(await eventually { started.current == 1 })
        let waiting = Task { try await operation.finished() }

        waiting.cancel()

        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(operation.isCancelled)
        // (a cancel that lands while the block still runs finishes it once the block returns)
        #expect(await eventually { operation.isFinished })
    }

    @Test func taskCancelledBeforeWaiting_cancelsTheOperation_whichFinishesWhenAdded() async {
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        let waiting = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await operation.finished()
        }
        #expect(await eventually { operation.isCancelled })
        AsyncOperationQueue().addOperation(operation)
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(ran.current == 0)
    }

    @Test func cancellingAfterTheOperationFinished_changesNothing() async throws {
        let operation = ResultBlockOperation { 1 }
        AsyncOperationQueue().addOperation(operation)
        let waiting = Task { try await operation.value }
        #expect(try await waiting.value == 1)
        waiting.cancel()
        #expect(!operation.isCancelled)
    }

    // MARK: - value

    @Test func value_isTheOutput() async throws {
        let operation = ResultBlockOperation { "forty-two" }
        AsyncOperationQueue().addOperation(operation)
        #expect(try await operation.value == "forty-two")
    }

    @Test func value_ofAFailedOperation_throwsItsError() async {
        let operation = ResultBlockOperation<Int> { throw StubError("9") }
        AsyncOperationQueue().addOperation(operation)
        await #expect(throws: StubError("9")) { try await operation.value }
    }

    @Test func value_ofACancelledOperation_throwsCancellationError() async {
        let operation = ResultBlockOperation { 1 }
        operation.cancel()
        AsyncOperationQueue().addOperation(operation)
        await #expect(throws: CancellationError.self) { try await operation.value }
    }

    // MARK: - Memory

    @Test func awaitedOperation_isReleased() async throws {
        var operation: ResultBlockOperation<Int>? = ResultBlockOperation { 1 }
        let probe = WeakProbe(operation!)
        AsyncOperationQueue().addOperation(operation!)
        _ = try await operation!.value
        operation = nil
        #expect(await eventually { probe.object == nil })
    }
}
