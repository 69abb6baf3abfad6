import Foundation
import Operations
import Testing
import TestSupport

/// A wait whose task is cancelled ends at once with `CancellationError`, whatever the operation
/// does: with a diagnostic for an operation on no queue (nothing would ever finish it), which stays
/// cancelled and finishes as soon as it is added or started; and for one on a queue, which
/// finishes on its own, even when its `execute()` ignores the cancellation.
@Suite struct CancelledWaitTests {
    /// An operation nobody has added to a queue, named for the diagnostics it causes.
    private func operationOnNoQueue() -> (operation: AsyncBlockOperation, ran: Counter) {
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.name = uniqueName("off-queue")
        return (operation, ran)
    }

    @Test func finished_onNoQueue_endsAtOnceWhenItsTaskIsCancelled() async {
        let (operation, ran) = operationOnNoQueue()
        let waiting = Task { try await operation.finished() }
        waiting.cancel()

        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(operation.isCancelled && !operation.isFinished)
        let reports = DiagnosticsLog.shared.diagnostics(about: operation.name!)
        #expect(reports.map(\.kind) == [.awaitedOffQueue])
        #expect(reports.first?.message.contains("the wait ended at once with CancellationError") == true)
        #expect(reports.first?.queueNames == [])

        AsyncOperationQueue().addOperation(operation) // it finishes once added, without running
        #expect(await eventually { operation.isFinished })
        #expect(ran.current == 0)
    }

    @Test func value_onNoQueue_endsAtOnceWhenItsTaskIsCancelled_andStartingFinishesIt() async {
        let operation = ResultBlockOperation { 42 }
        operation.name = uniqueName("off-queue value")
        let waiting = Task { try await operation.value }
        waiting.cancel()

        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(operation.isCancelled)
        operation.start() // started by hand, it finishes at once
        #expect(operation.isFinished && operation.output == nil)
        #expect(DiagnosticsLog.shared.kinds(about: operation.name!, onceThereAre: 1) == [.awaitedOffQueue])
    }

    @Test func aTaskCancelledBeforeItWaits_endsAtOnceToo() async {
        let (operation, _) = operationOnNoQueue()
        let waiting = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await operation.finished()
        }
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(operation.isCancelled && !operation.isFinished)
    }

    @Test func aTimeoutRacedTheUsualWay_endsForAnOperationOnNoQueue() async {
        let (operation, _) = operationOnNoQueue()
        // Race the wait against a sleep; the first to end cancels the other.
        let outcome = await withTaskGroup(of: String.self) { group in
            group.addTask {
                do {
                    try await operation.finished()
                    return "finished"
                } catch {
                    return "\(type(of: error))"
                }
            }
            group.addTask {
                try? await Task.sleep(nanoseconds: 10_000_000)
                return "timed out"
            }
            let first = await group.next()!
            group.cancelAll()
            _ = await group.next()
            return first
        }
        #expect(outcome == "timed out")
        #expect(operation.isCancelled)
    }

    @Test func queueRun_inACancelledTask_endsAtOnce_andTheCancelledOperationFinishes() async {
        let queue = AsyncOperationQueue()
        let started = Counter()
        let operation = AsyncBlockOperation { _ in started.increment() } // finishes only when cancelled
        let waiting = Task { try await queue.run(operation) }
        #expect(await eventually { started.current == 1 })
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(operation.isCancelled)
        #expect(await eventually { operation.isFinished })
    }

    @Test func onAQueue_aCancelledWaitEndsAtOnce_evenWhenTheOperationIgnoresCancellation() async {
        // Given an executing operation whose execute() ignores cancellation until the test lets it go
        let queue = AsyncOperationQueue()
        let mayEnd = Signal()
        let started = Counter()
        let operation = AsyncBlockOperation { started.increment(); _ = mayEnd.wait() }
        queue.addOperation(operation)
        #expect(await eventually { started.current == 1 })

        // When a task waiting for it is cancelled
        let waiting = Task { try await operation.finished() }
        waiting.cancel()

        // Then the wait ends at once, the operation cancelled but still running
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(operation.isCancelled && !operation.isFinished)
        mayEnd.signal()
        #expect(await eventually { operation.isFinished })
    }

    @Test func onASuspendedQueueThatHasNotStartedIt_aCancelledWaitEndsToo() async {
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let mayEnd = Signal()
        let started = Counter()
        let blocker = AsyncBlockOperation { started.increment(); _ = mayEnd.wait() }
        let operation = AsyncBlockOperation {}
        operation.name = uniqueName("behind a suspension")
        queue.addOperations([blocker, operation], waitUntilFinished: false)
        #expect(await eventually { started.current == 1 })
        queue.isSuspended = true
        let waiting = Task { try await operation.finished() }
        waiting.cancel()

        // A watchdog on a plain thread (the cooperative pool may be busy with other tests) lets
        // a wait that does not end finish after all, so that the test fails instead of hanging.
        let rescued = Counter()
        DispatchQueue.global().asyncAfter(deadline: .now() + blockingTimeout / 2) {
            guard !operation.isFinished else { return }
            rescued.increment()
            mayEnd.signal()
            queue.isSuspended = false
        }
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(rescued.current == 0)
        #expect(operation.isCancelled && !operation.isFinished) // the queue is still suspended
        mayEnd.signal()
        queue.isSuspended = false
        #expect(await eventually { operation.isFinished })
    }

    @Test func aWaitThatIsNotCancelled_stillWaitsForTheAdd() async throws {
        let (operation, ran) = operationOnNoQueue()
        let waiting = Task { try await operation.finished() }
        // Added from a thread of its own: the test's task may resume seconds late under load
        let added = runOnOwnThread {
            usleep(20_000)
            AsyncOperationQueue().addOperation(operation)
        }
        try await waiting.value
        #expect(added.wait(timeout: generousTimeout))
        #expect(ran.current == 1)
        #expect(DiagnosticsLog.shared.kinds(about: operation.name!).isEmpty) // added within the second
    }
}
