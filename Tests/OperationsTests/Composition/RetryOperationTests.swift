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

/// Seconds on a clock that never jumps.
private func uptime() -> TimeInterval {
    TimeInterval(DispatchTime.now().uptimeNanoseconds) / 1e9
}

@Suite struct RetryOperationTests {
    // MARK: - Attempts and outcome

    @Test func retriesUntilAnAttemptSucceeds_withAFreshOperationEachTime() throws {
        let made = Recorder<Int>()
        let retry = RetryOperation(maxAttempts: 5) { attempt in
            made.append(attempt)
            return AsyncBlockOperation { if attempt < 3 { throw StubError("\(attempt)") } }
        }

        try retry.runAndWait()

        #expect(made.all == [1, 2, 3])
        #expect(retry.attemptCount == 3)
        #expect(retry.errors.isEmpty)
    }

    @Test func firstAttemptSucceeding_isTheOnlyOne() throws {
        let made = Counter()
        let retry = RetryOperation(maxAttempts: 5, backoff: .fixed(3600)) { _ in
            made.increment()
            return AsyncBlockOperation {}
        }
        try retry.runAndWait()
        #expect(made.current == 1)
    }

    @Test func everyAttemptFailing_reportsTheLastAttemptsErrors() {
        let retry = RetryOperation(maxAttempts: 3) { attempt in
            AsyncBlockOperation { throw StubError("\(attempt)") }
        }
        #expect(throws: StubError("3")) { try retry.runAndWait() }
        #expect(retry.attemptCount == 3)
        #expect(retry.errors.compactMap { $0 as? StubError } == [StubError("3")])
    }

    @Test(arguments: [1, 0, -2])
    func atMostOneAttempt_neverRetries(maxAttempts: Int) {
        let retry = RetryOperation(maxAttempts: maxAttempts) { attempt in
            AsyncBlockOperation { throw StubError("\(attempt)") }
        }
        #expect(throws: StubError("1")) { try retry.runAndWait() }
        #expect(retry.attemptCount == 1)
    }

    @Test func shouldRetry_seesEachError_andStopsTheRetriesWhenFalse() {
        let seen = Recorder<Int>()
        let retry = RetryOperation(maxAttempts: 10, shouldRetry: { error in
            let code = (error as? StubError).flatMap { Int($0.label) } ?? 0
            seen.append(code)
            return code < 2
        }) { attempt in
            AsyncBlockOperation { throw StubError("\(attempt)") }
        }
        #expect(throws: StubError("2")) { try retry.runAndWait() }
        #expect(seen.all == [1, 2])
        #expect(retry.attemptCount == 2)
    }

    @Test func attemptsRunOneAfterAnother() throws {
        let probe = ConcurrencyProbe()
        let retry = RetryOperation(maxAttempts: 6) { attempt in
            AsyncBlockOperation { finish in
                probe.enter("attempts")
                DispatchQueue.global().asyncAfter(deadline: .now() + 0.005) {
                    probe.leave("attempts")
                    finish(attempt < 6 ? StubError("\(attempt)") : nil)
                }
            }
        }
        try retry.runAndWait()
        #expect(probe.maximum("attempts") == 1)
        #expect(retry.attemptCount == 6)
    }

    @Test func resultAttempts_giveTheirOutputThroughLastAttempt() throws {
        let retry = RetryOperation(maxAttempts: 3) { attempt in
            ResultBlockOperation { () throws -> String in
                if attempt == 1 { throw StubError("1") }
                return "attempt \(attempt)"
            }
        }
        try retry.runAndWait()
        #expect(retry.lastAttempt?.output == "attempt 2")
    }

    @Test func observersOfTheRetryOperation_hearEachEventOnce() {
        let events = Recorder<String>()
        let retry = RetryOperation(maxAttempts: 3) { attempt in
            AsyncBlockOperation { throw StubError("\(attempt)") }
        }
        retry.addObserver(EventLog(events: events))
        _ = try? retry.runAndWait()
        #expect(events.all == ["start", "finish"])
    }

    // MARK: - Backoff

    @Test func backoff_isAskedOncePerRetry() throws {
        let draws = Counter()
        let backoff = BackoffPolicy.fixed(0.01).withJitter(0.5) {
            draws.increment()
            return 0
        }
        let retry = RetryOperation(maxAttempts: 4, backoff: backoff) { attempt in
            AsyncBlockOperation { throw StubError("\(attempt)") }
        }
        _ = try? retry.runAndWait()
        #expect(draws.current == 3)
    }

