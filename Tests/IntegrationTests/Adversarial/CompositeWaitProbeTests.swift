import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// Round 8 of the adversarial probes: composites, waits and timeouts at their edges. Timeouts on
// cascades, transactions and retries, on their children and on operations that wait for a
// condition, a category or their turn before they start; cancel and cancel(with:) of a composite
// at each stage (before it is queued, while it waits for a dependency, while a child waits for a
// category, from inside a factory or a handler, during a rerun delay or a backoff); observers of
// nested composites hearing each event once, in order; every blocking and async wait on a
// composite that is cancelled, fails its conditions, sits on a suspended queue that shuts down,
// or whose child ignores cancellation; progress of retries, cancelled groups and nested
// composites; shutDown of a queue holding composites at every stage; debugDescription while a
// composite, its child or a retry's attempt waits; and the arithmetic of BackoffPolicy. Each
// probe quotes the sentence it checks. Every wait for something that must happen is bounded, and
// nothing asserts on wall-clock speed. Probes that found a product bug are disabled with
// "FOUND: …" so that the suite stays green.

/// Whether `log` (an `EventLogObserver`'s) is a lifecycle API.md 4 allows: `didStart` at most
/// once and first, `didCancel` at most once, `didFinish` exactly once and last.
private func isAllowedLifecycle(_ log: [String]) -> Bool {
    guard log.last == "didFinish", log.filter({ $0 == "didFinish" }).count == 1 else { return false }
    let starts = log.filter { $0 == "didStart" }.count
    guard starts <= 1, starts == 0 || log.first == "didStart" else { return false }
    return log.filter { $0 == "didCancel" }.count <= 1
}

/// The outcome of a blocking wait run on a thread of its own, once it ended.
private final class WaitOutcome: @unchecked Sendable {
    // @unchecked Sendable: `outcome` is only touched while holding `lock`.
    private let lock = NSLock()
    private var outcome: Result<Void, any Error>?

    func record(_ body: () throws -> Void) {
        let result = Result { try body() }
        lock.lock()
        defer { lock.unlock() }
        outcome = result
    }

    /// The error the wait threw, if it ended with one.
    var error: (any Error)? {
        lock.lock()
        defer { lock.unlock() }
        if case let .failure(error)? = outcome { return error }
        return nil
    }

    var hasEnded: Bool {
        lock.lock()
        defer { lock.unlock() }
        return outcome != nil
    }
}

@Suite("Composite and wait probes, round 8")
struct CompositeWaitProbeTests {
    // MARK: - Timeouts on composites, their children and retries

    // Composition.md: "Cancelling it stops the running attempt, or the wait, and makes no further
    // attempt." ObserversAndTimeouts.md: TimeoutObserver "cancels the operation with
    // AsyncOperationError/timedOut(after:)"; "A subclass decides for itself how to react to
    // cancellation". Composition.md, groups: "Its errors hold every child's errors, then its own."
    @Test
    func retryStoppedByItsTimeoutWhileAnAttemptIgnoresCancellation_makesNoOtherAttempt_evenWhenThatAttemptThenFails() {
        // Given a retry of three attempts, with a timeout, whose attempts ignore cancellation and
        // finish only when told
        let attempts = Recorder<ClosureOperation>()
        let retry = RetryOperation(maxAttempts: 3) { number in
            ClosureOperation(name: "attempt \(number)") { attempts.append($0) }
        }
        retry.addObserver(TimeoutObserver(timeout: 0.2))
        AsyncOperationQueue().addOperation(retry)
        #expect(waitUntil { attempts.count == 1 })

        // When the timeout fires while the first attempt runs, and that attempt then fails
        #expect(waitUntil { retry.isCancelled && attempts.all.first?.isCancelled == true })
        let failure = StubError("attempt 1 failed after the timeout")
        attempts.all.first?.finish(with: failure)

        // Then the retry makes no other attempt, and ends with the attempt's error, then the timeout
        #expect(waitUntilFinished([retry]))
        #expect(retry.attemptCount == 1)
        #expect(attempts.count == 1)
        #expect(retry.errors.count == 2, "\(retry.errors)")
        #expect(retry.errors.first as? StubError == failure, "\(retry.errors)")
        #expect(retry.errors.last as? AsyncOperationError == .timedOut(after: 0.2), "\(retry.errors)")
    }

    // API.md 6: TimeoutObserver "cancels the operation with a timeout error if it has not finished
    // that long after it started". TimeoutObserver: "The timer starts when the operation starts
    // executing (time spent waiting for dependencies, conditions or categories does not count)".
    @Test
    func retryWithATimeout_whoseConditionAnswersLaterThanTheTimeout_isNotTimedOutWhileItWaits() {
        // Given a retry with a one-second timeout whose condition does not answer yet
        let gate = HeldCallback<ConditionResult>()
        let ran = Counter()
        let retry = RetryOperation(maxAttempts: 1) { _ in AsyncBlockOperation { ran.increment() } }
        retry.addCondition(StubCondition(name: uniqueName("Approval")) { _, completion in gate.hold(completion) })
        retry.addObserver(TimeoutObserver(timeout: 1))
        AsyncOperationQueue().addOperation(retry)
        #expect(gate.waitUntilHeld())

        // When the condition keeps it waiting longer than the timeout
        Thread.sleep(forTimeInterval: 1.5)

        // Then the timeout has not fired: the retry has not started yet
        #expect(!retry.isCancelled, "the timeout counted the wait for a condition: \(retry.errors)")
        #expect(retry.attemptCount == 0)
        gate.call(.satisfied)
        #expect(waitUntilFinished([retry]))
        #expect(ran.current == 1)
        #expect(retry.attemptCount == 1)
    }

    // TimeoutObserver: "The timer starts when the operation starts executing". API.md 9: a
    // GroupOperation with maxConcurrentOperationCount = 1 starts its children "in the order they
    // were added": the second child waits for its turn, which its timeout does not count.
    @Test
    func serialGroupChildWithATimeout_waitingForItsTurnLongerThanTheTimeout_isNotTimedOut() {
        // Given a serial group whose second child has a one-second timeout, behind a first child
        // that runs until told
        let held = HeldOperations()
        let firstName = uniqueName("first")
        let second = AsyncBlockOperation {}
        second.addObserver(TimeoutObserver(timeout: 1))
        let group = GroupOperation(operations: [held.make(firstName), second])
        group.maxConcurrentOperationCount = 1
        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted(firstName))

        // When the first child runs longer than the second one's timeout
        Thread.sleep(forTimeInterval: 1.5)

