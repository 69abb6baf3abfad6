import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// Adversarial probes of the documented contract of composition (/work/shared/API.md, README.md,
// the DocC articles Composition.md, AsyncAwait.md, RunningOperationsInAService.md and
// Migration.md, and the `///` comments of the public symbols): groups, composites, retries,
// result and input operations, the async/await bridges, run-and-wait, and graceful shutdown.
// Each test names the sentence it checks. Every wait is bounded; none asserts on wall-clock speed;
// held work is finished before each test ends.

@Suite struct CompositionProbeTests {
    // MARK: - Results and inputs

    // ResultOperation.output: "The value the operation produced; `nil` until it finished with
    // one." ResultOperation.result: "otherwise its output, or
    // `AsyncOperationError.finishedWithoutOutput` if it finished without producing one."
    // (An output type that is itself optional, `User?` from a cache lookup say, must still tell
    // "produced nil" from "produced nothing".)
    @Test
    func resultOperationWithAnOptionalOutput_thatProducedNothing_hasNoOutput_andFinishedWithoutOutput() {
        // Given an operation whose output type is optional and which finishes without producing,
        // and another that produces nil
        let silentName = uniqueName("silent-optional")
        let silent = ClosureResultOperation<Int?>(name: silentName) { operation in operation.finish() }
        let producesNil = ResultBlockOperation<Int?> { nil }
        #expect(isAbsent(silent.output), "an output before it ran: \(String(describing: silent.output))")

        // When both run
        AsyncOperationQueue().addOperations([silent, producesNil], waitUntilFinished: true)

        // Then the one that produced nothing has no output and finished without output, while the
        // one that produced nil has nil as its output
        #expect(isAbsent(silent.output), "output: \(String(describing: silent.output))")
        if case let .failure(error)? = silent.result {
            #expect(error as? AsyncOperationError == .finishedWithoutOutput(operation: silentName))
        } else {
            Issue.record("expected finishedWithoutOutput, got \(String(describing: silent.result))")
        }
        #expect(!isAbsent(producesNil.output))
        if case let .success(value)? = producesNil.result {
            #expect(value == nil)
        } else {
            Issue.record("expected a produced nil, got \(String(describing: producesNil.result))")
        }
    }

