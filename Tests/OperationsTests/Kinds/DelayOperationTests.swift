import Foundation
import Operations
import Testing
import TestSupport

/// Seconds on a clock that never jumps.
private func uptime() -> TimeInterval {
    TimeInterval(DispatchTime.now().uptimeNanoseconds) / 1e9
}

/// Records when the observed operation finished.
private struct FinishOrder: OperationObserver {
    let order: Recorder<String>
    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        order.append("\(operation.name ?? "?") finished")
    }
}

@Suite struct DelayOperationTests {
    @Test func finishesAfterTheInterval_notBefore() throws {
        let start = uptime()
        try DelayOperation(0.2).runAndWait()
        #expect(uptime() - start >= 0.19)
    }

    @Test func untilAFutureDate_finishesNotBeforeIt() throws {
        let start = uptime()
        try DelayOperation(until: Date().addingTimeInterval(0.2)).runAndWait()
        #expect(uptime() - start >= 0.15) // the wall clock and the uptime clock may drift apart a little
    }

    @Test(arguments: [0, -1, .nan] as [TimeInterval])
    func nothingToWaitFor_finishesWithoutError(interval: TimeInterval) throws {
        let delay = DelayOperation(interval)
        try delay.runAndWait()
        #expect(!delay.isCancelled && !delay.isFailed)
    }

    @Test func untilAPastDate_finishesWithoutError() throws {
        let delay = DelayOperation(until: Date().addingTimeInterval(-60))
        try delay.runAndWait()
        #expect(!delay.isFailed)
    }

    @Test func holdsBackItsDependents() throws {
        let order = Recorder<String>()
        let delay = DelayOperation(0.05)
        delay.name = "delay"
        delay.addObserver(FinishOrder(order: order))
        let next = AsyncBlockOperation { order.append("next ran") }
        next.addDependency(delay)
        AsyncOperationQueue().addOperation(delay)
        try next.runAndWait()
        #expect(order.all == ["delay finished", "next ran"])
    }

    @Test func cancelledWhileWaiting_finishesAtOnce() {
        let delay = DelayOperation(3600)
        AsyncOperationQueue().addOperation(delay)
        #expect(waitUntil { delay.isExecuting })

        delay.cancel()

        #expect(waitUntilFinished([delay])) // long before the hour is up
        #expect(delay.isCancelled && delay.errors.isEmpty)
    }

    @Test func cancelledWithAnError_recordsIt() {
        let delay = DelayOperation(3600)
        AsyncOperationQueue().addOperation(delay)
        #expect(waitUntil { delay.isExecuting })
        delay.cancel(with: StubError("1"))
        #expect(throws: StubError("1")) { try delay.runAndWait() }
    }

    @Test func cancelledBeforeItStarts_neverWaits() {
        let delay = DelayOperation(3600)
        delay.cancel()
        #expect(throws: CancellationError.self) { try delay.runAndWait() }
    }

    @Test func infiniteDelay_endsOnlyWhenCancelled() {
        let delay = DelayOperation(.infinity)
        AsyncOperationQueue().addOperation(delay)
        #expect(waitUntil { delay.isExecuting })
        usleep(50_000)
        #expect(!delay.isFinished)
        delay.cancel()
        #expect(waitUntilFinished([delay]))
    }

    @Test func cancelledDelay_isReleased_thoughItsDeadlineIsFarAway() {
        var delay: DelayOperation? = DelayOperation(3600)
        let probe = WeakProbe(delay!)
        AsyncOperationQueue().addOperation(delay!)
        #expect(waitUntil { probe.object?.isExecuting ?? false })
        delay!.cancel()
        #expect(waitUntilFinished([delay!]))
        delay = nil
        #expect(probe.isReleased())
    }

    @Test func finishedDelay_isReleased() throws {
        var delay: DelayOperation? = DelayOperation(0.01)
        let probe = WeakProbe(delay!)
        try delay!.runAndWait()
        delay = nil
        #expect(probe.isReleased())
    }

    @Test func manyDelaysCancelledAtRandomMoments_allFinishOnce() {
        let finishes = Counter()
        let queue = AsyncOperationQueue()
        let delays = (0..<200).map { index -> DelayOperation in
            let delay = DelayOperation(Double(index % 5) * 0.002)
            delay.addObserver(CountFinishes(counter: finishes))
            return delay
        }
        queue.addOperations(delays, waitUntilFinished: false)
        for delay in delays.shuffled().prefix(100) {
            delay.cancel()
        }
        #expect(waitUntilFinished(delays))
        #expect(finishes.current == 200)
    }
}

private struct CountFinishes: OperationObserver {
    let counter: Counter
    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        counter.increment()
    }
}
