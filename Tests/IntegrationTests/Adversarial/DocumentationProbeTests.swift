import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// Adversarial probes of prose claims in the DocC articles (Composition, AsyncAwait,
// ObserversAndTimeouts, ConditionsAndMutualExclusion, RunningOperationsInAService) that no
// earlier test checks, each at an edge: cancellation while it is being announced, timeouts of
// nested composites, retries and delays cancelled through their progress or a timeout, awaits
// cancelled before an add, observers added from `operationDidCancel`, blocks that block their
// thread. (The probes that found breaks, of composites and of DebuggingAQueue's stall reports,
// are in `BreakProbeTests5`.) Every wait for something that must happen is bounded; nothing
// asserts on wall-clock speed.

@Suite("Documentation probes")
struct DocumentationProbeTests {
    // MARK: - ConditionsAndMutualExclusion.md

    // ConditionsAndMutualExclusion.md:54-55: "The queue evaluates a condition on the thread that
    // made the operation ready (the one that added it, or the one that finished its last
    // dependency)".
    @Test
    func conditionIsEvaluatedOnTheThreadThatMadeTheOperationReady_theOneThatAddedIt_orFinishedItsLastDependency() {
        let marker = "OperationsProbe5.threadMarker"
        let queue = AsyncOperationQueue()
        let seen = Recorder<String>()
        func conditioned(_ label: String) -> AsyncBlockOperation {
            let operation = AsyncBlockOperation {}
            operation.addCondition(StubCondition(name: "ReadsItsThread") { _, completion in
                seen.append("\(label): \(Thread.current.threadDictionary[marker] as? String ?? "another thread")")
                completion(.satisfied)
            })
            return operation
        }

        // Given an operation added from a thread of the test's own
        let added = conditioned("added")
        let adder = runOnOwnThread {
            Thread.current.threadDictionary[marker] = "the adding thread"
            queue.addOperation(added)
        }
        #expect(adder.wait(timeout: 10))
        #expect(waitUntilFinished([added], timeout: 10))

        // and one whose last dependency is finished from another thread of the test's own
        let gate = HeldCallback<(any Error)?>()
        let dependency = AsyncBlockOperation { finish in gate.hold(finish) }
        let dependent = conditioned("dependent")
        dependent.addDependency(dependency)
        queue.addOperations([dependency, dependent], waitUntilFinished: false)
        #expect(gate.waitUntilHeld())
        let finisher = runOnOwnThread {
            Thread.current.threadDictionary[marker] = "the finishing thread"
            gate.call(nil)
        }
        #expect(finisher.wait(timeout: 10))
        #expect(waitUntilFinished([dependent], timeout: 10))

        // Then each condition was evaluated on that thread
        #expect(seen.all == ["added: the adding thread", "dependent: the finishing thread"], "\(seen.all)")
    }

    // MARK: - Composition.md