    @Test func backoff_waitsBeforeEachRetry_notBefore() throws {
        let starts = Recorder<TimeInterval>()
        let retry = RetryOperation(maxAttempts: 3, backoff: .fixed(0.1)) { attempt in
            AsyncBlockOperation {
                starts.append(uptime())
                if attempt < 3 { throw StubError("\(attempt)") }
            }
        }
        try retry.runAndWait()
        let times = starts.all
        #expect(times.count == 3)
        for (earlier, later) in zip(times, times.dropFirst()) {
            #expect(later - earlier >= 0.095)
        }
    }

    // MARK: - Cancellation

    @Test func cancelledBeforeItStarts_makesNoAttempt() {
        let made = Counter()
        let retry = RetryOperation(maxAttempts: 3) { _ in
            made.increment()
            return AsyncBlockOperation {}
        }
        retry.cancel()
        #expect(throws: CancellationError.self) { try retry.runAndWait() }
        #expect(made.current == 0)
        #expect(retry.lastAttempt == nil)
    }

    @Test func cancelledDuringAnAttempt_cancelsIt_andMakesNoOther() {
        let started = Signal()
        let retry = RetryOperation(maxAttempts: 5) { _ in
            AsyncBlockOperation { _ in started.signal() } // finishes only when cancelled
        }
        AsyncOperationQueue().addOperation(retry)
        #expect(started.wait())

        retry.cancel()

        #expect(waitUntilFinished([retry]))
        #expect(retry.attemptCount == 1)
        #expect(retry.lastAttempt?.isCancelled == true)
        #expect(retry.errors.isEmpty)
    }

    @Test func cancelledDuringTheBackoff_stopsWaiting_andReportsTheFailureItWasWaitingToRetry() {
        let retry = RetryOperation(maxAttempts: 5, backoff: .fixed(3600)) { attempt in
            AsyncBlockOperation { throw StubError("\(attempt)") }
        }
        AsyncOperationQueue().addOperation(retry)
        #expect(waitUntil { retry.lastAttempt?.isFinished ?? false })

        // Whether this lands in the wait or just before the retry is decided, no attempt follows.
        retry.cancel()

        #expect(waitUntilFinished([retry])) // long before the hour is up
        #expect(retry.attemptCount == 1)
        #expect(retry.errors.compactMap { $0 as? StubError } == [StubError("1")])
    }

    @Test func cancelledWithAnError_recordsIt() {
        let started = Signal()
        let retry = RetryOperation(maxAttempts: 5) { _ in
            AsyncBlockOperation { _ in started.signal() }
        }
        AsyncOperationQueue().addOperation(retry)
        #expect(started.wait())
        retry.cancel(with: StubError("99"))
        #expect(throws: StubError("99")) { try retry.runAndWait() }
    }

    @Test func cancelledAtRandomMoments_alwaysFinishes_andNeverOverrunsItsAttempts() {
        for round in 0..<40 {
            let made = Counter()
            let retry = RetryOperation(maxAttempts: 4, backoff: .fixed(0.001)) { attempt in
                made.increment()
                return AsyncBlockOperation { finish in
                    DispatchQueue.global().async { finish(StubError("\(attempt)")) }
                }
            }
            AsyncOperationQueue().addOperation(retry)
            usleep(UInt32(round % 8) * 500)
            retry.cancel()
            #expect(waitUntilFinished([retry]))
            #expect(made.current <= 4)
            #expect(retry.lastAttempt.map { $0.isFinished } ?? true)
        }
    }

    // MARK: - With the engine

    @Test func attemptNeedingACategoryTheRetryHolds_failsAtOnce_insteadOfDeadlocking() {
        let category = uniqueName("category")
        let retry = RetryOperation(maxAttempts: 2) { _ in
            let attempt = AsyncBlockOperation {}
            attempt.addCondition(ExclusiveStub(category))
            return attempt
        }
        retry.addCondition(ExclusiveStub(category))
        #expect(throws: AsyncOperationError.self) { try retry.runAndWait() }
        #expect(retry.attemptCount == 2)
    }

    @Test func makeAttemptReturningAUsedOperation_cancelsTheRetry_withChildReused() {
        let only = AsyncBlockOperation { throw StubError("1") }
        only.name = "only"
        let retry = RetryOperation(maxAttempts: 3) { _ in only }
        retry.name = "retry"
        #expect(throws: AsyncOperationError.self) { try retry.runAndWait() }
        #expect(retry.attemptCount == 1)
        #expect(retry.isCancelled)
        let errors = retry.errors
        #expect(errors.count == 2)
        #expect(errors.compactMap { $0 as? AsyncOperationError } == [.childReused(composite: "retry", child: "only")])
        #expect(errors.compactMap { $0 as? StubError } == [StubError("1")])
    }

