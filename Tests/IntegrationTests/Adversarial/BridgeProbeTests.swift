import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// Adversarial probes of the bridges between operations and the rest of a program: async/await
// (`finished()`, `value`, `AsyncOperationQueue.run(_:)`, `AsyncTaskOperation`,
// `ResultTaskOperation`), blocking waits (`runAndWait(on:timeout:)`), retries and delays, typed
// chains, and the misuse table of the README seen through those bridges. Each test names the
// sentence it checks (README.md, Operations.docc/AsyncAwait.md and Composition.md, the `///`
// comments of the public API). Every wait is bounded; none asserts on wall-clock speed.

@Suite("Bridge probes")
struct BridgeProbeTests {
    // MARK: - Awaiting

    // AsyncOperation.finished(): "It returns once `isFinished` is true, at once if it already is;
    // any number of tasks may wait for the same operation." README, `.awaitedOffQueue` row: "If
    // the awaiting task is cancelled meanwhile, the wait ends at once with `CancellationError`" --
    // meanwhile, that is while it waits; an operation that has finished leaves nothing to wait for.
    @Test
    func finishedOperation_awaitedFromACancelledTask_givesItsOutcome_notCancellationError() async {
        // Given a result operation that finished with its output, and one that finished failing
        let queue = AsyncOperationQueue()
        let answer = ResultBlockOperation { 42 }
        let error = StubError("finished failing")
        let failed = AsyncBlockOperation { throw error }
        queue.addOperations([answer, failed], waitUntilFinished: false)
        #expect(await eventually { answer.isFinished && failed.isFinished })

        // When tasks that are already cancelled ask for their outcome
        let value = Task { () async throws -> Int in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await answer.value
        }
        let finish = Task { () async throws in
            withUnsafeCurrentTask { $0?.cancel() }
            try await failed.finished()
        }

        // Then each gets the outcome the operation finished with
        let valueOutcome = await boundedOutcome(of: value)
        let finishOutcome = await boundedOutcome(of: finish)
        #expect((try? valueOutcome?.get()) == 42, "\(String(describing: valueOutcome))")
        if case let .failure(thrown)? = finishOutcome {
            #expect(thrown as? StubError == error, "threw \(thrown) instead of the operation's error")
        } else {
            Issue.record("expected the operation's error, got \(String(describing: finishOutcome))")
        }
    }