    // Composition.md:73-76: neither handler is called when the composite is cancelled "by ... a
    // timeout"; Composition.md:94-96: an inner composite "that gives up is a failed child of the
    // outer one, whose handler can run a new inner composite from its factory". ObserversAndTimeouts.md:63:
    // the timeout cancels "with timedOut(after:)".
    @Test
    func innerCompositeStoppedByItsTimeout_isAFailedChildOfTheOuter_whoseRerunBuildsANewOne_andTheInnerHandlerIsNeverCalled() {
        // Given a cascade whose first step is a transaction that, on its first attempt, runs a
        // child until told and has a short timeout; its own handler would carry on
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let stuckName = uniqueName("stuck")
        let innerAttempts = Counter()
        let innerHandlerCalls = Counter()
        let outerFailures = Recorder<CompositeFailure>()
        let log = Recorder<String>()
        let outer = CascadeOperation { steps in
            steps.add {
                let attempt = innerAttempts.increment()
                let inner = TransactionOperation { parts in
                    parts.add { attempt == 1 ? held.make(stuckName) : AsyncBlockOperation { log.append("gathered") } }
                } cancellation: { _ in
                    innerHandlerCalls.increment()
                    return .carryOn
                }
                if attempt == 1 {
                    inner.addObserver(TimeoutObserver(timeout: 0.3))
                }
                return inner
            }
            steps.add { AsyncBlockOperation { log.append("render") } }
        } cancellation: { failure in
            outerFailures.append(failure)
            return failure.index == 0 && failure.attempt == 1 ? .rerun : .cancel
        }

        // When it runs
        queue.addOperation(outer)

        // Then the first inner transaction is stopped by its timeout without its handler hearing
        // anything; the outer handler hears it once as a cancelled child with the timeout, and
        // its rerun gathers and renders
        #expect(waitUntilFinished([outer], timeout: 20))
        #expect(innerHandlerCalls.current == 0, "the inner handler was called \(innerHandlerCalls.current) time(s)")
        let failures = outerFailures.all
        #expect(failures.count == 1, "\(failures.map { "\($0.index)/\($0.attempt): \($0.errors)" })")
        if let failure = failures.first {
            #expect(failure.index == 0 && failure.attempt == 1 && failure.isCancelled)
            #expect(failure.errors.asOperationErrors.contains(.timedOut(after: 0.3)), "\(failure.errors)")
        }
        #expect(innerAttempts.current == 2)
        #expect(log.all == ["gathered", "render"], "\(log.all)")
        #expect(outer.errors.isEmpty && !outer.isCancelled, "\(outer.errors)")
        #expect(held.startCount(stuckName) == 1)
    }

    // Composition.md:36-37: cascades and transactions "are GroupOperations: add them to a queue,
    // observe them, give them conditions and dependencies"; API.md 1: if a condition fails,
    // `execute()` is never called and the operation finishes with one error per failed condition;
    // Composition.md:54-55: the factory "is called when the child is due to run".
    @Test
    func compositesWhoseConditionFails_buildNoChild_callNeitherHandler_andFinishWithTheConditionsError() {
        // Given a cascade with a failing condition, and a transaction whose dependency failed and
        // which needs its dependencies to succeed, each with counting factories and handlers
        let queue = AsyncOperationQueue()
        let factoryCalls = Counter()
        let handlerCalls = Counter()
        let completionCalls = Counter()
        let conditionError = StubError("not now")
        let cascade = CascadeOperation { steps in
            steps.add {
                factoryCalls.increment()
                return AsyncBlockOperation {}
            }
        } completion: {
            completionCalls.increment()
        } cancellation: { _ in
            handlerCalls.increment()
            return .carryOn
        }
        cascade.addCondition(StubCondition.failing(conditionError))
        let cascadeLog = EventLogObserver()
        cascade.addObserver(cascadeLog)
        let failing = AsyncBlockOperation { throw StubError("upstream") }
        let transaction = TransactionOperation { parts in
            parts.add {
                factoryCalls.increment()
                return AsyncBlockOperation {}
            }
        } completion: {
            completionCalls.increment()
        } cancellation: { _ in
            handlerCalls.increment()
            return .carryOn
        }
        transaction.addDependency(failing)
        transaction.addCondition(NoFailedDependencies())

        // When they are added
        queue.addOperations([cascade, failing, transaction], waitUntilFinished: false)

        // Then each finishes with its condition's error alone, without building a child
        #expect(waitUntilFinished([cascade, failing, transaction], timeout: 10))
        #expect(cascade.errors.asStubErrors == [conditionError], "\(cascade.errors)")
        #expect(transaction.errors.count == 1 && transaction.isFailed, "\(transaction.errors)")
        #expect(factoryCalls.current == 0 && handlerCalls.current == 0 && completionCalls.current == 0)
        #expect(cascadeLog.log.all == ["didFinish"], "\(cascadeLog.log.all)")
    }