    // InputOperation: "If the upstream finished without an output, it fails with
    // `.missingInput`." Composition.md: "When the upstream operation finished without producing
    // a value, or an InputOperation was never given an input ..., it fails with `.missingInput`."
    @Test
    func inputOperationWithAnOptionalInput_afterAnUpstreamThatProducedNothing_failsWithMissingInput() {
        // Given an upstream of optional output that finishes without producing, and an operation
        // taking its output as input
        let upstreamName = uniqueName("silent-upstream")
        let upstream = ClosureResultOperation<Int?>(name: upstreamName) { operation in operation.finish() }
        let downstreamName = uniqueName("describe")
        let executedWith = Recorder<String>()
        let downstream = InputBlockOperation { (value: Int?) -> String in
            executedWith.append(String(describing: value))
            return "got \(String(describing: value))"
        }
        downstream.name = downstreamName
        downstream.takeInput(from: upstream)

        // When both run
        AsyncOperationQueue().addOperations([upstream, downstream], waitUntilFinished: true)

        // Then the downstream did not execute, and failed with missingInput naming the upstream
        #expect(executedWith.all.isEmpty, "executed with the input \(executedWith.all)")
        #expect(downstream.output == nil)
        #expect(
            downstream.errors.asOperationErrors == [.missingInput(operation: downstreamName, upstream: upstreamName)],
            "\(downstream.errors)"
        )
    }

    // ResultOperation.value: "an operation that finished without errors, without being cancelled
    // and without an output throws `AsyncOperationError.finishedWithoutOutput`."
    // AsyncOperationQueue.run(_:) for a ResultOperation: "returns its output once it has
    // finished, without blocking a thread; throws as `ResultOperation.value` does."
    @Test
    func queueRunOfAnOptionalResultOperation_thatProducedNothing_throwsFinishedWithoutOutput() async throws {
        // Given a queue, an operation of optional output that produces nothing, and one that
        // produces nil
        let queue = AsyncOperationQueue()
        let name = uniqueName("silent-run")
        let silent = ClosureResultOperation<Int?>(name: name) { operation in operation.finish() }
        let producesNil = ResultBlockOperation<Int?> { nil }

        // When each is run and awaited
        // Then the first throws finishedWithoutOutput, the second returns its nil
        await #expect(throws: AsyncOperationError.finishedWithoutOutput(operation: name)) {
            try await queue.run(silent)
        }
        let value = try await queue.run(producesNil)
        #expect(value == nil)
    }

    // MARK: - Groups

    // API.md 9: "a GroupOperation with maxConcurrentOperationCount = 1, start the operations
    // whose dependencies have finished in the order they were added". API.md: produce(_:) "adds
    // it to the queue (or group) this operation runs in". API.md 7: a group finishes only after
    // "every operation a child produced".
    @Test
    func serialGroup_startsAnOperationAChildProduced_afterTheSiblingAddedBeforeIt() {
        // Given a serial group of a child that produces an operation as it runs, then a sibling
        let log = Recorder<String>()
        let produced = AsyncBlockOperation { log.append("produced") }
        produced.name = uniqueName("produced")
        let producer = ClosureOperation(name: uniqueName("producer")) { operation in
            log.append("producer")
            operation.produce(produced)
            operation.finish()
        }
        let sibling = AsyncBlockOperation { log.append("sibling") }
        sibling.name = uniqueName("sibling")
        let group = GroupOperation(operations: [producer, sibling])
        group.maxConcurrentOperationCount = 1

        // When the group runs
        AsyncOperationQueue().addOperation(group)

        // Then the sibling, added first, started before the produced operation, and the group
        // finished after both
        #expect(waitUntilFinished([group]))
        #expect(log.all == ["producer", "sibling", "produced"])
        #expect(produced.isFinished && sibling.isFinished)
    }

    // Composition.md: a group "can react to each child in GroupOperation/childDidFinish(_:errors:)
    // (adding a child there, to retry, keeps the group running)". API.md 7: "its errors hold
    // every child's errors and its own".
    @Test
    func groupSubclass_addingAChildInChildDidFinish_asItsOnlyChildFails_keepsTheGroupRunning() {
        // Given a group subclass that adds a retry child when a child fails, with one failing child
        let error = StubError("first try")
        let held = HeldOperations()
        let retryName = uniqueName("retry")
        let groupName = uniqueName("retrying-group")
        let group = RetryingGroup(operations: [AsyncBlockOperation { throw error }]) { held.make(retryName) }
        group.name = groupName

        // When the group runs, and its only child fails
        AsyncOperationQueue().addOperation(group)

        // Then the retry child runs while the group still waits for it
        #expect(held.waitUntilStarted(retryName))
        #expect(!group.isFinished, "the group finished before the child its childDidFinish added")
        held.finish(retryName)
        #expect(waitUntilFinished([group]))
        // and the group holds the failed child's error, and reported nothing as too late
        #expect(group.errors.asStubErrors == [error], "\(group.errors)")
        #expect(DiagnosticsLog.shared.kinds(about: groupName).isEmpty)
    }

    // API.md 7: "Children may be added while the group runs, until it finishes." API.md 4:
    // "operationDidFinish exactly once, last": when a child's observer hears it, the child has not
    // finished, so neither has its group.
    @Test
    func childAddedFromTheLastChildsFinishObserver_isAwaitedByTheGroup() {
        // Given a group whose only child, as its observer hears it finish, adds a sibling
        let box = WeakBox<GroupOperation>()
        let held = HeldOperations()
        let lateName = uniqueName("added-from-observer")
        let groupName = uniqueName("observed-group")
        let only = AsyncBlockOperation {}
        only.addObserver(FinishedObserver { _, _ in box.object?.addChild(held.make(lateName)) })
        let group = GroupOperation(operations: [only])
        group.name = groupName
        box.object = group

        // When the group runs
        AsyncOperationQueue().addOperation(group)

        // Then the group waits for that sibling, and reports nothing as too late
        #expect(held.waitUntilStarted(lateName))
        #expect(!group.isFinished, "the group finished before a child added while it ran")
        held.finish(lateName)
        #expect(waitUntilFinished([group]))
        #expect(group.errors.isEmpty)
        #expect(DiagnosticsLog.shared.kinds(about: groupName).isEmpty)
    }

    // GroupOperation.childDidFinish(_:errors:): "Called when a child finished, with its errors,
    // before the group decides whether it is done". CascadeOperation is an open GroupOperation
    // (Composition.md: "Both are GroupOperations").
    @Test
    func cascadeSubclass_hearsInChildDidFinish_theErrorsOfAnAttemptThatIsRunAgain() {
        // Given a cascade subclass listening to childDidFinish, whose only child fails on its
        // first attempt, and a handler that runs it again once
        let error = StubError("first attempt")
        let attempts = Counter()
        let cascade = ListeningCascade { steps in
            steps.add {
                let attempt = attempts.increment()
                return AsyncBlockOperation { if attempt == 1 { throw error } }
            }
        } cancellation: { failure in
            failure.attempt == 1 ? .rerun : .cancel
        }

        // When it runs
        AsyncOperationQueue().addOperation(cascade)

        // Then it recovered, and childDidFinish heard the failed attempt with its error
        #expect(waitUntilFinished([cascade]))
        #expect(cascade.errors.isEmpty, "\(cascade.errors)")
        #expect(attempts.current == 2)
        #expect(cascade.heard.all == [[error], []], "childDidFinish heard \(cascade.heard.all)")
    }

    // MARK: - Composites

    // CompositeOperation: "Operations added with `addChild(_:)` and operations children produce
    // run as in any `GroupOperation`: the composite waits for them, but its handlers do not hear
    // about them." GroupOperation: "The group's `errors` hold every child's errors, then its own."
    @Test
    func compositeChildAddedWithAddChild_thatFails_isAwaited_keepsItsErrors_andNoHandlerHearsIt() {
        // Given a transaction with one declared child and one child added from outside, which
        // fails when told
        let extraError = StubError("extra")
        let gate = HeldCallback<(any Error)?>()
        let extra = AsyncBlockOperation { finish in gate.hold(finish) }
        let handlerCalls = Counter()
        let completions = Counter()
        let transaction = TransactionOperation { parts in
            parts.add { AsyncBlockOperation {} }
        } completion: {
            _ = completions.increment()
        } cancellation: { _ in
            _ = handlerCalls.increment()
            return .cancel
        }
        transaction.addChild(extra)

        // When it runs, the declared child succeeds, and the extra child then fails
        AsyncOperationQueue().addOperation(transaction)
        #expect(gate.waitUntilHeld())
        #expect(waitUntil { completions.current == 1 })
        #expect(!transaction.isFinished, "the transaction did not wait for the extra child")
        gate.call(extraError)

        // Then the transaction finished after it, uncancelled, with its error, and no handler
        // heard of it
        #expect(waitUntilFinished([transaction]))
        #expect(handlerCalls.current == 0)
        #expect(completions.current == 1)
        #expect(!transaction.isCancelled)
        #expect(transaction.errors.asStubErrors == [extraError], "\(transaction.errors)")
    }

    // Composition.md: "The completion handler is called once, when every child has succeeded
    // ..., before the composite finishes." API.md 7: "Children may be added while the group
    // runs, until it finishes."
    @Test
    func completionHandlerAddingAChild_theCascadeWaitsForThatChild() {
        // Given a cascade whose completion handler adds a last child to it
        let box = WeakBox<CascadeOperation>()
        let held = HeldOperations()
        let finalName = uniqueName("final-step")
        let cascadeName = uniqueName("cascade")
        let cascade = CascadeOperation { steps in
            steps.add { AsyncBlockOperation {} }
        } completion: {
            box.object?.addChild(held.make(finalName))
        }
        cascade.name = cascadeName
        box.object = cascade

        // When it runs, and that child fails
        AsyncOperationQueue().addOperation(cascade)
        #expect(held.waitUntilStarted(finalName))
        #expect(!cascade.isFinished, "the cascade finished before the child its completion added")
        let error = StubError("final step")
        held.finish(finalName, with: error)

        // Then the cascade finished after it, with its error, and reported nothing as too late
        #expect(waitUntilFinished([cascade]))
        #expect(cascade.errors.asStubErrors == [error], "\(cascade.errors)")
        #expect(DiagnosticsLog.shared.kinds(about: cascadeName).isEmpty)
    }

    // ResultTaskOperation: "cancelling the operation cancels the task, and the operation
    // finishes once the closure has returned or thrown". AsyncTaskOperation: "A
    // `CancellationError` thrown after the operation was cancelled is not recorded as an error."
    // Composition.md: "Cancelling a composite cancels its running children" and "Neither handler
    // is called when the composite itself is cancelled, by `cancel()`".
    @Test
    func transactionCancelledWhileATaskChildAwaits_cancelsItsTask_andCallsNoHandler() async {
        // Given a transaction whose child awaits in an async closure
        let bodyStarted = Flag()
        let bodySawCancellation = Flag()
        let handlerCalls = Counter()
        let completions = Counter()
        let transaction = TransactionOperation { parts in
            parts.add {
                ResultTaskOperation { () async throws -> Int in
                    bodyStarted.raise()
                    do {
                        try await Task.sleep(nanoseconds: 120_000_000_000)
                    } catch {
                        bodySawCancellation.raise()
                        throw error
                    }
                    return 1
                }
            }
        } completion: {
            _ = completions.increment()
        } cancellation: { _ in
            _ = handlerCalls.increment()
            return .carryOn
        }
        AsyncOperationQueue().addOperation(transaction)
        #expect(await eventually { bodyStarted.isRaised })

        // When the transaction is cancelled
        transaction.cancel()

        // Then the child's task saw the cancellation, the transaction finished cancelled without
        // errors, and neither handler was called
        #expect(await eventually { transaction.isFinished })
        #expect(bodySawCancellation.isRaised)
        #expect(transaction.isCancelled)
        #expect(transaction.errors.isEmpty, "\(transaction.errors)")
        #expect(handlerCalls.current == 0)
        #expect(completions.current == 0)
    }

    // MARK: - Retry

    // RetryOperation: "An attempt fails when it finishes with errors. It is retried if attempts
    // remain ... The retry operation succeeds as soon as an attempt succeeds". API.md 6:
    // TimeoutObserver "cancels the operation with a timeout error".
    @Test
    func retryOperation_retriesAnAttemptItsOwnTimeoutStopped_andSucceedsWithTheNext() {
        // Given a retry whose first attempt never finishes by itself but has a timeout
        let attempts = Counter()
        let retry = RetryOperation(maxAttempts: 3) { (attempt: Int) -> AsyncBlockOperation in
            _ = attempts.increment()
            guard attempt == 1 else { return AsyncBlockOperation {} }
            let stuck = AsyncBlockOperation { _ in } // never calls its continuation
            stuck.addObserver(TimeoutObserver(timeout: 0.1))
            return stuck
        }

        // When it runs
        AsyncOperationQueue().addOperation(retry)

        // Then the timed-out attempt was retried, and the retry succeeded with the second
        #expect(waitUntilFinished([retry]))
        #expect(retry.errors.isEmpty, "\(retry.errors)")
        #expect(!retry.isCancelled)
        #expect(retry.attemptCount == 2 && attempts.current == 2)
        #expect(retry.lastAttempt?.errors.isEmpty == true)
    }

    // RetryOperation: "otherwise its `errors` are **the last attempt's errors** ... Operations an
    // attempt produces are waited for and their errors kept, as in any group (API.md 7)". API.md
    // 7: "its `errors` hold every child's errors".
    @Test
    func retryOperation_whoseAttemptsAllFail_reportsTheLastAttemptsErrors_andThoseOfWhatAnAttemptProduced() {
        // Given a retry of two attempts, both failing; the first also produces an operation that
        // fails
        let firstError = StubError("attempt 1")
        let lastError = StubError("attempt 2")
        let sideError = StubError("side effect of attempt 1")
        let retry = RetryOperation(maxAttempts: 2) { (attempt: Int) -> ClosureOperation in
            ClosureOperation(name: uniqueName("attempt-\(attempt)")) { operation in
                if attempt == 1 {
                    operation.produce(AsyncBlockOperation { throw sideError })
                    operation.finish(with: firstError)
                } else {
                    operation.finish(with: lastError)
                }
            }
        }

        // When it runs
        AsyncOperationQueue().addOperation(retry)

        // Then its errors are the last attempt's and the produced operation's (in either order:
        // the two ran side by side), not the retried attempt's
        #expect(waitUntilFinished([retry]))
        #expect(retry.attemptCount == 2)
        let errors = retry.errors.asStubErrors
        #expect(errors.count == 2 && errors.contains(lastError) && errors.contains(sideError), "\(retry.errors)")
        #expect(!errors.contains(firstError))
    }

    // MARK: - Waiting

    // AsyncAwait.md, runAndWait: "an operation that is already on a queue is only waited for";
    // "Where the wait could never end it throws waitWouldDeadlock at once, without starting
    // anything: ... inside an operation of the target queue when all of that queue's concurrency
    // slots are taken by operations waiting like this one (a serial queue waiting for itself,
    // say)." A serial group runs its children on a serial queue of its own.
    @Test
    func runAndWaitInsideAChildOfASerialGroup_forASiblingQueuedBehindIt_throwsWaitWouldDeadlockAtOnce() {
        // Given a serial group whose first child waits, blocking, for the sibling queued behind it
        let siblingName = uniqueName("queued-sibling")
        let executed = Counter()
        let sibling = AsyncBlockOperation { _ = executed.increment() }
        sibling.name = siblingName
        let thrown = Recorder<AsyncOperationError>()
        let otherOutcomes = Recorder<String>()
        let waiter = AsyncBlockOperation {
            do {
                try sibling.runAndWait(timeout: 10)
                otherOutcomes.append("returned")
            } catch let error as AsyncOperationError {
                thrown.append(error)
            } catch {
                otherOutcomes.append("\(error)")
            }
        }
        waiter.name = uniqueName("waiter")
        let group = GroupOperation(operations: [waiter, sibling])
        group.maxConcurrentOperationCount = 1

        // When the group runs
        AsyncOperationQueue().addOperation(group)

        // Then the wait threw waitWouldDeadlock (not a timeout), and the sibling then ran as usual
        #expect(waitUntilFinished([group]))
        #expect(otherOutcomes.all.isEmpty, "\(otherOutcomes.all)")
        if let error = thrown.all.first, case let .waitWouldDeadlock(operation, _) = error {
            #expect(operation == siblingName)
        } else {
            Issue.record("expected waitWouldDeadlock, got \(thrown.all)")
        }
        #expect(executed.current == 1)
        #expect(!sibling.isCancelled && sibling.errors.isEmpty, "\(sibling.errors)")
    }

    // AsyncAwait.md, runAndWait: "an operation that is already on a queue is only waited for";
    // "After `timeout` seconds it cancels the operation with waitTimedOut and throws that error."
    // Composition.md: "Its `errors` hold every child's errors, then its own. Cancelling it cancels
    // the children and still waits for them."
    @Test
    func runAndWaitTimingOutOnAGroup_throwsAtTheTimeout_andTheGroupLaterHoldsItsChildsErrorThenTheTimeout() {
        // Given a running group whose child ignores cancellation and finishes when told
        let release = HeldCallback<(any Error)?>()
        let child = ClosureOperation(name: uniqueName("stubborn-child")) { operation in
            release.hold { error in operation.finish(with: error) }
        }
        let groupName = uniqueName("impatient-group")
        let group = GroupOperation(operations: [child])
        group.name = groupName
        AsyncOperationQueue().addOperation(group)
        #expect(release.waitUntilHeld())

        // When a wait for it times out
        let expected = AsyncOperationError.waitTimedOut(operation: groupName, after: 0.3)
        #expect(throws: expected) { try group.runAndWait(timeout: 0.3) }

        // Then the group and its child are cancelled, and the group still waits for the child
        #expect(group.isCancelled && child.isCancelled)
        #expect(!group.isFinished, "the group finished before its child")
        let childError = StubError("child")
        release.call(childError)
        // and finishes with the child's error, then the timeout
        #expect(waitUntilFinished([group]))
        #expect(group.errors.count == 2, "\(group.errors)")
        #expect(group.errors.first as? StubError == childError)
        #expect(group.errors.last as? AsyncOperationError == expected)
    }

    // MARK: - Shutting down

    // Composition.md, `.rerun(after: seconds)`: "the same, after a delay; cancelling the
    // composite meanwhile ends the wait"; "Neither handler is called when the composite itself is
    // cancelled". API.md 12: "running operations may finish within the grace period, then are
    // cancelled; every operation that was on the queue finishes exactly once; the call returns
    // when the queue is empty."
    @Test
    func shutDownPastTheGracePeriod_duringACascadesRerunDelay_endsTheWait_withoutAnotherAttempt() async {
        // Given a cascade waiting an hour to run its failed child again
        let queue = AsyncOperationQueue()
        let built = Counter()
        let handlerCalls = Counter()
        let completions = Counter()
        let error = StubError("first attempt")
        let cascade = CascadeOperation { steps in
            steps.add {
                _ = built.increment()
                return AsyncBlockOperation { throw error }
            }
        } completion: {
            _ = completions.increment()
        } cancellation: { _ in
            _ = handlerCalls.increment()
            return .rerun(after: 3600)
        }
        queue.addOperation(cascade)
        #expect(await eventually { handlerCalls.current == 1 })

        // When its queue shuts down with a short grace period
        let returned = Flag()
        Task {
            await queue.shutDown(gracePeriod: 0.05)
            returned.raise()
        }

        // Then the call returns, the cascade finished cancelled with the shut-down error, and no
        // new attempt, handler call or completion came
        #expect(await eventually { returned.isRaised }, "shutDown never returned")
        #expect(cascade.isFinished && cascade.isCancelled)
        #expect(cascade.errors.asOperationErrors.contains(.queueShutDown), "\(cascade.errors)")
        #expect(!cascade.errors.asStubErrors.contains(error), "\(cascade.errors)")
        #expect(handlerCalls.current == 1)
        #expect(built.current == 1)
        #expect(completions.current == 0)
        if !cascade.isFinished { cascade.cancel() } // leave nothing waiting for an hour
    }

    // RunningOperationsInAService.md: "Operations that wait (for dependencies, conditions, a
    // category, a slot, a suspended queue) are cancelled with the same error; operations that
    // execute may finish." API.md 7: "A GroupOperation finishes only after every child ... has
    // finished; its errors hold every child's errors and its own."
    @Test
    func shutDownWhileAGroupWaitsForASlot_finishesItCancelled_withoutRunningItsChildren() async {
        // Given a serial queue running an operation, and a group waiting for the slot
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let held = HeldOperations()
        let runningName = uniqueName("running")
        let running = held.make(runningName)
        let executed = Counter()
        let children = (0..<2).map { _ in AsyncBlockOperation { _ = executed.increment() } }
        let group = GroupOperation(operations: children)
        group.name = uniqueName("waiting-group")
        queue.addOperations([running, group], waitUntilFinished: false)
        #expect(await eventually { held.startCount(runningName) == 1 })

        // When the queue shuts down, letting the running operation finish
        let returned = Flag()
        Task {
            await queue.shutDown(gracePeriod: .infinity)
            returned.raise()
        }

        // Then the group is cancelled at once, while the running operation goes on; waiting only
        // for its turn, it finishes when the queue gets to it (AsyncOperationQueue
        // .cancelAllOperations()), with the shut-down error, its children never executed
        #expect(await eventually { group.isCancelled })
        #expect(!returned.isRaised && !running.isCancelled)
        held.finish(runningName)
        #expect(await eventually { group.isFinished })
        #expect(group.errors.asOperationErrors == [.queueShutDown], "\(group.errors)")
        #expect(children.allSatisfy { $0.isFinished && $0.isCancelled })
        #expect(executed.current == 0)
        // and the call returns once the running operation finished, uncancelled
        #expect(await eventually { returned.isRaised }, "shutDown never returned")
        #expect(running.isFinished && running.errors.isEmpty)
    }

    // MARK: - Migration

    // Migration.md, "Groups and produced operations": "A GroupOperation takes its children as an
    // array, runs them on its own queue and finishes once all of them, and everything they
    // produced, have finished; produce(_:) adds an operation to the queue (or the group) the
    // producing operation runs in". Its table: `produceOperation(operation)` → `produce(operation)`
    // "deprecated form with a fix-it; also inside a group"; `GroupOperation(operations: download,
    // parse)`, `group.addOperation(cleanUp)` and `finishWithError(error)` are the deprecated forms
    // of `GroupOperation(operations: [download, parse])`, `group.addChild(cleanUp)` and
    // `finish(with: error)`.
    @available(*, deprecated, message: "uses PSOperations' spellings on purpose")
    @Test
    func psOperationsSpellings_inAGroup_producedAndAddedOperations_areAwaited_andTheirErrorsKept() {
        // Given a group made the PSOperations way, whose first child produces an operation and
        // whose second runs until told
        let held = HeldOperations()
        let gateName = uniqueName("gate")
        let gate = held.make(gateName)
        let events = Recorder<String>()
        let produced = AsyncBlockOperation { events.append("produced") }
        let download = ClosureOperation(name: uniqueName("download")) { operation in
            operation.produceOperation(produced)
            operation.finish()
        }
        let group = GroupOperation(operations: download, gate)
        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted(gateName))

        // When a clean-up operation that fails is added to it with the old spelling
        let error = StubError("clean-up")
        let cleanUp = ClosureOperation(name: uniqueName("clean-up")) { operation in
            events.append("cleanUp")
            operation.finishWithError(error)
        }
        group.addOperation(cleanUp)

        // Then the produced and added operations run inside the group, which waits for its gate
        #expect(waitUntil { produced.isFinished && cleanUp.isFinished })
        #expect(!group.isFinished)
        held.finish(gateName)
        #expect(waitUntilFinished([group]))
        #expect(Set(events.all) == ["produced", "cleanUp"])
        // and holds the clean-up's error
        #expect(group.errors.asStubErrors == [error], "\(group.errors)")
    }
}

