import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// A second round of adversarial probes of composition and of the async/await bridges, each
// checking one documented behaviour that the other suites leave alone (/work/shared/API.md,
// README.md, Operations.docc/Composition.md and AsyncAwait.md, and the `///` comments of
// CompositeOperation, CompositeFailure, CompositeResolution, RetryOperation, addChain,
// InputOperation, finished(), value, run(_:) and runAndWait(on:timeout:)). Each test names the
// sentence it checks. Every wait is bounded; none asserts on wall-clock speed; events are ordered
// with held operations and flags, not sleeps.

@Suite("Composition probes, round 2")
struct CompositionProbeTests2 {
    // MARK: - Composites: order, handlers, failures

    // TransactionOperation: "`maxConcurrentOperationCount` limits how many children run at once";
    // API.md 9: "a GroupOperation with maxConcurrentOperationCount = 1, start the operations whose
    // dependencies have finished in the order they were added".
    @Test
    func transactionOfWidthOne_runsItsChildrenInTheOrderTheyWereDeclared() {
        // Given a transaction of six children, one at a time
        let order = Recorder<Int>()
        let transaction = TransactionOperation { parts in
            for index in 0..<6 {
                parts.add { AsyncBlockOperation { order.append(index) } }
            }
        }
        transaction.maxConcurrentOperationCount = 1

        // When it runs
        AsyncOperationQueue().addOperation(transaction)

        // Then its children ran in the declared order
        #expect(waitUntilFinished([transaction]))
        #expect(order.all == [0, 1, 2, 3, 4, 5])
        #expect(transaction.errors.isEmpty, "\(transaction.errors)")
    }