    // Composition.md:67: `.rerun(after:)`: "the same, after a delay; cancelling the composite
    // meanwhile ends the wait". DebuggingAQueue.md:52-54: GroupOperation "(and so the cascades,
    // transactions and retries) reports `progress` ..., and cancelling the progress cancels the
    // group". Composition.md:73-76: no handler once it is cancelled.
    @Test
    func cascadeWhoseProgressIsCancelledDuringARerunDelay_endsTheWait_withoutAnotherAttemptOrHandlerCall() {
        // Given a cascade whose only child fails, with a handler that asks for a rerun after a
        // long delay
        let queue = AsyncOperationQueue()
        let attempts = Counter()
        let handlerCalls = Counter()
        let error = StubError("busy")
        let cascade = CascadeOperation { steps in
            steps.add {
                attempts.increment()
                return AsyncBlockOperation { throw error }
            }
        } cancellation: { _ in
            handlerCalls.increment()
            return .rerun(after: 1_000)
        }
        queue.addOperation(cascade)
        #expect(waitUntil { handlerCalls.current == 1 })
        Thread.sleep(forTimeInterval: 0.1) // the wait begins

        // When its progress is cancelled during the delay
        cascade.progress.cancel()

        // Then it finishes cancelled, with no other attempt and no other handler call
        #expect(waitUntilFinished([cascade], timeout: 10), "the rerun delay was not ended")
        #expect(cascade.isCancelled)
        Thread.sleep(forTimeInterval: 0.1)
        #expect(attempts.current == 1 && handlerCalls.current == 1, "\(attempts.current) attempts, \(handlerCalls.current) handler calls")
    }

    // Composition.md:183-184: "Cancelling it stops the running attempt, or the wait, and makes no
    // further attempt." DebuggingAQueue.md:52-54: retries report `progress`, "and cancelling the
    // progress cancels the group". RetryOperation: "cancelled during a wait, its errors are those
    // of the attempt that was waiting to be retried".
    @Test
    func retryWhoseProgressIsCancelledDuringTheBackoff_endsTheWait_andMakesNoOtherAttempt() {
        // Given a retry whose attempts fail, with a long backoff
        let queue = AsyncOperationQueue()
        let attempts = Counter()
        let error = StubError("busy")
        let retry = RetryOperation(maxAttempts: 5, backoff: .fixed(1_000)) { _ in
            attempts.increment()
            return AsyncBlockOperation { throw error }
        }
        queue.addOperation(retry)
        #expect(waitUntil { retry.lastAttempt?.isFinished == true })
        Thread.sleep(forTimeInterval: 0.1) // the backoff begins

        // When its progress is cancelled during the backoff
        retry.progress.cancel()

        // Then it finishes cancelled at once, with the waiting attempt's error, and no other attempt
        #expect(waitUntilFinished([retry], timeout: 10), "the backoff was not ended")
        #expect(retry.isCancelled)
        #expect(retry.errors.asStubErrors == [error], "\(retry.errors)")
        Thread.sleep(forTimeInterval: 0.1)
        #expect(attempts.current == 1)
    }

    // Composition.md:183-184: cancelling a retry "stops the running attempt, or the wait, and
    // makes no further attempt". ObserversAndTimeouts.md:63-64: `TimeoutObserver(timeout:)` cancels
    // the operation with `timedOut(after:)` "if it has not finished that many seconds after it
    // started". API.md 7: a group's errors hold every child's errors and its own.
    @Test
    func retryStoppedByItsTimeoutDuringTheBackoff_finishesPromptly_withTheTimeoutAndTheAttemptsError_andNoOtherAttempt() {
        // Given a retry whose attempts fail, with a long backoff and a short timeout
        let queue = AsyncOperationQueue()
        let attempts = Counter()
        let error = StubError("busy")
        let retry = RetryOperation(maxAttempts: 5, backoff: .fixed(1_000)) { _ in
            attempts.increment()
            return AsyncBlockOperation { throw error }
        }
        retry.addObserver(TimeoutObserver(timeout: 0.3))

        // When it runs
        queue.addOperation(retry)

        // Then its timeout ends the backoff: it finishes with the attempt's error and the timeout
        #expect(waitUntilFinished([retry], timeout: 10), "the timeout did not end the backoff")
        #expect(retry.isCancelled)
        #expect(retry.errors.asStubErrors.contains(error), "\(retry.errors)")
        #expect(retry.errors.asOperationErrors.contains(.timedOut(after: 0.3)), "\(retry.errors)")
        Thread.sleep(forTimeInterval: 0.1)
        #expect(attempts.current == 1)
    }

