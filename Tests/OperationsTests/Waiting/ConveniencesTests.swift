import Foundation
import Operations
import Testing
import TestSupport

/// Adding and awaiting in one call, awaiting off a queue, `Duration` overloads, the public lock box.
@Suite struct ConveniencesTests {
    @Test func run_addsAndAwaitsTheOutput() async throws {
        let queue = AsyncOperationQueue()
        let answer = try await queue.run(ResultBlockOperation { 6 * 7 })
        #expect(answer == 42)
        let plain = AsyncBlockOperation {}
        try await queue.run(plain)
        #expect(plain.isFinished)
    }

    @Test func run_throwsTheOperationsError() async {
        let queue = AsyncOperationQueue()
        await #expect(throws: StubError("no")) {
            try await queue.run(AsyncBlockOperation { throw StubError("no") })
        }
        await #expect(throws: StubError("never")) {
            try await queue.run(ResultBlockOperation<Int> { throw StubError("never") })
        }
    }

    @Test func awaitingAnOperationOnNoQueue_isReported_andFinishesOnceAdded() async throws {
        let operation = AsyncBlockOperation {}
        operation.name = uniqueName("forgotten")
        let log = DiagnosticsLog.shared
        let awaiting = Counter()
        let waiting = Task {
            awaiting.increment()
            try await operation.finished()
        }
        // Under a sanitizer the task may start late (the pool is busy with blocking tests): the
        // report comes a second after the wait began, so the bound counts from there.
        #expect(await eventually(timeout: 4 * generousTimeout) { awaiting.current > 0 })
        #expect(await eventually(timeout: 4 * generousTimeout) { log.kinds(about: operation.name!) == [.awaitedOffQueue] })
        AsyncOperationQueue().addOperation(operation)
        try await waiting.value
        #expect(log.kinds(about: operation.name!) == [.awaitedOffQueue])
    }

    @Test func awaitingAnOperationAddedSoonAfter_isNotReported() async throws {
        let operation = AsyncBlockOperation {}
        operation.name = uniqueName("added")
        let waiting = Task { try await operation.finished() }
        AsyncOperationQueue().addOperation(operation)
        try await waiting.value
        try await Task.sleep(nanoseconds: 1_200_000_000) // past the grace period: a chance to go wrong
        #expect(DiagnosticsLog.shared.kinds(about: operation.name!).isEmpty)
    }

    @available(macOS 13, iOS 16, tvOS 16, watchOS 9, *)
    @Test func durationOverloads_meanTheSameAsSeconds() throws {
        #expect(CompositeResolution.rerun(after: .milliseconds(1500)) == .rerun(after: 1.5))
        #expect(BackoffPolicy.fixed(.seconds(2)).delay(beforeAttempt: 2) == 2)
        let backoff = BackoffPolicy.exponential(initial: .milliseconds(500), maximum: .seconds(1))
        #expect([2, 3, 4].map(backoff.delay(beforeAttempt:)) == [0.5, 1, 1])
        let delay = DelayOperation(.milliseconds(10))
        try delay.runAndWait(timeout: .seconds(30))
        #expect(delay.isFinished)
        #expect(try ResultBlockOperation { 7 }.runAndWait(timeout: .seconds(30)) == 7)
    }

    @Test func lockedValue_keepsStateConsistentAcrossThreads() {
        let count = LockedValue(0)
        DispatchQueue.concurrentPerform(iterations: 1_000) { _ in
            count.withLock { $0 += 1 }
        }
        #expect(count.withLock { $0 } == 1_000)
    }
}