    // AsyncOperation.finished(): "any number of tasks may wait for the same operation";
    // "Cancelling the waiting task cancels the operation"; "Throws ... `CancellationError` if it
    // was cancelled without an error." API.md 5: an `AsyncBlockOperation` "whose continuation has
    // not been called yet finishes at once; a late continuation call is ignored."
    @Test
    func oneOfManyWaitersCancelled_cancelsTheOperation_andEveryOtherWaitEndsWithCancellationError() async {
        // Given an operation waiting for its continuation, awaited by twenty tasks
        let held = HeldOperations()
        let name = uniqueName("awaited-by-many")
        let operation = held.make(name)
        AsyncOperationQueue().addOperation(operation)
        #expect(await eventually { held.startCount(name) == 1 })
        let others = (0..<19).map { _ in Task { try await operation.finished() } }
        let victim = Task { try await operation.finished() }
        try? await Task.sleep(nanoseconds: 50_000_000) // a chance for the waits to begin

        // When one of the waiting tasks is cancelled
        victim.cancel()

        // Then that wait ends with CancellationError, the operation finishes cancelled, and every
        // other wait ends the same way
        let victimOutcome = await boundedOutcome(of: victim)
        #expect(victimOutcome.map(isCancellationError) == true, "\(String(describing: victimOutcome))")
        #expect(await eventually { operation.isFinished })
        #expect(operation.isCancelled)
        for other in others {
            let outcome = await boundedOutcome(of: other)
            #expect(outcome.map(isCancellationError) == true, "\(String(describing: outcome))")
        }
        held.finish(name, with: StubError("late")) // a late continuation call changes nothing
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    // README: "`try await report.value.pages` // cancelling this task cancels `report`".
    // ResultTaskOperation: "cancelling the operation cancels the task, and the operation finishes
    // once the closure has returned or thrown". AsyncTaskOperation: "A `CancellationError` thrown
    // after the operation was cancelled is not recorded as an error." AsyncOperationQueue.run:
    // "Cancelling the task cancels the operation."
    @Test
    func cancellingTheTaskAwaitingQueueRun_cancelsTheTaskOperationsBody_andItFinishesWithoutErrors() async {
        // Given a task that runs and awaits an async operation sleeping for a long time
        let bodyStarted = Flag()
        let bodySawCancellation = Flag()
        let operation = ResultTaskOperation { () async throws -> Int in
            bodyStarted.raise()
            do {
                try await Task.sleep(nanoseconds: 600_000_000_000)
            } catch {
                bodySawCancellation.raise()
                throw error
            }
            return 1
        }
        let queue = AsyncOperationQueue()
        let waiting = Task { try await queue.run(operation) }
        #expect(await eventually { bodyStarted.isRaised })

        // When that task is cancelled
        waiting.cancel()

        // Then the wait throws CancellationError, the body saw the cancellation, and the operation
        // finished cancelled, without errors and without output
        let outcome = await boundedOutcome(of: waiting)
        #expect(outcome.map(isCancellationError) == true, "\(String(describing: outcome))")
        #expect(await eventually { operation.isFinished })
        #expect(bodySawCancellation.isRaised)
        #expect(operation.isCancelled)
        #expect(operation.errors.isEmpty, "\(operation.errors)")
        #expect(operation.output == nil)
    }

    // AsyncAwait.md: "Cancelling the operation cancels the task; the operation finishes when the
    // closure returns, so its categories are never freed while the closure still runs."
    // ResultOperation.value: "A cancelled operation throws `CancellationError` even if it produced
    // an output before it noticed; the answer is always the one `result` gives."
    @Test
    func taskOperationIgnoringCancellation_keepsItsCategoryUntilItsBodyReturns_andItsOutputCountsForNothing() async {
        // Given an async operation holding a category, whose body ignores cancellation, and an
        // operation waiting for that category
        let x = uniqueName("X")
        let gate = AsyncGate()
        let bodyStarted = Flag()
        let stubborn = ResultTaskOperation { () async -> Int in
            bodyStarted.raise()
            await gate.wait() // not woken by a cancellation
            return 7
        }
        stubborn.addCondition(ExclusiveCategory(x))
        let nextRan = Flag()
        let next = AsyncBlockOperation { nextRan.raise() }
        next.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperations([stubborn, next], waitUntilFinished: false)
        #expect(await eventually { bodyStarted.isRaised })

        // When a task awaiting it is cancelled, while its body goes on
        let cancelledWait = Task { try await stubborn.value }
        cancelledWait.cancel()
        let cancelledOutcome = await boundedOutcome(of: cancelledWait)
        #expect(cancelledOutcome.map(isCancellationError) == true, "\(String(describing: cancelledOutcome))")
        let patientWait = Task { try await stubborn.value }
        try? await Task.sleep(nanoseconds: 200_000_000) // a chance for a wrong release of the category

        // Then the category stays held (and the operation unfinished) until the body returns
        #expect(stubborn.isCancelled)
        #expect(!stubborn.isFinished, "finished while its body still ran")
        #expect(!nextRan.isRaised, "the category was freed while the closure still ran")
        gate.open()

        // and once it returned, the output it produced counts for nothing
        let patientOutcome = await boundedOutcome(of: patientWait)
        #expect(patientOutcome.map(isCancellationError) == true, "\(String(describing: patientOutcome))")
        if case let .failure(error)? = stubborn.result {
            #expect(error is CancellationError, "\(error)")
        } else {
            Issue.record("result: \(String(describing: stubborn.result))")
        }
        #expect(await eventually { nextRan.isRaised })
    }

    // API.md 6: `TimeoutObserver(timeout:)` "cancels the operation with a timeout error".
    // AsyncTaskOperation: cancelling it "cancels its task"; "A `CancellationError` thrown after
    // the operation was cancelled is not recorded as an error." finished(): "Throws: the
    // operation's only error as it is".
    @Test
    func timeoutObserverOnATaskOperation_cancelsItsTask_andTheTimeoutIsTheOnlyErrorAwaited() async {
        // Given an async operation that sleeps far longer than its timeout
        let operation = AsyncTaskOperation {
            try await Task.sleep(nanoseconds: 600_000_000_000)
        }
        operation.addObserver(TimeoutObserver(timeout: 0.2))

        // When it is run and awaited
        let queue = AsyncOperationQueue()
        let waiting = Task { try await queue.run(operation) }

        // Then the wait throws the timeout as it is, its only error
        let outcome = await boundedOutcome(of: waiting)
        if case let .failure(error)? = outcome {
            #expect(error as? AsyncOperationError == .timedOut(after: 0.2), "\(error)")
        } else {
            Issue.record("expected the timeout, got \(String(describing: outcome))")
        }
        #expect(operation.errors.asOperationErrors == [.timedOut(after: 0.2)], "\(operation.errors)")
    }

    // AsyncOperation.finished(): "An operation waiting on a plain Foundation `OperationQueue` is
    // invisible to the package: it is reported the same way, and the wait still ends when it
    // finishes there."
    @Test
    func awaitingAnOperationWaitingOnAPlainQueue_isReportedAsInvisible_andEndsWhenItFinishesThere() async {
        // Given an operation waiting on a suspended plain queue
        let plain = OperationQueue()
        plain.isSuspended = true
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        let name = uniqueName("on-a-plain-queue")
        operation.name = name
        plain.addOperation(operation)

        // When it is awaited for over a second
        let waiting = Task { try await operation.finished() }
        #expect(await eventually(timeout: 10) { DiagnosticsLog.shared.kinds(about: name).contains(.awaitedOffQueue) })

        // Then the report says the package cannot see a plain queue, and the wait ends once the
        // operation runs there
        let message = DiagnosticsLog.shared.diagnostics(about: name).first?.message ?? ""
        #expect(message.contains("no queue of this package") && message.contains("plain OperationQueue"), "\(message)")
        plain.isSuspended = false
        let outcome = await boundedOutcome(of: waiting)
        #expect(outcome.map { (try? $0.get()) != nil } == true, "\(String(describing: outcome))")
        #expect(ran.current == 1)
    }

    // MARK: - Blocking waits

    // AsyncAwait.md: "After `timeout` seconds it cancels the operation with
    // `waitTimedOut(operation:after:)` and throws that error." API.md 10: "A suspended queue ...
    // starts nothing." AsyncOperationQueue.cancelAllOperations(): one waiting for its turn on a
    // suspended queue "finishes without executing when the queue gets to it".
    @Test
    func runAndWaitOnASuspendedQueue_timesOut_andTheCancelledOperationNeverExecutes() {
        // Given a suspended queue
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        let name = uniqueName("on-a-suspended-queue")
        operation.name = name

        // When an operation is run and waited for there, with a timeout
        let expected = AsyncOperationError.waitTimedOut(operation: name, after: 0.3)
        #expect(throws: expected) { try operation.runAndWait(on: queue, timeout: 0.3) }

        // Then it was cancelled with the timeout, and once the queue resumes it finishes with that
        // error, without executing
        #expect(operation.isCancelled)
        queue.isSuspended = false
        #expect(waitUntilFinished([operation]))
        #expect(ran.current == 0)
        #expect(operation.errors.asOperationErrors == [expected], "\(operation.errors)")
    }

    // runAndWait(on:timeout:): "`AsyncOperationError.waitTimedOut` if it has not finished
    // `timeout` seconds after the call"; "The call returns once `isFinished` is true." AsyncAwait.md:
    // "an operation that is already on a queue is only waited for".
    @Test
    func runAndWaitWithANegativeTimeout_givesUpAtOnce_andWithZero_returnsAFinishedOperationsOutput() {
        // Given an operation that finishes only when told, and one that finished with an output
        let held = HeldOperations()
        let name = uniqueName("never-told")
        let stuck = held.make(name)
        AsyncOperationQueue().addOperation(stuck)
        #expect(held.waitUntilStarted(name))
        let answer = ResultBlockOperation { 5 }
        #expect((try? answer.runAndWait(timeout: 10)) == 5)

        // When each is waited for with no time at all
        // Then the unfinished one times out and is cancelled (finishing at once, its continuation
        // pending), and the finished one gives its output
        #expect(throws: AsyncOperationError.waitTimedOut(operation: name, after: -1)) {
            try stuck.runAndWait(timeout: -1)
        }
        #expect(waitUntilFinished([stuck]))
        #expect(stuck.isCancelled)
        #expect((try? answer.runAndWait(timeout: 0)) == 5)
    }