// MARK: - Helpers

/// Whether a `ResultOperation<Int?>`'s `output` is absent, rather than a produced `nil`.
private func isAbsent(_ output: Int??) -> Bool {
    if case .none = output { return true }
    return false
}

/// A group that adds, once, the child `makeRetry` makes when one of its children fails.
private final class RetryingGroup: GroupOperation, @unchecked Sendable {
    // @unchecked Sendable: `makeRetry` is immutable and `retries` is thread-safe.
    private let makeRetry: @Sendable () -> Foundation.Operation
    private let retries = Counter()

    init(operations: [Foundation.Operation], makeRetry: @escaping @Sendable () -> Foundation.Operation) {
        self.makeRetry = makeRetry
        super.init(operations: operations)
    }

    override func childDidFinish(_ child: Foundation.Operation, errors: [any Error]) {
        if !errors.isEmpty, retries.increment() == 1 {
            addChild(makeRetry())
        }
    }
}

/// A cascade that records the errors each `childDidFinish` call carries, in order.
private final class ListeningCascade: CascadeOperation, @unchecked Sendable {
    // @unchecked Sendable: `heard` is thread-safe; the rest is CascadeOperation's.
    let heard = Recorder<[StubError?]>()

    override func childDidFinish(_ child: Foundation.Operation, errors: [any Error]) {
        heard.append(errors.asStubErrors)
    }
}