    // Composition.md:186-187: "`DelayOperation(seconds)` and `DelayOperation(until: date)` finish
    // after the delay, at once when cancelled, and hold nothing once finished." Composition.md:18:
    // cancelling a group "cancels the children and still waits for them". ObserversAndTimeouts.md:63.
    @Test
    func groupStoppedByItsTimeout_cancelsItsDelays_whichFinishAtOnce_andNothingIsLeftAlive() {
        // Given a group of two long delays, one counted from its start and one until a date, with
        // a short timeout
        let queue = AsyncOperationQueue()
        func run() -> (group: WeakProbe<GroupOperation>, delays: [WeakProbe<DelayOperation>], errors: [any Error], cancelled: [Bool]) {
            let interval = DelayOperation(1_000)
            let date = DelayOperation(until: Date().addingTimeInterval(1_000))
            let group = GroupOperation(operations: [interval, date])
            group.addObserver(TimeoutObserver(timeout: 0.3))
            queue.addOperation(group)
            _ = waitUntilFinished([group, interval, date], timeout: 10)
            return (WeakProbe(group), [WeakProbe(interval), WeakProbe(date)], group.errors, [group.isFinished, interval.isFinished, date.isFinished, interval.isCancelled, date.isCancelled])
        }

        // When it runs
        let outcome = run()

        // Then the timeout finished it and both delays at once, and nothing of them stays alive
        #expect(outcome.cancelled == [true, true, true, true, true], "\(outcome.cancelled)")
        #expect(outcome.errors.asOperationErrors == [.timedOut(after: 0.3)], "\(outcome.errors)")
        #expect(outcome.group.isReleased(timeout: 10))
        #expect(outcome.delays.allSatisfy { $0.isReleased(timeout: 10) })
    }

    // Composition.md:112: "Cancelling a composite cancels its running children, nested composites
    // included." Composition.md:18: a group "still waits for them". Composition.md:73-76: neither
    // handler is called when a composite is cancelled by an enclosing composite or group.
    @Test
    func cancellingAGroupAroundNestedComposites_reachesTheInnermostRunningChild_andNoHandlerIsCalled() {
        // Given a plain group around a transaction around a cascade whose child runs until told
        // and ignores cancellation until then
        let queue = AsyncOperationQueue()
        let innermostCancelled = Flag()
        let release = HeldCallback<Void>()
        let innermost = ClosureOperation { operation in
            release.hold { _ in operation.finish() }
        }
        let handlerCalls = Counter()
        let completionCalls = Counter()
        let cascade = CascadeOperation { steps in
            steps.add { innermost }
        } completion: {
            completionCalls.increment()
        } cancellation: { _ in
            handlerCalls.increment()
            return .carryOn
        }
        let transaction = TransactionOperation { parts in
            parts.add { cascade }
        } completion: {
            completionCalls.increment()
        } cancellation: { _ in
            handlerCalls.increment()
            return .carryOn
        }
        innermost.addObserver(CancelledObserver { _ in innermostCancelled.raise() })
        let group = GroupOperation(operations: [transaction])
        queue.addOperation(group)
        #expect(release.waitUntilHeld())

        // When the group is cancelled
        group.cancel()

        // Then the innermost child hears the cancel, and everything waits for it
        #expect(waitUntil(timeout: 10) { innermostCancelled.isRaised })
        Thread.sleep(forTimeInterval: 0.1)
        #expect(!group.isFinished && !transaction.isFinished && !cascade.isFinished)
        release.call(())

        // and, once it finished, everything finishes cancelled, with no handler called
        #expect(waitUntilFinished([group, transaction, cascade, innermost], timeout: 10))
        #expect(group.isCancelled && transaction.isCancelled && cascade.isCancelled)
        #expect(handlerCalls.current == 0 && completionCalls.current == 0)
    }