    // runAndWait(on:timeout:): "One that is already on a queue ... is not added again: the call
    // waits for it where it is"; "inside an operation of `queue` when every concurrency slot of
    // `queue` is held by an operation waiting like this" it throws `waitWouldDeadlock`, "before
    // anything is started". A plain operation on the queue is an operation of that queue.
    @Test
    func runAndWaitInsideAPlainOperationOfASerialQueue_forASiblingThere_throwsWaitWouldDeadlock_whateverQueueIsPassed() {
        // Given a serial queue running a plain operation, with an operation queued behind it
        let queue = AsyncOperationQueue()
        queue.name = uniqueName("serial")
        queue.maxConcurrentOperationCount = 1
        let siblingName = uniqueName("queued-sibling")
        let siblingRan = Counter()
        let sibling = AsyncBlockOperation { siblingRan.increment() }
        sibling.name = siblingName
        let other = AsyncOperationQueue()
        let thrown = Recorder<any Error>()
        let returned = Counter()
        let waiter = BlockOperation {
            // When the plain operation waits for the sibling, passing another queue
            do {
                try sibling.runAndWait(on: other, timeout: 10)
                returned.increment()
            } catch {
                thrown.append(error)
            }
        }
        queue.addOperations([waiter, sibling], waitUntilFinished: false)

        // Then the wait threw waitWouldDeadlock at once, and the sibling ran once, where it was
        #expect(waitUntilFinished([waiter, sibling]))
        #expect(returned.current == 0)
        if let error = thrown.all.first as? AsyncOperationError, case let .waitWouldDeadlock(operation, _) = error {
            #expect(operation == siblingName)
        } else {
            Issue.record("expected waitWouldDeadlock, got \(thrown.all)")
        }
        #expect(siblingRan.current == 1)
        #expect(sibling.errors.isEmpty && !sibling.isCancelled, "\(sibling.errors)")
        #expect(DiagnosticsLog.shared.kinds(about: siblingName).isEmpty)
    }