    // CompositeFailure.child: "The operation that failed or was cancelled; it has finished."
    // `index`: "The child's position among the composite's declared children"; `attempt`:
    // "1 the first time, 2 after one rerun, and so on".
    @Test
    func transactionHandler_seesTheFailedChildFinished_withItsIndexAttemptAndErrors() {
        // Given a transaction whose third child fails on its first two attempts, and a handler
        // that runs it again
        let label = uniqueName("flaky")
        let attempts = Counter()
        let completions = Counter()
        let seen = Recorder<SeenFailure>()
        let transaction = TransactionOperation { parts in
            parts.add { AsyncBlockOperation {} }
            parts.add { AsyncBlockOperation {} }
            parts.add {
                let attempt = attempts.increment()
                return AsyncBlockOperation { if attempt < 3 { throw StubError("\(label)-\(attempt)") } }
            }
        } completion: {
            _ = completions.increment()
        } cancellation: { failure in
            seen.append(SeenFailure(failure))
            return .rerun
        }

        // When it runs
        AsyncOperationQueue().addOperation(transaction)

        // Then the handler saw each failed attempt, finished, with its index, number and errors
        #expect(waitUntilFinished([transaction]))
        #expect(seen.all == [
            SeenFailure(index: 2, attempt: 1, childIsFinished: true, isCancelled: false, errors: [StubError("\(label)-1")]),
            SeenFailure(index: 2, attempt: 2, childIsFinished: true, isCancelled: false, errors: [StubError("\(label)-2")]),
        ])
        // and the transaction recovered
        #expect(completions.current == 1)
        #expect(transaction.errors.isEmpty && !transaction.isCancelled, "\(transaction.errors)")
    }

    // CompositeFailure.isCancelled: "Whether the child was cancelled (possibly with errors too)";
    // `errors`: "The child's errors". CompositeResolution.carryOn: "its errors are dropped, the
    // children after it run, and the completion handler is called at the end."
    @Test
    func childCancelledFromOutsideWithAnError_reachesTheHandlerAsCancelledWithThatError_andCarryOnCompletes() {
        // Given a cascade whose first child waits until told, then a second child
        let gate = HeldCallback<(any Error)?>()
        let first = Recorder<AsyncBlockOperation>()
        let secondRan = Counter()
        let completions = Counter()
        let seen = Recorder<SeenFailure>()
        let cascade = CascadeOperation { steps in
            steps.add {
                let child = AsyncBlockOperation { finish in gate.hold(finish) }
                first.append(child)
                return child
            }
            steps.add { AsyncBlockOperation { _ = secondRan.increment() } }
        } completion: {
            _ = completions.increment()
        } cancellation: { failure in
            seen.append(SeenFailure(failure))
            return .carryOn
        }
        AsyncOperationQueue().addOperation(cascade)
        #expect(gate.waitUntilHeld())

        // When someone else cancels that child with an error
        let error = StubError("cancelled from outside")
        first.all.first?.cancel(with: error)

        // Then the handler saw it cancelled, with the error; the cascade carried on and completed
        #expect(waitUntilFinished([cascade]))
        #expect(seen.all == [SeenFailure(index: 0, attempt: 1, childIsFinished: true, isCancelled: true, errors: [error])])
        #expect(secondRan.current == 1)
        #expect(completions.current == 1)
        #expect(cascade.errors.isEmpty && !cascade.isCancelled, "\(cascade.errors)")
    }

    // Composition.md: "A factory must not return an operation that was already queued or run;
    // the composite then cancels with AsyncOperationError/childReused(composite:child:)."
    @Test
    func transactionWhoseTwoFactoriesReturnOneOperation_cancelsWithChildReused_andRunsItAtMostOnce() {
        // Given a transaction whose two factories return the same operation
        let executed = Counter()
        let sharedName = uniqueName("shared")
        let shared = AsyncBlockOperation { _ = executed.increment() }
        shared.name = sharedName
        let transactionName = uniqueName("sharing-transaction")
        let handlerCalls = Counter()
        let completions = Counter()
        let transaction = TransactionOperation { parts in
            parts.add { shared }
            parts.add { shared }
        } completion: {
            _ = completions.increment()
        } cancellation: { _ in
            _ = handlerCalls.increment()
            return .carryOn
        }
        transaction.name = transactionName

        // When it runs
        AsyncOperationQueue().addOperation(transaction)

        // Then it cancelled with childReused naming the shared operation, which ran at most once
        #expect(waitUntilFinished([transaction]))
        #expect(transaction.isCancelled)
        #expect(
            transaction.errors.asOperationErrors == [.childReused(composite: transactionName, child: sharedName)],
            "\(transaction.errors)"
        )
        #expect(executed.current <= 1)
        #expect(completions.current == 0)
        #expect(handlerCalls.current == 0)
    }

    // CompositeChildren.add(_:): "`makeChild` must return a new operation each time it is called";
    // Composition.md: "the composite then cancels with childReused". CompositeResolution.rerun:
    // "with a new operation from its factory".
    @Test
    func cascadeWhoseFactoryReturnsTheFailedAttemptOnRerun_cancelsWithChildReused() {
        // Given a cascade whose factory always returns the same failing operation, and a handler
        // that asks for a rerun
        let childName = uniqueName("same-child")
        let executed = Counter()
        let failing = AsyncBlockOperation {
            _ = executed.increment()
            throw StubError("fails")
        }
        failing.name = childName
        let factoryCalls = Counter()
        let handlerCalls = Counter()
        let completions = Counter()
        let secondBuilt = Counter()
        let cascadeName = uniqueName("rerunning-cascade")
        let cascade = CascadeOperation { steps in
            steps.add {
                _ = factoryCalls.increment()
                return failing
            }
            steps.add {
                _ = secondBuilt.increment()
                return AsyncBlockOperation {}
            }
        } completion: {
            _ = completions.increment()
        } cancellation: { _ in
            _ = handlerCalls.increment()
            return .rerun
        }
        cascade.name = cascadeName

        // When it runs
        AsyncOperationQueue().addOperation(cascade)

        // Then the rerun was refused: the cascade finished cancelled with childReused, the child
        // ran once, and nothing more was built or decided
        #expect(waitUntilFinished([cascade]))
        #expect(cascade.isCancelled)
        #expect(
            cascade.errors.asOperationErrors.contains(.childReused(composite: cascadeName, child: childName)),
            "\(cascade.errors)"
        )
        #expect(factoryCalls.current == 2)
        #expect(executed.current == 1)
        #expect(handlerCalls.current == 1)
        #expect(completions.current == 0)
        #expect(secondBuilt.current == 0)
    }

    // CompositeOperation: "Both handlers run on an arbitrary thread ..., never under a lock";
    // "The completion handler is called once, when every child has succeeded ..., before the
    // composite finishes."
    @Test
    func handlersReadingTheirCompositesState_doNotDeadlock_andCompletionComesBeforeTheFinish() {
        // Given a cascade whose handlers read the cascade's description, progress and errors
        let box = WeakBox<CascadeOperation>()
        let attempts = Counter()
        let readInHandler = Recorder<String>()
        let readInCompletion = Recorder<Bool>()
        let cascade = CascadeOperation { steps in
            steps.add {
                let attempt = attempts.increment()
                return AsyncBlockOperation { if attempt == 1 { throw StubError("once") } }
            }
            steps.add { AsyncBlockOperation {} }
        } completion: {
            guard let cascade = box.object else { return }
            _ = cascade.debugDescription
            _ = cascade.progress.completedUnitCount
            _ = cascade.errors
            readInCompletion.append(cascade.isFinished)
        } cancellation: { _ in
            guard let cascade = box.object else { return .cancel }
            readInHandler.append(cascade.debugDescription)
            _ = cascade.progress.totalUnitCount
            _ = cascade.errors
            return .rerun
        }
        box.object = cascade

        // When it runs
        AsyncOperationQueue().addOperation(cascade)

        // Then it finished, each handler having read the state once, the completion before the
        // cascade finished
        #expect(waitUntilFinished([cascade]), "a handler reading its composite's state deadlocked")
        #expect(readInHandler.count == 1)
        #expect(readInCompletion.all == [false])
        #expect(cascade.errors.isEmpty, "\(cascade.errors)")
    }

    // Composition.md: "A composite's errors hold its children's errors, except those of attempts
    // that were run again or carried on: a composite that recovered reports no failure to whoever
    // waits for it." AsyncOperationQueue.run(_:): "throws its errors as finished() does".
    @Test
    func queueRunOfATransactionThatRecovered_byRerunAndCarryOn_returnsWithoutThrowing() async {
        // Given a transaction whose first child fails once (run again) and second fails (carried on)
        let attempts = Counter()
        let transaction = TransactionOperation { parts in
            parts.add {
                let attempt = attempts.increment()
                return AsyncBlockOperation { if attempt == 1 { throw StubError("rerun me") } }
            }
            parts.add { AsyncBlockOperation { throw StubError("carry on") } }
        } cancellation: { failure in
            failure.index == 0 ? .rerun : .carryOn
        }

        // When it is run and awaited
        let outcome = await boundedOutcome { try await AsyncOperationQueue().run(transaction) }

        // Then the wait returned without an error
        #expect(outcome == "returned")
        #expect(transaction.errors.isEmpty, "\(transaction.errors)")
        #expect(attempts.current == 2)
    }

    // CompositeResolution.cancel: "The composite finishes cancelled, with the failed child's errors
    // among its own." AsyncAwait.md, runAndWait: "It throws the operation's only error as it is,
    // several as AsyncOperationError/multipleErrors(operation:errors:)".
    @Test
    func cascadeGivingUpOnAChildWithTwoErrors_runAndWaitThrowsMultipleErrors_namingTheCascade() {
        // Given a cascade without a handler whose first child is a serial group of two failing
        // operations
        let first = StubError("first")
        let second = StubError("second")
        let laterBuilt = Counter()
        let cascadeName = uniqueName("giving-up-cascade")
        let cascade = CascadeOperation { steps in
            steps.add {
                let group = GroupOperation(operations: [AsyncBlockOperation { throw first }, AsyncBlockOperation { throw second }])
                group.maxConcurrentOperationCount = 1
                return group
            }
            steps.add {
                _ = laterBuilt.increment()
                return AsyncBlockOperation {}
            }
        }
        cascade.name = cascadeName

        // When it is run and waited for
        // Then the wait throws both errors together, naming the cascade, which is cancelled
        #expect(throws: AsyncOperationError.multipleErrors(operation: cascadeName, errors: [first, second])) {
            try cascade.runAndWait(timeout: 10)
        }
        #expect(cascade.isCancelled)
        #expect(laterBuilt.current == 0)
    }

    // Composition.md: "Cancelling the waiting task cancels the operation, and the wait ends at
    // once with CancellationError"; "Neither handler is called when the composite itself is
    // cancelled"; "Cancelling a composite cancels its running children".
    @Test
    func taskAwaitingQueueRunOfATransaction_cancelled_cancelsItsChildren_andNoHandlerIsCalled() async {
        // Given a transaction of two children that wait until told, run and awaited by a task
        let gates = [HeldCallback<(any Error)?>(), HeldCallback<(any Error)?>()]
        let children = Recorder<AsyncBlockOperation>()
        let handlerCalls = Counter()
        let completions = Counter()
        let transaction = TransactionOperation { parts in
            for index in 0..<2 {
                parts.add {
                    let child = AsyncBlockOperation { finish in gates[index].hold(finish) }
                    children.append(child)
                    return child
                }
            }
        } completion: {
            _ = completions.increment()
        } cancellation: { _ in
            _ = handlerCalls.increment()
            return .carryOn
        }
        let outcomes = Recorder<String>()
        let queue = AsyncOperationQueue()
        let task = Task {
            do {
                try await queue.run(transaction)
                outcomes.append("returned")
            } catch {
                outcomes.append(describe(error))
            }
        }
        #expect(await eventually { gates.allSatisfy { $0.timesHeld > 0 } })

        // When the task is cancelled
        task.cancel()

        // Then its wait ends with CancellationError, the transaction and its children finish
        // cancelled, and neither handler is called
        #expect(await eventually { outcomes.count == 1 })
        #expect(outcomes.all == ["CancellationError"])
        #expect(await eventually { transaction.isFinished })
        #expect(transaction.isCancelled)
        #expect(children.all.count == 2 && children.all.allSatisfy { $0.isFinished && $0.isCancelled })
        #expect(handlerCalls.current == 0)
        #expect(completions.current == 0)
    }

    // API.md, "Seeing inside": "GroupOperation (and so the composites) conform to
    // ProgressReporting: totalUnitCount is the number of children admitted, completedUnitCount the
    // number finished". CascadeOperation: "A child's factory is called when the child is due to run".
    @Test
    func cascadeProgress_countsChildrenAsTheyAreAdmitted_oneAtATime() {
        // Given a cascade of two children that run until told
        let held = HeldOperations()
        let firstName = uniqueName("first-step")
        let secondName = uniqueName("second-step")
        let cascade = CascadeOperation { steps in
            steps.add { held.make(firstName) }
            steps.add { held.make(secondName) }
        }
        AsyncOperationQueue().addOperation(cascade)

        // When the first runs, then the second
        #expect(held.waitUntilStarted(firstName))
        // Then only the first is counted while it runs
        #expect(cascade.progress.totalUnitCount == 1, "total \(cascade.progress.totalUnitCount)")
        #expect(cascade.progress.completedUnitCount == 0)
        held.finish(firstName)
        #expect(held.waitUntilStarted(secondName))
        #expect(waitUntil { cascade.progress.completedUnitCount == 1 })
        #expect(cascade.progress.totalUnitCount == 2, "total \(cascade.progress.totalUnitCount)")
        held.finish(secondName)
        // and both are, once the cascade finished
        #expect(waitUntilFinished([cascade]))
        #expect(cascade.progress.totalUnitCount == 2 && cascade.progress.completedUnitCount == 2)
    }

    // Composition.md, `.cancel`: "cancels itself: children still running are cancelled, later
    // ones never start"; `.rerun(after:)`: "cancelling the composite meanwhile ends the wait".
    @Test
    func transactionCancelledByItsHandler_whileAnotherChildWaitsForItsRerun_finishesWithoutRerunningIt() {
        // Given a transaction whose first child fails and is to run again in an hour, and whose
        // second child fails only once that wait began, the handler then cancelling
        let firstBuilt = Counter()
        let secondGate = HeldCallback<(any Error)?>()
        let handlerCalls = Counter()
        let completions = Counter()
        let secondError = StubError("second")
        let transaction = TransactionOperation { parts in
            parts.add {
                _ = firstBuilt.increment()
                return AsyncBlockOperation { throw StubError("first") }
            }
            parts.add { AsyncBlockOperation { finish in secondGate.hold(finish) } }
        } completion: {
            _ = completions.increment()
        } cancellation: { failure in
            _ = handlerCalls.increment()
            return failure.index == 0 ? .rerun(after: 3600) : .cancel
        }
        AsyncOperationQueue().addOperation(transaction)
        #expect(waitUntil { handlerCalls.current == 1 } && secondGate.waitUntilHeld())

        // When the second child fails
        secondGate.call(secondError)

        // Then the transaction finishes cancelled with that child's error, without waiting for the
        // hour or building the first child again
        #expect(waitUntilFinished([transaction]), "the rerun delay kept the cancelled transaction running")
        #expect(transaction.isCancelled)
        #expect(transaction.errors.asStubErrors.contains(secondError), "\(transaction.errors)")
        #expect(firstBuilt.current == 1)
        #expect(handlerCalls.current == 2)
        #expect(completions.current == 0)
        if !transaction.isFinished { transaction.cancel() } // leave nothing waiting for an hour
    }

    // Composition.md: "A factory must not return an operation that was already queued or run; the
    // composite then cancels with childReused" (a plain Foundation operation waiting on an
    // AsyncOperationQueue is queued).
    @Test
    func factoryReturningAPlainOperationQueuedOnASuspendedQueue_cancelsWithChildReused_andLeavesItThere() {
        // Given a plain operation waiting on a suspended queue, and a cascade whose factory returns it
        let elsewhere = AsyncOperationQueue()
        elsewhere.isSuspended = true
        let executed = Counter()
        let plainName = uniqueName("queued-plain")
        let plain = BlockOperation { _ = executed.increment() }
        plain.name = plainName
        elsewhere.addOperation(plain)
        let cascadeName = uniqueName("borrowing-cascade")
        let cascade = CascadeOperation { steps in
            steps.add { plain }
        }
        cascade.name = cascadeName

        // When the cascade runs
        AsyncOperationQueue().addOperation(cascade)

        // Then it cancels with childReused, and the plain operation still waits on its own queue
        #expect(waitUntilFinished([cascade]))
        #expect(cascade.isCancelled)
        #expect(cascade.errors.asOperationErrors == [.childReused(composite: cascadeName, child: plainName)], "\(cascade.errors)")
        #expect(!plain.isFinished && !plain.isCancelled && executed.current == 0)
        // and runs there once its queue resumes
        elsewhere.isSuspended = false
        #expect(waitUntilFinished([plain]))
        #expect(executed.current == 1)
    }

    // Composition.md: "A factory must not return an operation that was already queued or run" (one
    // cancelled before it was ever queued is neither); CompositeFailure.isCancelled "possibly with
    // errors too"; API.md 5: "cancel(with:) before the operation starts: it finishes without
    // executing, with that error (if any) in errors".
    @Test
    func factoryReturningAnOperationCancelledBeforeItWasQueued_reachesTheHandlerAsCancelled_notAsReused() {
        // Given a cascade whose first factory returns an operation it cancelled with an error
        let error = StubError("cancelled up front")
        let executed = Counter()
        let seen = Recorder<SeenFailure>()
        let completions = Counter()
        let cascade = CascadeOperation { steps in
            steps.add {
                let child = AsyncBlockOperation { _ = executed.increment() }
                child.cancel(with: error)
                return child
            }
            steps.add { AsyncBlockOperation {} }
        } completion: {
            _ = completions.increment()
        } cancellation: { failure in
            seen.append(SeenFailure(failure))
            return .carryOn
        }

        // When it runs
        AsyncOperationQueue().addOperation(cascade)

        // Then the child finished without executing, the handler saw it cancelled with the error,
        // and the cascade carried on to completion
        #expect(waitUntilFinished([cascade]))
        #expect(executed.current == 0)
        #expect(seen.all == [SeenFailure(index: 0, attempt: 1, childIsFinished: true, isCancelled: true, errors: [error])])
        #expect(completions.current == 1)
        #expect(cascade.errors.isEmpty && !cascade.isCancelled, "\(cascade.errors)")
    }

    // Composition.md: "A finished composite lets go of its factories and handlers" (also one that
    // cancelled itself with childReused).
    @Test
    func compositeCancelledWithChildReused_letsGoOfItsFactoriesAndHandlers() {
        // Given a cascade whose factory returns an operation that already ran, and handlers that
        // capture an object
        let ran = AsyncBlockOperation {}
        AsyncOperationQueue().addOperations([ran], waitUntilFinished: true)
        var captured: Counter? = Counter()
        let probe = WeakProbe(captured!)
        let cascade = CascadeOperation { [captured] steps in
            steps.add { [captured] in
                _ = captured
                return ran
            }
        } completion: { [captured] in
            _ = captured
        } cancellation: { [captured] _ in
            _ = captured
            return .carryOn
        }
        captured = nil

        // When it runs
        AsyncOperationQueue().addOperation(cascade)

        // Then it finishes cancelled, and what its closures captured is released
        #expect(waitUntilFinished([cascade]))
        #expect(cascade.isCancelled)
        #expect(probe.isReleased(timeout: 10))
        withExtendedLifetime(cascade) {}
    }

    // MARK: - Chains

    // Composition.md: an operation whose predecessor failed "finishes without executing, with
    // upstreamFailed ... naming the first operation that failed and why"; InputOperation: "naming
    // the first operation that failed along the chain". API.md 7: a group's "errors hold every
    // child's errors".
    @Test
    func chainAfterALinkWithTwoErrors_failsWithUpstreamFailed_namingItAndBothReasons() {
        // Given a chain whose head is a serial group with two failing children
        let first = StubError(uniqueName("first-reason"))
        let second = StubError(uniqueName("second-reason"))
        let headName = uniqueName("two-error-head")
        let head = GroupOperation(operations: [AsyncBlockOperation { throw first }, AsyncBlockOperation { throw second }])
        head.maxConcurrentOperationCount = 1
        head.name = headName
        let executed = Counter()
        let middleName = uniqueName("middle")
        let middle = AsyncBlockOperation { _ = executed.increment() }
        middle.name = middleName
        let tailName = uniqueName("tail")
        let tail = AsyncBlockOperation { _ = executed.increment() }
        tail.name = tailName

        // When the chain runs
        AsyncOperationQueue().addChain([head, middle, tail])

        // Then neither later link executed; each failed with upstreamFailed naming the head, with
        // a reason that gives both of its errors
        #expect(waitUntilFinished([head, middle, tail]))
        #expect(executed.current == 0)
        for (operation, name) in [(middle, middleName), (tail, tailName)] {
            guard operation.errors.count == 1,
                  case let .upstreamFailed(failed, upstream, reason)? = operation.errors.first as? AsyncOperationError
            else {
                Issue.record("\(name): \(operation.errors)")
                continue
            }
            #expect(failed == name)
            #expect(upstream == headName)
            #expect(reason.contains(first.label) && reason.contains(second.label), "reason: \(reason)")
        }
    }

    // addChain(_:): "Each AsyncOperation in the chain also finishes without executing when the
    // operation before it failed or was cancelled, with upstreamFailed or .upstreamCancelled
    // naming the first failure" (a plain Foundation operation included).
    @Test
    func chainThroughACancelledPlainOperation_stopsTheRest_withUpstreamCancelledNamingIt() {
        // Given a chain of an operation, a plain operation cancelled before it runs, then two more
        let executed = Recorder<String>()
        let head = AsyncBlockOperation { executed.append("head") }
        head.name = uniqueName("head")
        let plainName = uniqueName("plain")
        let plain = BlockOperation { executed.append("plain") }
        plain.name = plainName
        plain.cancel()
        let middleName = uniqueName("middle")
        let middle = AsyncBlockOperation { executed.append("middle") }
        middle.name = middleName
        let tailName = uniqueName("tail")
        let tail = AsyncBlockOperation { executed.append("tail") }
        tail.name = tailName

        // When the chain runs
        AsyncOperationQueue().addChain([head, plain, middle, tail])

        // Then only the head executed; the links after the plain one name it as cancelled
        #expect(waitUntilFinished([head, plain, middle, tail]))
        #expect(executed.all == ["head"])
        #expect(middle.errors.asOperationErrors == [.upstreamCancelled(operation: middleName, upstream: plainName)], "\(middle.errors)")
        #expect(tail.errors.asOperationErrors == [.upstreamCancelled(operation: tailName, upstream: plainName)], "\(tail.errors)")
    }

    // CascadeOperation: "A child's factory is called when the child is due to run, so it can read
    // what the children before it left behind." InputOperation.takeInput(from:): "Call it before
    // the operation is added to a queue" (the upstream may have finished already).
    // CompositeResolution.rerun: "with a new operation from its factory".
    @Test
    func cascadeStepTakingTheInputOfTheStepBeforeIt_getsTheOutputOfItsSucceedingAttempt() {
        // Given a cascade whose first step fails once, then produces 21, and whose second step is
        // built to take the latest first step's output as its input and double it
        let firstSteps = Recorder<ResultOperation<Int>>()
        let secondSteps = Recorder<InputBlockOperation<Int, Int>>()
        let cascade = CascadeOperation { steps in
            steps.add {
                let attempt = firstSteps.count + 1
                let fetch = ResultBlockOperation { () throws -> Int in
                    if attempt == 1 { throw StubError("first attempt") }
                    return 21
                }
                firstSteps.append(fetch)
                return fetch
            }
            steps.add {
                let double = InputBlockOperation { (value: Int) in value * 2 }
                if let upstream = firstSteps.all.last {
                    double.takeInput(from: upstream)
                }
                secondSteps.append(double)
                return double
            }
        } cancellation: { failure in
            failure.index == 0 && failure.attempt == 1 ? .rerun : .cancel
        }

        // When it runs
        AsyncOperationQueue().addOperation(cascade)

        // Then the second step worked on the second attempt's output
        #expect(waitUntilFinished([cascade]))
        #expect(cascade.errors.isEmpty, "\(cascade.errors)")
        #expect(firstSteps.count == 2 && secondSteps.count == 1)
        #expect(secondSteps.all.first?.input == 21)
        #expect(secondSteps.all.first?.output == 42)
    }

    // MARK: - Retry

    // RetryOperation: "Attempts run one after another as children of the retry operation ...,
    // with their conditions, categories and observers honoured"; "An attempt fails when it
    // finishes with errors. It is retried if attempts remain".
    @Test
    func retryAttemptStoppedByAFailingCondition_isRetried_andTheNextAttemptSucceeds() {
        // Given a retry whose first attempt has a condition that fails
        let executed = Recorder<Int>()
        let conditionError = StubError("condition")
        let retry = RetryOperation(maxAttempts: 3) { (attempt: Int) -> AsyncBlockOperation in
            let operation = AsyncBlockOperation { executed.append(attempt) }
            if attempt == 1 {
                operation.addCondition(StubCondition.failing(conditionError))
            }
            return operation
        }

        // When it runs
        AsyncOperationQueue().addOperation(retry)

        // Then the first attempt never executed, the second did, and the retry succeeded
        #expect(waitUntilFinished([retry]))
        #expect(executed.all == [2])
        #expect(retry.attemptCount == 2)
        #expect(retry.errors.isEmpty, "\(retry.errors)")
    }

    // Composition.md: "Composites nest in each other"; CompositeOperation: "composites nest in each
    // other and in any GroupOperation, in every direction"; RetryOperation: "If every attempt
    // fails, the retry operation's errors are the last attempt's."
    @Test
    func retryThatGivesUpInsideACascade_reachesTheHandlerOnce_withTheLastAttemptsError() {
        // Given a cascade whose first step is a retry of two failing attempts, then a second step,
        // and a handler that carries on
        let label = uniqueName("attempt")
        let secondRan = Counter()
        let completions = Counter()
        let seen = Recorder<SeenFailure>()
        let cascade = CascadeOperation { steps in
            steps.add {
                RetryOperation(maxAttempts: 2) { (attempt: Int) -> AsyncBlockOperation in
                    AsyncBlockOperation { throw StubError("\(label)-\(attempt)") }
                }
            }
            steps.add { AsyncBlockOperation { _ = secondRan.increment() } }
        } completion: {
            _ = completions.increment()
        } cancellation: { failure in
            seen.append(SeenFailure(failure))
            return .carryOn
        }

        // When it runs
        AsyncOperationQueue().addOperation(cascade)

        // Then the handler heard the retry once, with the last attempt's error, and the cascade
        // went on and completed
        #expect(waitUntilFinished([cascade]))
        #expect(seen.all == [SeenFailure(index: 0, attempt: 1, childIsFinished: true, isCancelled: false, errors: [StubError("\(label)-2")])])
        #expect(secondRan.current == 1)
        #expect(completions.current == 1)
        #expect(cascade.errors.isEmpty, "\(cascade.errors)")
    }

    // RetryOperation: "shouldRetry sees every error of every failed attempt, if earlier ones
    // matter to you"; init, shouldRetry: "decides, for each error of a failed attempt, whether
    // that error is worth another attempt; all must be."
    @Test
    func shouldRetry_seesEveryErrorOfEveryFailedAttempt_andAllMustBeRetryable() {
        // Given two retries whose attempts each fail with two errors, and whose shouldRetry records
        // what it sees: the first retry's refuses the first error of attempt 2 (of 3), the
        // second's accepts everything (2 attempts)
        let label = uniqueName("attempt")
        func makeRetry(maxAttempts: Int, refusing refused: String?, seen: Recorder<String>) -> RetryOperation<GroupOperation> {
            RetryOperation(maxAttempts: maxAttempts, shouldRetry: { error in
                let name = (error as? StubError)?.label ?? "\(error)"
                seen.append(name)
                return name != refused
            }) { (attempt: Int) -> GroupOperation in
                let group = GroupOperation(operations: [
                    AsyncBlockOperation { throw StubError("\(label)-\(attempt)-a") },
                    AsyncBlockOperation { throw StubError("\(label)-\(attempt)-b") },
                ])
                group.maxConcurrentOperationCount = 1
                return group
            }
        }
        let seenByRefusing = Recorder<String>()
        let refusing = makeRetry(maxAttempts: 3, refusing: "\(label)-2-a", seen: seenByRefusing)
        let seenByAccepting = Recorder<String>()
        let accepting = makeRetry(maxAttempts: 2, refusing: nil, seen: seenByAccepting)

        // When they run
        AsyncOperationQueue().addOperations([refusing, accepting], waitUntilFinished: false)

        // Then a refused error stopped the first after its second attempt, both failing as their
        // last attempt did
        #expect(waitUntilFinished([refusing, accepting]))
        #expect(refusing.attemptCount == 2 && accepting.attemptCount == 2)
        let lastErrors = [StubError("\(label)-2-a"), StubError("\(label)-2-b")]
        #expect(refusing.errors.asStubErrors == lastErrors, "\(refusing.errors)")
        #expect(accepting.errors.asStubErrors == lastErrors, "\(accepting.errors)")
        // and each shouldRetry saw every error of every failed attempt
        let everyError = ["1-a", "1-b", "2-a", "2-b"].map { "\(label)-\($0)" }
        #expect(seenByRefusing.all == everyError)
        #expect(seenByAccepting.all == everyError)
    }

    // MARK: - Waiting

    // AsyncAwait.md, runAndWait: "an operation that is already on a queue of this package is only
    // waited for"; "After timeout seconds it cancels the operation with waitTimedOut and throws
    // that error". Composition.md, `.rerun(after:)`: "cancelling the composite meanwhile ends the
    // wait"; "Neither handler is called when the composite itself is cancelled, by ... a timeout".
    @Test
    func runAndWaitGivingUpOnACascadeDuringItsRerunDelay_endsTheDelay_withoutAnotherAttemptOrCall() {
        // Given a running cascade waiting an hour to run its failed child again
        let built = Counter()
        let handlerCalls = Counter()
        let completions = Counter()
        let cascadeName = uniqueName("patient-cascade")
        let cascade = CascadeOperation { steps in
            steps.add {
                _ = built.increment()
                return AsyncBlockOperation { throw StubError("first attempt") }
            }
        } completion: {
            _ = completions.increment()
        } cancellation: { _ in
            _ = handlerCalls.increment()
            return .rerun(after: 3600)
        }
        cascade.name = cascadeName
        AsyncOperationQueue().addOperation(cascade)
        #expect(waitUntil { handlerCalls.current == 1 })

        // When a wait for it gives up
        let expected = AsyncOperationError.waitTimedOut(operation: cascadeName, after: 0.2)
        #expect(throws: expected) { try cascade.runAndWait(timeout: 0.2) }

        // Then the cascade finishes cancelled with that error, with no new attempt or call
        #expect(waitUntilFinished([cascade]), "the rerun delay kept the cancelled cascade running")
        #expect(cascade.isCancelled)
        #expect(cascade.errors.asOperationErrors.contains(expected), "\(cascade.errors)")
        #expect(built.current == 1)
        #expect(handlerCalls.current == 1)
        #expect(completions.current == 0)
        if !cascade.isFinished { cascade.cancel() } // leave nothing waiting for an hour
    }

    // AsyncAwait.md, runAndWait: "An operation that waits for itself from its own execute() is not
    // detected (another thread may finish it)": on a serial queue too, where its own slot is the
    // only one, it is not refused with waitWouldDeadlock, and returns once another thread finished it.
    @Test
    func operationWaitingForItselfFromItsOwnExecute_onASerialQueue_returnsOnceAnotherThreadFinishesIt() {
        // Given an operation of a serial queue that has another thread finish it, then waits for itself
        let outcomes = Recorder<String>()
        let operation = ClosureOperation(name: uniqueName("self-waiter")) { operation in
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { operation.finish() }
            do {
                try operation.runAndWait(timeout: 10)
                outcomes.append("returned")
            } catch {
                outcomes.append(describe(error))
            }
        }
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1

        // When it runs
        queue.addOperation(operation)

        // Then its wait returned, and it finished without errors
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil(timeout: 10) { outcomes.count == 1 })
        #expect(outcomes.all == ["returned"])
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    // AsyncAwait.md, runAndWait: "Where the wait could never end it throws waitWouldDeadlock at
    // once, without starting anything: ... inside an operation of the target queue when all of
    // that queue's concurrency slots are taken by operations waiting like this one". A group runs
    // its children on a queue of its own, of its maxConcurrentOperationCount.
    @Test
    func twoChildrenOfAGroupOfWidthTwo_bothWaitingForASiblingQueuedBehindThem_oneThrowsWaitWouldDeadlock() {
        // Given a group of width two whose first two children, once both run, wait blocking for
        // the third
        let siblingName = uniqueName("queued-sibling")
        let executed = Counter()
        let sibling = AsyncBlockOperation { _ = executed.increment() }
        sibling.name = siblingName
        let arrived = Counter()
        let outcomes = Recorder<String>()
        let waiters = (0..<2).map { index in
            let waiter = AsyncBlockOperation {
                _ = arrived.increment()
                _ = waitUntil(timeout: 10) { arrived.current >= 2 }
                do {
                    try sibling.runAndWait(timeout: 10)
                    outcomes.append("returned")
                } catch AsyncOperationError.waitWouldDeadlock(let operation, _) where operation == siblingName {
                    outcomes.append("waitWouldDeadlock")
                } catch {
                    outcomes.append(describe(error))
                }
            }
            waiter.name = uniqueName("waiter-\(index)")
            return waiter
        }
        let group = GroupOperation(operations: waiters + [sibling])
        group.maxConcurrentOperationCount = 2

        // When the group runs
        AsyncOperationQueue().addOperation(group)

        // Then the second wait threw waitWouldDeadlock, and the first returned once the sibling ran
        #expect(waitUntilFinished([group]))
        #expect(outcomes.all.sorted() == ["returned", "waitWouldDeadlock"], "\(outcomes.all)")
        #expect(executed.current == 1)
        #expect(sibling.errors.isEmpty && !sibling.isCancelled, "\(sibling.errors)")
    }
}