    // Composition.md:183-184: "Cancelling it stops the running attempt, or the wait, and makes no
    // further attempt." RetryOperation: an attempt "is retried if attempts remain, the retry
    // operation has not been cancelled, and ...".
    @Test
    func retryCancelledWhileItsObserverMakesTheRunningAttemptFail_makesNoOtherAttempt() {
        // Given a retry whose attempt runs until told, and an observer that, on hearing the retry
        // cancelled, makes that attempt fail
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let attemptName = uniqueName("attempt")
        let attempts = Counter()
        let retry = RetryOperation(maxAttempts: 3) { _ in
            attempts.increment()
            return held.make(attemptName)
        }
        let error = StubError("failed as the retry was being cancelled")
        retry.addObserver(BlockObserver(didCancel: { _ in held.finish(attemptName, with: error) }))
        queue.addOperation(retry)
        #expect(held.waitUntilStarted(attemptName))

        // When the retry is cancelled
        retry.cancel()

        // Then it finishes cancelled, with no other attempt
        #expect(waitUntilFinished([retry], timeout: 10))
        Thread.sleep(forTimeInterval: 0.2)
        #expect(retry.isCancelled)
        #expect(attempts.current == 1, "\(attempts.current) attempts")
        #expect(held.startCount(attemptName) == 1)
    }

    // RunningOperationsInAService.md:59-62: "Once the grace period is over, those still running are
    // cancelled too, and the call returns when every operation has finished, each exactly once."
    // Composition.md:73-76: neither handler is called when the composite itself is cancelled.
    @Test
    func transactionRunningWhenItsQueueShutsDownWithoutGrace_finishesCancelled_andNeitherHandlerIsCalled() {
        // Given a transaction whose first child runs until told, with handlers that would carry on
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let childName = uniqueName("child")
        let handlerCalls = Counter()
        let completionCalls = Counter()
        let transaction = TransactionOperation { parts in
            parts.add { held.make(childName) }
            parts.add { AsyncBlockOperation {} }
        } completion: {
            completionCalls.increment()
        } cancellation: { _ in
            handlerCalls.increment()
            return .carryOn
        }
        let log = EventLogObserver()
        transaction.addObserver(log)
        queue.addOperation(transaction)
        #expect(held.waitUntilStarted(childName))

        // When the queue shuts down without a grace period
        let done = runOnOwnThread { queue.shutDownAndWait(gracePeriod: 0) }

        // Then the call returns once the transaction finished, cancelled with queueShutDown, heard
        // once, and neither handler was called
        #expect(done.wait(timeout: 10), "shutDownAndWait never returned")
        #expect(transaction.isFinished && transaction.isCancelled)
        #expect(transaction.errors.asOperationErrors.contains(.queueShutDown), "\(transaction.errors)")
        #expect(log.log.all == ["didStart", "didCancel", "didFinish"], "\(log.log.all)")
        #expect(handlerCalls.current == 0 && completionCalls.current == 0, "\(handlerCalls.current) handler calls, \(completionCalls.current) completion calls")
    }

    // MARK: - AsyncAwait.md

