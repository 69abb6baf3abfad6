import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// Round 6 of the adversarial probes: combinations of features that are each documented but
// rarely used together. Retries, cascades and transactions whose children use categories,
// timeouts and failing conditions, or sit in groups that are cancelled or on queues that shut
// down; typed chains through retries, groups, timeouts, delays and plain queues; the async
// bridges raced against cancellation and shutdown; barriers, suspension and queue width mixed
// with categories; observers on composites and their children; and ProcedureKit's spellings
// from the migration guide. Each probe quotes the sentence it checks. Every wait for something
// that must happen is bounded, and nothing asserts on wall-clock speed. Three probes failed as
// first written (serial order around a dependency that just finished, on a serial queue, in a
// serial group and after a retry): a serial queue's turn ended when the operation started, so
// the next in line went to Foundation before the dependents of the running one were told.

/// Whether `error` is `AsyncOperationError.categoryHeldByEnclosingGroup` for a category whose
/// name contains `category`.
private func isCategoryHeldByEnclosingGroup(_ error: (any Error)?, _ category: String) -> Bool {
    guard case let .categoryHeldByEnclosingGroup(held, _)? = error as? AsyncOperationError else { return false }
    return held.contains(category)
}

/// A finish a test records: the index, attempt, errors and cancellation a handler was given.
private struct SeenFailure: Equatable, Sendable, CustomStringConvertible {
    let index: Int
    let attempt: Int
    let errors: [String]
    let isCancelled: Bool

    init(_ failure: CompositeFailure) {
        index = failure.index
        attempt = failure.attempt
        errors = failure.errors.map { String(describing: $0) }
        isCancelled = failure.isCancelled
    }

    init(index: Int, attempt: Int, errors: [any Error], isCancelled: Bool) {
        self.index = index
        self.attempt = attempt
        self.errors = errors.map { String(describing: $0) }
        self.isCancelled = isCancelled
    }

    var description: String { "#\(index) attempt \(attempt) \(errors) cancelled: \(isCancelled)" }
}

@Suite("Cross-feature probes, round 6")
struct CrossFeatureProbeTests {
    // MARK: - Retries with categories, timeouts and conditions

    // ConditionsAndMutualExclusion.md: "A child that needs a category its enclosing group already
    // holds could never run, so it fails at once with
    // AsyncOperationError/categoryHeldByEnclosingGroup". Composition.md: "If every attempt fails,
    // the retry operation's errors are the last attempt's."
    @Test
    func retryWhoseAttemptsNeedTheCategoryTheRetryHolds_failsEveryAttemptAtOnce_andEndsWithThatError() {
        // Given a retry operation in category X whose attempts need X too
        let x = uniqueName("X")
        let executed = Counter()
        let retry = RetryOperation(maxAttempts: 3) { _ in
            let attempt = AsyncBlockOperation { executed.increment() }
            attempt.addCondition(ExclusiveCategory(x))
            return attempt
        }
        retry.name = uniqueName("retry")
        retry.addCondition(ExclusiveCategory(x))

        // When it runs
        AsyncOperationQueue().addOperation(retry)

        // Then every attempt fails at once without executing, and the retry ends with the last
        // attempt's error alone
        #expect(waitUntilFinished([retry]))
        #expect(executed.current == 0)
        #expect(retry.attemptCount == 3)
        #expect(retry.errors.count == 1, "\(retry.errors)")
        #expect(isCategoryHeldByEnclosingGroup(retry.errors.first, x), "\(retry.errors)")
    }

    // API.md 2: "Operations that share a mutually exclusive category never execute at the same
    // time, also when they sit on different AsyncOperationQueues." RunningOperationsInAService.md:
    // a failing job "retries with backoff, 3 attempts in all, and holds its account from its first
    // attempt to its last". RetryOperation: attempts run "as children of the retry operation (it is
    // a GroupOperation)".
    @Test
    func retryInACategory_keepsItThroughItsBackoffs_soAnOperationOfAnotherQueueRunsOnlyAfterItsLastAttempt() {
        // Given a retry operation in category X whose first two attempts fail, with a backoff,
        // and whose third runs until told
        let x = uniqueName("X")
        let held = HeldOperations()
        let lastName = uniqueName("last-attempt")
        let retry = RetryOperation(maxAttempts: 3, backoff: .fixed(0.2)) { number in
            number < 3 ? AsyncBlockOperation { throw StubError("attempt \(number)") } : held.make(lastName)
        }
        retry.addCondition(ExclusiveCategory(x))
        let queue = AsyncOperationQueue()
        queue.addOperation(retry)
        #expect(waitUntil { retry.attemptCount >= 1 })

        // When an operation of another queue, in X, is added while it runs
        let outsiderRan = Counter()
        let outsider = AsyncBlockOperation { outsiderRan.increment() }
        outsider.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(outsider)

        // Then the outsider has not run by the time the last attempt starts, after both backoffs
        #expect(held.waitUntilStarted(lastName))
        #expect(outsiderRan.current == 0, "the outsider ran while the retry operation held X between its attempts")
        #expect(outsider.snapshot().state == .waitingForCategories, "\(outsider.snapshot())")
        held.finish(lastName)
        #expect(waitUntilFinished([retry, outsider]))
        #expect(retry.errors.isEmpty, "\(retry.errors)")
        #expect(outsiderRan.current == 1)
    }