    @Test func makeAttemptReturningAUsedOperationFirst_failsWithoutRunningIt() {
        let used = AsyncBlockOperation {}
        AsyncOperationQueue().addOperations([used], waitUntilFinished: true)
        let retry = RetryOperation(maxAttempts: 3) { _ in used }
        #expect(throws: AsyncOperationError.childReused(composite: "RetryOperation<AsyncBlockOperation>", child: "AsyncBlockOperation")) {
            try retry.runAndWait()
        }
        #expect(retry.attemptCount == 0)
    }

    @Test func finishedRetry_releasesItsFactory_andIsReleasedWithItsAttempts() throws {
        var payload: Payload? = Payload()
        let payloadProbe = WeakProbe(payload!)
        var retry: RetryOperation<AsyncBlockOperation>? = RetryOperation(maxAttempts: 3) { [payload] attempt in
            AsyncBlockOperation {
                _ = payload
                if attempt < 2 { throw StubError("\(attempt)") }
            }
        }
        payload = nil
        try retry!.runAndWait()
        #expect(payloadProbe.isReleased())
        let retryProbe = WeakProbe(retry!)
        let attemptProbe = WeakProbe(retry!.lastAttempt!)
        retry = nil
        #expect(retryProbe.isReleased())
        #expect(attemptProbe.isReleased())
    }

    @Test func childrenAddedFromOutside_areRefusedClearly_andFinishCancelled() {
        // Given a retry operation (it makes its own attempts)
        let retry = RetryOperation(maxAttempts: 2) { _ in AsyncBlockOperation {} }
        retry.name = uniqueName("retry")
        let stranger = AsyncBlockOperation {}

        // When a child is added to it from outside, and its width is set
        retry.addChild(stranger)
        retry.maxConcurrentOperationCount = 4

        // Then both are reported and change nothing: the stranger finishes cancelled, unrun
        #expect(DiagnosticsLog.shared.kinds(about: retry.name!) == [.notSupported, .notSupported])
        #expect(retry.maxConcurrentOperationCount != 4)
        #expect(waitUntilFinished([stranger]))
        #expect(stranger.isCancelled)
        AsyncOperationQueue().addOperations([retry], waitUntilFinished: true)
        #expect(!retry.isFailed && retry.attemptCount == 1)
    }
}

@Suite struct BackoffPolicyTests {
    @Test func none_neverWaits() {
        #expect((1...5).map(BackoffPolicy.none.delay(beforeAttempt:)) == [0, 0, 0, 0, 0])
    }

    @Test func fixed_waitsTheSameBeforeEveryRetry_andNotBeforeTheFirstAttempt() {
        #expect((0...4).map(BackoffPolicy.fixed(2).delay(beforeAttempt:)) == [0, 0, 2, 2, 2])
    }

    @Test func exponential_growsByTheMultiplier_upToTheMaximum() {
        let policy = BackoffPolicy.exponential(initial: 0.5, multiplier: 2, maximum: 3)
        #expect((1...6).map(policy.delay(beforeAttempt:)) == [0, 0.5, 1, 2, 3, 3])
        let tripling = BackoffPolicy.exponential(initial: 1, multiplier: 3)
        #expect((2...4).map(tripling.delay(beforeAttempt:)) == [1, 3, 9])
    }

    @Test func exponential_farAlong_staysAtTheMaximum() {
        #expect(BackoffPolicy.exponential(initial: 1, maximum: 60).delay(beforeAttempt: 5_000) == 60)
    }

    @Test func jitter_shortensEachDelayByARandomPartOfTheFraction() {
        let base = BackoffPolicy.fixed(8)
        #expect(base.withJitter { 0 }.delay(beforeAttempt: 2) == 8)
        #expect(base.withJitter { 0.5 }.delay(beforeAttempt: 2) == 4)
        #expect(base.withJitter(0.5) { 0.5 }.delay(beforeAttempt: 2) == 6)
        #expect(base.withJitter(0.5) { 7 }.delay(beforeAttempt: 2) == 4) // out-of-range draws are clamped
        #expect(base.withJitter().delay(beforeAttempt: 1) == 0)
    }

    @Test func jitter_withTheSystemRandom_staysInRange() {
        let policy = BackoffPolicy.exponential(initial: 1, maximum: 10).withJitter(0.5)
        for attempt in 2...20 {
            let delay = policy.delay(beforeAttempt: attempt)
            let base = min(pow(2, Double(attempt - 2)), 10)
            #expect(delay >= base / 2 && delay <= base)
        }
    }

    @Test func nonsense_neverGivesANegativeDelay() {
        #expect(BackoffPolicy.fixed(-3).delay(beforeAttempt: 2) == 0)
        #expect(BackoffPolicy.fixed(.nan).delay(beforeAttempt: 2) == 0)
        #expect(BackoffPolicy.exponential(initial: -1).delay(beforeAttempt: 3) == 0)
    }
}