    // MARK: - Retry and delay

    // Composition.md: "Cancelling it stops the running attempt, or the wait, and makes no further
    // attempt." RetryOperation: "cancelled during a wait, its errors are those of the attempt that
    // was waiting to be retried". finished(): "Cancelling the waiting task cancels the operation".
    @Test
    func retryAwaitedFromATaskCancelledDuringItsBackoff_endsTheWait_andMakesNoOtherAttempt() async {
        // Given a retry whose first attempt failed and which now waits ten minutes to retry
        let error = StubError("attempt failed")
        let made = Counter()
        let retry = RetryOperation(maxAttempts: 3, backoff: .fixed(600)) { (_: Int) -> AsyncBlockOperation in
            made.increment()
            return AsyncBlockOperation { throw error }
        }
        AsyncOperationQueue().addOperation(retry)
        #expect(await eventually { retry.lastAttempt?.isFinished == true })

        // When a task awaiting it is cancelled
        let waiting = Task { try await retry.finished() }
        waiting.cancel()

        // Then the wait ends with CancellationError, the retry finishes well before the backoff
        // would end, with the failed attempt's error, and no other attempt is made
        let outcome = await boundedOutcome(of: waiting)
        #expect(outcome.map(isCancellationError) == true, "\(String(describing: outcome))")
        #expect(await eventually { retry.isFinished })
        #expect(retry.isCancelled)
        #expect(retry.errors.asStubErrors == [error], "\(retry.errors)")
        #expect(retry.attemptCount == 1)
        #expect(made.current == 1)
    }

    // BackoffPolicy.delay(beforeAttempt:): "Never negative". DelayOperation: "Zero, a negative
    // interval or NaN finishes at once". RetryOperation: "If every attempt fails, the retry
    // operation's errors are the last attempt's."
    @Test(arguments: [BackoffPolicy.fixed(-5), .exponential(initial: -1), .fixed(0)])
    func retryWithAZeroOrNegativeBackoff_makesEveryAttemptAtOnce(backoff: BackoffPolicy) {
        // Given a retry of three attempts that all fail
        let retry = RetryOperation(maxAttempts: 3, backoff: backoff) { (attempt: Int) -> AsyncBlockOperation in
            AsyncBlockOperation { throw StubError("attempt \(attempt)") }
        }

        // When it runs
        AsyncOperationQueue().addOperation(retry)

        // Then it made every attempt and fails as the last did
        #expect(waitUntilFinished([retry]))
        #expect(retry.attemptCount == 3)
        #expect(retry.errors.asStubErrors == [StubError("attempt 3")], "\(retry.errors)")
    }