    // ObserversAndTimeouts.md: a timeout "frees its categories once it finishes". API.md 2:
    // "Cancelling or failing an operation frees its categories." RetryOperation: an attempt
    // "cancel[led] with cancel(with:)" is retried; "Attempts run ... with their conditions,
    // categories and observers honoured."
    @Test
    func retryAttemptStoppedByItsTimeoutInACategory_freesIt_andTheNextAttemptNeverOverlapsAnotherQueuesHolder() {
        // Given a retry whose first attempt, in X, never finishes but has a timeout, and whose
        // second attempt, in X, succeeds; its backoff is long enough for X to change hands
        let x = uniqueName("X")
        let held = HeldOperations()
        let firstName = uniqueName("first-attempt")
        let secondRan = Flag()
        let attempts = Recorder<AsyncBlockOperation>()
        let retry = RetryOperation(maxAttempts: 2, backoff: .fixed(1)) { number -> AsyncBlockOperation in
            if number == 1 {
                let attempt = held.make(firstName)
                attempts.append(attempt)
                attempt.addObserver(TimeoutObserver(timeout: 0.3))
                attempt.addCondition(ExclusiveCategory(x))
                return attempt
            }
            let attempt = AsyncBlockOperation { secondRan.raise() }
            attempt.addCondition(ExclusiveCategory(x))
            return attempt
        }
        let queue = AsyncOperationQueue()
        queue.addOperation(retry)
        #expect(held.waitUntilStarted(firstName))

        // When an operation of another queue waits for X meanwhile
        let outsiderName = uniqueName("outsider")
        let outsider = held.make(outsiderName)
        outsider.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(outsider)

        // Then the timed-out attempt lets the outsider have X
        #expect(held.waitUntilStarted(outsiderName))
        // and the second attempt, if it did not run before the outsider got X, waits for it
        if !secondRan.isRaised {
            #expect(waitUntil { retry.attemptCount == 2 && retry.lastAttempt?.snapshot().state == .waitingForCategories },
                    "the second attempt did not wait for X while the outsider held it: \(String(describing: retry.lastAttempt?.snapshot()))")
        }
        held.finish(outsiderName)
        #expect(waitUntilFinished([retry, outsider]))
        #expect(secondRan.isRaised)
        #expect(retry.errors.isEmpty, "\(retry.errors)")
        #expect(retry.attemptCount == 2)
        #expect(attempts.all.first?.errors.asOperationErrors == [.timedOut(after: 0.3)], "\(attempts.all.first?.errors ?? [])")
    }

    // RetryOperation: "An attempt fails when it finishes with errors (one cancelled with
    // cancel(), which records none, does not fail: cancel it with cancel(with:) to have it
    // retried)." "The retry operation succeeds as soon as an attempt succeeds".
    @Test
    func retryWhoseAttemptIsCancelledWithoutAnError_makesNoOtherAttempt_andDoesNotFail() throws {
        // Given a retry whose attempts never call their continuation, and are cancelled by an
        // observer as they start
        let retry = RetryOperation(maxAttempts: 3) { _ in
            let attempt = AsyncBlockOperation { _ in }
            attempt.addObserver(StartedObserver { $0.cancel() })
            return attempt
        }

        // When it runs
        try retry.runAndWait(timeout: generousTimeout)

        // Then it made one attempt, and finished neither failed nor cancelled
        #expect(retry.attemptCount == 1)
        #expect(retry.errors.isEmpty, "\(retry.errors)")
        #expect(!retry.isCancelled)
        #expect(retry.lastAttempt?.isCancelled == true)
    }

    // Composition.md: the `.cancel` answer (the default) "finishes cancelled, with the child's
    // errors". RetryOperation: "An attempt fails when it finishes with errors"; "Groups nest"
    // (API.md 7); composites "nest ... in any GroupOperation".
    @Test
    func retryOfACascadeThatGaveUp_buildsAFreshCascade_andSucceedsWithIt() throws {
        // Given a retry whose attempts are cascades of two steps, the second of which fails on the
        // first attempt
        let ran = Recorder<String>()
        let retry = RetryOperation(maxAttempts: 2) { number in
            CascadeOperation { steps in
                steps.add { AsyncBlockOperation { ran.append("step 0 of attempt \(number)") } }
                steps.add {
                    AsyncBlockOperation {
                        ran.append("step 1 of attempt \(number)")
                        if number == 1 { throw StubError("step 1 failed") }
                    }
                }
            }
        }

        // When it runs
        try retry.runAndWait(timeout: generousTimeout)

        // Then the second cascade ran both steps again, and nothing is reported failed
        #expect(ran.all == ["step 0 of attempt 1", "step 1 of attempt 1", "step 0 of attempt 2", "step 1 of attempt 2"])
        #expect(retry.attemptCount == 2)
        #expect(retry.errors.isEmpty, "\(retry.errors)")
    }

    // ObserversAndTimeouts.md: `operationDidStart(_:)` "exactly once", `operationDidCancel(_:)`
    // "at most once", `operationDidFinish(_:errors:)` "exactly once, last". TimeoutObserver: "One
    // observer may be added to several operations; each gets its own timer."
    @Test
    func observersOfARetryAndOfEachAttempt_sharingOneTimeoutObserver_hearEachEventOnce() throws {
        // Given a retry whose first two attempts never finish and whose third succeeds, every
        // attempt observed and given the same timeout observer
        let timeout = TimeoutObserver(timeout: 0.3)
        let held = HeldOperations()
        let attemptLogs = Recorder<(number: Int, log: EventLogObserver)>()
        let retry = RetryOperation(maxAttempts: 3) { number in
            let attempt = number < 3 ? held.make(uniqueName("hangs")) : AsyncBlockOperation {}
            let log = EventLogObserver()
            attempt.addObserver(log)
            attempt.addObserver(timeout)
            attemptLogs.append((number, log))
            return attempt
        }
        let retryLog = EventLogObserver()
        retry.addObserver(retryLog)

        // When it runs
        try retry.runAndWait(timeout: generousTimeout)

        // Then the retry and each attempt heard each of their events once
        #expect(waitUntil { retryLog.log.all.contains("didFinish") })
        #expect(retryLog.log.all == ["didStart", "didFinish"], "\(retryLog.log.all)")
        let logs = attemptLogs.all.sorted { $0.number < $1.number }
        #expect(logs.map(\.number) == [1, 2, 3])
        for (number, log) in logs {
            #expect(waitUntil { log.log.all.contains("didFinish") })
            let expected = number < 3 ? ["didStart", "didCancel", "didFinish"] : ["didStart", "didFinish"]
            #expect(log.log.all == expected, "attempt \(number): \(log.log.all)")
            let errors = log.finishedErrors.all.map(\.asOperationErrors)
            #expect(errors == [number < 3 ? [.timedOut(after: 0.3)] : []], "attempt \(number): \(errors)")
        }
        #expect(retry.errors.isEmpty, "\(retry.errors)")
    }

    // MARK: - Composites with conditions, categories and timeouts

    // Composition.md: "The cancellation handler is called when a child finishes failed or
    // cancelled"; CompositeFailure tells "with which errors, and whether it was cancelled";
    // `.carryOn` "goes on as if the child had succeeded; the completion handler still comes";
    // "A composite's errors hold its children's errors, except those of attempts that were run
    // again or carried on". API.md 1: a failed condition: "execute() is never called".
    @Test
    func cascadeStepStoppedByAFailingCondition_reachesTheHandlerAsFailedNotCancelled_andCarryOnCompletes() throws {
        // Given a cascade whose first step has a condition that fails, carrying on past it
        let conditionError = StubError("not allowed")
        let executed = Recorder<String>()
        let failures = Recorder<SeenFailure>()
        let completions = Counter()
        let cascade = CascadeOperation { steps in
            steps.add {
                let step = AsyncBlockOperation { executed.append("step 0") }
                step.addCondition(StubCondition.failing(conditionError))
                return step
            }
            steps.add { AsyncBlockOperation { executed.append("step 1") } }
        } completion: {
            completions.increment()
        } cancellation: { failure in
            failures.append(SeenFailure(failure))
            return .carryOn
        }

        // When it runs
        try cascade.runAndWait(timeout: generousTimeout)

        // Then the handler saw step 0 failed with the condition's error, not cancelled; step 1
        // ran, the completion came once, and the cascade reports nothing
        #expect(failures.all == [SeenFailure(index: 0, attempt: 1, errors: [conditionError], isCancelled: false)], "\(failures.all)")
        #expect(executed.all == ["step 1"])
        #expect(completions.current == 1)
        #expect(cascade.errors.isEmpty, "\(cascade.errors)")
    }

    // Composition.md: `.rerun` "runs a new attempt of the child at once"; the handler learns
    // "whether it was cancelled"; "A composite's errors hold its children's errors, except those
    // of attempts that were run again". ObserversAndTimeouts.md: TimeoutObserver "cancels the
    // operation with AsyncOperationError/timedOut(after:)".
    @Test
    func cascadeStepStoppedByItsTimeout_isSeenCancelledWithTheTimeout_andItsRerunLeavesNoError() throws {
        // Given a cascade whose step never finishes on its first attempt but has a timeout, and
        // succeeds on its second; the handler reruns it
        let held = HeldOperations()
        let builds = Counter()
        let failures = Recorder<SeenFailure>()
        let cascade = CascadeOperation { steps in
            steps.add {
                if builds.increment() == 1 {
                    let step = held.make(uniqueName("hangs"))
                    step.addObserver(TimeoutObserver(timeout: 0.3))
                    return step
                }
                return AsyncBlockOperation {}
            }
        } cancellation: { failure in
            failures.append(SeenFailure(failure))
            return .rerun
        }

        // When it runs
        try cascade.runAndWait(timeout: generousTimeout)

        // Then the handler saw the first attempt cancelled with the timeout, and the cascade,
        // having recovered, reports nothing
        #expect(failures.all == [SeenFailure(index: 0, attempt: 1, errors: [AsyncOperationError.timedOut(after: 0.3)], isCancelled: true)], "\(failures.all)")
        #expect(builds.current == 2)
        #expect(cascade.errors.isEmpty, "\(cascade.errors)")
    }

    // API.md 2: "Operations that share a mutually exclusive category never execute at the same
    // time". Composition.md: a TransactionOperation "runs them all at once"; "The completion
    // handler is called once, when every child has succeeded".
    @Test
    func transactionWhoseChildrenShareACategory_runsThemOneAtATime_andCompletesOnce() throws {
        // Given a transaction of four children in one category
        let x = uniqueName("X")
        let probe = ConcurrencyProbe()
        let completions = Counter()
        let transaction = TransactionOperation { parts in
            for _ in 0..<4 {
                parts.add {
                    let part = AsyncBlockOperation {
                        probe.enter(x)
                        usleep(20_000)
                        probe.leave(x)
                    }
                    part.addCondition(ExclusiveCategory(x))
                    return part
                }
            }
        } completion: {
            completions.increment()
        }

        // When it runs
        try transaction.runAndWait(timeout: generousTimeout)

        // Then no two overlapped, and it completed once
        #expect(probe.maximum(x) == 1)
        #expect(completions.current == 1)
        #expect(transaction.errors.isEmpty, "\(transaction.errors)")
    }

    // Composition.md: `.cancel` "cancels itself: children still running are cancelled, later ones
    // never start, no completion; it finishes cancelled, with the child's errors".
    // ConditionsAndMutualExclusion.md: "Finishing, failing or being cancelled frees its categories."
    @Test
    func transactionGivingUpOnAChild_cancelsASiblingWaitingForACategoryHeldElsewhere_whichNeverExecutes() {
        // Given X held on another queue, and a transaction of a child that runs until told and a
        // child that waits for X
        let (x, holderHeld, holderName, holder, _) = startHoldingACategory()
        let held = HeldOperations()
        let firstName = uniqueName("first")
        let siblingRan = Counter()
        let siblings = Recorder<AsyncBlockOperation>()
        let handlerCalls = Counter()
        let completions = Counter()
        let transaction = TransactionOperation { parts in
            parts.add { held.make(firstName) }
            parts.add {
                let sibling = AsyncBlockOperation { siblingRan.increment() }
                sibling.addCondition(ExclusiveCategory(x))
                siblings.append(sibling)
                return sibling
            }
        } completion: {
            completions.increment()
        } cancellation: { _ in
            handlerCalls.increment()
            return .cancel
        }
        let queue = AsyncOperationQueue()
        queue.addOperation(transaction)
        #expect(held.waitUntilStarted(firstName))
        #expect(waitUntil { siblings.all.first?.snapshot().state == .waitingForCategories })

        // When the first child fails and the handler gives up
        let failure = StubError("first failed")
        held.finish(firstName, with: failure)

        // Then the sibling is cancelled without executing, and the transaction finishes cancelled
        // with the first child's error alone, without a completion
        #expect(waitUntilFinished([transaction], timeout: generousTimeout))
        #expect(siblingRan.current == 0)
        #expect(siblings.all.first?.isCancelled == true)
        #expect(transaction.isCancelled)
        #expect(transaction.errors.asStubErrors == [failure], "\(transaction.errors)")
        #expect(handlerCalls.current == 1)
        #expect(completions.current == 0)
        holderHeld.finish(holderName)
        #expect(waitUntilFinished([holder]))
    }

    // ObserversAndTimeouts.md: `operationDidCancel(_:)` "at most once"; `operationDidFinish`
    // "exactly once, last, with errors already final". Composition.md: without a handler the
    // composite "cancels itself: ... later ones never start ...; it finishes cancelled, with the
    // child's errors".
    @Test
    func cascadeCancellingItselfForAFailedStep_isHeardCancelledOnce_andFinishedWithTheStepsError() {
        // Given an observed cascade without handlers whose first step fails
        let failure = StubError("step 0 failed")
        let laterBuilds = Counter()
        let cascade = CascadeOperation { steps in
            steps.add { AsyncBlockOperation { throw failure } }
            steps.add {
                laterBuilds.increment()
                return AsyncBlockOperation {}
            }
        }
        let log = EventLogObserver()
        cascade.addObserver(log)

        // When it runs
        AsyncOperationQueue().addOperation(cascade)

        // Then its observer heard it start, be cancelled and finish, once each, with the step's
        // error; the later step was never built
        #expect(waitUntilFinished([cascade]))
        #expect(waitUntil { log.log.all.contains("didFinish") })
        #expect(log.log.all == ["didStart", "didCancel", "didFinish"], "\(log.log.all)")
        #expect(log.finishedErrors.all.map(\.asStubErrors) == [[failure]], "\(log.finishedErrors.all)")
        #expect(cascade.isCancelled)
        #expect(laterBuilds.current == 0)
    }

    // Composition.md: "a composite that recovered reports no failure to whoever waits for it".
    // ConditionsAndMutualExclusion.md: NoFailedDependencies: "none of its dependencies failed";
    // NoCancelledDependencies: "none of its dependencies was cancelled".
    @Test
    func operationDependingOnACascadeThatCarriedOn_passesNoFailedAndNoCancelledDependencies() {
        // Given a cascade whose first step fails and is carried on, and an operation depending on
        // it with both conditions
        let cascade = CascadeOperation { steps in
            steps.add { AsyncBlockOperation { throw StubError("optional step") } }
            steps.add { AsyncBlockOperation {} }
        } cancellation: { _ in .carryOn }
        let ran = Counter()
        let dependent = AsyncBlockOperation { ran.increment() }
        dependent.addDependency(cascade)
        dependent.addCondition(NoFailedDependencies())
        dependent.addCondition(NoCancelledDependencies())

        // When both run
        AsyncOperationQueue().addOperations([cascade, dependent], waitUntilFinished: false)

        // Then the dependent runs, without errors
        #expect(waitUntilFinished([cascade, dependent]))
        #expect(ran.current == 1)
        #expect(dependent.errors.isEmpty, "\(dependent.errors)")
    }

    // Composition.md: without a handler the composite "finishes cancelled, with the child's
    // errors". API.md 1: "the operation finishes with one error per failed condition".
    @Test
    func operationDependingOnACascadeThatGaveUp_failsNoFailedAndNoCancelledDependencies_withOneErrorEach() {
        // Given a cascade whose step fails (no handler), and an operation depending on it with
        // both conditions
        let cascade = CascadeOperation { steps in
            steps.add { AsyncBlockOperation { throw StubError("step failed") } }
        }
        let ran = Counter()
        let dependent = AsyncBlockOperation { ran.increment() }
        dependent.addDependency(cascade)
        dependent.addCondition(NoFailedDependencies())
        dependent.addCondition(NoCancelledDependencies())

        // When both run
        AsyncOperationQueue().addOperations([cascade, dependent], waitUntilFinished: false)

        // Then the dependent never executes, and has one error per condition
        #expect(waitUntilFinished([cascade, dependent]))
        #expect(cascade.isCancelled && cascade.isFailed)
        #expect(ran.current == 0)
        #expect(dependent.errors.count == 2, "\(dependent.errors)")
    }

    // MARK: - Groups, categories and produced operations

    // AsyncOperation.produce: "adds it to the queue (or group) this operation runs in".
    // ConditionsAndMutualExclusion.md: "A child that needs a category its enclosing group already
    // holds could never run, so it fails at once with categoryHeldByEnclosingGroup". API.md 7:
    // "its errors hold every child's errors".
    @Test
    func operationProducedByAChildOfAGroupInACategory_needingThatCategory_failsAtOnceWithCategoryHeldByEnclosingGroup() {
        // Given a group in X whose child produces an operation that needs X
        let x = uniqueName("X")
        let executed = Counter()
        let produced = AsyncBlockOperation { executed.increment() }
        produced.name = uniqueName("produced")
        produced.addCondition(ExclusiveCategory(x))
        let child = ClosureOperation { operation in
            operation.produce(produced)
            operation.finish()
        }
        let group = GroupOperation(operations: [child])
        group.addCondition(ExclusiveCategory(x))

        // When the group runs
        AsyncOperationQueue().addOperation(group)

        // Then the produced operation fails at once without executing, and the group keeps that
        // error
        #expect(waitUntilFinished([group, produced]))
        #expect(executed.current == 0)
        #expect(produced.errors.count == 1 && isCategoryHeldByEnclosingGroup(produced.errors.first, x), "\(produced.errors)")
        #expect(group.errors.contains { isCategoryHeldByEnclosingGroup($0, x) }, "\(group.errors)")
    }

    // GroupOperation: "A child that needs a mutually exclusive category its enclosing group holds
    // could never run, so it fails at once with AsyncOperationError.categoryHeldByEnclosingGroup."
    // API.md 7: "Groups nest."
    @Test
    func grandchildNeedingTheOutermostGroupsCategory_failsAtOnce_andTheErrorReachesTheOutermostGroup() {
        // Given an outer group in X around an inner group whose child needs X
        let x = uniqueName("X")
        let executed = Counter()
        let grandchild = AsyncBlockOperation { executed.increment() }
        grandchild.addCondition(ExclusiveCategory(x))
        let inner = GroupOperation(operations: [grandchild])
        let outer = GroupOperation(operations: [inner])
        outer.addCondition(ExclusiveCategory(x))

        // When the outer group runs
        AsyncOperationQueue().addOperation(outer)

        // Then the grandchild fails at once without executing, and both groups hold its error
        #expect(waitUntilFinished([outer, inner, grandchild]))
        #expect(executed.current == 0)
        #expect(grandchild.errors.count == 1 && isCategoryHeldByEnclosingGroup(grandchild.errors.first, x), "\(grandchild.errors)")
        #expect(outer.errors.contains { isCategoryHeldByEnclosingGroup($0, x) }, "\(outer.errors)")
    }

    // Composition.md: a RetryOperation: "Cancelling it stops the running attempt, or the wait, and
    // makes no further attempt." RetryOperation: "cancelled during a wait, its errors are those of
    // the attempt that was waiting to be retried." API.md 7: "Cancelling the group cancels its
    // children."
    @Test
    func groupCancelledWhileAChildRetryWaitsInItsBackoff_endsTheWait_andMakesNoOtherAttempt() {
        // Given a group around a retry whose attempts fail and whose backoff is very long
        let failure = StubError("attempt failed")
        let attempts = Counter()
        let retry = RetryOperation(maxAttempts: 3, backoff: .fixed(1_000)) { _ in
            AsyncBlockOperation {
                attempts.increment()
                throw failure
            }
        }
        let group = GroupOperation(operations: [retry])
        AsyncOperationQueue().addOperation(group)
        #expect(waitUntil { attempts.current == 1 && retry.lastAttempt?.isFinished == true })

        // When the group is cancelled during the backoff
        group.cancel()

        // Then both finish without another attempt; the retry keeps the waiting attempt's error
        #expect(waitUntilFinished([group, retry], timeout: generousTimeout))
        #expect(attempts.current == 1)
        #expect(retry.attemptCount == 1)
        #expect(retry.errors.asStubErrors == [failure], "\(retry.errors)")
        #expect(group.errors.asStubErrors == [failure], "\(group.errors)")
    }

    // MARK: - Chains

    // Composition.md: "The chain stops at its first failure: an AsyncOperation whose predecessor
    // failed or was cancelled finishes without executing"; RetryOperation: "The retry operation
    // succeeds as soon as an attempt succeeds".
    @Test
    func chainThroughARetryThatRecovered_runsTheNextLink() {
        // Given a chain of a retry whose first attempt fails, then an operation
        let retry = RetryOperation(maxAttempts: 2) { number in
            AsyncBlockOperation { if number == 1 { throw StubError("first attempt") } }
        }
        let ran = Counter()
        let next = AsyncBlockOperation { ran.increment() }

        // When the chain runs
        AsyncOperationQueue().addChain([retry, next])

        // Then the next link runs, as the retry recovered
        #expect(waitUntilFinished([retry, next]))
        #expect(retry.errors.isEmpty, "\(retry.errors)")
        #expect(ran.current == 1)
        #expect(next.errors.isEmpty, "\(next.errors)")
    }

    // Composition.md: "`.upstreamCancelled` naming the first one that was cancelled (with a reason
    // or without: that operation's own errors keep the reason, a timeout's say). Plain Foundation
    // operations run whatever happened before them".
    @Test
    func chainAfterALinkStoppedByItsTimeout_stopsTheNextWithUpstreamCancelled_theLinkKeepsTheTimeout_andAPlainTailRuns() {
        // Given a chain of an operation that never finishes but has a timeout, an operation, and a
        // plain operation
        let held = HeldOperations()
        let headName = uniqueName("head")
        let head = held.make(headName)
        head.addObserver(TimeoutObserver(timeout: 0.3))
        let executed = Counter()
        let middle = AsyncBlockOperation { executed.increment() }
        middle.name = uniqueName("middle")
        let tailRan = Counter()
        let tail = BlockOperation { tailRan.increment() }

        // When the chain runs
        AsyncOperationQueue().addChain([head, middle, tail])

        // Then the head keeps its timeout, the middle says the head was cancelled, and the plain
        // tail runs
        #expect(waitUntilFinished([head, middle, tail]))
        #expect(head.errors.asOperationErrors == [.timedOut(after: 0.3)], "\(head.errors)")
        #expect(middle.errors.asOperationErrors == [.upstreamCancelled(operation: middle.name!, upstream: headName)], "\(middle.errors)")
        #expect(executed.current == 0)
        #expect(tailRan.current == 1)
    }

    // Composition.md: "`upstreamFailed(operation:upstream:reason:)` naming the first operation
    // that failed and why". API.md 7: a group's "errors hold every child's errors and its own".
    @Test
    func chainAfterAGroupWhoseChildFailed_failsWithUpstreamFailed_namingTheGroupAndTheChildsError() {
        // Given a chain of a group whose child fails, then an operation
        let failure = StubError(uniqueName("disk-full"))
        let group = GroupOperation(operations: [AsyncBlockOperation { throw failure }])
        group.name = uniqueName("group")
        let ran = Counter()
        let next = AsyncBlockOperation { ran.increment() }
        next.name = uniqueName("next")

        // When the chain runs
        AsyncOperationQueue().addChain([group, next])

        // Then the next link did not run, and says the group failed with the child's error
        #expect(waitUntilFinished([group, next]))
        #expect(ran.current == 0)
        #expect(next.errors.asOperationErrors == [.upstreamFailed(operation: next.name!, upstream: group.name!, reason: String(describing: failure))], "\(next.errors)")
    }

    // `OperationQueue.addChain(_:)`: "Each AsyncOperation in the chain also finishes without
    // executing when the operation before it failed or was cancelled, with
    // AsyncOperationError.upstreamFailed ... Works on any OperationQueue".
    @Test
    func chainOnAPlainOperationQueue_stopsAtAFailedLink_withUpstreamFailed_andAPlainTailStillRuns() {
        // Given a chain of a failing operation, an operation and a plain operation, on a plain
        // Foundation queue
        let failure = StubError(uniqueName("offline"))
        let failing = AsyncBlockOperation { throw failure }
        failing.name = uniqueName("download")
        let ran = Counter()
        let next = AsyncBlockOperation { ran.increment() }
        next.name = uniqueName("unzip")
        let tailRan = Counter()
        let tail = BlockOperation { tailRan.increment() }

        // When the chain runs there
        OperationQueue().addChain([failing, next, tail])

        // Then the second link finishes without executing, naming the first failure
        #expect(waitUntilFinished([failing, next, tail]))
        #expect(ran.current == 0)
        #expect(next.errors.asOperationErrors == [.upstreamFailed(operation: next.name!, upstream: failing.name!, reason: String(describing: failure))], "\(next.errors)")
        #expect(tailRan.current == 1)
    }

    // Composition.md: "an AsyncOperation whose predecessor failed ... finishes without executing,
    // with upstreamFailed naming the first operation that failed and why". API.md 1: a failed
    // condition: "the operation finishes with one error per failed condition".
    @Test
    func chainLinkStoppedByItsOwnFailingCondition_failsTheNextWithUpstreamFailed_namingItAndTheConditionsError() {
        // Given a chain whose second link has a condition that fails
        let failure = StubError(uniqueName("not-authorized"))
        let ran = Recorder<String>()
        let first = AsyncBlockOperation { ran.append("first") }
        let second = AsyncBlockOperation { ran.append("second") }
        second.name = uniqueName("second")
        second.addCondition(StubCondition.failing(failure))
        let third = AsyncBlockOperation { ran.append("third") }
        third.name = uniqueName("third")

        // When the chain runs
        AsyncOperationQueue().addChain([first, second, third])

        // Then the second link keeps the condition's error, and the third names the second
        #expect(waitUntilFinished([first, second, third]))
        #expect(ran.all == ["first"])
        #expect(second.errors.asStubErrors == [failure], "\(second.errors)")
        #expect(third.errors.asOperationErrors == [.upstreamFailed(operation: third.name!, upstream: second.name!, reason: String(describing: failure))], "\(third.errors)")
    }

    // DelayOperation: "Cancelled while it waits, it finishes at once". Composition.md: "an
    // AsyncOperation whose predecessor ... was cancelled finishes without executing, with ...
    // `.upstreamCancelled` naming the first one that was cancelled".
    @Test
    func chainAfterADelayCancelledWhileItWaits_stopsTheNextLinkWithUpstreamCancelled() {
        // Given a chain of a long delay, then an operation
        let delay = DelayOperation(1_000)
        delay.name = uniqueName("pause")
        let ran = Counter()
        let next = AsyncBlockOperation { ran.increment() }
        next.name = uniqueName("upload")
        AsyncOperationQueue().addChain([delay, next])
        #expect(waitUntil { delay.isExecuting })

        // When the delay is cancelled while it waits
        delay.cancel()

        // Then it finishes at once without errors, and the next link names it cancelled
        #expect(waitUntilFinished([delay, next], timeout: generousTimeout))
        #expect(delay.errors.isEmpty, "\(delay.errors)")
        #expect(ran.current == 0)
        #expect(next.errors.asOperationErrors == [.upstreamCancelled(operation: next.name!, upstream: delay.name!)], "\(next.errors)")
    }

    // ObserversAndTimeouts.md: "A timeout covers an operation's execution, not its wait".
    // Composition.md: `InputOperation` "takes an earlier operation's output as its input".
    @Test
    func inputOperationWithATimeout_waitingLongerThanItForItsUpstream_isNotTimedOut_andGetsTheInput() {
        // Given a chain of an operation that produces 21 when told and an input operation with a
        // short timeout
        let gate = HeldCallback<Void>()
        let upstream = ClosureResultOperation<Int> { operation in
            gate.hold { _ in operation.finish(producing: 21) }
        }
        let double = InputBlockOperation { (value: Int) in value * 2 }
        double.takeInput(from: upstream)
        double.addObserver(TimeoutObserver(timeout: 0.2))
        AsyncOperationQueue().addChain([upstream, double])
        #expect(gate.waitUntilHeld())

        // When the upstream produces its value after more than the timeout
        Thread.sleep(forTimeInterval: 0.6)
        gate.call(())

        // Then the input operation ran to its end with the value
        #expect(waitUntilFinished([upstream, double]))
        #expect(double.errors.isEmpty, "\(double.errors)")
        #expect(double.output == 42)
    }

    // Composition.md: "`.upstreamCancelled` naming the first one that was cancelled (with a reason
    // or without: ... a timeout's say)". AsyncAwait.md: `value` "gives a ResultOperation's output"
    // and throws "the operation's only error as it is". AsyncTaskOperation/ResultTaskOperation:
    // "Cancelling the operation cancels the task".
    @Test
    func inputOperationAfterATaskOperationStoppedByItsTimeout_valueThrowsUpstreamCancelledNamingIt() async {
        // Given a task operation that sleeps long, with a timeout, and an input operation after it
        let queue = AsyncOperationQueue()
        let fetch = ResultTaskOperation { () async throws -> Int in
            try await Task.sleep(nanoseconds: 600_000_000_000)
            return 1
        }
        fetch.name = uniqueName("fetch")
        fetch.addObserver(TimeoutObserver(timeout: 0.3))
        let next = InputBlockOperation { (value: Int) in value + 1 }
        next.name = uniqueName("next")
        next.takeInput(from: fetch)

        // When both run and a task awaits the input operation's value
        queue.addOperations([fetch, next], waitUntilFinished: false)
        let outcome = await boundedOutcome(of: Task { try await next.value })

        // Then the wait throws upstreamCancelled naming the task operation, which keeps the timeout
        guard case let .failure(error)? = outcome else {
            Issue.record("the wait \(outcome == nil ? "never ended" : "returned a value")")
            return
        }
        #expect((error as? AsyncOperationError) == .upstreamCancelled(operation: next.name!, upstream: fetch.name!), "\(error)")
        #expect((fetch.errors.first as? AsyncOperationError) == .timedOut(after: 0.3), "\(fetch.errors)")
    }

    // MARK: - Shutting down with composites, retries, delays and waits

    // API.md 12: "After shutDown begins, nothing new runs on that queue; running operations may
    // finish within the grace period". RunningOperationsInAService.md: "operations that execute
    // may finish."
    @Test
    func retryInItsBackoffWhenItsQueueShutsDownWithAGracePeriod_makesItsNextAttempt_andSucceedsWithinIt() async {
        // Given a retry whose first attempt failed and which waits in its backoff
        let queue = AsyncOperationQueue()
        let attempts = Recorder<Int>()
        let retry = RetryOperation(maxAttempts: 2, backoff: .fixed(0.5)) { number in
            AsyncBlockOperation {
                attempts.append(number)
                if number == 1 { throw StubError("first attempt") }
            }
        }
        queue.addOperation(retry)
        #expect(await eventually { attempts.count >= 1 && retry.lastAttempt?.isFinished == true })

        // When its queue shuts down with a generous grace period
        let shutDown = Task { () async throws in await queue.shutDown(gracePeriod: 60) }
        let returned = await boundedOutcome(of: shutDown, timeout: 60)

        // Then the retry made its second attempt within the grace period and succeeded
        #expect(returned != nil, "shutDown did not return")
        #expect(retry.isFinished)
        #expect(attempts.all == [1, 2], "\(attempts.all)")
        #expect(retry.errors.isEmpty, "\(retry.errors)")
        #expect(!retry.isCancelled)
    }

    // API.md 12: "running operations may finish within the grace period". Composition.md: a
    // CascadeOperation "runs its children one after another, each once the one before it
    // succeeded"; "The completion handler is called once".
    @Test
    func cascadeRunningWhenItsQueueShutsDownWithAGracePeriod_startsItsNextStep_andCompletes() {
        // Given a cascade whose first step runs until told
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let firstName = uniqueName("step-0")
        let ran = Counter()
        let completions = Counter()
        let cascade = CascadeOperation { steps in
            steps.add { held.make(firstName) }
            steps.add { AsyncBlockOperation { ran.increment() } }
        } completion: {
            completions.increment()
        }
        queue.addOperation(cascade)
        #expect(held.waitUntilStarted(firstName))

        // When its queue shuts down with a generous grace period, and then the first step finishes
        let shutDown = runOnOwnThread { queue.shutDownAndWait(gracePeriod: 60) }
        #expect(waitUntil { queue.isShutDown })
        held.finish(firstName)

        // Then the second step runs, the cascade completes, and the shutdown returns
        #expect(shutDown.wait(timeout: 60), "shutDownAndWait did not return")
        #expect(cascade.isFinished)
        #expect(ran.current == 1)
        #expect(completions.current == 1)
        #expect(cascade.errors.isEmpty, "\(cascade.errors)")
    }

    // API.md 12: running operations "may finish within the grace period, then are cancelled";
    // AsyncOperationError.queueShutDown: "it still ran when the grace period ended. It was
    // cancelled with this error." Composition.md: cancelling a retry "stops the running attempt
    // ... and makes no further attempt".
    @Test
    func retryRunningWhenItsQueueShutsDownWithoutGrace_makesNoOtherAttempt_andFinishesWithQueueShutDown() {
        // Given a retry whose attempt runs until told
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let attemptName = uniqueName("attempt")
        let retry = RetryOperation(maxAttempts: 3) { _ in held.make(attemptName) }
        queue.addOperation(retry)
        #expect(held.waitUntilStarted(attemptName))

        // When its queue shuts down without a grace period
        let shutDown = runOnOwnThread { queue.shutDownAndWait(gracePeriod: 0) }

        // Then the shutdown returns, the retry made no other attempt, and it was cancelled with
        // the shutdown error
        #expect(shutDown.wait(timeout: generousTimeout), "shutDownAndWait did not return")
        #expect(retry.isFinished && retry.isCancelled)
        #expect(held.startCount(attemptName) == 1)
        #expect(retry.attemptCount == 1)
        #expect(retry.errors.asOperationErrors == [.queueShutDown], "\(retry.errors)")
    }

    // DelayOperation: "Cancelled while it waits, it finishes at once". API.md 12: running
    // operations "may finish within the grace period, then are cancelled"; "the call returns when
    // the queue is empty".
    @Test
    func delayWaitingWhenItsQueueShutsDownWithoutGrace_finishesAtOnceWithQueueShutDown() {
        // Given a long delay executing on a queue
        let queue = AsyncOperationQueue()
        let delay = DelayOperation(1_000)
        queue.addOperation(delay)
        #expect(waitUntil { delay.isExecuting })

        // When the queue shuts down without a grace period
        let shutDown = runOnOwnThread { queue.shutDownAndWait(gracePeriod: 0) }

        // Then the call returns, and the delay finished cancelled with the shutdown error
        #expect(shutDown.wait(timeout: generousTimeout), "shutDownAndWait did not return")
        #expect(delay.isFinished && delay.isCancelled)
        #expect(delay.errors.asOperationErrors == [.queueShutDown], "\(delay.errors)")
    }

    // RunningOperationsInAService.md: "Operations that wait (for dependencies, ...) are cancelled
    // with the same error" (queueShutDown); "Other queues are unaffected." AsyncAwait.md:
    // `finished()` throws "the operation's only error as it is".
    @Test
    func awaitingAnOperationWaitingForADependencyOfAnotherQueue_whenItsQueueShutsDown_throwsQueueShutDown() async {
        // Given an operation waiting for a dependency that runs on another queue, awaited by a task
        let held = HeldOperations()
        let dependencyName = uniqueName("dependency")
        let dependency = held.make(dependencyName)
        AsyncOperationQueue().addOperation(dependency)
        #expect(await eventually { held.startCount(dependencyName) == 1 })
        let queue = AsyncOperationQueue()
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.addDependency(dependency)
        queue.addOperation(operation)
        let waiting = Task { try await operation.finished() }

        // When its queue shuts down
        let shutDown = Task { () async throws in await queue.shutDown(gracePeriod: 0) }
        #expect(await boundedOutcome(of: shutDown) != nil, "shutDown did not return")

        // Then the wait throws queueShutDown; the operation never ran; the dependency still runs
        let outcome = await boundedOutcome(of: waiting)
        guard case let .failure(error)? = outcome else {
            Issue.record("the wait \(outcome == nil ? "never ended" : "returned")")
            return
        }
        #expect((error as? AsyncOperationError) == .queueShutDown, "\(error)")
        #expect(ran.current == 0)
        #expect(dependency.isExecuting && !dependency.isCancelled)
        held.finish(dependencyName)
        #expect(await eventually { dependency.isFinished })
    }

    // AsyncOperation.produce: "adds it to the queue (or group) this operation runs in". API.md 7:
    // "A GroupOperation finishes only after every child (and every operation a child produced)
    // has finished". API.md 12: "every operation that was on the queue finishes exactly once; the
    // call returns when the queue is empty."
    @Test
    func operationProducedByAGroupsChild_duringTheGracePeriodOfTheGroupsQueue_finishesBeforeTheShutdownReturns() {
        // Given a group running on a queue, whose child runs until told
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let childName = uniqueName("child")
        let child = held.make(childName)
        let group = GroupOperation(operations: [child])
        let groupFinishes = Counter()
        group.addObserver(FinishedObserver { _, _ in groupFinishes.increment() })
        queue.addOperation(group)
        #expect(held.waitUntilStarted(childName))

        // When the queue shuts down with a grace period, and the child then produces an operation
        // and finishes
        let shutDown = runOnOwnThread { queue.shutDownAndWait(gracePeriod: 60) }
        #expect(waitUntil { queue.isShutDown })
        let produced = AsyncBlockOperation {}
        let producedFinishes = Counter()
        produced.addObserver(FinishedObserver { _, _ in producedFinishes.increment() })
        child.produce(produced)
        held.finish(childName)

        // Then the shutdown returns once the group and the produced operation finished, once each
        #expect(shutDown.wait(timeout: 60), "shutDownAndWait did not return")
        #expect(produced.isFinished && group.isFinished)
        #expect(waitUntil { groupFinishes.current >= 1 && producedFinishes.current >= 1 })
        #expect(groupFinishes.current == 1 && producedFinishes.current == 1)
    }

    // MARK: - async/await and run-and-wait around groups

    // AsyncAwait.md: "Cancelling the waiting task cancels the operation, and the wait ends at once
    // with CancellationError, whatever the operation does: the operation finishes on its own".
    // API.md 7: "Cancelling the group cancels its children"; a group "finishes only after every
    // child ... has finished".
    @Test
    func taskAwaitingAGroupWhoseChildIgnoresCancellation_endsAtOnce_andTheGroupFinishesOnceTheChildDoes() async {
        // Given a running group whose child ignores cancellation and finishes when told
        let gate = HeldCallback<Void>()
        let child = ClosureOperation { operation in gate.hold { _ in operation.finish() } }
        let group = GroupOperation(operations: [child])
        AsyncOperationQueue().addOperation(group)
        #expect(await eventually { gate.timesHeld > 0 })
        let waiting = Task { try await group.finished() }

        // When the waiting task is cancelled
        waiting.cancel()

        // Then the wait ends with CancellationError while the child still runs; the group and its
        // child are cancelled, and the group finishes once the child does
        let outcome = await boundedOutcome(of: waiting)
        #expect(outcome.map(isCancellationError) == true, "\(String(describing: outcome))")
        #expect(group.isCancelled && child.isCancelled)
        #expect(!group.isFinished, "the group finished while its child still ran")
        gate.call(())
        #expect(await eventually { group.isFinished })
        #expect(group.errors.isEmpty, "\(group.errors)")
    }

    // AsyncAwait.md: "On no queue (nothing would ever finish it) the wait also reports an
    // `.awaitedOffQueue` diagnostic; such an operation stays cancelled and finishes ... once its
    // queue gets to it (... a suspended one waits for its resume". GroupOperation: children "start
    // when the group executes; until then they wait".
    @Test
    func childOfAGroupNotYetQueued_awaitedByACancelledTask_endsAtOnce_isNotReportedOffQueue_andNeverExecutes() async {
        // Given a group not on any queue yet, and a task awaiting its child
        _ = DiagnosticsLog.shared
        let childName = uniqueName("child")
        let executed = Counter()
        let child = AsyncBlockOperation { executed.increment() }
        child.name = childName
        let group = GroupOperation(operations: [child])
        let waiting = Task { try await child.finished() }

        // When the task is cancelled
        waiting.cancel()

        // Then the wait ends with CancellationError, the child (which sits in its group) is not
        // reported as awaited off any queue, and it never executes once the group runs
        let outcome = await boundedOutcome(of: waiting)
        #expect(outcome.map(isCancellationError) == true, "\(String(describing: outcome))")
        try? await Task.sleep(nanoseconds: 1_500_000_000) // past the one-second report
        #expect(!DiagnosticsLog.shared.kinds(about: childName).contains(.awaitedOffQueue),
                "\(DiagnosticsLog.shared.diagnostics(about: childName))")
        AsyncOperationQueue().addOperation(group)
        #expect(await eventually { group.isFinished && child.isFinished })
        #expect(executed.current == 0)
        #expect(child.isCancelled)
    }

    // AsyncAwait.md: `runAndWait` "throws AsyncOperationError/waitWouldDeadlock(operation:reason:)
    // at once, without starting anything: ... inside an operation of the target queue when all of
    // that queue's concurrency slots are taken by operations waiting like this one (a serial queue
    // waiting for itself, say)". ObserversAndTimeouts.md: `operationDidStart(_:)` comes "exactly
    // once, before execute()".
    @Test
    func runAndWaitFromTheStartedObserverOfAnOperationOfASerialQueue_forAnotherOperationThere_throwsWaitWouldDeadlock() {
        // Given a serial queue, and an operation whose started-observer runs and waits for a new
        // operation on that queue
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let behind = AsyncBlockOperation {}
        behind.name = uniqueName("behind")
        let thrown = Recorder<String>()
        let caught = Recorder<AsyncOperationError?>()
        let first = AsyncBlockOperation {}
        first.addObserver(StartedObserver { _ in
            do {
                try behind.runAndWait(on: queue, timeout: 10)
                thrown.append("returned")
            } catch {
                thrown.append(String(describing: error))
                caught.append(error as? AsyncOperationError)
            }
        })

        // When the operation starts
        queue.addOperation(first)

        // Then the wait throws waitWouldDeadlock at once instead of timing out
        #expect(waitUntilFinished([first], timeout: generousTimeout))
        #expect(thrown.count == 1)
        guard case .waitWouldDeadlock? = caught.all.first ?? nil else {
            Issue.record("expected waitWouldDeadlock, got \(thrown.all)")
            return
        }
    }

    // MARK: - Barriers, suspension, width and categories

    // Foundation, `addBarrierBlock(_:)`: the block "executes after all previously added operations
    // finish and prevents any subsequent operations from executing until the barrier block
    // completes". Composition.md: RetryOperation waits "between attempts as its BackoffPolicy
    // says".
    @Test
    func barrierAddedWhileARetryWaitsInItsBackoff_runsAfterItsLastAttempt_andBeforeALaterOperation() {
        // Given a retry whose first attempt failed and which waits in its backoff
        let queue = AsyncOperationQueue()
        let events = Recorder<String>()
        let retry = RetryOperation(maxAttempts: 2, backoff: .fixed(0.3)) { number in
            AsyncBlockOperation {
                events.append("attempt \(number)")
                if number == 1 { throw StubError("first attempt") }
            }
        }
        queue.addOperation(retry)
        #expect(waitUntil { events.count >= 1 })

        // When a barrier and then an operation are added
        let barrierSawRetryFinished = Recorder<Bool>()
        queue.addBarrierBlock {
            barrierSawRetryFinished.append(retry.isFinished)
            events.append("barrier")
        }
        let later = AsyncBlockOperation { events.append("later") }
        queue.addOperation(later)

        // Then the barrier runs after the retry's last attempt, once the retry finished, and the
        // later operation after the barrier
        #expect(waitUntilFinished([retry, later]))
        #expect(waitUntil { events.count >= 4 })
        #expect(events.all == ["attempt 1", "attempt 2", "barrier", "later"], "\(events.all)")
        #expect(barrierSawRetryFinished.all == [true])
    }

    // API.md 10: "A suspended queue evaluates no condition, takes no category and starts nothing."
    // ConditionsAndMutualExclusion.md: "One still waiting for anything else holds nobody up".
    @Test
    func operationOnASuspendedQueue_takesNoCategory_soALaterOneOfAnotherQueueRuns_andItRunsInTurnOnceResumed() {
        // Given an operation in X on a suspended queue
        let x = uniqueName("X")
        let suspended = AsyncOperationQueue()
        suspended.isSuspended = true
        let ran = Recorder<String>()
        let early = AsyncBlockOperation { ran.append("early") }
        early.addCondition(ExclusiveCategory(x))
        suspended.addOperation(early)

        // When an operation in X is added later to a running queue
        let held = HeldOperations()
        let laterName = uniqueName("later")
        let later = held.make(laterName)
        later.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(later)

        // Then it runs at once; once the suspended queue resumes, the early one waits for X and
        // runs after the later one finished
        #expect(held.waitUntilStarted(laterName))
        #expect(ran.all.isEmpty)
        suspended.isSuspended = false
        #expect(waitUntil { early.snapshot().state == .waitingForCategories }, "\(early.snapshot())")
        #expect(ran.all.isEmpty)
        held.finish(laterName)
        #expect(waitUntilFinished([early, later]))
        #expect(ran.all == ["early"])
    }

    // ConditionsAndMutualExclusion.md: "no operation is granted a category while it could not
    // start at once: one whose queue's slots are all taken waits for a slot first, holding
    // nothing". Foundation: a maxConcurrentOperationCount of 0 starts nothing.
    @Test
    func operationOnAQueueOfWidthZero_takesNoCategory_andOnceTheWidthIsRaised_waitsForItsHolder() {
        // Given an operation in X on a queue of width zero
        let x = uniqueName("X")
        let narrow = AsyncOperationQueue()
        narrow.maxConcurrentOperationCount = 0
        let ran = Recorder<String>()
        let early = AsyncBlockOperation { ran.append("early") }
        early.addCondition(ExclusiveCategory(x))
        narrow.addOperation(early)

        // When an operation in X is added later to another queue
        let held = HeldOperations()
        let laterName = uniqueName("later")
        let later = held.make(laterName)
        later.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(later)

        // Then it runs; once the width is raised the early one waits for X, then runs
        #expect(held.waitUntilStarted(laterName))
        #expect(ran.all.isEmpty)
        narrow.maxConcurrentOperationCount = 1
        #expect(waitUntil { early.snapshot().state == .waitingForCategories }, "\(early.snapshot())")
        #expect(ran.all.isEmpty)
        held.finish(laterName)
        #expect(waitUntilFinished([early, later]))
        #expect(ran.all == ["early"])
    }

    // DelayOperation: it "finishes a given interval after it starts executing". API.md 10: "A
    // suspended queue ... starts nothing."
    @Test
    func delayOnASuspendedQueue_doesNotStartItsWait_untilTheQueueResumes() {
        // Given a short delay and an operation after it, on a suspended queue
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        let delay = DelayOperation(0.05)
        let ran = Counter()
        let after = AsyncBlockOperation { ran.increment() }
        after.addDependency(delay)
        queue.addOperations([delay, after], waitUntilFinished: false)

        // When far more than the delay passes
        Thread.sleep(forTimeInterval: 0.5)

        // Then nothing started; once resumed, both run
        #expect(!delay.isExecuting && !delay.isFinished)
        #expect(ran.current == 0)
        queue.isSuspended = false
        #expect(waitUntilFinished([delay, after]))
        #expect(delay.errors.isEmpty && ran.current == 1)
    }

    // API.md 10: "A suspended queue evaluates no condition, takes no category and starts
    // nothing." ConditionsAndMutualExclusion.md: "One still waiting for anything else holds nobody
    // up".
    @Test
    func queueSuspendedWhileItsOperationWaitsInACategorysLine_letsTheCategoryGoElsewhere_andTheOperationWaitsForItOnceResumed() {
        // Given an operation in X waiting on a serial queue while X is held on another queue
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let ran = Recorder<String>()
        let waiter = AsyncBlockOperation { ran.append("waiter") }
        waiter.addCondition(ExclusiveCategory(x))
        queue.addOperation(waiter)
        #expect(waitUntil { waiter.snapshot().state == .waitingForCategories })

        // When its queue is suspended, X is let go, and an operation of a third queue asks for X
        queue.isSuspended = true
        held.finish(holderName)
        #expect(waitUntilFinished([holder]))
        let outsiderName = uniqueName("outsider")
        let outsider = held.make(outsiderName)
        outsider.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(outsider)

        // Then the outsider gets X, as the suspended queue takes none; resumed, the waiter waits
        // for the outsider and runs after it
        #expect(held.waitUntilStarted(outsiderName, timeout: 10), "the operation of the suspended queue kept X: \(waiter.snapshot()); outsider: \(outsider.snapshot())")
        #expect(ran.all.isEmpty)
        queue.isSuspended = false
        #expect(waitUntil { waiter.snapshot().state == .waitingForCategories }, "\(waiter.snapshot())")
        #expect(ran.all.isEmpty)
        held.finish(outsiderName)
        #expect(waitUntilFinished([waiter, outsider]))
        #expect(ran.all == ["waiter"])
    }

    // ConditionsAndMutualExclusion.md: "no operation is granted a category while it could not
    // start at once: one whose queue's slots are all taken waits for a slot first, holding
    // nothing". Foundation: a maxConcurrentOperationCount of 0 starts nothing.
    @Test
    func queueNarrowedToZeroWhileItsOperationWaitsInACategorysLine_letsTheCategoryGoElsewhere() {
        // Given an operation in X waiting on a queue while X is held on another queue
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let queue = AsyncOperationQueue()
        let ran = Recorder<String>()
        let waiter = AsyncBlockOperation { ran.append("waiter") }
        waiter.addCondition(ExclusiveCategory(x))
        queue.addOperation(waiter)
        #expect(waitUntil { waiter.snapshot().state == .waitingForCategories })

        // When its queue's width drops to zero, X is let go, and an operation of a third queue
        // asks for X
        queue.maxConcurrentOperationCount = 0
        held.finish(holderName)
        #expect(waitUntilFinished([holder]))
        let outsiderName = uniqueName("outsider")
        let outsider = held.make(outsiderName)
        outsider.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(outsider)

        // Then the outsider gets X; once the width is back, the waiter runs after it
        #expect(held.waitUntilStarted(outsiderName, timeout: 10), "the operation that could take no slot kept X: \(waiter.snapshot()); outsider: \(outsider.snapshot())")
        #expect(ran.all.isEmpty)
        queue.maxConcurrentOperationCount = 1
        held.finish(outsiderName)
        #expect(waitUntilFinished([waiter, outsider]))
        #expect(ran.all == ["waiter"])
    }

    // ConditionsAndMutualExclusion.md: "A GroupOperation's children stand in line where their
    // group stands, ahead of operations added after the group ... Everyone else gets the category
    // in add order." Composition.md: "Children may be added while the group runs".
    @Test
    func childAddedToARunningGroupAfterAnOutsiderAskedForTheCategory_getsItFirst_asItStandsWhereItsGroupStands() {
        // Given a running group whose child holds X, and an operation of another queue, added
        // after the group, waiting for X
        let x = uniqueName("X")
        let held = HeldOperations()
        let firstName = uniqueName("first-child")
        let first = held.make(firstName)
        first.addCondition(ExclusiveCategory(x))
        let group = GroupOperation(operations: [first])
        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted(firstName))
        let outsiderName = uniqueName("outsider")
        let outsider = held.make(outsiderName)
        outsider.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(outsider)
        #expect(waitUntil { outsider.snapshot().state == .waitingForCategories })

        // When a child in X is added to the group, and the first child finishes
        let lateName = uniqueName("late-child")
        let late = held.make(lateName)
        late.addCondition(ExclusiveCategory(x))
        group.addChild(late)
        #expect(waitUntil { late.snapshot().state == .waitingForCategories })
        held.finish(firstName)

        // Then the late child gets X before the outsider
        #expect(waitUntil { held.startCount(lateName) + held.startCount(outsiderName) > 0 })
        #expect(held.startCount(lateName) == 1, "the outsider got X before the group's child: \(late.snapshot())")
        #expect(held.startCount(outsiderName) == 0)
        held.finish(lateName)
        #expect(held.waitUntilStarted(outsiderName))
        held.finish(outsiderName)
        #expect(waitUntilFinished([group, outsider]))
    }

    // AsyncOperationQueue.conditionEvaluationTimeout: "The children of a group (a cascade's
    // steps, a retry's attempts) get the time of the queue the group runs on, as it is when the
    // group starts." ConditionsAndMutualExclusion.md: a condition "that has not answered after the
    // queue's conditionEvaluationTimeout ... fails it with conditionTimedOut(condition:after:)".
    @Test
    func retryInAGroup_whoseAttemptsConditionNeverAnswers_failsWithTheOutermostQueuesConditionTimeout() {
        // Given a queue with a short condition timeout, running a group around a retry whose
        // attempts have a condition that keeps its completion handler and never answers
        let queue = AsyncOperationQueue()
        queue.conditionEvaluationTimeout = 0.3
        let kept = Recorder<@Sendable (ConditionResult) -> Void>()
        let executed = Counter()
        let retry = RetryOperation(maxAttempts: 2) { _ in
            let attempt = AsyncBlockOperation { executed.increment() }
            attempt.addCondition(StubCondition(name: "NeverAnswers") { _, completion in kept.append(completion) })
            return attempt
        }
        let group = GroupOperation(operations: [retry])

        // When it runs
        queue.addOperation(group)

        // Then each attempt fails with the queue's condition timeout, and so does the retry
        #expect(waitUntilFinished([group], timeout: generousTimeout), "the attempts did not get the queue's condition timeout")
        #expect(executed.current == 0)
        #expect(retry.attemptCount == 2)
        #expect(retry.errors.asOperationErrors == [.conditionTimedOut(condition: "NeverAnswers", after: 0.3)], "\(retry.errors)")
        #expect(kept.count == 2)
    }

    // AsyncOperationQueue.stallReportThreshold: "one .stalled diagnostic per operation ... The
    // children of a group that starts on the queue are watched too, with the threshold the queue
    // has then." API.md 7: "Groups nest."
    @Test
    func stallReports_coverACascadeStepNestedInAGroup_waitingForACategoryHeldElsewhere() {
        // Given X held on another queue, and a queue reporting stalls that runs a group around a
        // cascade whose step needs X
        _ = DiagnosticsLog.shared
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let queue = AsyncOperationQueue()
        queue.stallReportThreshold = 0.2
        let stepName = uniqueName("nested-step")
        let cascade = CascadeOperation { steps in
            steps.add {
                let step = AsyncBlockOperation {}
                step.name = stepName
                step.addCondition(ExclusiveCategory(x))
                return step
            }
        }
        let group = GroupOperation(operations: [cascade])

        // When the group runs and the step waits for X
        queue.addOperation(group)

        // Then the step is reported stalled, once
        #expect(waitUntil(timeout: generousTimeout) { DiagnosticsLog.shared.kinds(about: stepName).contains(.stalled) },
                "no stall report about the nested step: \(DiagnosticsLog.shared.diagnostics(about: stepName))")
        Thread.sleep(forTimeInterval: 0.5)
        #expect(DiagnosticsLog.shared.kinds(about: stepName).filter { $0 == .stalled }.count == 1)
        queue.stallReportThreshold = nil
        held.finish(holderName)
        #expect(waitUntilFinished([holder, group]))
    }

    // OperationLogger: "Hears the lifecycle of every operation on a queue that has it as its
    // logger ... Each event comes once." OperationLogEvent.groupID: "The GroupOperation (or
    // composite) whose child the operation is, if that group's events are heard too".
    // `queueName`: "a group's child: as its group joins a logging queue".
    @Test
    func logger_hearsEveryChildOfNestedCompositesAndWhatTheyProduced_onceEach_withTheirGroupsID() {
        // Given a logging queue running a group around a cascade whose first step produces an
        // operation, and whose second step is built once the first succeeded
        let queue = AsyncOperationQueue()
        let logger = RecordingLogger()
        queue.logger = logger
        let names = (group: uniqueName("group"), cascade: uniqueName("cascade"), first: uniqueName("step-0"), second: uniqueName("step-1"), produced: uniqueName("produced"))
        let cascade = CascadeOperation { steps in
            steps.add {
                ClosureOperation(name: names.first) { operation in
                    let produced = AsyncBlockOperation {}
                    produced.name = names.produced
                    operation.produce(produced)
                    operation.finish()
                }
            }
            steps.add {
                let step = AsyncBlockOperation {}
                step.name = names.second
                return step
            }
        }
        cascade.name = names.cascade
        let group = GroupOperation(operations: [cascade])
        group.name = names.group

        // When it runs
        queue.addOperation(group)
        #expect(waitUntilFinished([group]))

        // Then every operation was heard to start and finish once, finishing last, each child
        // with its group's ID
        let all = [names.group, names.cascade, names.first, names.second, names.produced]
        #expect(waitUntil { all.allSatisfy { name in logger.kinds(of: name).contains { if case .finished = $0 { true } else { false } } } },
                "\(all.map { ($0, logger.kinds(of: $0)) })")
        for name in all {
            let kinds = logger.kinds(of: name)
            #expect(kinds.filter { $0 == .started }.count == 1, "\(name): \(kinds)")
            #expect(kinds.filter { if case .finished = $0 { true } else { false } }.count == 1, "\(name): \(kinds)")
            if case .finished? = kinds.last {} else { Issue.record("\(name) was not heard finished last: \(kinds)") }
        }
        let groupOf = { (name: String) in logger.events(of: name).first?.groupID }
        #expect(groupOf(names.group) == nil)
        #expect(groupOf(names.cascade) == logger.id(of: names.group))
        #expect(groupOf(names.first) == logger.id(of: names.cascade))
        #expect(groupOf(names.second) == logger.id(of: names.cascade))
        #expect(groupOf(names.produced) == logger.id(of: names.cascade))
        #expect(logger.id(of: names.group) != nil && logger.id(of: names.cascade) != nil)
    }

    // CompositeOperation: "Operations added with addChild(_:) and operations children produce run
    // as in any GroupOperation: the composite waits for them, but its handlers do not hear about
    // them." API.md 7: its "errors hold every child's errors".
    @Test
    func operationProducedByACascadeStep_thatFails_isAwaited_keepsItsError_andNoHandlerHearsIt() {
        // Given a cascade whose first step produces an operation that fails after a moment
        let failure = StubError("produced work failed")
        let producedRan = Counter()
        let produced = AsyncBlockOperation {
            usleep(100_000)
            producedRan.increment()
            throw failure
        }
        let handlerCalls = Counter()
        let cascade = CascadeOperation { steps in
            steps.add { ClosureOperation { $0.produce(produced); $0.finish() } }
            steps.add { AsyncBlockOperation {} }
        } cancellation: { _ in
            handlerCalls.increment()
            return .carryOn
        }

        // When it runs
        AsyncOperationQueue().addOperation(cascade)

        // Then it finished only after the produced operation, with its error, and no handler heard it
        #expect(waitUntilFinished([cascade]))
        #expect(produced.isFinished && producedRan.current == 1)
        #expect(cascade.errors.asStubErrors == [failure], "\(cascade.errors)")
        #expect(handlerCalls.current == 0)
    }

    // Composition.md's retry example: `RetryOperation(maxAttempts: 4, backoff:
    // .exponential(initial: 0.01, maximum: 1).withJitter(), shouldRetry: { $0 is ServerBusy }) { _
    // in ResultTaskOperation { ... } }`; "try await download.finished()"; "let report =
    // download.lastAttempt?.output // ..., on the third attempt". "shouldRetry picks which errors
    // are worth another attempt."
    @Test
    func retryOfTaskOperationsWithJitteredBackoff_asTheExampleHasIt_givesTheThirdAttemptsOutput_andStopsAtAnUnretryableError() async throws {
        struct ServerBusy: Error {}
        struct Forbidden: Error {}
        // Given the article's retry, whose attempts are busy twice, then answer
        let queue = AsyncOperationQueue()
        let calls = Counter()
        let download = RetryOperation(
            maxAttempts: 4,
            backoff: .exponential(initial: 0.01, maximum: 1).withJitter(random: { 0.5 }),
            shouldRetry: { $0 is ServerBusy }
        ) { _ in
            ResultTaskOperation { () async throws -> Int in
                if calls.increment() < 3 { throw ServerBusy() }
                return 12
            }
        }
        queue.addOperation(download)

        // When it is awaited
        try await download.finished()

        // Then the third attempt's output is there
        #expect(download.attemptCount == 3)
        #expect(download.lastAttempt?.output == 12)

        // And a retry whose first attempt fails with an error not worth retrying stops there
        let refused = RetryOperation(maxAttempts: 4, backoff: .fixed(0.01), shouldRetry: { $0 is ServerBusy }) { _ in
            ResultTaskOperation { () async throws -> Int in throw Forbidden() }
        }
        queue.addOperation(refused)
        await #expect(throws: Forbidden.self) { try await refused.finished() }
        #expect(refused.attemptCount == 1)
    }

    // MARK: - Groups finished by hand, adapters, cycles and races

    // Composition.md: "Cancelling it cancels the children and still waits for them; so does
    // finishing it by hand (finish(with:), in a subclass's execute() say) while children are
    // left: it is heard finished once they have, with their errors before its own."
    // ConditionsAndMutualExclusion.md: "Finishing, failing or being cancelled frees its categories."
    @Test
    func groupSubclassFinishedByHandInExecute_whileItsChildWaitsForACategoryHeldElsewhere_cancelsIt_andIsHeardFinishedOnce() {
        final class GivesUp: GroupOperation, @unchecked Sendable {
            let child: AsyncBlockOperation
            let reason: StubError
            init(child: AsyncBlockOperation, reason: StubError) {
                self.child = child
                self.reason = reason
                super.init()
            }
            override func execute() {
                addChild(child)
                super.execute()
                finish(with: reason)
            }
        }
        // Given X held on another queue, and a group subclass that adds a child needing X and
        // then finishes by hand
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let executed = Counter()
        let child = AsyncBlockOperation { executed.increment() }
        child.addCondition(ExclusiveCategory(x))
        let reason = StubError("gave up")
        let group = GivesUp(child: child, reason: reason)
        let log = EventLogObserver()
        group.addObserver(log)

        // When it runs
        AsyncOperationQueue().addOperation(group)

        // Then the child is cancelled without executing, and the group finishes with its own
        // error, heard once, while X is still held
        #expect(waitUntilFinished([group, child], timeout: generousTimeout))
        #expect(executed.current == 0)
        #expect(child.isCancelled)
        #expect(group.errors.asStubErrors == [reason], "\(group.errors)")
        #expect(waitUntil { log.log.all.contains("didFinish") })
        #expect(log.log.all.filter { $0 == "didFinish" }.count == 1, "\(log.log.all)")
        #expect(holder.isExecuting)
        held.finish(holderName)
        #expect(waitUntilFinished([holder]))
    }

    // GroupOperation.childDidFinish: "Called when a child finished ... before the group decides
    // whether it is done". Composition.md: finishing a group by hand "while children are left: it
    // is heard finished once they have, with their errors before its own". DelayOperation:
    // "Cancelled while it waits, it finishes at once".
    @Test
    func groupSubclassFinishingByHandWhenAChildFails_endsASiblingDelayAtOnce_withTheChildsErrorBeforeItsOwn() {
        final class StopsAtFirstFailure: GroupOperation, @unchecked Sendable {
            let reason: StubError
            init(operations: [Foundation.Operation], reason: StubError) {
                self.reason = reason
                super.init(operations: operations)
            }
            override func childDidFinish(_ child: Foundation.Operation, errors: [any Error]) {
                if !errors.isEmpty { finish(with: reason) }
            }
        }
        // Given a group subclass that finishes by hand when a child fails, with a failing child
        // and a long delay
        let childFailure = StubError("child failed")
        let reason = StubError("stopped")
        let delay = DelayOperation(1_000)
        let failing = AsyncBlockOperation {
            usleep(50_000)
            throw childFailure
        }
        let group = StopsAtFirstFailure(operations: [delay, failing], reason: reason)

        // When it runs
        AsyncOperationQueue().addOperation(group)

        // Then the delay ends at once, and the group holds the child's error, then its own
        #expect(waitUntilFinished([group, delay], timeout: generousTimeout))
        #expect(delay.isCancelled)
        #expect(group.errors.asStubErrors == [childFailure, reason], "\(group.errors)")
    }

    // `OperationQueue.addChain(_:)`: plain operations serve "between two links as an adapter that
    // inspects one operation and prepares (or cancels) the next". Composition.md:
    // "`.upstreamCancelled` naming the first one that was cancelled".
    @Test
    func chainAdapterCancellingTheNextLink_stopsIt_andTheLinkAfterNamesItCancelled() {
        // Given a chain of an operation, a plain adapter that cancels the next link, that link, and
        // one more
        let ran = Recorder<String>()
        let fetch = AsyncBlockOperation { ran.append("fetch") }
        let save = AsyncBlockOperation { ran.append("save") }
        save.name = uniqueName("save")
        let adapter = BlockOperation {
            ran.append("adapter")
            save.cancel()
        }
        let notify = AsyncBlockOperation { ran.append("notify") }
        notify.name = uniqueName("notify")

        // When the chain runs
        AsyncOperationQueue().addChain([fetch, adapter, save, notify])

        // Then the cancelled link never executes, and the last names it
        #expect(waitUntilFinished([fetch, adapter, save, notify]))
        #expect(ran.all == ["fetch", "adapter"], "\(ran.all)")
        #expect(save.isCancelled && save.errors.isEmpty, "\(save.errors)")
        #expect(notify.errors.asOperationErrors == [.upstreamCancelled(operation: notify.name!, upstream: save.name!)], "\(notify.errors)")
    }

    // README, misuse table: "dependencies that form a cycle | .dependencyCycle | the operation
    // that closes the cycle (with addDependency ...) finishes with
    // AsyncOperationError.dependencyCycle when queued, so the rest runs instead of hanging".
    // `addChain`: "Every operation gets a dependency on the operation before it in the array."
    @Test
    func chainWhoseLinksAlreadyDependOnALaterOne_closesACycle_andEveryLinkFinishesInsteadOfHanging() {
        // Given two operations, the first already depending on the second
        let ran = Recorder<String>()
        let first = AsyncBlockOperation { ran.append("first") }
        first.name = uniqueName("first")
        let second = AsyncBlockOperation { ran.append("second") }
        second.name = uniqueName("second")
        first.addDependency(second)

        // When they are added as a chain, which makes the second depend on the first
        AsyncOperationQueue().addChain([first, second])

        // Then the cycle is broken: both finish, the one that closed it with dependencyCycle
        #expect(waitUntilFinished([first, second], timeout: generousTimeout), "first: \(first.snapshot()); second: \(second.snapshot())")
        let cycleErrors = (first.errors + second.errors).compactMap { $0 as? AsyncOperationError }.filter {
            if case .dependencyCycle = $0 { true } else { false }
        }
        #expect(cycleErrors.count == 1, "first: \(first.errors); second: \(second.errors)")
    }

    // AsyncAwait.md: "So a timeout raced against the wait the usual way (a task group with a
    // sleep, the loser cancelled) always ends." "Cancelling the waiting task cancels the
    // operation". API.md 7: "Cancelling the group cancels its children."
    @Test
    func runOfAGroupRacedAgainstATimeout_whileItsChildWaitsForACategoryHeldElsewhere_endsAndCancelsTheGroup() async {
        // Given X held on another queue, and a group whose child needs X
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let executed = Counter()
        let child = AsyncBlockOperation { executed.increment() }
        child.addCondition(ExclusiveCategory(x))
        let group = GroupOperation(operations: [child])
        let queue = AsyncOperationQueue()

        // When running it is raced against a short sleep
        let winner = await withTaskGroup(of: String.self) { race in
            race.addTask {
                do {
                    try await queue.run(group)
                    return "ran"
                } catch {
                    return "wait ended: \(error)"
                }
            }
            race.addTask {
                try? await Task.sleep(nanoseconds: 300_000_000)
                return "timeout"
            }
            let first = await race.next() ?? "nothing"
            race.cancelAll()
            return first
        }

        // Then the sleep wins, the group is cancelled and finishes, and its child never executes
        #expect(winner == "timeout")
        #expect(await eventually { group.isFinished && child.isFinished })
        #expect(group.isCancelled && child.isCancelled)
        #expect(executed.current == 0)
        #expect(holder.isExecuting)
        held.finish(holderName)
        #expect(await eventually { holder.isFinished })
    }

    // AsyncAwait.md: "Cancelling the waiting task cancels the operation". Composition.md: "The
    // cancellation handler is called when a child finishes failed or cancelled"; `.carryOn` "goes
    // on as if the child had succeeded; the completion handler still comes".
    @Test
    func transactionChildCancelledByTheTaskAwaitingItsValue_reachesTheHandlerAsCancelled_andCarryOnCompletes() async {
        // Given a transaction whose child waits until cancelled, and a task awaiting its value
        let children = Recorder<ResultTaskOperation<Int>>()
        let failures = Recorder<SeenFailure>()
        let completions = Counter()
        let transaction = TransactionOperation { parts in
            parts.add {
                let child = ResultTaskOperation { () async throws -> Int in
                    try await Task.sleep(nanoseconds: 600_000_000_000)
                    return 1
                }
                children.append(child)
                return child
            }
            parts.add { AsyncBlockOperation {} }
        } completion: {
            completions.increment()
        } cancellation: { failure in
            failures.append(SeenFailure(failure))
            return .carryOn
        }
        AsyncOperationQueue().addOperation(transaction)
        #expect(await eventually { children.all.first?.isExecuting == true })
        let child = children.all[0]
        let waiting = Task { try await child.value }

        // When the task is cancelled
        waiting.cancel()

        // Then the child is cancelled, the handler hears it cancelled, and the transaction
        // completes without errors
        let outcome = await boundedOutcome(of: waiting)
        #expect(outcome.map(isCancellationError) == true, "\(String(describing: outcome))")
        #expect(await eventually { transaction.isFinished })
        #expect(child.isCancelled)
        #expect(failures.all.count == 1 && failures.all.first?.isCancelled == true && failures.all.first?.index == 0, "\(failures.all)")
        #expect(completions.current == 1)
        #expect(transaction.errors.isEmpty, "\(transaction.errors)")
    }

    // Composition.md: finishing a group by hand "while children are left: it is heard finished
    // once they have, with their errors before its own". CompositeOperation: "Neither handler is
    // called once the composite itself is cancelled"; GroupOperation: a group finished by hand
    // stops its children ("a composite or a retry starts nothing more then").
    @Test
    func cascadeFinishedByHandWhileAStepRuns_stopsTheStep_buildsNoOtherStep_callsNoHandler_andKeepsItsError() {
        // Given a cascade whose first step runs until told
        let held = HeldOperations()
        let firstName = uniqueName("step-0")
        let laterBuilds = Counter()
        let handlerCalls = Counter()
        let completions = Counter()
        let cascade = CascadeOperation { steps in
            steps.add { held.make(firstName) }
            steps.add {
                laterBuilds.increment()
                return AsyncBlockOperation {}
            }
        } completion: {
            completions.increment()
        } cancellation: { _ in
            handlerCalls.increment()
            return .carryOn
        }
        let log = EventLogObserver()
        cascade.addObserver(log)
        AsyncOperationQueue().addOperation(cascade)
        #expect(held.waitUntilStarted(firstName))

        // When it is finished by hand with an error
        let reason = StubError("finished by hand")
        cascade.finish(with: reason)

        // Then the running step is stopped, no later step is built, no handler is called, and the
        // cascade is heard finished once, with its own error
        #expect(waitUntilFinished([cascade], timeout: generousTimeout), "\(cascade.snapshot())")
        #expect(laterBuilds.current == 0)
        #expect(handlerCalls.current == 0)
        #expect(completions.current == 0)
        #expect(cascade.errors.asStubErrors == [reason], "\(cascade.errors)")
        #expect(waitUntil { log.log.all.contains("didFinish") })
        #expect(log.log.all.filter { $0 == "didFinish" }.count == 1, "\(log.log.all)")
        held.finish(firstName)
    }

    // Composition.md: finishing a group by hand "while children are left: it is heard finished
    // once they have, with their errors before its own"; a RetryOperation: "Cancelling it stops
    // the running attempt, or the wait, and makes no further attempt". GroupOperation: a group
    // finished by hand stops its children.
    @Test
    func retryFinishedByHandDuringItsBackoff_endsTheWait_makesNoOtherAttempt_andFinishesWithItsOwnError() {
        // Given a retry whose attempt failed and which waits in a very long backoff
        let failure = StubError("attempt failed")
        let attempts = Counter()
        let retry = RetryOperation(maxAttempts: 3, backoff: .fixed(1_000)) { _ in
            AsyncBlockOperation {
                attempts.increment()
                throw failure
            }
        }
        AsyncOperationQueue().addOperation(retry)
        #expect(waitUntil { attempts.current == 1 && retry.lastAttempt?.isFinished == true })

        // When it is finished by hand with an error
        let reason = StubError("finished by hand")
        retry.finish(with: reason)

        // Then it finishes promptly without another attempt, with its own error last
        #expect(waitUntilFinished([retry], timeout: generousTimeout), "\(retry.snapshot())")
        #expect(attempts.current == 1)
        #expect(retry.attemptCount == 1)
        #expect(retry.errors.last.flatMap { $0 as? StubError } == reason, "\(retry.errors)")
        #expect(!retry.errors.contains { ($0 as? StubError) != failure && ($0 as? StubError) != reason }, "\(retry.errors)")
    }

    // Composition.md: `.rerun(after: seconds)`: "the same, after a delay; cancelling the composite
    // meanwhile ends the wait"; finishing a group by hand "while children are left: it is heard
    // finished once they have".
    @Test
    func transactionFinishedByHandDuringARerunDelay_endsTheWait_andRunsNoOtherAttempt() {
        // Given a transaction whose child failed and waits a very long time for its rerun, while a
        // sibling has succeeded
        let attempts = Counter()
        let transaction = TransactionOperation { parts in
            parts.add {
                AsyncBlockOperation {
                    attempts.increment()
                    throw StubError("failed")
                }
            }
            parts.add { AsyncBlockOperation {} }
        } cancellation: { _ in .rerun(after: 1_000) }
        AsyncOperationQueue().addOperation(transaction)
        #expect(waitUntil { attempts.current == 1 })
        Thread.sleep(forTimeInterval: 0.2) // the handler answers and the wait begins

        // When it is finished by hand
        let reason = StubError("finished by hand")
        transaction.finish(with: reason)

        // Then it finishes promptly, without another attempt, with its own error last
        #expect(waitUntilFinished([transaction], timeout: generousTimeout), "\(transaction.snapshot())")
        #expect(attempts.current == 1)
        #expect(transaction.errors.last.flatMap { $0 as? StubError } == reason, "\(transaction.errors)")
    }

    // API.md 9: "A queue with maxConcurrentOperationCount = 1 ... start[s] the operations whose
    // dependencies have finished in the order they were added, conditions and categories
    // included". RetryOperation: attempts "until one succeeds".
    @Test
    func serialQueue_onceARetryFinishes_startsItsDependentsAndALaterOperationInAddOrder_throughASlowCondition() {
        // Given a serial queue running a retry that fails once, two operations depending on it
        // (the first with a condition that answers late, from another thread), and one more
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let order = Recorder<String>()
        let retry = RetryOperation(maxAttempts: 2) { number in
            AsyncBlockOperation {
                order.append("attempt \(number)")
                if number == 1 { throw StubError("first attempt") }
            }
        }
        let slow = AsyncBlockOperation { order.append("slow") }
        slow.addDependency(retry)
        slow.addCondition(StubCondition(name: "AnswersLate") { _, completion in
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) { completion(.satisfied) }
        })
        let quick = AsyncBlockOperation { order.append("quick") }
        quick.addDependency(retry)
        let last = AsyncBlockOperation { order.append("last") }

        // When they are added in that order
        queue.addOperations([retry, slow, quick, last], waitUntilFinished: false)

        // Then they start in add order, the slow condition included
        #expect(waitUntilFinished([retry, slow, quick, last]))
        #expect(order.all == ["attempt 1", "attempt 2", "slow", "quick", "last"], "\(order.all)")
    }

    // API.md 9: "A queue with maxConcurrentOperationCount = 1 ... start[s] the operations whose
    // dependencies have finished in the order they were added". Foundation's serial queue, given
    // the same operations, starts them in add order (checked here first, as the reference).
    @Test
    func serialQueue_startsTheDependentOfTheRunningOperation_beforeALaterIndependentOne_asFoundationsSerialQueueDoes() {
        // Given, on a serial queue, an operation that runs a moment, one that depends on it, and
        // an independent one added last
        func scenario(on queue: OperationQueue, make: (String, Recorder<String>) -> Operation) -> [String] {
            queue.maxConcurrentOperationCount = 1
            let order = Recorder<String>()
            let first = make("first", order)
            let dependent = make("dependent", order)
            dependent.addDependency(first)
            let later = make("later", order)
            // When they are added in that order
            queue.addOperations([first, dependent, later], waitUntilFinished: false)
            #expect(waitUntilFinished([first, dependent, later]))
            return order.all
        }
        let foundation = scenario(on: OperationQueue()) { label, order in
            BlockOperation {
                if label == "first" { usleep(100_000) }
                order.append(label)
            }
        }
        let package = scenario(on: AsyncOperationQueue()) { label, order in
            AsyncBlockOperation {
                if label == "first" { usleep(100_000) }
                order.append(label)
            }
        }

        // Then both start them in add order: the dependent as soon as the first finished
        #expect(foundation == ["first", "dependent", "later"], "Foundation's own serial queue: \(foundation)")
        #expect(package == ["first", "dependent", "later"], "AsyncOperationQueue: \(package)")
    }

    // API.md 9: "a GroupOperation with maxConcurrentOperationCount = 1, start the operations whose
    // dependencies have finished in the order they were added". GroupOperation's
    // `maxConcurrentOperationCount`: "1 runs them one after another, in the order added".
    @Test
    func serialGroup_startsTheDependentOfTheRunningChild_beforeALaterIndependentChild() {
        // Given a serial group of a child that runs a moment, a child that depends on it, and an
        // independent child added last
        let order = Recorder<String>()
        let first = AsyncBlockOperation {
            usleep(100_000)
            order.append("first")
        }
        let dependent = AsyncBlockOperation { order.append("dependent") }
        dependent.addDependency(first)
        let later = AsyncBlockOperation { order.append("later") }
        let group = GroupOperation(operations: [first, dependent, later])
        group.maxConcurrentOperationCount = 1

        // When it runs
        AsyncOperationQueue().addOperation(group)

        // Then the children start in the order they were added
        #expect(waitUntilFinished([group]))
        #expect(order.all == ["first", "dependent", "later"], "\(order.all)")
    }

    // MARK: - Migration.md: ProcedureKit's spellings

    // Migration.md, "From ProcedureKit": `procedure.add(condition:)`, `add(observer:)`,
    // `add(dependency:)` → `addCondition`, `addObserver`, `addDependency`, "deprecated form with a
    // fix-it"; `queue.add(operation:)` / `queue.add(operations:)` → `addOperation(_:)` /
    // `addOperations(_:waitUntilFinished: false)`; `cancel(with:)`; PSOperations'
    // `cancelWithError(error)` → `cancel(with: error)`; `finishWithError(error)` →
    // `finish(with: error)`; `group.add(child:)` / `add(children:)` → `addChild(_:)`.
    @available(*, deprecated, message: "runs ProcedureKit's and PSOperations' spellings on purpose")
    @Test
    func procedureKitSpellings_onAQueueAndInAGroup_honourCategoriesConditionsDependenciesAndObservers() {
        // Given operations configured with the old spellings: three in one category, each
        // observed; one whose dependency fails, with NoFailedDependencies; one cancelled with an
        // error before it is queued; and a group whose children are added the ProcedureKit way
        let queue = AsyncOperationQueue()
        let x = uniqueName("X")
        let probe = ConcurrencyProbe()
        let finishes = Recorder<Int>()
        let exclusive = (0..<3).map { _ in
            let operation = AsyncBlockOperation {
                probe.enter(x)
                usleep(20_000)
                probe.leave(x)
            }
            operation.add(condition: ExclusiveCategory(x))
            operation.add(observer: FinishedObserver { _, errors in finishes.append(errors.count) })
            return operation
        }
        let dependencyFailure = StubError("dependency failed")
        let failing = ClosureOperation { $0.finishWithError(dependencyFailure) }
        let blockedRan = Counter()
        let blocked = AsyncBlockOperation { blockedRan.increment() }
        blocked.add(condition: NoFailedDependencies())
        blocked.add(dependency: failing)
        let refusal = StubError("refused")
        let refusedRan = Counter()
        let refused = AsyncBlockOperation { refusedRan.increment() }
        refused.cancelWithError(refusal)
        let childrenRan = Recorder<String>()
        let group = GroupOperation()
        group.add(child: AsyncBlockOperation { childrenRan.append("a") })
        group.add(children: [AsyncBlockOperation { childrenRan.append("b") }, AsyncBlockOperation { childrenRan.append("c") }])

        // When they are added the ProcedureKit way
        queue.add(operations: exclusive + [failing, blocked])
        queue.add(operation: refused)
        queue.add(operation: group)

        // Then each behaves as its new spelling says
        #expect(waitUntilFinished(exclusive + [failing, blocked, refused, group]))
        #expect(probe.maximum(x) == 1)
        #expect(waitUntil { finishes.count >= 3 })
        #expect(finishes.all == [0, 0, 0])
        #expect(failing.errors.asStubErrors == [dependencyFailure])
        #expect(blockedRan.current == 0 && blocked.errors.count == 1, "\(blocked.errors)")
        #expect(refusedRan.current == 0)
        #expect(refused.errors.asStubErrors == [refusal], "\(refused.errors)")
        #expect(Set(childrenRan.all) == ["a", "b", "c"] && childrenRan.count == 3)
        #expect(group.errors.isEmpty)
    }

    // Migration.md, "From Advanced NSOperations and PSOperations": `produceOperation(operation)` →
    // `produce(operation)`, "deprecated form with a fix-it; also inside a group";
    // `finishWithError(error)` → `finish(with: error)`; a continuation without an argument "still
    // compiles too"; `BlockObserver(startHandler:produceHandler:finishHandler:)` → `didStart:`...;
    // "BlockObserver { op, errors in ... } still compiles, deprecated" as the finish handler;
    // `NegatedCondition(condition:)`, `SilentCondition(condition:)`; `GroupOperation(operations:
    // download, parse)` ("the variadic form is deprecated"); `group.addOperation(cleanUp)` →
    // `group.addChild(cleanUp)`.
    @available(*, deprecated, message: "runs PSOperations' spellings on purpose")
    @Test
    func psOperationsSpellings_insideATransactionAndAGroup_behaveAsTheirNewSpellings() throws {
        // Given a transaction whose children use PSOperations' spellings, and a group made the
        // variadic way with a child added the old way
        let heard = Recorder<String>()
        let legacyFinish = Recorder<Int>()
        let producedName = uniqueName("produced")
        let producedRan = Counter()
        let conditionedRan = Counter()
        let neverRun = AsyncBlockOperation {}
        let failure = StubError("old-style failure")
        let failures = Recorder<SeenFailure>()
        let transaction = TransactionOperation { parts in
            parts.add {
                let producer = ClosureOperation { operation in
                    let produced = AsyncBlockOperation { producedRan.increment() }
                    produced.name = producedName
                    operation.produceOperation(produced)
                    operation.finishWithError(nil)
                }
                producer.addObserver(BlockObserver(
                    startHandler: { _ in heard.append("start") },
                    produceHandler: { _, produced in heard.append("produce \(produced.name ?? "?")") },
                    finishHandler: { _, errors in heard.append("finish \(errors.count)") }
                ))
                producer.addObserver(BlockObserver { _, errors in legacyFinish.append(errors.count) })
                return producer
            }
            parts.add { AsyncBlockOperation { (continuation: @escaping @Sendable () -> Void) in continuation() } }
            parts.add {
                let operation = AsyncBlockOperation { conditionedRan.increment() }
                operation.addCondition(NegatedCondition(condition: StubCondition.failing(StubError("inner"))))
                operation.addCondition(SilentCondition(condition: StubCondition.satisfied(bringing: neverRun)))
                return operation
            }
            parts.add { ClosureOperation { $0.finishWithError(failure) } }
        } cancellation: { failure in
            failures.append(SeenFailure(failure))
            return .carryOn
        }
        let groupRan = Recorder<String>()
        let group = GroupOperation(operations: AsyncBlockOperation { groupRan.append("a") }, AsyncBlockOperation { groupRan.append("b") })
        group.addOperation(AsyncBlockOperation { groupRan.append("c") })

        // When both run
        let queue = AsyncOperationQueue()
        queue.addOperations([transaction, group], waitUntilFinished: false)

        // Then each old spelling did what its new one does
        #expect(waitUntilFinished([transaction, group]))
        #expect(waitUntil { heard.count >= 3 && legacyFinish.count >= 1 })
        #expect(heard.all == ["start", "produce \(producedName)", "finish 0"], "\(heard.all)")
        #expect(legacyFinish.all == [0])
        #expect(producedRan.current == 1)
        #expect(conditionedRan.current == 1)
        #expect(!neverRun.isFinished && !neverRun.isExecuting, "SilentCondition's dependency was run")
        #expect(failures.all == [SeenFailure(index: 3, attempt: 1, errors: [failure], isCancelled: false)], "\(failures.all)")
        #expect(transaction.errors.isEmpty, "\(transaction.errors)")
        #expect(Set(groupRan.all) == ["a", "b", "c"] && groupRan.count == 3)
    }
}