        // Then the second child, still waiting for its turn, is not timed out
        #expect(!second.isCancelled, "the timeout counted the wait for the turn: \(second.errors)")
        #expect(second.snapshot().state == .waitingInLine, "\(second.snapshot())")
        held.finish(firstName)
        #expect(waitUntilFinished([group]))
        #expect(group.errors.isEmpty, "\(group.errors)")
    }

    // Composition.md: "Neither handler is called when the composite itself is cancelled, by
    // cancel(), an enclosing composite or group, or a timeout"; `.cancel`: "later ones never
    // start". API.md 2: "Cancelling or failing an operation frees its categories." API.md 4.
    @Test
    func cascadeStoppedByItsTimeoutWhileItsStepWaitsForACategoryHeldElsewhere_neverRunsTheStep_andCallsNoHandler() {
        // Given a cascade with a timeout whose first step needs a category held on another queue
        let holding = startHoldingACategory()
        let built = Counter()
        let stepRan = Counter()
        let handlerCalls = Counter()
        let completions = Counter()
        let steps = Recorder<AsyncBlockOperation>()
        let events = EventLogObserver()
        let cascade = CascadeOperation { children in
            children.add {
                built.increment()
                let step = AsyncBlockOperation { stepRan.increment() }
                step.addCondition(ExclusiveCategory(holding.x))
                steps.append(step)
                return step
            }
            children.add {
                built.increment()
                return AsyncBlockOperation {}
            }
        } completion: {
            completions.increment()
        } cancellation: { _ in
            handlerCalls.increment()
            return .carryOn
        }
        cascade.addObserver(events)
        cascade.addObserver(TimeoutObserver(timeout: 0.3))

        // When it runs, and its timeout fires while the step waits
        AsyncOperationQueue().addOperation(cascade)

        // Then it finishes cancelled with the timeout alone, its step cancelled and never run
        #expect(waitUntilFinished([cascade]))
        #expect(cascade.isCancelled)
        #expect(cascade.errors.asOperationErrors == [.timedOut(after: 0.3)], "\(cascade.errors)")
        #expect(stepRan.current == 0)
        #expect(built.current == 1)
        #expect(steps.all.first?.isCancelled == true)
        #expect(handlerCalls.current == 0)
        #expect(completions.current == 0)
        #expect(events.log.all == ["didStart", "didCancel", "didFinish"], "\(events.log.all)")
        #expect(!holding.holder.isFinished)
        holding.held.finish(holding.holderName)
    }

    // API.md 6: "An AsyncBlockOperation that never calls its continuation therefore cannot block
    // its queue when it has a timeout." Composition.md: the handler "is called when a child
    // finishes failed or cancelled"; CompositeFailure.isCancelled; `.carryOn`: "goes on as if
    // the child had succeeded; the completion handler still comes"; "a composite that recovered
    // reports no failure to whoever waits for it".
    @Test
    func transactionChildThatNeverAnswersButHasATimeout_reachesTheHandlerCancelledWithIt_andCarryOnLetsTheWaitReturn() {
        // Given a transaction whose first part never calls its continuation but has a timeout
        let seen = Recorder<String>()
        let seenErrors = Recorder<[AsyncOperationError?]>()
        let completions = Counter()
        let transaction = TransactionOperation { parts in
            parts.add {
                let silent = AsyncBlockOperation { _ in }
                silent.addObserver(TimeoutObserver(timeout: 0.2))
                return silent
            }
            parts.add { AsyncBlockOperation {} }
        } completion: {
            completions.increment()
        } cancellation: { failure in
            seen.append("#\(failure.index) cancelled: \(failure.isCancelled)")
            seenErrors.append(failure.errors.asOperationErrors)
            return .carryOn
        }

        // When it is run and waited for
        #expect(throws: Never.self) { try transaction.runAndWait(timeout: generousTimeout) }

        // Then the handler saw the silent part cancelled by its timeout, and the transaction completed
        #expect(seen.all == ["#0 cancelled: true"], "\(seen.all)")
        #expect(seenErrors.all == [[.timedOut(after: 0.2)]], "\(seenErrors.all)")
        #expect(completions.current == 1)
        #expect(transaction.errors.isEmpty, "\(transaction.errors)")
        #expect(!transaction.isCancelled)
    }

    // Composition.md, `.cancel` "(also the default, without a handler)": "it finishes cancelled,
    // with the child's errors", "later ones never start". AsyncAwait.md: runAndWait "throws the
    // operation's only error as it is".
    @Test
    func cascadeWithoutAHandler_whoseStepNeverAnswersButHasATimeout_runAndWaitThrowsThatTimeout() {
        // Given a cascade without handlers whose first step never calls its continuation, but has
        // a timeout
        let built = Counter()
        let cascade = CascadeOperation { steps in
            steps.add {
                let silent = AsyncBlockOperation { _ in }
                silent.addObserver(TimeoutObserver(timeout: 0.2))
                return silent
            }
            steps.add {
                built.increment()
                return AsyncBlockOperation {}
            }
        }

        // When it is run and waited for, then the wait ends with the step's timeout
        #expect(throws: AsyncOperationError.timedOut(after: 0.2)) { try cascade.runAndWait(timeout: generousTimeout) }
        #expect(cascade.isCancelled)
        #expect(cascade.errors.asOperationErrors == [.timedOut(after: 0.2)], "\(cascade.errors)")
        #expect(built.current == 0)
    }

    // RetryOperation: an attempt "cancel[led] with cancel(with:)" is retried; "If every attempt
    // fails, the retry operation's errors are the last attempt's." A timeout cancels with an error.
    @Test
    func retryWhoseEveryAttemptIsStoppedByItsOwnTimeout_makesMaxAttempts_andFailsWithTheLastTimeoutAlone() {
        // Given a retry of three attempts, each never answering but with a timeout of its own
        let retry = RetryOperation(maxAttempts: 3) { _ in
            let attempt = AsyncBlockOperation { _ in }
            attempt.addObserver(TimeoutObserver(timeout: 0.1))
            return attempt
        }

        // When it is run, then it fails with the last attempt's timeout, as it is
        #expect(throws: AsyncOperationError.timedOut(after: 0.1)) { try retry.runAndWait(timeout: generousTimeout) }
        #expect(retry.attemptCount == 3)
        #expect(retry.errors.asOperationErrors == [.timedOut(after: 0.1)], "\(retry.errors)")
        #expect(!retry.isCancelled)
    }

    // Composition.md: "Cancelling it stops the running attempt, or the wait, and makes no further
    // attempt"; "Cancelling a composite cancels its running children, nested composites
    // included". An attempt "cancelled with cancel(), which records none, does not fail".
    @Test
    func retryStoppedByItsTimeoutWhileItsAttemptIsATransaction_cancelsTheTransactionsParts_andMakesNoOtherAttempt() {
        // Given a retry with a timeout whose attempts are transactions of two parts that never answer
        let built = Counter()
        let parts = Recorder<AsyncBlockOperation>()
        let retry = RetryOperation(maxAttempts: 3) { (_: Int) -> TransactionOperation in
            built.increment()
            return TransactionOperation { children in
                for _ in 0..<2 {
                    children.add {
                        let part = AsyncBlockOperation { _ in }
                        parts.append(part)
                        return part
                    }
                }
            }
        }
        retry.addObserver(TimeoutObserver(timeout: 0.3))

        // When it runs and the timeout fires
        AsyncOperationQueue().addOperation(retry)

        // Then the transaction's parts finish cancelled, and no other attempt is made
        #expect(waitUntilFinished([retry]))
        #expect(built.current == 1)
        #expect(retry.attemptCount == 1)
        #expect(retry.errors.asOperationErrors == [.timedOut(after: 0.3)], "\(retry.errors)")
        #expect(retry.lastAttempt?.isCancelled == true)
        #expect(parts.count == 2)
        #expect(parts.all.allSatisfy { $0.isFinished && $0.isCancelled })
    }

    // DelayOperation: "Cancelled while it waits, it finishes at once". Composition.md, chains:
    // ".upstreamCancelled naming the first one that was cancelled (with a reason or without: that
    // operation's own errors keep the reason, a timeout's say)".
    @Test
    func delayWithAShorterTimeout_endsAtOnceWithTheTimeout_andTheChainAfterItStopsWithUpstreamCancelled() {
        // Given an hour's delay with a timeout, chained before a result operation
        let delay = DelayOperation(3600)
        delay.name = uniqueName("delay")
        delay.addObserver(TimeoutObserver(timeout: 0.1))
        let next = ResultBlockOperation { 42 }
        next.name = uniqueName("next")

        // When the chain runs
        AsyncOperationQueue().addChain([delay, next])

        // Then waiting for the next link ends with upstreamCancelled, naming the delay
        let expected = AsyncOperationError.upstreamCancelled(operation: next.name ?? "", upstream: delay.name ?? "")
        #expect(throws: expected) { try next.runAndWait(timeout: generousTimeout) }
        #expect(delay.errors.asOperationErrors == [.timedOut(after: 0.1)], "\(delay.errors)")
    }

    // TimeoutObserver: cancels the operation "if it has not finished timeout seconds after it
    // started": with 0, at once; with infinity, never.
    @Test
    func timeoutOfZero_cancelsAtOnceWithItsError_andAnInfiniteTimeoutNeverFires() {
        // Given an operation that never answers with a timeout of zero, and one that succeeds with
        // an infinite timeout
        let instant = AsyncBlockOperation { _ in }
        instant.addObserver(TimeoutObserver(timeout: 0))
        let patient = AsyncBlockOperation {}
        patient.addObserver(TimeoutObserver(timeout: .infinity))

        // When both run
        AsyncOperationQueue().addOperations([instant, patient], waitUntilFinished: false)

        // Then the first is cancelled with a zero timeout, and the second succeeds
        #expect(waitUntilFinished([instant, patient]))
        #expect(instant.errors.asOperationErrors == [.timedOut(after: 0)], "\(instant.errors)")
        #expect(patient.errors.isEmpty, "\(patient.errors)")
        #expect(!patient.isCancelled)
    }

    // MARK: - Cancelling composites at each stage

    // API.md 5: "cancel(with:) before the operation starts: it finishes without executing, with
    // that error (if any) in errors." Composition.md: "Neither handler is called when the composite
    // itself is cancelled"; factories are called "when the child is due to run". API.md 4.
    @Test
    func cascadeCancelledWithAnErrorBeforeItIsQueued_callsNoFactoryOrHandler_andFinishesWithThatErrorAlone() {
        // Given a cascade cancelled with an error before it is on a queue
        let built = Counter()
        let handlerCalls = Counter()
        let completions = Counter()
        let events = EventLogObserver()
        let cascade = CascadeOperation { steps in
            steps.add {
                built.increment()
                return AsyncBlockOperation {}
            }
        } completion: {
            completions.increment()
        } cancellation: { _ in
            handlerCalls.increment()
            return .carryOn
        }
        cascade.addObserver(events)
        let reason = StubError("cancelled before it was queued")
        cascade.cancel(with: reason)

        // When it is run and waited for, then the wait throws that error
        #expect(throws: reason) { try cascade.runAndWait(timeout: generousTimeout) }
        #expect(cascade.errors.asStubErrors == [reason], "\(cascade.errors)")
        #expect(built.current == 0)
        #expect(handlerCalls.current == 0)
        #expect(completions.current == 0)
        #expect(events.log.all == ["didCancel", "didFinish"], "\(events.log.all)")
    }

    // ObserversAndTimeouts.md: "An operation cancelled while it waits on a queue for dependencies,
    // conditions or categories begins finishing as it is cancelled". API.md 5.
    @Test
    func transactionCancelledWithAnErrorWhileItWaitsForADependency_finishesAtOnce_withoutBuildingAPart() {
        // Given a transaction waiting for a dependency that runs until told
        let held = HeldOperations()
        let dependencyName = uniqueName("dependency")
        let dependency = held.make(dependencyName)
        let built = Counter()
        let events = EventLogObserver()
        let transaction = TransactionOperation { parts in
            parts.add {
                built.increment()
                return AsyncBlockOperation {}
            }
        }
        transaction.addObserver(events)
        transaction.addDependency(dependency)
        AsyncOperationQueue().addOperations([dependency, transaction], waitUntilFinished: false)
        #expect(held.waitUntilStarted(dependencyName))
        #expect(waitUntil { transaction.snapshot().state == .waitingForDependencies })

        // When it is cancelled with an error
        let reason = StubError("no longer needed")
        transaction.cancel(with: reason)

        // Then it finishes while its dependency still runs, with that error, having built nothing
        #expect(waitUntilFinished([transaction]))
        #expect(!dependency.isFinished)
        #expect(transaction.errors.asStubErrors == [reason], "\(transaction.errors)")
        #expect(built.current == 0)
        #expect(events.log.all == ["didCancel", "didFinish"], "\(events.log.all)")
        held.finish(dependencyName)
    }

    // Composition.md: "Cancelling it cancels the children and still waits for them"; "Neither
    // handler is called when the composite itself is cancelled". API.md 2: "Cancelling or failing
    // an operation frees its categories." API.md 4.
    @Test
    func cascadeCancelledWithAnErrorWhileItsStepWaitsForACategoryHeldElsewhere_neverRunsTheStep_andKeepsThatErrorAlone() {
        // Given a cascade whose first step waits for a category held on another queue
        let holding = startHoldingACategory()
        let built = Counter()
        let stepRan = Counter()
        let handlerCalls = Counter()
        let steps = Recorder<AsyncBlockOperation>()
        let events = EventLogObserver()
        let cascade = CascadeOperation { children in
            children.add {
                built.increment()
                let step = AsyncBlockOperation { stepRan.increment() }
                step.addCondition(ExclusiveCategory(holding.x))
                steps.append(step)
                return step
            }
            children.add {
                built.increment()
                return AsyncBlockOperation {}
            }
        } cancellation: { _ in
            handlerCalls.increment()
            return .carryOn
        }
        cascade.addObserver(events)
        AsyncOperationQueue().addOperation(cascade)
        #expect(waitUntil { steps.all.first?.snapshot().state == .waitingForCategories })

        // When the cascade is cancelled with an error
        let reason = StubError("cancelled while its step waited")
        cascade.cancel(with: reason)

        // Then it finishes with that error alone; the step never ran, the next was never built
        #expect(waitUntilFinished([cascade]))
        #expect(cascade.errors.asStubErrors == [reason], "\(cascade.errors)")
        #expect(stepRan.current == 0)
        #expect(built.current == 1)
        #expect(handlerCalls.current == 0)
        #expect(events.log.all == ["didStart", "didCancel", "didFinish"], "\(events.log.all)")
        #expect(!holding.holder.isFinished)
        holding.held.finish(holding.holderName)
    }

    // CompositeResolution.cancel: "children not yet started never are, and the completion handler
    // is not called". Composition.md: "Neither handler is called when the composite itself is
    // cancelled"; factories are called "when the child is due to run".
    @Test
    func cascadeCancelledFromItsSecondFactory_neverRunsThatStep_andBuildsNoLaterOne() {
        // Given a cascade whose second factory cancels the cascade as it builds the step
        let box = WeakBox<CascadeOperation>()
        let reason = StubError("cancelled from a factory")
        let built = Recorder<Int>()
        let executed = Recorder<Int>()
        let handlerCalls = Counter()
        let completions = Counter()
        let events = EventLogObserver()
        let cascade = CascadeOperation { steps in
            for index in 0..<3 {
                steps.add {
                    built.append(index)
                    if index == 1 { box.object?.cancel(with: reason) }
                    return AsyncBlockOperation { executed.append(index) }
                }
            }
        } completion: {
            completions.increment()
        } cancellation: { _ in
            handlerCalls.increment()
            return .carryOn
        }
        box.object = cascade
        cascade.addObserver(events)

        // When it is run, then the wait ends with that error
        #expect(throws: reason) { try cascade.runAndWait(timeout: generousTimeout) }
        #expect(executed.all == [0], "\(executed.all)")
        #expect(built.all == [0, 1], "\(built.all)")
        #expect(handlerCalls.current == 0)
        #expect(completions.current == 0)
        #expect(events.log.all == ["didStart", "didCancel", "didFinish"], "\(events.log.all)")
    }

    // Composition.md: the handler is "never called again after a .cancel answer"; "Neither handler
    // is called when the composite itself is cancelled ... there is nothing left to decide".
    // CompositeStateMachine: "Cancelled while the handler decided: the answer no longer matters."
    // Groups: "Its errors hold every child's errors, then its own."
    @Test(arguments: [CompositeResolution.rerun, .rerun(after: 0.05), .carryOn])
    func handlerThatCancelsItsTransaction_thenAnswersToGoOn_buildsNoNewAttempt_andCompletesNothing(answer: CompositeResolution) {
        // Given a transaction whose handler cancels it, then answers as if it were going on
        let box = WeakBox<TransactionOperation>()
        let reason = StubError("cancelled by its handler")
        let failure = StubError("the part failed")
        let built = Counter()
        let handlerCalls = Counter()
        let completions = Counter()
        let events = EventLogObserver()
        let transaction = TransactionOperation { parts in
            parts.add {
                built.increment()
                return AsyncBlockOperation { throw failure }
            }
        } completion: {
            completions.increment()
        } cancellation: { _ in
            handlerCalls.increment()
            box.object?.cancel(with: reason)
            return answer
        }
        box.object = transaction
        transaction.addObserver(events)

        // When its part fails
        AsyncOperationQueue().addOperation(transaction)

        // Then the answer is ignored: no new attempt, no completion, the part's error then its own
        #expect(waitUntilFinished([transaction]))
        #expect(built.current == 1)
        #expect(handlerCalls.current == 1)
        #expect(completions.current == 0)
        #expect(transaction.isCancelled)
        #expect(transaction.errors.asStubErrors == [failure, reason], "\(transaction.errors)")
        #expect(events.log.all == ["didStart", "didCancel", "didFinish"], "\(events.log.all)")
    }

    // CompositeResolution.rerun(after:): "The failed attempt's errors are dropped"; Composition.md:
    // "cancelling the composite meanwhile ends the wait". API.md 5: cancel(with:) puts "that error
    // ... in errors".
    @Test
    func cascadeCancelledWithAnErrorDuringARerunDelay_endsTheWait_withThatErrorAlone() {
        // Given a cascade waiting an hour to run its failed step again
        let built = Counter()
        let handlerCalls = Counter()
        let cascade = CascadeOperation { steps in
            steps.add {
                built.increment()
                return AsyncBlockOperation { throw StubError("first attempt") }
            }
        } cancellation: { _ in
            handlerCalls.increment()
            return .rerun(after: 3600)
        }
        AsyncOperationQueue().addOperation(cascade)
        #expect(waitUntil { handlerCalls.current == 1 })

        // When it is cancelled with an error during the delay
        let reason = StubError("stop waiting")
        cascade.cancel(with: reason)

        // Then it finishes promptly with that error alone: the failed attempt's was dropped
        #expect(waitUntilFinished([cascade]), "the rerun delay kept the cancelled cascade running")
        #expect(cascade.errors.asStubErrors == [reason], "\(cascade.errors)")
        #expect(built.current == 1)
        #expect(handlerCalls.current == 1)
    }

    // API.md 5, and RetryOperation: "makeAttempt ... Called when the attempt is due"; attemptCount
    // counts attempts "started or about to start"; lastAttempt is "nil before the first attempt".
    @Test
    func retryCancelledWithAnErrorWhileItsConditionIsUnanswered_makesNoAttempt_andALateAnswerChangesNothing() {
        // Given a retry whose condition has not answered
        let gate = HeldCallback<ConditionResult>()
        let built = Counter()
        let retry = RetryOperation(maxAttempts: 3) { _ in
            built.increment()
            return AsyncBlockOperation {}
        }
        retry.addCondition(StubCondition(name: uniqueName("Approval")) { _, completion in gate.hold(completion) })
        AsyncOperationQueue().addOperation(retry)
        #expect(gate.waitUntilHeld())

        // When it is cancelled with an error, and the condition answers afterwards
        let reason = StubError("cancelled while its condition was evaluated")
        retry.cancel(with: reason)
        #expect(waitUntilFinished([retry]))
        gate.call(.satisfied)

        // Then it made no attempt, and keeps that error alone
        #expect(retry.errors.asStubErrors == [reason], "\(retry.errors)")
        #expect(retry.attemptCount == 0)
        #expect(retry.lastAttempt == nil)
        #expect(built.current == 0)
    }

    // GroupOperation.addChild: "A child added to a cancelled group is cancelled." GroupOperation:
    // "operations a child produces are awaited too". API.md 7: "A GroupOperation finishes only
    // after every child (and every operation a child produced) has finished".
    @Test
    func stepOfACancelledCascadeProducingWorkAsItStops_theWorkNeverRuns_andTheCascadeWaitsForIt() {
        // Given a cascade whose step ignores cancellation
        let steps = Recorder<ClosureOperation>()
        let producedRan = Counter()
        let cascade = CascadeOperation { children in
            children.add { ClosureOperation(name: "stubborn step") { steps.append($0) } }
        }
        AsyncOperationQueue().addOperation(cascade)
        #expect(waitUntil { steps.count == 1 })

        // When the cascade is cancelled, and the step then produces more work before it finishes
        cascade.cancel()
        #expect(waitUntil { steps.all.first?.isCancelled == true })
        let produced = AsyncBlockOperation { producedRan.increment() }
        steps.all.first?.produce(produced)
        #expect(waitUntilFinished([produced]))
        #expect(!cascade.isFinished)
        steps.all.first?.finish()

        // Then the produced work finished cancelled without running, and the cascade finished after it
        #expect(waitUntilFinished([cascade]))
        #expect(producedRan.current == 0)
        #expect(produced.isCancelled)
        #expect(cascade.isCancelled)
    }

    // API.md 4: "operationDidCancel at most once"; "operationDidFinish exactly once, last".
    @Test
    func transactionCancelledTwiceWithTwoErrors_isHeardCancelledOnce_andFinishedOnce() {
        // Given a running transaction whose part runs until told
        let held = HeldOperations()
        let partName = uniqueName("part")
        let events = EventLogObserver()
        let transaction = TransactionOperation { parts in
            parts.add { held.make(partName) }
        }
        transaction.addObserver(events)
        AsyncOperationQueue().addOperation(transaction)
        #expect(held.waitUntilStarted(partName))

        // When it is cancelled twice
        let first = StubError("first cancel")
        transaction.cancel(with: first)
        transaction.cancel(with: StubError("second cancel"))

        // Then its observers hear one cancel and one finish, which carries the first error
        #expect(waitUntilFinished([transaction]))
        #expect(events.log.all == ["didStart", "didCancel", "didFinish"], "\(events.log.all)")
        #expect(events.finishedErrors.count == 1)
        #expect(events.finishedErrors.all.first?.asStubErrors.first == first, "\(transaction.errors)")
    }

    // API.md 4: "operationDidStart comes exactly once, before execute(); operationDidFinish exactly
    // once, last, with errors already final; operationDidCancel at most once." Composition.md:
    // "Cancelling a composite cancels its running children, nested composites included."
    @Test
    func observersOfNestedCompositesStoppedByTheOutermostTimeout_eachHearEveryEventOnce_inOrder() {
        // Given a cascade with a timeout whose first step is a transaction of two parts that never
        // answer, each of them observed
        let innerLogs = Recorder<EventLogObserver>()
        let partLogs = Recorder<EventLogObserver>()
        let outerLog = EventLogObserver()
        let nextBuilt = Counter()
        let outer = CascadeOperation { steps in
            steps.add {
                let inner = TransactionOperation { parts in
                    for _ in 0..<2 {
                        parts.add {
                            let part = AsyncBlockOperation { _ in }
                            let log = EventLogObserver()
                            partLogs.append(log)
                            part.addObserver(log)
                            return part
                        }
                    }
                }
                let log = EventLogObserver()
                innerLogs.append(log)
                inner.addObserver(log)
                return inner
            }
            steps.add {
                nextBuilt.increment()
                return AsyncBlockOperation {}
            }
        }
        outer.addObserver(outerLog)
        outer.addObserver(TimeoutObserver(timeout: 0.5))

        // When it runs until its timeout
        AsyncOperationQueue().addOperation(outer)

        // Then every observer heard a lifecycle API.md 4 allows, the outer one all three events
        #expect(waitUntilFinished([outer]))
        #expect(outerLog.log.all == ["didStart", "didCancel", "didFinish"], "\(outerLog.log.all)")
        #expect(outer.errors.asOperationErrors == [.timedOut(after: 0.5)], "\(outer.errors)")
        #expect(innerLogs.count == 1)
        for log in innerLogs.all + partLogs.all {
            #expect(isAllowedLifecycle(log.log.all), "\(log.log.all)")
            #expect(log.log.all.contains("didCancel"), "\(log.log.all)")
        }
        #expect(nextBuilt.current == 0)
    }

    // MARK: - Waits that always end

    // RunningOperationsInAService.md: operations that wait ("a suspended queue") "are cancelled with
    // the same error"; AsyncOperationQueue.shutDown: "A suspended queue is resumed, so that the
    // operations it cancelled can finish (none of them executes)". AsyncAwait.md: finished()
    // "throws its errors".
    @Test
    func awaitingACompositeOnASuspendedQueueThatShutsDown_throwsQueueShutDown_andNoFactoryIsCalled() async {
        // Given a cascade, awaited, on a suspended queue
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        let built = Counter()
        let events = EventLogObserver()
        let cascade = CascadeOperation { steps in
            steps.add {
                built.increment()
                return AsyncBlockOperation {}
            }
        }
        cascade.addObserver(events)
        queue.addOperation(cascade)
        let wait = Task { try await cascade.finished() }

        // When the queue shuts down
        let shutDown = Task { () async throws in await queue.shutDown(gracePeriod: 0) }
        let returned = await boundedOutcome(of: shutDown)
        let waited = await boundedOutcome(of: wait)

        // Then the wait ends with queueShutDown, and nothing was built
        #expect(returned != nil, "shutDown did not return")
        guard case let .failure(error)? = waited else {
            Issue.record("the wait did not end with an error: \(String(describing: waited))")
            return
        }
        #expect(error as? AsyncOperationError == .queueShutDown, "\(error)")
        #expect(built.current == 0)
        #expect(events.log.all == ["didCancel", "didFinish"], "\(events.log.all)")
    }

    // AsyncAwait.md: runAndWait "runs the operation on a private AsyncOperationQueue, or on the
    // queue you pass"; it "throws its errors". API.md 12: "every operation that was on the queue
    // finishes exactly once".
    @Test
    func runAndWaitOnASuspendedQueuePassedIn_forATransaction_endsWithQueueShutDown_whenThatQueueShutsDown() {
        // Given a thread blocked in runAndWait for a transaction on a suspended queue
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        let built = Counter()
        let transaction = TransactionOperation { parts in
            parts.add {
                built.increment()
                return AsyncBlockOperation {}
            }
        }
        let outcome = WaitOutcome()
        let waited = runOnOwnThread {
            outcome.record { try transaction.runAndWait(on: queue, timeout: generousTimeout) }
        }
        #expect(waitUntil { queue.allOperationCount == 1 })

        // When the queue shuts down
        queue.shutDownAndWait(gracePeriod: 0)

        // Then the wait ends with queueShutDown, and no part was built
        #expect(waited.wait(timeout: generousTimeout), "runAndWait did not return")
        #expect(outcome.error as? AsyncOperationError == .queueShutDown, "\(String(describing: outcome.error))")
        #expect(built.current == 0)
    }

    // AsyncAwait.md: "Cancelling the waiting task cancels the operation, and the wait ends at once
    // with CancellationError, whatever the operation does"; it "finishes once ... its queue gets to
    // it (... a suspended one waits for its resume, as Foundation's does)". Composition.md: neither
    // handler is called when the composite is cancelled.
    @Test
    func taskAwaitingQueueRunOfACascadeOnASuspendedQueue_cancelled_endsAtOnce_andTheCascadeFinishesOnResumeBuildingNothing() async {
        // Given a task running a cascade on a suspended queue
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        let built = Counter()
        let handlerCalls = Counter()
        let events = EventLogObserver()
        let cascade = CascadeOperation { steps in
            steps.add {
                built.increment()
                return AsyncBlockOperation {}
            }
        } cancellation: { _ in
            handlerCalls.increment()
            return .carryOn
        }
        cascade.addObserver(events)
        let run = Task { try await queue.run(cascade) }
        #expect(await eventually { queue.allOperationCount == 1 })

        // When the task is cancelled
        run.cancel()
        let outcome = await boundedOutcome(of: run)

        // Then the wait ends with CancellationError, and the cascade finishes once the queue resumes
        #expect(outcome.map { isCancellationError($0) } == true, "\(String(describing: outcome))")
        #expect(cascade.isCancelled)
        queue.isSuspended = false
        #expect(await eventually { cascade.isFinished })
        #expect(built.current == 0)
        #expect(handlerCalls.current == 0)
        #expect(events.log.all == ["didCancel", "didFinish"], "\(events.log.all)")
    }

    // README, misuse: "addChild on a RetryOperation (it makes its own attempts) ... .notSupported |
    // the children finish cancelled on a shared queue". AsyncAwait.md: runAndWait throws
    // "CancellationError for an operation cancelled without an error".
    @Test
    func childAddedToARunningRetryFromOutside_isReported_finishesCancelledWithoutRunning_andItsWaitEnds() {
        // Given a running retry
        let held = HeldOperations()
        let attemptName = uniqueName("attempt")
        let retry = RetryOperation(maxAttempts: 1) { _ in held.make(attemptName) }
        retry.name = uniqueName("retry")
        AsyncOperationQueue().addOperation(retry)
        #expect(held.waitUntilStarted(attemptName))

        // When a child is added to it from outside, and waited for
        let ran = Counter()
        let outsider = AsyncBlockOperation { ran.increment() }
        retry.addChild(outsider)

        // Then the wait ends with CancellationError, the child never ran, and the add was reported
        #expect(throws: CancellationError.self) { try outsider.runAndWait(timeout: generousTimeout) }
        #expect(ran.current == 0)
        #expect(DiagnosticsLog.shared.kinds(about: retry.name ?? "").contains(.notSupported))
        held.finish(attemptName)
        #expect(waitUntilFinished([retry]))
        #expect(retry.errors.isEmpty, "\(retry.errors)")
        #expect(retry.attemptCount == 1)
    }

    // API.md 1: "If any condition fails, execute() is never called; the operation finishes with one
    // error per failed condition". AsyncAwait.md: runAndWait throws "several as
    // AsyncOperationError/multipleErrors(operation:errors:)". RetryOperation: makeAttempt is
    // "Called when the attempt is due".
    @Test
    func retryWhoseTwoConditionsFail_makesNoAttempt_andRunAndWaitThrowsBothErrorsNamingTheRetry() {
        // Given a retry with two failing conditions
        let built = Counter()
        let retry = RetryOperation(maxAttempts: 3) { _ in
            built.increment()
            return AsyncBlockOperation {}
        }
        retry.name = uniqueName("retry")
        let first = StubError("first condition")
        let second = StubError("second condition")
        retry.addCondition(StubCondition.failing(first, name: "First"))
        retry.addCondition(StubCondition.failing(second, name: "Second"))

        // When it is run, then the wait throws both errors, naming the retry
        #expect(throws: AsyncOperationError.multipleErrors(operation: retry.name ?? "", errors: [first, second])) {
            try retry.runAndWait(timeout: generousTimeout)
        }
        #expect(built.current == 0)
        #expect(retry.attemptCount == 0)
    }

    // Foundation's addOperations(_:waitUntilFinished: true) returns once the operations have
    // finished; AsyncAwait.md names it among the blocking waits. CompositeResolution.rerun(after:):
    // "Runs the child again, after seconds from now".
    @Test
    func addOperationsWaitingUntilFinished_forACascadeRerunningAfterADelay_returnsOnlyOnceItCompleted() {
        // Given a cascade whose step fails once and is run again after a short delay
        let attempts = Counter()
        let completions = Counter()
        let cascade = CascadeOperation { steps in
            steps.add {
                let number = attempts.increment()
                return AsyncBlockOperation { if number == 1 { throw StubError("first attempt") } }
            }
        } completion: {
            completions.increment()
        } cancellation: { _ in
            .rerun(after: 0.1)
        }

        // When it is added with waitUntilFinished, on a thread of its own
        let finishedOnReturn = Recorder<Bool>()
        let returned = runOnOwnThread {
            AsyncOperationQueue().addOperations([cascade], waitUntilFinished: true)
            finishedOnReturn.append(cascade.isFinished)
        }

        // Then the call returns only once the cascade has finished, after the rerun
        #expect(returned.wait(timeout: generousTimeout))
        #expect(finishedOnReturn.all == [true])
        #expect(attempts.current == 2)
        #expect(completions.current == 1)
        #expect(cascade.errors.isEmpty, "\(cascade.errors)")
    }

    // API.md 12: "every operation that was on the queue finishes exactly once; the call returns when
    // the queue is empty. Other queues are unaffected." Foundation's waitUntilAllOperationsAreFinished
    // returns once the queue is empty.
    @Test
    func waitUntilAllOperationsAreFinished_onAQueueWhoseTransactionWaitsForACategoryHeldElsewhere_returnsOnceItShutsDown() {
        // Given a transaction whose part waits for a category held on another queue, and a thread
        // waiting for its queue to empty
        let holding = startHoldingACategory()
        let queue = AsyncOperationQueue()
        let partRan = Counter()
        let parts = Recorder<AsyncBlockOperation>()
        let transaction = TransactionOperation { children in
            children.add {
                let part = AsyncBlockOperation { partRan.increment() }
                part.addCondition(ExclusiveCategory(holding.x))
                parts.append(part)
                return part
            }
        }
        queue.addOperation(transaction)
        #expect(waitUntil { parts.all.first?.snapshot().state == .waitingForCategories })
        let emptied = runOnOwnThread { queue.waitUntilAllOperationsAreFinished() }

        // When the queue shuts down without a grace period
        queue.shutDownAndWait(gracePeriod: 0)

        // Then the waiting thread returns, the part never ran, and the other queue's holder runs on
        #expect(emptied.wait(timeout: generousTimeout), "waitUntilAllOperationsAreFinished did not return")
        #expect(transaction.errors.asOperationErrors == [.queueShutDown], "\(transaction.errors)")
        #expect(partRan.current == 0)
        #expect(!holding.holder.isFinished)
        holding.held.finish(holding.holderName)
    }

    // AsyncAwait.md: "After timeout seconds it cancels the operation with
    // AsyncOperationError/waitTimedOut(operation:after:) and throws that error." RetryOperation:
    // "cancelled during a wait, its errors are those of the attempt that was waiting to be
    // retried"; groups keep "every child's errors, then its own". Errors name what they are about.
    @Test
    func runAndWaitGivingUpOnARetryInItsBackoff_throwsWaitTimedOutNamingIt_andMakesNoOtherAttempt() {
        // Given a retry whose first attempt failed and which waits an hour before the next
        let built = Counter()
        let retry = RetryOperation(maxAttempts: 3, backoff: .fixed(3600)) { number in
            built.increment()
            return AsyncBlockOperation { throw StubError("attempt \(number)") }
        }
        let retryName = uniqueName("retry")
        retry.name = retryName
        AsyncOperationQueue().addOperation(retry)
        #expect(waitUntil { retry.lastAttempt?.isFinished == true })

        // When a wait for it gives up
        let expected = AsyncOperationError.waitTimedOut(operation: retryName, after: 0.2)
        #expect(throws: expected) { try retry.runAndWait(timeout: 0.2) }

        // Then it finishes promptly with the attempt's error then the wait's, and makes no other attempt
        #expect(waitUntilFinished([retry]), "the backoff kept the cancelled retry running")
        #expect(retry.errors.count == 2, "\(retry.errors)")
        #expect(retry.errors.first as? StubError == StubError("attempt 1"), "\(retry.errors)")
        #expect(retry.errors.last as? AsyncOperationError == expected, "\(retry.errors)")
        #expect(retry.attemptCount == 1)
        #expect(built.current == 1)
        #expect(String(describing: expected).contains(retryName))
    }

    // Composition.md: "If every attempt fails, the retry operation's errors are the last attempt's";
    // chains: "upstreamFailed ... naming the first operation that failed and why".
    @Test
    func chainAfterARetryThatGaveUp_failsTheNextLinkWithUpstreamFailed_givingOnlyTheLastAttemptsError() {
        // Given a retry whose three attempts fail, chained before a result operation
        let retry = RetryOperation(maxAttempts: 3) { number in
            AsyncBlockOperation { throw StubError("attempt \(number)") }
        }
        retry.name = uniqueName("retry")
        let next = ResultBlockOperation { 42 }
        next.name = uniqueName("next")

        // When the chain runs
        AsyncOperationQueue().addChain([retry, next])

        // Then the next link fails naming the retry and its last attempt's error only
        let expected = AsyncOperationError.upstreamFailed(operation: next.name ?? "", upstream: retry.name ?? "", reason: "StubError(attempt 3)")
        #expect(throws: expected) { try next.runAndWait(timeout: generousTimeout) }
        #expect(retry.attemptCount == 3)
    }

    // AsyncAwait.md: "After timeout seconds it cancels the operation with waitTimedOut and throws
    // that error"; "runAndWait ends at its timeout". Composition.md: "Cancelling it cancels the
    // children and still waits for them". ObserversAndTimeouts.md: "a block that itself blocks its
    // thread finishes once it returns".
    @Test
    func runAndWaitOnAGroupAlreadyStoppedByItsTimeout_whoseChildBlocksItsThread_endsAtItsOwnTimeout() {
        // Given a group stopped by its timeout, still waiting for a child that blocks its thread
        let release = Signal()
        let childStarted = Signal()
        let group = GroupOperation(operations: [AsyncBlockOperation {
            childStarted.signal()
            _ = release.wait()
        }])
        let groupName = uniqueName("group")
        group.name = groupName
        group.addObserver(TimeoutObserver(timeout: 0.1))
        AsyncOperationQueue().addOperation(group)
        #expect(childStarted.wait(timeout: generousTimeout))
        #expect(waitUntil { group.isCancelled })

        // When a thread waits for it with a short timeout
        let outcome = WaitOutcome()
        let waited = runOnOwnThread { outcome.record { try group.runAndWait(timeout: 0.3) } }
        let endedAtItsTimeout = waited.wait(timeout: generousTimeout)
        release.signal()

        // Then the wait ended at its timeout, with waitTimedOut
        #expect(endedAtItsTimeout, "runAndWait(timeout: 0.3) was still blocked \(generousTimeout) s later")
        #expect(endedAtItsTimeout || waited.wait(timeout: generousTimeout))
        #expect(outcome.error as? AsyncOperationError == .waitTimedOut(operation: groupName, after: 0.3), "\(String(describing: outcome.error))")
        #expect(waitUntilFinished([group]))
    }

    // AsyncAwait.md: "After timeout seconds it cancels the operation with waitTimedOut and throws
    // that error"; "runAndWait ends at its timeout". Composition.md: "so does finishing it by hand
    // (finish(with:) ...) while children are left: it is heard finished once they have".
    // Found by this probe: the cancel was ignored (its finish had begun), and the wait took it
    // for a finish being delivered, waiting with no deadline for the children.
    @Test
    func runAndWaitOnAGroupFinishedByHand_whoseChildBlocksItsThread_endsAtItsOwnTimeout() {
        // Given a group finished by hand, still waiting for a child that blocks its thread
        let release = Signal()
        let childStarted = Signal()
        let group = GroupOperation(operations: [AsyncBlockOperation {
            childStarted.signal()
            _ = release.wait()
        }])
        let groupName = uniqueName("group")
        group.name = groupName
        AsyncOperationQueue().addOperation(group)
        #expect(childStarted.wait(timeout: generousTimeout))
        group.finish(with: StubError("finished by hand"))
        #expect(!group.isFinished)

        // When a thread waits for it with a short timeout
        let outcome = WaitOutcome()
        let waited = runOnOwnThread { outcome.record { try group.runAndWait(timeout: 0.3) } }
        let endedAtItsTimeout = waited.wait(timeout: generousTimeout)
        release.signal()

        // Then the wait ended at its timeout, with waitTimedOut
        #expect(endedAtItsTimeout, "runAndWait(timeout: 0.3) was still blocked \(generousTimeout) s later")
        #expect(endedAtItsTimeout || waited.wait(timeout: generousTimeout))
        #expect(outcome.error as? AsyncOperationError == .waitTimedOut(operation: groupName, after: 0.3), "\(String(describing: outcome.error))")
        #expect(waitUntilFinished([group]))
    }

    // AsyncAwait.md: "Cancelling the waiting task cancels the operation, and the wait ends at once
    // with CancellationError, whatever the operation does ... So a timeout raced against the wait
    // the usual way (a task group with a sleep, the loser cancelled) always ends."
    @Test
    func awaitingAGroupFinishedByHandWhoseChildBlocksItsThread_racedAgainstATimeout_ends() async {
        // Given a group finished by hand, still waiting for a child that blocks its thread
        let release = Signal()
        let childStarted = Flag()
        let group = GroupOperation(operations: [AsyncBlockOperation {
            childStarted.raise()
            _ = release.wait()
        }])
        AsyncOperationQueue().addOperation(group)
        #expect(await eventually { childStarted.isRaised })
        group.finish(with: StubError("finished by hand"))

        // When a wait for it is raced against a short sleep
        let race = Task { () async throws -> String in
            try await withThrowingTaskGroup(of: String.self) { tasks in
                tasks.addTask {
                    try await group.finished()
                    return "finished"
                }
                tasks.addTask {
                    try await Task.sleep(nanoseconds: 200_000_000)
                    return "timed out"
                }
                let first = try await tasks.next() ?? "nothing"
                tasks.cancelAll()
                return first
            }
        }
        let outcome = await boundedOutcome(of: race, timeout: generousTimeout)
        release.signal()

        // Then the race ends, the sleep winning, while the group still waited for its child
        #expect(outcome != nil, "the race never ended")
        if case let .success(winner)? = outcome {
            #expect(winner == "timed out")
        }
        #expect(await eventually { group.isFinished })
        #expect(group.errors.asStubErrors == [StubError("finished by hand")], "\(group.errors)")
    }

    // OperationSnapshot.State.finishing: "Its errors are final; its observers are hearing that it
    // finished." API.md, seeing inside: debugDescription "says, while the operation waits, exactly
    // what for". Composition.md: a group finished by hand while children are left "is heard
    // finished once they have, with their errors before its own".
    // Found by this probe: the group was described as finishing. It is now described as
    // executing until its children have finished.
    @Test
    func groupFinishedByHandWhileAChildRuns_isNotDescribedAsFinishing_whileItsErrorsAreNotFinal() {
        // Given a running group whose child ignores cancellation and finishes only when told
        let children = Recorder<ClosureOperation>()
        let group = GroupOperation(operations: [ClosureOperation(name: uniqueName("stubborn-child")) { children.append($0) }])
        AsyncOperationQueue().addOperation(group)
        #expect(waitUntil { children.count == 1 })

        // When it is finished by hand while its child still runs, and described
        let own = StubError("finished by hand")
        group.finish(with: own)
        #expect(waitUntil { children.all.first?.isCancelled == true })
        let snapshot = group.snapshot()
        let errorsThen = group.errors.asStubErrors

        // and the child then fails
        let childError = StubError("the child failed as it stopped")
        children.all.first?.finish(with: childError)
        #expect(waitUntilFinished([group]))
        #expect(group.errors.asStubErrors == [childError, own], "\(group.errors)")

        // Then, had it said it was finishing, its errors would have been final
        if snapshot.state == .finishing {
            #expect(errorsThen == group.errors.asStubErrors, "described as '\(snapshot)' with errors \(errorsThen), which then became \(group.errors)")
        }
        #expect(snapshot.state == .executing, "\(snapshot)")
    }

    // AsyncOperationQueue.shutDown: "A negative or zero grace period (or NaN) cancels the running
    // operations at once"; API.md 12: "the call returns when the queue is empty".
    @Test
    func shutDownWithANaNGracePeriod_cancelsARunningCascadeAtOnce_andReturns() async {
        // Given a queue running a cascade whose step runs until told
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let stepName = uniqueName("step")
        let cascade = CascadeOperation { steps in
            steps.add { held.make(stepName) }
        }
        queue.addOperation(cascade)
        #expect(await eventually { held.startCount(stepName) == 1 })

        // When the queue shuts down with a grace period that is not a number
        let shutDown = Task { () async throws in await queue.shutDown(gracePeriod: .nan) }

        // Then the call returns, the cascade cancelled with queueShutDown
        #expect(await boundedOutcome(of: shutDown) != nil, "shutDown did not return")
        #expect(cascade.isFinished)
        #expect(cascade.errors.asOperationErrors == [.queueShutDown], "\(cascade.errors)")
    }

    // AsyncAwait.md: AsyncTaskOperation: "Cancelling the operation cancels the task"; finished()
    // "throws its errors". Composition.md, `.cancel` (the default): "it finishes cancelled, with the
    // child's errors". ObserversAndTimeouts.md: a timeout cancels with timedOut(after:).
    @Test
    func awaitingACascadeWhoseTaskStepSleepsForAnHourButHasATimeout_throwsThatTimeout() async {
        // Given a cascade whose step sleeps for an hour in a task, with a timeout
        let built = Counter()
        let cascade = CascadeOperation { steps in
            steps.add {
                let step = AsyncTaskOperation { try await Task.sleep(nanoseconds: 3_600_000_000_000) }
                step.addObserver(TimeoutObserver(timeout: 0.2))
                return step
            }
            steps.add {
                built.increment()
                return AsyncBlockOperation {}
            }
        }

        // When it is run and awaited
        let run = Task { try await AsyncOperationQueue().run(cascade) }
        let outcome = await boundedOutcome(of: run)

        // Then the wait ends with the step's timeout, as it is
        guard case let .failure(error)? = outcome else {
            Issue.record("the wait did not end with an error: \(String(describing: outcome))")
            return
        }
        #expect(error as? AsyncOperationError == .timedOut(after: 0.2), "\(error)")
        #expect(cascade.isCancelled)
        #expect(built.current == 0)
    }

    // MARK: - Progress

    // API.md, progress: "totalUnitCount is the number of children admitted, completedUnitCount the
    // number finished". GroupOperation: "fractionCompleted is 1 once the group has finished".
    @Test
    func retryThatGaveUp_reportsItsProgressComplete_andNeverMoreFinishedThanAdmitted() {
        // Given a retry whose three attempts fail, with a short backoff
        let retry = RetryOperation(maxAttempts: 3, backoff: .fixed(0.01)) { number in
            AsyncBlockOperation { throw StubError("attempt \(number)") }
        }

        // When it is run
        #expect(throws: StubError("attempt 3")) { try retry.runAndWait(timeout: generousTimeout) }

        // Then its progress is complete, counting at least the three attempts
        #expect(retry.progress.fractionCompleted == 1)
        #expect(retry.progress.completedUnitCount == retry.progress.totalUnitCount)
        #expect(retry.progress.totalUnitCount >= 3)
    }

    // GroupOperation: "Cancelling the progress cancels the group, and cancelling the group cancels
    // it"; "fractionCompleted is 1 once the group has finished"; totalUnitCount counts the children
    // "admitted". API.md 7: "Cancelling the group cancels its children."
    @Test
    func groupCancelledBeforeItRuns_countsItsThreeChildrenAdmittedAndFinished_andItsProgressIsCancelled() {
        // Given a group of three children, cancelled before it is queued
        let ran = Counter()
        let children = (0..<3).map { _ in AsyncBlockOperation { ran.increment() } }
        let group = GroupOperation(operations: children)
        group.cancel()

        // When it is run
        #expect(throws: CancellationError.self) { try group.runAndWait(timeout: generousTimeout) }

        // Then its progress counts the three children, all finished, and is cancelled
        #expect(group.progress.totalUnitCount == 3)
        #expect(group.progress.completedUnitCount == 3)
        #expect(group.progress.fractionCompleted == 1)
        #expect(group.progress.isCancelled)
        #expect(ran.current == 0)
        #expect(children.allSatisfy { $0.isFinished && $0.isCancelled })
    }

    // Composition.md: "cancelling the progress cancels the group"; the handler "is called when a
    // child finishes failed or cancelled"; `.carryOn`: "goes on as if the child had succeeded; the
    // completion handler still comes". Foundation: cancelling a child progress leaves its parent.
    @Test
    func cancellingTheProgressOfAGroupInsideACascade_cancelsOnlyThatGroup_whichTheHandlerCanCarryOnFrom() {
        // Given a cascade whose first step is a group with a child that runs until told
        let held = HeldOperations()
        let childName = uniqueName("inner-child")
        let inners = Recorder<GroupOperation>()
        let seen = Recorder<String>()
        let laterRan = Counter()
        let completions = Counter()
        let cascade = CascadeOperation { steps in
            steps.add {
                let inner = GroupOperation(operations: [held.make(childName)])
                inners.append(inner)
                return inner
            }
            steps.add { AsyncBlockOperation { laterRan.increment() } }
        } completion: {
            completions.increment()
        } cancellation: { failure in
            seen.append("#\(failure.index) cancelled: \(failure.isCancelled)")
            return .carryOn
        }
        AsyncOperationQueue().addOperation(cascade)
        #expect(held.waitUntilStarted(childName))

        // When the inner group's progress is cancelled
        inners.all.first?.progress.cancel()

        // Then the inner group is cancelled, the handler hears it, and the cascade carries on
        #expect(waitUntilFinished([cascade]))
        #expect(inners.all.first?.isCancelled == true)
        #expect(seen.all == ["#0 cancelled: true"], "\(seen.all)")
        #expect(laterRan.current == 1)
        #expect(completions.current == 1)
        #expect(!cascade.isCancelled)
        #expect(cascade.errors.isEmpty, "\(cascade.errors)")
        #expect(!cascade.progress.isCancelled)
    }

    // GroupOperation: "fractionCompleted is 1 once the group has finished (a group that finishes
    // with no child counts one unit then, done)". CompositeOperation: "An empty composite calls it
    // [the completion handler] when it executes."
    @Test
    func emptyCascade_callsItsCompletionOnce_andCountsOneUnitDone() throws {
        // Given a cascade with no step
        let completions = Counter()
        let cascade = CascadeOperation { _ in } completion: {
            completions.increment()
        }

        // When it is run
        try cascade.runAndWait(timeout: generousTimeout)

        // Then its completion came once and its progress is one unit, done
        #expect(completions.current == 1)
        #expect(cascade.progress.totalUnitCount == 1)
        #expect(cascade.progress.completedUnitCount == 1)
        #expect(cascade.progress.fractionCompleted == 1)
    }

    // GroupOperation: "Cancelling the progress cancels the group". API.md 5: cancelled before it
    // starts, "it finishes without executing". RetryOperation: makeAttempt is "Called when the
    // attempt is due".
    @Test
    func retryWhoseProgressIsCancelledBeforeItIsQueued_makesNoAttempt_andItsWaitThrowsCancellationError() {
        // Given a retry whose progress is cancelled before it is queued
        let built = Counter()
        let retry = RetryOperation(maxAttempts: 3) { _ in
            built.increment()
            return AsyncBlockOperation {}
        }
        retry.progress.cancel()
        #expect(waitUntil { retry.isCancelled })

        // When it is run, then the wait throws CancellationError, and no attempt was made
        #expect(throws: CancellationError.self) { try retry.runAndWait(timeout: generousTimeout) }
        #expect(built.current == 0)
        #expect(retry.attemptCount == 0)
    }

    // API.md, progress: "completedUnitCount the number finished". API.md 7: a group finishes "only
    // after every child ... has finished".
    @Test
    func groupProgress_countsAChildCancelledWhileItRuns_asFinished_whileTheGroupStillRuns() {
        // Given a running group of three children that run until told
        let held = HeldOperations()
        let names = (0..<3).map { _ in uniqueName("child") }
        let children = names.map(held.make)
        let group = GroupOperation(operations: children)
        AsyncOperationQueue().addOperation(group)
        #expect(names.allSatisfy { held.waitUntilStarted($0) })

        // When one child is cancelled
        children[1].cancel()

        // Then the group counts it finished, among three, and runs on
        #expect(waitUntil { group.progress.completedUnitCount == 1 }, "\(group.progress.completedUnitCount)")
        #expect(group.progress.totalUnitCount == 3)
        #expect(!group.isFinished)
        held.finish(names[0])
        held.finish(names[2])
        #expect(waitUntilFinished([group]))
        #expect(group.progress.completedUnitCount == 3)
    }

    // GroupOperation: "totalUnitCount those admitted (growing as children are added or produced)";
    // "A child group's progress is a child of its parent's, as Foundation's child progress works,
    // so nested groups report partial progress." API.md 7: "Children may be added while the group
    // runs, until it finishes. Groups nest."
    @Test
    func transactionAddedLateToARunningGroup_isCountedAdmitted_andItsPartsRollUpPartially() {
        // Given a running group whose first child runs until told
        let held = HeldOperations()
        let firstName = uniqueName("first")
        let group = GroupOperation(operations: [held.make(firstName)])
        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted(firstName))
        #expect(group.progress.totalUnitCount == 1)

        // When a transaction of two parts that run until told is added to it
        let partNames = [uniqueName("part"), uniqueName("part")]
        let transaction = TransactionOperation { parts in
            for name in partNames {
                parts.add { held.make(name) }
            }
        }
        group.addChild(transaction)
        #expect(partNames.allSatisfy { held.waitUntilStarted($0) })

        // Then the group counts it as a second child, and one finished part as half of it
        #expect(group.progress.totalUnitCount == 2)
        held.finish(partNames[0])
        #expect(waitUntil { abs(group.progress.fractionCompleted - 0.25) < 1e-9 }, "\(group.progress.fractionCompleted)")
        #expect(group.progress.completedUnitCount == 0)
        held.finish(partNames[1])
        #expect(waitUntilFinished([transaction]))
        #expect(waitUntil { abs(group.progress.fractionCompleted - 0.5) < 1e-9 }, "\(group.progress.fractionCompleted)")
        held.finish(firstName)
        #expect(waitUntilFinished([group]))
        #expect(group.progress.fractionCompleted == 1)
    }

    // MARK: - Shutting down a queue holding composites

    // API.md 12: "After shutDown begins, nothing new runs on that queue; running operations may
    // finish within the grace period, then are cancelled; every operation that was on the queue
    // finishes exactly once; the call returns when the queue is empty. Other queues are
    // unaffected." RetryOperation: "cancelled during a wait, its errors are those of the attempt
    // that was waiting to be retried". Composition.md: no handler is called for a cancelled composite.
    @Test
    func shutDownWithoutGrace_ofAQueueHoldingCompositesAtEveryStage_finishesEachOnceWithQueueShutDown_andReturns() async {
        // Given a queue holding a cascade whose first step runs, a transaction whose part waits for a
        // category held on another queue, a retry in its backoff, and a group waiting for the cascade
        let holding = startHoldingACategory()
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let stepName = uniqueName("step-0")
        let built = Recorder<String>()
        let executed = Recorder<String>()
        let cascade = CascadeOperation { steps in
            steps.add {
                built.append("cascade step 0")
                return held.make(stepName)
            }
            steps.add {
                built.append("cascade step 1")
                return AsyncBlockOperation { executed.append("cascade step 1") }
            }
        }
        let waitingParts = Recorder<AsyncBlockOperation>()
        let transaction = TransactionOperation { parts in
            parts.add {
                let part = AsyncBlockOperation { executed.append("transaction part") }
                part.addCondition(ExclusiveCategory(holding.x))
                waitingParts.append(part)
                return part
            }
        }
        let retry = RetryOperation(maxAttempts: 3, backoff: .fixed(3600)) { number in
            AsyncBlockOperation { throw StubError("attempt \(number)") }
        }
        let group = GroupOperation(operations: [AsyncBlockOperation { executed.append("group child") }])
        group.addDependency(cascade)
        let operations: [AsyncOperation] = [cascade, transaction, retry, group]
        let logs = operations.map { operation -> EventLogObserver in
            let log = EventLogObserver()
            operation.addObserver(log)
            return log
        }
        queue.addOperations(operations, waitUntilFinished: false)
        #expect(await eventually { held.startCount(stepName) == 1 })
        #expect(await eventually { waitingParts.all.first?.snapshot().state == .waitingForCategories })
        #expect(await eventually { retry.lastAttempt?.isFinished == true })

        // When the queue shuts down without a grace period
        let shutDown = Task { () async throws in await queue.shutDown(gracePeriod: 0) }
        let returned = await boundedOutcome(of: shutDown)

        // Then the call returns, and each finished once, cancelled with queueShutDown, nothing more run
        #expect(returned != nil, "shutDown did not return")
        #expect(operations.allSatisfy { $0.isFinished })
        for (index, log) in logs.enumerated() {
            let expected = index == 3 ? ["didCancel", "didFinish"] : ["didStart", "didCancel", "didFinish"]
            #expect(log.log.all == expected, "operation \(index): \(log.log.all)")
        }
        #expect(cascade.errors.asOperationErrors == [.queueShutDown], "\(cascade.errors)")
        #expect(transaction.errors.asOperationErrors == [.queueShutDown], "\(transaction.errors)")
        #expect(group.errors.asOperationErrors == [.queueShutDown], "\(group.errors)")
        #expect(retry.errors.count == 2, "\(retry.errors)")
        #expect(retry.errors.first as? StubError == StubError("attempt 1"), "\(retry.errors)")
        #expect(retry.errors.last as? AsyncOperationError == .queueShutDown, "\(retry.errors)")
        #expect(retry.attemptCount == 1)
        #expect(built.all == ["cascade step 0"], "\(built.all)")
        #expect(executed.all.isEmpty, "\(executed.all)")
        #expect(!holding.holder.isFinished, "the shutdown reached the holder on another queue")
        holding.held.finish(holding.holderName)
    }

    // AsyncOperationQueue.shutDown: "Cancellation is cooperative for a running operation: one that
    // ignores it keeps this call waiting"; "the call returns when the queue is empty".
    // Composition.md: a cancelled retry "makes no further attempt".
    @Test
    func shutDownWhileARetrysAttemptIgnoresCancellationAndThenFails_returnsOnlyAfterIt_andMakesNoOtherAttempt() async {
        // Given a retry whose attempt ignores cancellation and finishes only when told
        let queue = AsyncOperationQueue()
        let attempts = Recorder<ClosureOperation>()
        let retry = RetryOperation(maxAttempts: 3) { number in
            ClosureOperation(name: "attempt \(number)") { attempts.append($0) }
        }
        queue.addOperation(retry)
        #expect(await eventually { attempts.count == 1 })

        // When the queue shuts down without a grace period, and the attempt fails some time later
        let returned = Flag()
        let shutDown = Task { () async throws in
            await queue.shutDown(gracePeriod: 0)
            returned.raise()
        }
        #expect(await eventually { retry.isCancelled && attempts.all.first?.isCancelled == true })
        try? await Task.sleep(nanoseconds: 200_000_000)
        #expect(!returned.isRaised, "shutDown returned while the attempt still ran")
        let failure = StubError("the attempt failed as it stopped")
        attempts.all.first?.finish(with: failure)

        // Then the call returns, and the retry made no other attempt
        #expect(await boundedOutcome(of: shutDown) != nil, "shutDown did not return")
        #expect(retry.isFinished)
        #expect(retry.attemptCount == 1)
        #expect(attempts.count == 1)
        #expect(retry.errors.count == 2, "\(retry.errors)")
        #expect(retry.errors.first as? StubError == failure, "\(retry.errors)")
        #expect(retry.errors.last as? AsyncOperationError == .queueShutDown, "\(retry.errors)")
    }

    // RunningOperationsInAService.md: "From the moment it is called the queue refuses new
    // operations: one added later finishes at once without executing, cancelled with
    // AsyncOperationError/queueShutDown, and its observers hear it."
    @Test
    func compositesAddedDuringAShutDownsGracePeriod_finishAtOnceWithQueueShutDown_callingNoFactory() async {
        // Given a queue shutting down with a long grace period while an operation runs
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let runnerName = uniqueName("runner")
        queue.addOperation(held.make(runnerName))
        #expect(await eventually { held.startCount(runnerName) == 1 })
        let shutDown = Task { () async throws in await queue.shutDown(gracePeriod: 3600) }
        #expect(await eventually { queue.isShutDown })

        // When a cascade and a retry are added
        let built = Counter()
        let cascade = CascadeOperation { steps in
            steps.add {
                built.increment()
                return AsyncBlockOperation {}
            }
        }
        let retry = RetryOperation(maxAttempts: 2) { _ in
            built.increment()
            return AsyncBlockOperation {}
        }
        let logs = [EventLogObserver(), EventLogObserver()]
        cascade.addObserver(logs[0])
        retry.addObserver(logs[1])
        queue.addOperations([cascade, retry], waitUntilFinished: false)

        // Then both finish at once, cancelled with queueShutDown, having built nothing
        #expect(await eventually { cascade.isFinished && retry.isFinished })
        #expect(cascade.errors.asOperationErrors == [.queueShutDown], "\(cascade.errors)")
        #expect(retry.errors.asOperationErrors == [.queueShutDown], "\(retry.errors)")
        #expect(built.current == 0)
        #expect(logs.allSatisfy { $0.log.all == ["didCancel", "didFinish"] }, "\(logs.map(\.log.all))")
        held.finish(runnerName)
        #expect(await boundedOutcome(of: shutDown) != nil, "shutDown did not return")
    }

    // AsyncOperationQueue.shutDown: "An operation that waits for nothing but a slot (or its turn on
    // a serial queue) is cancelled at once but finishes, without executing, when the queue gets to
    // it ... it finishes once they let one go." OperationSnapshot: `waitingInLine`, "cancelled".
    @Test
    func cascadeWaitingForItsTurnOnASerialQueueThatShutsDown_isCancelledAtOnce_saysSo_andFinishesOnceTheRunningOneDoes() async {
        // Given a serial queue running an operation, with a cascade waiting for its turn
        let queue = AsyncOperationQueue()
        queue.name = uniqueName("serial")
        queue.maxConcurrentOperationCount = 1
        let held = HeldOperations()
        let runnerName = uniqueName("runner")
        let built = Counter()
        let events = EventLogObserver()
        let cascade = CascadeOperation { steps in
            steps.add {
                built.increment()
                return AsyncBlockOperation {}
            }
        }
        cascade.name = uniqueName("cascade")
        cascade.addObserver(events)
        queue.addOperations([held.make(runnerName), cascade], waitUntilFinished: false)
        #expect(await eventually { held.startCount(runnerName) == 1 })

        // When the queue shuts down with a long grace period
        let returned = Flag()
        let shutDown = Task { () async throws in
            await queue.shutDown(gracePeriod: 3600)
            returned.raise()
        }

        // Then the cascade is cancelled at once, still in line, and says so
        #expect(await eventually { cascade.isCancelled })
        #expect(!cascade.isFinished)
        let snapshot = cascade.snapshot()
        #expect(snapshot.state == .waitingInLine, "\(snapshot)")
        #expect(cascade.debugDescription.hasPrefix("\(cascade.name ?? ""): waiting in line, cancelled"), "\(cascade.debugDescription)")
        #expect(!returned.isRaised)

        // and finishes, without building a step, once the running operation finishes
        held.finish(runnerName)
        #expect(await boundedOutcome(of: shutDown) != nil, "shutDown did not return")
        #expect(cascade.errors.asOperationErrors == [.queueShutDown], "\(cascade.errors)")
        #expect(built.current == 0)
        #expect(events.log.all == ["didCancel", "didFinish"], "\(events.log.all)")
    }

    // MARK: - debugDescription while composites wait

    // API.md, seeing inside: debugDescription "says, while the operation waits, exactly what for:
    // unfinished dependencies by name"; the queue's "lists every unfinished operation ... with the
    // same explanation".
    @Test
    func transactionWaitingForARunningCascade_namesItAsItsDependency_inItsOwnAndItsQueuesDescription() {
        // Given a transaction that depends on a cascade whose step runs until told
        let queue = AsyncOperationQueue()
        queue.name = uniqueName("ledger")
        let held = HeldOperations()
        let stepName = uniqueName("step")
        let cascade = CascadeOperation { steps in
            steps.add { held.make(stepName) }
        }
        let cascadeName = uniqueName("cascade")
        cascade.name = cascadeName
        let transaction = TransactionOperation { parts in
            parts.add { AsyncBlockOperation {} }
        }
        let transactionName = uniqueName("transaction")
        transaction.name = transactionName
        transaction.addDependency(cascade)
        queue.addOperations([cascade, transaction], waitUntilFinished: false)
        #expect(held.waitUntilStarted(stepName))

        // When both are described, then the transaction names the cascade, which is executing
        let line = "\(transactionName): waiting for dependencies; waits for dependency '\(cascadeName)'"
        #expect(waitUntil { transaction.debugDescription == line }, "\(transaction.debugDescription)")
        let description = queue.debugDescription
        #expect(description.contains("\n  \(cascadeName): executing"), "\(description)")
        #expect(description.contains("\n  \(line)"), "\(description)")
        held.finish(stepName)
        #expect(waitUntilFinished([cascade, transaction]))
    }

    // API.md, seeing inside: debugDescription names "each category it waits for with the name of the
    // operation holding it". Composition.md: children "run on the composite's own queue with the full
    // engine".
    @Test
    func operationWaitingForACategoryHeldByACascadesStep_namesTheStepAsItsHolder() {
        // Given a cascade whose step holds category X and runs until told
        let x = uniqueName("X")
        let held = HeldOperations()
        let stepName = uniqueName("step")
        let cascade = CascadeOperation { steps in
            steps.add {
                let step = held.make(stepName)
                step.addCondition(ExclusiveCategory(x))
                return step
            }
        }
        cascade.name = uniqueName("cascade")
        AsyncOperationQueue().addOperation(cascade)
        #expect(held.waitUntilStarted(stepName))

        // When an operation of another queue waits for X
        let outsider = AsyncBlockOperation {}
        let outsiderName = uniqueName("outsider")
        outsider.name = outsiderName
        outsider.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(outsider)

        // Then it names the step holding X
        #expect(waitUntil { outsider.snapshot().state == .waitingForCategories })
        let description = outsider.debugDescription
        #expect(description.hasPrefix("\(outsiderName): waiting for categories; waits for category '\(x)'"), "\(description)")
        #expect(description.contains("held by '\(stepName)'"), "\(description)")
        held.finish(stepName)
        #expect(waitUntilFinished([cascade, outsider]))
    }

    // API.md, seeing inside: debugDescription names "each category it waits for with the name of the
    // operation holding it"; OperationSnapshot.State.executing: "Its execute() runs (or ran and the
    // operation has not finished yet)". RetryOperation: attempts run "as children of the retry
    // operation ... with their conditions, categories and observers honoured".
    @Test
    func retrysAttemptWaitingForACategoryHeldElsewhere_namesItsHolder_whileTheRetrySaysItExecutes() {
        // Given a retry whose attempt needs a category held on another queue
        let holding = startHoldingACategory()
        let attemptName = uniqueName("attempt")
        let retry = RetryOperation(maxAttempts: 1) { _ in
            let attempt = AsyncBlockOperation {}
            attempt.name = attemptName
            attempt.addCondition(ExclusiveCategory(holding.x))
            return attempt
        }
        let retryName = uniqueName("retry")
        retry.name = retryName
        let queue = AsyncOperationQueue()
        queue.addOperation(retry)

        // When the attempt waits, then it names the holder, and the retry says it executes
        #expect(waitUntil { retry.lastAttempt?.snapshot().state == .waitingForCategories })
        let attemptLine = retry.lastAttempt?.debugDescription ?? ""
        #expect(attemptLine.hasPrefix("\(attemptName): waiting for categories; waits for category '\(holding.x)'"), "\(attemptLine)")
        #expect(attemptLine.contains("held by '\(holding.holderName)'"), "\(attemptLine)")
        #expect(retry.debugDescription == "\(retryName): executing", "\(retry.debugDescription)")
        #expect(queue.debugDescription.contains("\n  \(retryName): executing"), "\(queue.debugDescription)")
        holding.held.finish(holding.holderName)
        #expect(waitUntilFinished([retry]))
        #expect(retry.errors.isEmpty, "\(retry.errors)")
    }

    // API.md, seeing inside: debugDescription names "conditions not yet answered by name".
    // Composites are GroupOperations: "give them conditions and dependencies".
    @Test
    func transactionWhoseConditionHasNotAnswered_namesThatCondition() {
        // Given a transaction whose condition has not answered
        let gate = HeldCallback<ConditionResult>()
        let conditionName = uniqueName("Approval")
        let built = Counter()
        let transaction = TransactionOperation { parts in
            parts.add {
                built.increment()
                return AsyncBlockOperation {}
            }
        }
        let transactionName = uniqueName("transaction")
        transaction.name = transactionName
        transaction.addCondition(StubCondition(name: conditionName) { _, completion in gate.hold(completion) })
        AsyncOperationQueue().addOperation(transaction)
        #expect(gate.waitUntilHeld())

        // When it is described, then it names the condition
        #expect(transaction.debugDescription == "\(transactionName): evaluating conditions; waits for condition '\(conditionName)'", "\(transaction.debugDescription)")
        #expect(built.current == 0)
        gate.call(.satisfied)
        #expect(waitUntilFinished([transaction]))
        #expect(built.current == 1)
    }

    // API.md, seeing inside: debugDescription names "each category it waits for with the name of the
    // operation holding it". DebuggingAQueue.md: "a suspended queue, or its turn"; GroupOperation:
    // children "start when the group executes; until then they wait".
    @Test
    func childOfAGroupWaitingForACategory_saysItWaitsForItsGroup_andTheGroupNamesTheHolder() {
        // Given a group in a category held on another queue, with a child
        let holding = startHoldingACategory()
        let child = AsyncBlockOperation {}
        let childName = uniqueName("child")
        child.name = childName
        let group = GroupOperation(operations: [child])
        let groupName = uniqueName("group")
        group.name = groupName
        group.addCondition(ExclusiveCategory(holding.x))
        AsyncOperationQueue().addOperation(group)

        // When the group waits, then the group names the holder, and the child names its group
        #expect(waitUntil { group.snapshot().state == .waitingForCategories })
        #expect(group.debugDescription.hasPrefix("\(groupName): waiting for categories; waits for category '\(holding.x)'"), "\(group.debugDescription)")
        #expect(group.debugDescription.contains("held by '\(holding.holderName)'"), "\(group.debugDescription)")
        #expect(child.debugDescription == "\(childName): waiting in line; waits for its group '\(groupName)' to start", "\(child.debugDescription)")
        holding.held.finish(holding.holderName)
        #expect(waitUntilFinished([group]))
        #expect(child.isFinished && !child.isCancelled)
    }

    // MARK: - BackoffPolicy

    // BackoffPolicy.exponential: "Wait initial seconds before the first retry, and multiplier times
    // longer before each one after that, never more than maximum seconds": from zero, every delay
    // is zero.
    // Found by this probe: 0 × an overflowed power is NaN, which read as the maximum.
    @Test
    func exponentialBackoffFromZero_waitsNothingBeforeAnyRetry_howeverManyThereAre() {
        // Given exponential policies that start at zero
        let tenfold = BackoffPolicy.exponential(initial: 0, multiplier: 10, maximum: 60)
        let doubling = BackoffPolicy.exponential(initial: 0)

        // When asked for the delay before attempts near and far, then every one is zero
        for attempt in [2, 3, 50, 400] {
            #expect(tenfold.delay(beforeAttempt: attempt) == 0, "before attempt \(attempt)")
        }
        for attempt in [2, 100, 1_100, 5_000] {
            #expect(doubling.delay(beforeAttempt: attempt) == 0, "before attempt \(attempt)")
        }
    }

    // BackoffPolicy.withJitter: "a delay d becomes a value between d * (1 - fraction) and d";
    // "fraction: how much of each delay the jitter may take away, from 0 (none) to 1 (all)";
    // delay(beforeAttempt:): "Never negative; 0 for the first attempt."
    @Test
    func jitteredBackoff_staysBetweenTheShortenedAndTheFullDelay_atTheEdgesOfItsDraws() {
        let delay = 8.0
        // A draw of 0 takes nothing away; a draw just below 1 takes nearly the whole fraction
        #expect(BackoffPolicy.fixed(delay).withJitter(0.5, random: { 0 }).delay(beforeAttempt: 2) == delay)
        let shortest = BackoffPolicy.fixed(delay).withJitter(0.5, random: { 0.999_999 }).delay(beforeAttempt: 2)
        #expect(shortest >= delay * 0.5 && shortest <= delay, "\(shortest)")
        // Full jitter by default; a fraction beyond 1 never makes a delay negative
        #expect(BackoffPolicy.exponential(initial: 1, maximum: 4).withJitter(random: { 0.25 }).delay(beforeAttempt: 5) == 3)
        let beyond = BackoffPolicy.fixed(delay).withJitter(3, random: { 0.9 }).delay(beforeAttempt: 2)
        #expect(beyond >= 0 && beyond <= delay, "\(beyond)")
        // The first attempt never waits, jitter or not
        #expect(BackoffPolicy.fixed(delay).withJitter(random: { 0.5 }).delay(beforeAttempt: 1) == 0)
    }

    // BackoffPolicy: "0.5 s, 1 s, 2 s, 4 s, ... at most 30 s"; delay(beforeAttempt:): "Never
    // negative; 0 for the first attempt."
    @Test
    func exponentialBackoff_growsAsDocumented_neverPassesItsMaximum_andNoDelayIsNegative() {
        let growing = BackoffPolicy.exponential(initial: 0.5, maximum: 30)
        #expect((2...6).map { growing.delay(beforeAttempt: $0) } == [0.5, 1, 2, 4, 8])
        #expect(growing.delay(beforeAttempt: 8) == 30)
        #expect(growing.delay(beforeAttempt: 5_000) == 30)
        #expect(growing.delay(beforeAttempt: 1) == 0)
        #expect(growing.delay(beforeAttempt: 0) == 0)
        #expect(growing.delay(beforeAttempt: -3) == 0)
        #expect(BackoffPolicy.fixed(-3).delay(beforeAttempt: 2) == 0)
        #expect(BackoffPolicy.fixed(.nan).delay(beforeAttempt: 2) == 0)
        #expect(BackoffPolicy.none.delay(beforeAttempt: 7) == 0)
    }

    // DelayOperation(_:): "an infinite one [finishes] only when cancelled". RetryOperation:
    // "Cancelling the retry operation cancels ... the wait before the next one, and it then finishes
    // without further attempts; cancelled during a wait, its errors are those of the attempt that
    // was waiting to be retried". AsyncAwait.md: several errors are thrown as multipleErrors.
    @Test
    func retryWithAnInfiniteBackoff_cancelledWithAnErrorDuringIt_endsTheWait_andThrowsTheAttemptsErrorThenItsOwn() {
        // Given a retry whose first attempt failed and which waits forever before the next
        let retry = RetryOperation(maxAttempts: 2, backoff: .fixed(.infinity)) { number in
            AsyncBlockOperation { throw StubError("attempt \(number)") }
        }
        let retryName = uniqueName("retry")
        retry.name = retryName
        AsyncOperationQueue().addOperation(retry)
        #expect(waitUntil { retry.lastAttempt?.isFinished == true })

        // When it is cancelled with an error
        let reason = StubError("stop waiting")
        retry.cancel(with: reason)

        // Then the wait ends with the attempt's error and the cancel's, and no other attempt is made
        let expected = AsyncOperationError.multipleErrors(operation: retryName, errors: [StubError("attempt 1"), reason])
        #expect(throws: expected) { try retry.runAndWait(timeout: generousTimeout) }
        #expect(retry.attemptCount == 1)
    }
}