    // RetryOperation: "The retry operation succeeds as soon as an attempt succeeds"; "Operations an
    // attempt produces are waited for and their errors kept, as in any group (API.md 7): work an
    // attempt hands off that fails still fails the retry operation."
    @Test
    func retryWhoseSucceedingAttemptProducedWork_waitsForIt_failsWithItsError_andMakesNoOtherAttempt() {
        // Given a retry whose first attempt hands off work and succeeds
        let held = HeldOperations()
        let producedName = uniqueName("handed-off")
        let retry = RetryOperation(maxAttempts: 3) { (attempt: Int) -> ClosureOperation in
            ClosureOperation(name: uniqueName("attempt-\(attempt)")) { operation in
                operation.produce(held.make(producedName))
                operation.finish()
            }
        }

        // When it runs, while the handed-off work still runs
        AsyncOperationQueue().addOperation(retry)
        #expect(held.waitUntilStarted(producedName))
        #expect(waitUntil { retry.lastAttempt?.isFinished == true })
        Thread.sleep(forTimeInterval: 0.1) // a chance to finish too early

        // Then the retry waits for it, and fails with its error, after one attempt
        #expect(!retry.isFinished, "finished before the work its attempt handed off")
        let error = StubError("handed-off work failed")
        held.finish(producedName, with: error)
        #expect(waitUntilFinished([retry]))
        #expect(retry.errors.asStubErrors == [error], "\(retry.errors)")
        #expect(retry.attemptCount == 1)
    }

    // DelayOperation: "Cancelled while it waits, it finishes at once". finished(): "Cancelling the
    // waiting task cancels the operation and ends the wait at once".
    @Test
    func delayAwaitedFromACancelledTask_endsTheWait_andFinishesWithoutErrors() async {
        // Given a delay of ten minutes that has started waiting
        let delay = DelayOperation(600)
        AsyncOperationQueue().addOperation(delay)
        #expect(await eventually { delay.isExecuting })

        // When a task awaiting it is cancelled
        let waiting = Task { try await delay.finished() }
        waiting.cancel()

        // Then the wait ends with CancellationError and the delay finishes cancelled, without errors
        let outcome = await boundedOutcome(of: waiting)
        #expect(outcome.map(isCancellationError) == true, "\(String(describing: outcome))")
        #expect(await eventually { delay.isFinished })
        #expect(delay.isCancelled)
        #expect(delay.errors.isEmpty, "\(delay.errors)")
    }

    // DelayOperation: "an infinite one [finishes] only when cancelled"; "Cancelled while it waits,
    // it finishes at once". AsyncAwait.md: "After `timeout` seconds it cancels the operation with
    // `waitTimedOut(operation:after:)` and throws that error."
    @Test
    func infiniteDelayWaitedForWithATimeout_throwsWaitTimedOut_andFinishesWithThatError() {
        // Given an infinite delay
        let delay = DelayOperation(.infinity)
        let name = uniqueName("endless-delay")
        delay.name = name

        // When it is run and waited for with a timeout
        let expected = AsyncOperationError.waitTimedOut(operation: name, after: 0.2)
        #expect(throws: expected) { try delay.runAndWait(timeout: 0.2) }

        // Then it finishes, with the timeout as its error
        #expect(waitUntilFinished([delay]))
        #expect(delay.isCancelled)
        #expect(delay.errors.asOperationErrors == [expected], "\(delay.errors)")
    }

    // MARK: - Typed chains