// MARK: - Helpers

/// What a cancellation handler saw, in a form that compares with `==`.
private struct SeenFailure: Equatable, Sendable {
    let index: Int
    let attempt: Int
    let childIsFinished: Bool
    let isCancelled: Bool
    let errors: [StubError?]

    init(index: Int, attempt: Int, childIsFinished: Bool, isCancelled: Bool, errors: [StubError?]) {
        self.index = index
        self.attempt = attempt
        self.childIsFinished = childIsFinished
        self.isCancelled = isCancelled
        self.errors = errors
    }

    init(_ failure: CompositeFailure) {
        self.init(
            index: failure.index,
            attempt: failure.attempt,
            childIsFinished: failure.child.isFinished,
            isCancelled: failure.isCancelled,
            errors: failure.errors.asStubErrors
        )
    }
}

/// "CancellationError" for a `CancellationError`, the error's description otherwise.
private func describe(_ error: any Error) -> String {
    error is CancellationError ? "CancellationError" : String(describing: error)
}

/// Runs `body` in a task and gives "returned", or what it threw (see `describe`); `nil` if it
/// had not ended within a generous bound, so that a wait that never ends fails the test.
private func boundedOutcome(_ body: @escaping @Sendable () async throws -> Void) async -> String? {
    let outcome = Recorder<String>()
    Task {
        do {
            try await body()
            outcome.append("returned")
        } catch {
            outcome.append(describe(error))
        }
    }
    _ = await eventually(timeout: 10) { outcome.count > 0 }
    return outcome.all.first
}