    // AsyncAwait.md:30-31: runAndWait "runs the operation on a private AsyncOperationQueue, or on
    // the queue you pass; an operation that is already on a queue of this package is only waited
    // for. It returns once `isFinished` is true."
    @Test
    func runAndWaitPassingAnotherQueue_forAnOperationRunningOnAQueue_onlyWaitsForIt() {
        // Given an operation running on a queue until told
        let queue = AsyncOperationQueue()
        let other = AsyncOperationQueue()
        let held = HeldOperations()
        let name = uniqueName("already-on-a-queue")
        let operation = held.make(name)
        queue.addOperation(operation)
        #expect(held.waitUntilStarted(name))

        // When a thread runs it and waits, passing another queue
        let outcome = Recorder<Bool>()
        let waiter = runOnOwnThread {
            outcome.append((try? operation.runAndWait(on: other, timeout: 30)) != nil)
        }
        Thread.sleep(forTimeInterval: 0.1)
        let returnedEarly = outcome.count > 0
        let otherQueueCount = other.allOperationCount
        held.finish(name)

        // Then the call only waited for it where it was, and returned once it finished
        #expect(waiter.wait(timeout: 10))
        #expect(!returnedEarly)
        #expect(otherQueueCount == 0)
        #expect(outcome.all == [true])
        #expect(held.startCount(name) == 1)
        #expect(DiagnosticsLog.shared.kinds(about: name).isEmpty, "\(DiagnosticsLog.shared.kinds(about: name))")
    }

    // AsyncAwait.md:51-56: "Cancelling the waiting task cancels the operation, and the wait ends
    // at once with CancellationError ... On no queue ... the wait also reports an
    // `.awaitedOffQueue` diagnostic; such an operation stays cancelled and finishes once started,
    // or once its queue gets to it (at once on a running queue; a suspended one waits for its
    // resume, as Foundation's does)."
    @Test
    func taskWaitCancelledWhileTheOperationIsOnNoQueue_endsAtOnce_andTheOperationFinishesOnlyWhenAQueueGetsToItOrItIsStarted() async {
        // Given two operations on no queue, each awaited by a task
        let executed = Counter()
        let queuedName = uniqueName("awaited-then-queued")
        let queued = AsyncBlockOperation { executed.increment() }
        queued.name = queuedName
        let started = AsyncBlockOperation { executed.increment() }
        started.name = uniqueName("awaited-then-started")
        let waits = [Task { try await queued.finished() }, Task { try await started.finished() }]
        try? await Task.sleep(nanoseconds: 50_000_000)

        // When the tasks are cancelled
        waits.forEach { $0.cancel() }

        // Then each wait ends at once with CancellationError, reported, the operations cancelled
        // and unfinished
        for wait in waits {
            let outcome = await boundedOutcome(of: wait, timeout: 10)
            #expect(outcome.map(isCancellationError) == true, "\(String(describing: outcome))")
        }
        #expect(queued.isCancelled && !queued.isFinished && started.isCancelled && !started.isFinished)
        #expect(await eventually(timeout: 10) { DiagnosticsLog.shared.kinds(about: queuedName).contains(.awaitedOffQueue) })

        // and one added to a suspended queue finishes only once it resumes, the other once started
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        queue.addOperation(queued)
        try? await Task.sleep(nanoseconds: 100_000_000)
        #expect(!queued.isFinished, "finished on a suspended queue")
        queue.isSuspended = false
        #expect(await eventually(timeout: 10) { queued.isFinished })
        started.start()
        #expect(await eventually(timeout: 10) { started.isFinished })
        #expect(executed.current == 0)
        #expect(queued.errors.isEmpty && started.errors.isEmpty, "\(queued.errors) \(started.errors)")
    }

    // MARK: - ObserversAndTimeouts.md