    // finished(): "Cancelling the waiting task cancels the operation"; "The operation finishes on
    // its own, promptly unless its `execute()` ignores cancellation or its queue is suspended".
    // API.md 5: cancelled before it starts, "it finishes without executing". Cancelling a link does
    // not touch the links before it.
    @Test
    func taskAwaitingAChainsTail_cancelledWhileTheHeadRuns_finishesTheTailAlone_andTheRestRuns() async {
        // Given a typed chain whose head is still running
        let gate = AsyncGate()
        let headStarted = Flag()
        let head = ResultTaskOperation { () async -> Int in
            headStarted.raise()
            await gate.wait()
            return 2
        }
        let middle = InputBlockOperation { (number: Int) in number * 10 }
        middle.takeInput(from: head)
        let tailRan = Flag()
        let tail = InputBlockOperation { (number: Int) -> String in
            tailRan.raise()
            return "\(number)"
        }
        tail.takeInput(from: middle)
        AsyncOperationQueue().addChain([head, middle, tail])
        #expect(await eventually { headStarted.isRaised })

        // When a task awaiting the tail is cancelled
        let waiting = Task { try await tail.value }
        waiting.cancel()

        // Then the wait ends, and the tail finishes cancelled without executing while the head
        // still runs
        let outcome = await boundedOutcome(of: waiting)
        #expect(outcome.map(isCancellationError) == true, "\(String(describing: outcome))")
        #expect(await eventually { tail.isFinished })
        #expect(!head.isFinished)
        #expect(tail.isCancelled && tail.errors.isEmpty, "\(tail.errors)")

        // and the links before it run as usual
        gate.open()
        #expect(await eventually { middle.isFinished })
        #expect(middle.output == 20)
        #expect(!head.isCancelled && !middle.isCancelled)
        #expect(!tailRan.isRaised)
    }

