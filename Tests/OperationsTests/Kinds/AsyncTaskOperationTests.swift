import Foundation
import Operations
import Testing
import TestSupport

/// Records every event an observer hears, by name.
private struct EventLog: OperationObserver {
    let events: Recorder<String>
    func operationDidStart(_ operation: AsyncOperation) { events.append("start") }
    func operationDidCancel(_ operation: AsyncOperation) { events.append("cancel") }
    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) { events.append("finish") }
}

private final class Payload: Sendable {}

private let oneMinute: UInt64 = 60_000_000_000

@Suite struct AsyncTaskOperationTests {
    @Test func runsTheBody_andFinishesWhenItReturns() async throws {
        let steps = Recorder<String>()
        let operation = AsyncTaskOperation {
            steps.append("before")
            try await Task.sleep(nanoseconds: 5_000_000)
            steps.append("after")
        }
        operation.addObserver(EventLog(events: steps))
        AsyncOperationQueue().addOperation(operation)

        try await operation.finished()

        #expect(steps.all == ["start", "before", "after", "finish"])
    }

    @Test func aThrownError_isTheOperationsError() async {
        let operation = AsyncTaskOperation { throw StubError("5") }
        AsyncOperationQueue().addOperation(operation)
        await #expect(throws: StubError("5")) { try await operation.finished() }
        #expect(operation.errors.count == 1)
    }

    @Test func cancellingWhileTheBodyRuns_cancelsItsTask_andFinishesWithoutError() async {
        let steps = Recorder<String>()
        let operation = AsyncTaskOperation {
            steps.append("sleeping")
            do {
                try await Task.sleep(nanoseconds: oneMinute)
            } catch {
                steps.append(error is CancellationError ? "sleep cancelled" : "other error")
                throw error
            }
        }
        AsyncOperationQueue().addOperation(operation)
        #expect(await eventually { steps.count == 1 })

        operation.cancel()

        await #expect(throws: CancellationError.self) { try await operation.finished() }
        #expect(steps.all == ["sleeping", "sleep cancelled"])
        #expect(operation.errors.isEmpty) // the body's CancellationError is how it obeyed
    }

    @Test func cancellingWithAnError_recordsThatError_only() async {
        let operation = AsyncTaskOperation { try await Task.sleep(nanoseconds: oneMinute) }
        AsyncOperationQueue().addOperation(operation)
        #expect(await eventually { operation.isExecuting })
        operation.cancel(with: StubError("2"))
        await #expect(throws: StubError("2")) { try await operation.finished() }
    }

    @Test func anErrorThrownAfterCancellation_isStillRecorded() async {
        let bodyStarted = Counter()
        let operation = AsyncTaskOperation {
            bodyStarted.increment()
            while !Task.isCancelled { await Task.yield() }
            throw StubError("3")
        }
        AsyncOperationQueue().addOperation(operation)
        // (isExecuting alone is not enough: a cancel before execute() runs skips the body.)
        #expect(await eventually { bodyStarted.current == 1 })
        operation.cancel()
        await #expect(throws: StubError("3")) { try await operation.finished() }
    }

    @Test func operationFinishesOnlyOnceTheBodyHasReturned() async {
        let bodyReturned = Counter()
        let bodyStarted = Counter()
        let operation = AsyncTaskOperation {
            bodyStarted.increment()
            while !Task.isCancelled { await Task.yield() }
            await withCheckedContinuation { continuation in // a wait that ignores cancellation
                DispatchQueue.global().asyncAfter(deadline: .now() + 0.02) { continuation.resume() }
            }
            bodyReturned.increment()
        }
        AsyncOperationQueue().addOperation(operation)
        #expect(await eventually { bodyStarted.current == 1 })
        operation.cancel()
        try? await operation.finished()
        #expect(bodyReturned.current == 1)
    }

    @Test func cancelledBeforeItStarts_neverRunsTheBody() async {
        let ran = Counter()
        let events = Recorder<String>()
        let operation = AsyncTaskOperation { ran.increment() }
        operation.addObserver(EventLog(events: events))
        operation.cancel()
        AsyncOperationQueue().addOperation(operation)
        await #expect(throws: CancellationError.self) { try await operation.finished() }
        #expect(ran.current == 0)
        #expect(events.all == ["cancel", "finish"])
    }

    @Test func resultTaskOperation_producesWhatTheBodyReturns() async throws {
        let operation = ResultTaskOperation {
            try await Task.sleep(nanoseconds: 1_000_000)
            return 42
        }
        AsyncOperationQueue().addOperation(operation)
        #expect(try await operation.value == 42)
        #expect(operation.output == 42)
    }

    @Test func resultTaskOperation_cancelledWhileRunning_hasNoOutput() async {
        let operation = ResultTaskOperation<Int> {
            try await Task.sleep(nanoseconds: oneMinute)
            return 1
        }
        AsyncOperationQueue().addOperation(operation)
        #expect(await eventually { operation.isExecuting })
        operation.cancel()
        await #expect(throws: CancellationError.self) { try await operation.value }
        #expect(operation.output == nil)
    }

    @Test func bodyAndOperation_areReleasedOnceFinished() async throws {
        var payload: Payload? = Payload()
        let payloadProbe = WeakProbe(payload!)
        var operation: AsyncTaskOperation? = AsyncTaskOperation { [payload] in
            _ = payload
        }
        payload = nil
        let operationProbe = WeakProbe(operation!)
        AsyncOperationQueue().addOperation(operation!)
        try await operation!.finished()
        operation = nil
        #expect(await eventually { payloadProbe.object == nil && operationProbe.object == nil })
    }

    @Test func runsAsAStepOfAGroup_withBlockOperations() async throws {
        let order = Recorder<String>()
        let fetch = ResultTaskOperation { () async throws -> Int in
            order.append("fetch")
            return 7
        }
        let use = AsyncBlockOperation { order.append("use \(fetch.output ?? 0)") }
        use.addDependency(fetch)
        let group = GroupOperation(operations: [fetch, use])
        AsyncOperationQueue().addOperation(group)
        try await group.finished()
        #expect(order.all == ["fetch", "use 7"])
    }

    @Test func isAResultTaskOperationOfVoid_whoseValueIsThereOnceItSucceeded() async throws {
        let operation = AsyncTaskOperation {}
        AsyncOperationQueue().addOperation(operation)
        try await operation.value
        #expect(operation.output != nil)
        let asResult: ResultTaskOperation<Void> = operation
        #expect(asResult.result.map { (try? $0.get()) != nil } == true)
    }

    @Test func subclassThatFinishesByItself_succeedsWithoutProducing() throws {
        // A subclass may finish with finish(), as any AsyncOperation does: with nothing to
        // produce, that is a success, not AsyncOperationError.finishedWithoutOutput.
        final class FinishesAtOnce: AsyncTaskOperation, @unchecked Sendable {
            init() { super.init {} }
            override func execute() { finish() }
        }
        let operation = FinishesAtOnce()
        try operation.runAndWait()
        #expect(operation.result.map { (try? $0.get()) != nil } == true)
    }
}