    // ObserversAndTimeouts.md:15-19: "An operation cancelled while it waits on a queue for
    // dependencies, conditions or categories begins finishing as it is cancelled, so an observer
    // added from `operationDidCancel` is too late for it; one cancelled before it was added, or
    // while it waited only for its turn, finishes when its queue gets to it." (So an observer
    // added then is not too late: API.md 4, `operationDidFinish` exactly once.)
    @Test
    func observerAddedFromOperationDidCancel_ofAnOperationCancelledBeforeItsAddOrWaitingOnlyForItsTurn_hearsItsFinish() {
        // Given an operation on no queue, one waiting on a suspended queue, and one waiting on a
        // serial queue behind an operation running until told; each adds an observer from
        // operationDidCancel
        func operation(_ label: String) -> (operation: AsyncBlockOperation, late: EventLogObserver) {
            let operation = AsyncBlockOperation {}
            operation.name = uniqueName(label)
            let late = EventLogObserver()
            operation.addObserver(BlockObserver(didCancel: { cancelled in cancelled.addObserver(late) }))
            return (operation, late)
        }
        let beforeAdd = operation("cancelled-before-its-add")
        let suspendedQueue = AsyncOperationQueue()
        suspendedQueue.isSuspended = true
        let onSuspended = operation("waiting-on-a-suspended-queue")
        suspendedQueue.addOperation(onSuspended.operation)
        let serialQueue = AsyncOperationQueue()
        serialQueue.maxConcurrentOperationCount = 1
        let held = HeldOperations()
        let runningName = uniqueName("running")
        serialQueue.addOperation(held.make(runningName))
        #expect(held.waitUntilStarted(runningName))
        let behind = operation("waiting-for-its-turn")
        serialQueue.addOperation(behind.operation)

        // When each is cancelled, and its queue then gets to it
        beforeAdd.operation.cancel()
        onSuspended.operation.cancel()
        behind.operation.cancel()
        AsyncOperationQueue().addOperation(beforeAdd.operation)
        suspendedQueue.isSuspended = false
        held.finish(runningName)

        // Then each late observer hears the finish, and none was reported too late
        let all = [beforeAdd, onSuspended, behind]
        #expect(waitUntilFinished(all.map(\.operation), timeout: 10))
        for (operation, late) in all {
            let name = operation.name ?? ""
            #expect(waitUntil(timeout: 5) { late.log.all == ["didFinish"] }, "\(name): \(late.log.all)")
            #expect(!DiagnosticsLog.shared.kinds(about: name).contains(.configuredTooLate), "\(name): \(DiagnosticsLog.shared.kinds(about: name))")
        }
    }

    // ObserversAndTimeouts.md:63-67: the timeout cancels the operation with `timedOut(after:)`;
    // "cancelling it finishes it at once (a block that itself blocks its thread finishes once it
    // returns ...)". Apple, `completionBlock`: runs when isFinished becomes true.
    @Test
    func timeoutOfABlockThatBlocksItsThread_cancelsIt_butItFinishesOnlyOnceTheBlockReturns() {
        // Given two block operations whose blocks block their thread until told, one of each
        // kind, with a short timeout and a completion block
        let queue = AsyncOperationQueue()
        let release = Signal()
        let releaseContinuation = Signal()
        let throwing = AsyncBlockOperation { _ = release.wait(timeout: blockingTimeout) }
        let continuation = AsyncBlockOperation { finish in
            _ = releaseContinuation.wait(timeout: blockingTimeout)
            finish(nil)
        }
        let completions = Counter()
        for operation in [throwing, continuation] {
            operation.addObserver(TimeoutObserver(timeout: 0.2))
            operation.completionBlock = { completions.increment() }
        }

        // When they run past their timeout
        queue.addOperations([throwing, continuation], waitUntilFinished: false)
        #expect(waitUntil(timeout: 10) { throwing.isCancelled && continuation.isCancelled })
        Thread.sleep(forTimeInterval: 0.2)

        // Then each is cancelled but still executing until its block returns
        #expect(!throwing.isFinished && throwing.isExecuting)
        #expect(!continuation.isFinished && continuation.isExecuting)
        release.signal()
        releaseContinuation.signal()
        #expect(waitUntilFinished([throwing, continuation], timeout: 10))
        #expect(throwing.errors.asOperationErrors == [.timedOut(after: 0.2)], "\(throwing.errors)")
        #expect(continuation.errors.asOperationErrors == [.timedOut(after: 0.2)], "\(continuation.errors)")
        #expect(waitUntil(timeout: 10) { completions.current >= 2 })
        Thread.sleep(forTimeInterval: 0.1)
        #expect(completions.current == 2)
    }