    // InputOperation: "If the upstream failed or was cancelled, this operation finishes without
    // executing, with `AsyncOperationError.upstreamFailed` or `.upstreamCancelled`". ResultOperation:
    // `result` "counts a cancellation or an error as a failure even when a value was produced".
    @Test
    func upstreamCancelledAfterProducingItsOutput_stopsTheInputOperation_withUpstreamCancelled() {
        // Given an upstream that is cancelled as it runs, and produces its output anyway
        let upstreamName = uniqueName("cancelled-producer")
        let upstream = ClosureResultOperation<Int>(name: upstreamName) { operation in
            operation.cancel()
            operation.finish(producing: 5)
        }
        let ran = Counter()
        let downstreamName = uniqueName("consumer")
        let downstream = InputBlockOperation { (number: Int) -> Int in
            ran.increment()
            return number
        }
        downstream.name = downstreamName
        downstream.takeInput(from: upstream)

        // When they run as a chain
        AsyncOperationQueue().addChain([upstream, downstream])

        // Then the downstream did not run, and says the upstream was cancelled, once
        #expect(waitUntilFinished([upstream, downstream]))
        #expect(ran.current == 0)
        #expect(downstream.input == nil)
        #expect(downstream.errors.asOperationErrors == [.upstreamCancelled(operation: downstreamName, upstream: upstreamName)],
                "\(downstream.errors)")
    }

    // README: `greet.takeInput(from: fetch)` then `queue.addChain([fetch, greet, report])`.
    // Composition.md: "An `AsyncOperation` whose predecessor failed or was cancelled finishes
    // without executing, with `upstreamFailed(operation:upstream:reason:)`". ResultOperation.value:
    // "Throws: what `finished()` throws", which is "the operation's only error as it is".
    @Test
    func takeInputAndAddChainTogether_giveOneUpstreamFailedError_thatValueThrowsAsItIs() async {
        // Given the README's chain, whose first link fails
        let fetchName = uniqueName("fetch")
        let fetch = ResultBlockOperation<Int> { throw StubError("offline") }
        fetch.name = fetchName
        let greetName = uniqueName("greet")
        let greet = InputBlockOperation { (id: Int) in "Hello, \(id)" }
        greet.name = greetName
        greet.takeInput(from: fetch)
        let reported = Flag()
        let report = BlockOperation { reported.raise() }

        // When it runs and the greeting is awaited
        AsyncOperationQueue().addChain([fetch, greet, report])
        let waiting = Task { try await greet.value }

        // Then the wait throws the one upstreamFailed error naming the failed link, as it is
        let outcome = await boundedOutcome(of: waiting)
        if case let .failure(error)? = outcome,
           case let .upstreamFailed(operation, upstream, reason)? = error as? AsyncOperationError {
            #expect(operation == greetName)
            #expect(upstream == fetchName)
            #expect(reason.contains("offline"), "\(reason)")
        } else {
            Issue.record("expected upstreamFailed, got \(String(describing: outcome))")
        }
        #expect(greet.errors.count == 1, "\(greet.errors)")
        #expect(await eventually { reported.isRaised })
    }

    // MARK: - Misuse, through the bridges

    // README, `.addedTwice`: "the second add is ignored; the operation runs once; the message names
    // the queue it is on and the one that refused it." AsyncOperationQueue.run: "Adds `operation`
    // and waits ... until it has finished". OperationDiagnostic.queueNames: "the queue the operation
    // is on ..., then, for an add that was refused, the queue that refused it."
    @Test
    func queueRunOfAnOperationRunningOnAnotherQueue_reportsAddedTwice_andReturnsOnceItFinishesThere() async {
        // Given an operation running on one queue
        let held = HeldOperations()
        let name = uniqueName("running-elsewhere")
        let operation = held.make(name)
        let home = AsyncOperationQueue()
        home.name = uniqueName("home")
        home.addOperation(operation)
        #expect(await eventually { held.startCount(name) == 1 })

        // When another queue runs it
        let other = AsyncOperationQueue()
        other.name = uniqueName("other")
        let waiting = Task { try await other.run(operation) }

        // Then the add is reported naming both queues, and the wait ends once it finished there
        #expect(await eventually { DiagnosticsLog.shared.kinds(about: name).contains(.addedTwice) })
        #expect(DiagnosticsLog.shared.diagnostics(about: name).first?.queueNames == [home.name!, other.name!])
        try? await Task.sleep(nanoseconds: 50_000_000)
        #expect(!operation.isFinished)
        held.finish(name)
        let outcome = await boundedOutcome(of: waiting)
        #expect(outcome.map { (try? $0.get()) != nil } == true, "\(String(describing: outcome))")
        #expect(held.startCount(name) == 1)
    }

    // README, `.addedAfterFinishing`: "adding a finished or executing operation ... ignored".
    // AsyncOperationQueue.run: "throws its errors as `AsyncOperation.finished()` does", which
    // "returns once `isFinished` is true, at once if it already is".
    @Test
    func queueRunOfAFinishedOperation_reportsAddedAfterFinishing_andGivesItsOutcomeAtOnce() async {
        // Given two result operations that finished, one with an output and one failing
        let queue = AsyncOperationQueue()
        let answerName = uniqueName("finished-answer")
        let answer = ResultBlockOperation { 42 }
        answer.name = answerName
        let error = StubError("finished failing")
        let failed = ResultBlockOperation<Int> { throw error }
        queue.addOperations([answer, failed], waitUntilFinished: false)
        #expect(await eventually { answer.isFinished && failed.isFinished })

        // When another queue runs them
        let other = AsyncOperationQueue()
        let answerRun = Task { try await other.run(answer) }
        let failedRun = Task { try await other.run(failed) }

        // Then each gives the outcome it finished with, and the add is reported
        let answerOutcome = await boundedOutcome(of: answerRun)
        let failedOutcome = await boundedOutcome(of: failedRun)
        #expect((try? answerOutcome?.get()) == 42, "\(String(describing: answerOutcome))")
        if case let .failure(thrown)? = failedOutcome {
            #expect(thrown as? StubError == error, "\(thrown)")
        } else {
            Issue.record("expected the operation's error, got \(String(describing: failedOutcome))")
        }
        #expect(DiagnosticsLog.shared.kinds(about: answerName) == [.addedAfterFinishing])
    }

    // README, `.conditionNeverAnswered`: "the operation fails with
    // `AsyncOperationError.conditionNeverAnswered`". finished(): "Throws: the operation's only
    // error as it is".
    @Test
    func conditionDroppingItsCompletion_failsTheRunOperation_withConditionNeverAnswered() async {
        // Given an operation whose condition drops its completion handler
        let conditionName = uniqueName("Dropper")
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        let name = uniqueName("dropped")
        operation.name = name
        operation.addCondition(StubCondition(name: conditionName) { _, _ in })

        // When it is run and awaited
        let queue = AsyncOperationQueue()
        let waiting = Task { try await queue.run(operation) }

        // Then the wait throws conditionNeverAnswered as it is, and it never executed
        let outcome = await boundedOutcome(of: waiting)
        if case let .failure(error)? = outcome {
            #expect(error as? AsyncOperationError == .conditionNeverAnswered(condition: conditionName), "\(error)")
        } else {
            Issue.record("expected conditionNeverAnswered, got \(String(describing: outcome))")
        }
        #expect(ran.current == 0)
        #expect(DiagnosticsLog.shared.kinds(about: name).contains(.conditionNeverAnswered))
    }

    // README, `.conditionTimedOut`: "after the queue's `conditionEvaluationTimeout` ... the
    // operation fails with `AsyncOperationError.conditionTimedOut`". runAndWait: "Throws: the
    // operation's only error as it is".
    @Test
    func conditionThatNeverAnswers_failsRunAndWait_withConditionTimedOut_afterTheQueuesTimeout() {
        // Given a queue that gives conditions 0.2 s, and a condition that holds its completion
        let queue = AsyncOperationQueue()
        queue.conditionEvaluationTimeout = 0.2
        let answer = HeldCallback<ConditionResult>()
        let conditionName = uniqueName("Silent")
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        let name = uniqueName("unanswered")
        operation.name = name
        operation.addCondition(StubCondition(name: conditionName) { _, completion in answer.hold(completion) })

        // When it is run and waited for, with a far longer wait
        // Then the wait throws conditionTimedOut as it is, and a late answer changes nothing
        #expect(throws: AsyncOperationError.conditionTimedOut(condition: conditionName, after: 0.2)) {
            try operation.runAndWait(on: queue, timeout: 10)
        }
        answer.call(.satisfied)
        Thread.sleep(forTimeInterval: 0.05)
        #expect(ran.current == 0)
        #expect(operation.errors.count == 1, "\(operation.errors)")
        #expect(DiagnosticsLog.shared.kinds(about: name).contains(.conditionTimedOut))
    }

    // README, `.dependencyCycle`: "the operation that closes the cycle (with `addDependency` ...)
    // finishes with `AsyncOperationError.dependencyCycle` when queued, so the rest runs instead of
    // hanging". AsyncOperationQueue.run: "throws its errors as `AsyncOperation.finished()` does".
    @Test
    func dependencyCycle_theOperationClosingItThrowsDependencyCycleWhenRun_andTheOtherRuns() async {
        // Given two operations that depend on each other, the second closing the cycle
        let ran = Recorder<String>()
        let firstName = uniqueName("first")
        let first = AsyncBlockOperation { ran.append("first") }
        first.name = firstName
        let closerName = uniqueName("closer")
        let closer = AsyncBlockOperation { ran.append("closer") }
        closer.name = closerName
        first.addDependency(closer)
        closer.addDependency(first)

        // When both are queued, the closer through run
        let queue = AsyncOperationQueue()
        queue.addOperation(first)
        let closerRun = Task { try await queue.run(closer) }
        let firstWait = Task { try await first.finished() }

        // Then the closer's wait throws dependencyCycle, it never ran, and the other ran
        let closerOutcome = await boundedOutcome(of: closerRun)
        if case let .failure(error)? = closerOutcome {
            #expect(error as? AsyncOperationError == .dependencyCycle(operation: closerName, dependency: firstName), "\(error)")
        } else {
            Issue.record("expected dependencyCycle, got \(String(describing: closerOutcome))")
        }
        let firstOutcome = await boundedOutcome(of: firstWait)
        #expect(firstOutcome.map { (try? $0.get()) != nil } == true, "\(String(describing: firstOutcome))")
        #expect(ran.all == ["first"])
        #expect(DiagnosticsLog.shared.kinds(about: closerName).contains(.dependencyCycle))
    }
}

// MARK: - Support

/// Holds the async closures that wait on it until the test opens it. Deliberately deaf to task
/// cancellation: it stands for a body that ignores cancellation.
private final class AsyncGate: @unchecked Sendable {
    // @unchecked Sendable: `isOpen` and `waiters` are only touched while holding `lock`.
    private let lock = NSLock()
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        await withCheckedContinuation { continuation in
            enqueue(continuation)
        }
    }

    func open() {
        lock.lock()
        isOpen = true
        let waiting = waiters
        waiters = []
        lock.unlock()
        waiting.forEach { $0.resume() }
    }

    private func enqueue(_ continuation: CheckedContinuation<Void, Never>) {
        lock.lock()
        if isOpen {
            lock.unlock()
            continuation.resume()
            return
        }
        waiters.append(continuation)
        lock.unlock()
    }
}