    // ObserversAndTimeouts.md:14: "Observers are called on an arbitrary thread, never while the
    // framework holds one of its locks." (An observer that asks the operation and its queue what
    // they are would wait for ever on a lock held around its call.)
    @Test
    func observersAskingTheOperationAndItsQueueAboutThemselves_fromEveryCallback_doNotDeadlock() {
        // Given an operation that produces one and then cancels and finishes itself, observed by
        // an observer that, in every callback, reads the operation and its queue
        let queue = AsyncOperationQueue()
        queue.name = uniqueName("introspected")
        let heard = Recorder<String>()
        let operation = ClosureOperation(name: uniqueName("introspective")) { operation in
            operation.produce(BlockOperation {})
            operation.cancel(with: StubError("done"))
            operation.finish()
        }
        operation.addObserver(IntrospectingObserver(queue: queue, heard: heard))

        // When it runs, from a thread of the test's own
        let added = runOnOwnThread { queue.addOperation(operation) }

        // Then every callback came and returned
        #expect(added.wait(timeout: 10), "the add never returned")
        #expect(waitUntilFinished([operation], timeout: 10), "the operation never finished: a callback waits on a lock")
        #expect(waitUntil(timeout: 10) { heard.all.contains("didFinish") })
        #expect(heard.all == ["didStart", "didProduce", "didCancel", "didFinish"], "\(heard.all)")
    }

    // MARK: - RunningOperationsInAService.md

    // RunningOperationsInAService.md:56-58: "From the moment it is called the queue refuses new
    // operations: one added later finishes at once without executing, cancelled with
    // `queueShutDown`, and its observers hear it." API.md 7: cancelling a group cancels its children.
    @Test
    func groupAddedAfterTheShutDown_finishesCancelledWithQueueShutDown_andNoChildRuns() {
        // Given a queue that was shut down
        let queue = AsyncOperationQueue()
        queue.shutDownAndWait(gracePeriod: 0)
        let executed = Recorder<String>()
        let asyncChild = AsyncBlockOperation { executed.append("async child") }
        let plainChild = BlockOperation { executed.append("plain child") }
        let group = GroupOperation(operations: [asyncChild, plainChild])
        let log = EventLogObserver()
        group.addObserver(log)

        // When a group is added to it
        queue.addOperation(group)

        // Then it finishes cancelled with queueShutDown, heard, and no child runs
        #expect(waitUntilFinished([group, asyncChild, plainChild], timeout: 10))
        #expect(group.errors.asOperationErrors == [.queueShutDown], "\(group.errors)")
        #expect(log.log.all == ["didCancel", "didFinish"], "\(log.log.all)")
        #expect(executed.all.isEmpty, "\(executed.all)")
        #expect(asyncChild.isCancelled && plainChild.isCancelled)
    }
}

/// Reads the operation and its queue in every callback: what an observer that logs state does.
private struct IntrospectingObserver: OperationObserver {
    let queue: AsyncOperationQueue
    let heard: Recorder<String>

    private func look(at operation: AsyncOperation, _ event: String) {
        _ = operation.snapshot()
        _ = operation.debugDescription
        _ = operation.errors
        _ = (operation.isReady, operation.isExecuting, operation.isFinished, operation.isCancelled)
        _ = operation.dependencies
        _ = queue.snapshot()
        _ = queue.debugDescription
        _ = queue.allOperations
        _ = queue.allOperationCount
        heard.append(event)
    }

    func operationDidStart(_ operation: AsyncOperation) {
        look(at: operation, "didStart")
    }

    func operationDidCancel(_ operation: AsyncOperation) {
        look(at: operation, "didCancel")
    }

    func operation(_ operation: AsyncOperation, didProduce newOperation: Operation) {
        look(at: operation, "didProduce")
    }

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        look(at: operation, "didFinish")
    }
}
