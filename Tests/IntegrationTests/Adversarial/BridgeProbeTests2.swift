import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// Adversarial probes, second round, of the bridges between operations and Swift concurrency or
// blocking code: awaiting operations and queues, cancellation travelling from a task into an
// operation and from an operation into its task (and on into what that task awaits),
// `AsyncTaskOperation` and `ResultTaskOperation`, `runAndWait(on:timeout:)`, waits that must end,
// and errors that say what happened. Sources: README.md, AsyncAwait.md, /work/shared/API.md and
// the `///` comments of the public API; each test quotes the sentence it checks, and none repeats
// BridgeProbeTests or the unit tests. Every wait is bounded; none asserts on wall-clock speed.

@Suite("Bridge probes, round 2")
struct BridgeProbeTests2 {
    // MARK: - Cancellation, there and back

    // README: "`try await report.value.pages` // cancelling this task cancels `report`".
    // AsyncTaskOperation: "Cancelling the operation while the closure runs cancels its task".
    // AsyncOperation.finished(): "Cancelling the waiting task cancels the operation". API.md 5: an
    // `AsyncBlockOperation` "whose continuation has not been called yet finishes at once".
    // AsyncTaskOperation: "A `CancellationError` thrown after the operation was cancelled is not
    // recorded as an error."
    @Test
    func cancellingATaskAwaitingATaskOperation_reachesTheOperationItsBodyAwaits_andEveryoneEndsWithoutErrors() async {
        // Given a task operation whose body awaits another operation, running until told, and a
        // task that runs and awaits the task operation
        let held = HeldOperations()
        let innerName = uniqueName("inner")
        let inner = held.make(innerName)
        let queue = AsyncOperationQueue()
        queue.addOperation(inner)
        let bodyIsWaiting = Flag()
        let outer = AsyncTaskOperation {
            bodyIsWaiting.raise()
            try await inner.finished()
        }
        let waiting = Task { try await queue.run(outer) }
        #expect(await eventually { bodyIsWaiting.isRaised && held.startCount(innerName) == 1 })

        // When the task is cancelled
        waiting.cancel()

        // Then the cancellation travels through the task operation and its body into the inner
        // operation: all finish cancelled, none with an error, and the task throws CancellationError
        let outcome = await boundedOutcome(of: waiting)
        #expect(outcome.map(isCancellationError) == true, "\(String(describing: outcome))")
        #expect(await eventually { inner.isFinished && outer.isFinished })
        #expect(outer.isCancelled && inner.isCancelled)
        #expect(outer.errors.isEmpty, "\(outer.errors)")
        #expect(inner.errors.isEmpty, "\(inner.errors)")
    }

    // AsyncTaskOperation: "Cancelling the operation while the closure runs cancels its task";
    // "A `CancellationError` thrown after the operation was cancelled is not recorded as an
    // error." AsyncOperation.finished(): "Throws: the operation's only error as it is".
    // cancel(with:): "adding `error` (if any) to its `errors`".
    @Test
    func taskOperationCancelledWithAnError_cancelsWhatItsBodyAwaits_andAwaitersGetThatErrorOnly() async {
        // Given a task operation whose body awaits the value of an operation running until told
        let innerStarted = Flag()
        let inner = ResultTaskOperation { () async throws -> Int in
            innerStarted.raise()
            try await Task.sleep(nanoseconds: 600_000_000_000)
            return 1
        }
        let queue = AsyncOperationQueue()
        queue.addOperation(inner)
        let outer = ResultTaskOperation { () async throws -> Int in
            try await inner.value + 1
        }
        queue.addOperation(outer)
        #expect(await eventually { innerStarted.isRaised && outer.isExecuting })

        // When the outer operation is cancelled with an error
        let error = StubError("stop the outer one")
        outer.cancel(with: error)

        // Then the inner one was cancelled through the outer one's task and finished without
        // errors, and awaiting the outer one throws the error, its only one
        let outerValue = await boundedOutcome(of: Task { try await outer.value })
        if case let .failure(thrown)? = outerValue {
            #expect(thrown as? StubError == error, "\(thrown)")
        } else {
            Issue.record("expected the cancel's error, got \(String(describing: outerValue))")
        }
        #expect(outer.errors.asStubErrors == [error])
        #expect(await eventually { inner.isFinished })
        #expect(inner.isCancelled)
        #expect(inner.errors.isEmpty, "\(inner.errors)")
    }

    // AsyncTaskOperation: "It finishes when the closure returns; an error it throws becomes the
    // operation's error"; only "A `CancellationError` thrown after the operation was cancelled
    // is not recorded as an error." NoFailedDependencies: "Fails if any of the operation's
    // dependencies finished with errors." AsyncOperationQueue.run: "throws its errors as
    // `AsyncOperation.finished()` does".
    @Test
    func bodyThrowingCancellationErrorOfItsOwn_failsTheOperation_whichWasNeverCancelled() async {
        // Given a task operation whose body gives up with a CancellationError nobody asked for,
        // and an operation that needs it to succeed
        let operation = AsyncTaskOperation { throw CancellationError() }
        let dependentRan = Counter()
        let dependent = AsyncBlockOperation { dependentRan.increment() }
        dependent.addDependency(operation)
        dependent.addCondition(NoFailedDependencies())
        let queue = AsyncOperationQueue()
        queue.addOperation(dependent)

        // When it is run and awaited
        let outcome = await boundedOutcome(of: Task { try await queue.run(operation) })

        // Then it failed with that error, its only one, without being cancelled, and the
        // dependent did not run
        if case let .failure(thrown)? = outcome {
            #expect(thrown is CancellationError, "\(thrown)")
        } else {
            Issue.record("expected CancellationError, got \(String(describing: outcome))")
        }
        #expect(!operation.isCancelled)
        #expect(operation.errors.count == 1 && operation.errors.first is CancellationError, "\(operation.errors)")
        #expect(operation.isFailed)
        #expect(await eventually { dependent.isFinished })
        #expect(dependentRan.current == 0)
        #expect(dependent.isFailed)
    }

    // AsyncOperation.finished(): "any number of tasks may wait for the same operation"; "Throws:
    // the operation's only error as it is". runAndWait(on:timeout:): "One that is already on a
    // queue of this package ... is not added again: the call waits for it where it is";
    // "Throws: the operation's only error as it is". API.md 5.
    @Test
    func operationCancelledWithAnErrorFromOutside_givesEveryAwaitingTaskAndBlockedThreadThatError_notCancellationError() async {
        // Given an operation running until told, awaited by tasks and by a blocked thread
        let held = HeldOperations()
        let name = uniqueName("awaited")
        let operation = held.make(name)
        AsyncOperationQueue().addOperation(operation)
        #expect(await eventually { held.startCount(name) == 1 })
        let waits = (0..<5).map { _ in Task { try await operation.finished() } }
        let blocked = Recorder<String>()
        let blockedDone = runOnOwnThread {
            do {
                try operation.runAndWait(timeout: blockingTimeout)
                blocked.append("returned")
            } catch {
                blocked.append((error as? StubError)?.label ?? "\(error)")
            }
        }
        try? await Task.sleep(nanoseconds: 50_000_000) // a chance for the waits to begin

        // When it is cancelled from outside, with an error
        let error = StubError("cancelled from outside")
        operation.cancel(with: error)

        // Then every wait ends with that error, and none of the awaiting tasks is cancelled
        for wait in waits {
            let outcome = await boundedOutcome(of: wait)
            if case let .failure(thrown)? = outcome {
                #expect(thrown as? StubError == error, "\(thrown)")
            } else {
                Issue.record("expected the cancel's error, got \(String(describing: outcome))")
            }
            #expect(!wait.isCancelled)
        }
        #expect(await eventually { blockedDone.wait(timeout: 0) })
        #expect(blocked.all == [error.label])
        held.finish(name) // a late continuation call changes nothing
        #expect(operation.errors.asStubErrors == [error])
    }

    // ResultTaskOperation.init(priority:_:): "Creates an operation whose output is what `body`
    // returns, run in a task of the given priority".
    @Test
    func resultTaskOperation_runsItsBodyAtTheGivenPriority() async throws {
        // Given task operations that report the priority their body runs at
        let low = ResultTaskOperation(priority: .low) { Task.currentPriority }
        let high = ResultTaskOperation(priority: .high) { Task.currentPriority }

        // When each is run and awaited
        let queue = AsyncOperationQueue()
        let lowOutcome = await boundedOutcome(of: Task { try await queue.run(low) })
        let highOutcome = await boundedOutcome(of: Task { try await queue.run(high) })

        // Then each body ran at the priority it was given
        #expect((try? lowOutcome?.get()) == .low, "\(String(describing: lowOutcome))")
        #expect((try? highOutcome?.get()) == .high, "\(String(describing: highOutcome))")
    }

    // MARK: - Blocking waits

    // runAndWait(on:timeout:): "Throws: ... before anything is started,
    // `AsyncOperationError.waitWouldDeadlock` where the wait could never end: ... or on the thread
    // delivering this operation's own finish (in an observer's `operationDidFinish`, say)."
    @Test
    func runAndWaitFromAnObserverHearingTheFinish_throwsWaitWouldDeadlock_insteadOfBlockingTheFinish() {
        // Given a result operation and a plain one whose observers wait for them as they hear
        // them finish
        let thrown = Recorder<String>()
        let resultName = uniqueName("result")
        let result = ResultBlockOperation { 42 }
        result.name = resultName
        result.addObserver(FinishedObserver { operation, _ in
            do {
                let output = try (operation as? ResultBlockOperation<Int>)?.runAndWait(timeout: 10)
                thrown.append("result returned \(String(describing: output))")
            } catch {
                thrown.append(Self.deadlockOperation(error).map { "result: waitWouldDeadlock(\($0))" } ?? "result: \(error)")
            }
        })
        let plainName = uniqueName("plain")
        let plain = AsyncBlockOperation {}
        plain.name = plainName
        plain.addObserver(FinishedObserver { operation, _ in
            do {
                try operation.runAndWait(timeout: 10)
                thrown.append("plain returned")
            } catch {
                thrown.append(Self.deadlockOperation(error).map { "plain: waitWouldDeadlock(\($0))" } ?? "plain: \(error)")
            }
        })

        // When they run
        AsyncOperationQueue().addOperations([result, plain], waitUntilFinished: false)

        // Then each wait threw waitWouldDeadlock naming its operation, and both finished
        #expect(waitUntilFinished([result, plain], timeout: 60))
        #expect(Set(thrown.all) == ["result: waitWouldDeadlock(\(resultName))", "plain: waitWouldDeadlock(\(plainName))"], "\(thrown.all)")
        #expect(result.output == 42)
    }

    // API.md, "Shutting down": "`AsyncOperationError.queueShutDown`: an operation added after
    // shutDown began"; 12: "After `shutDown` begins, nothing new runs on that queue".
    // AsyncOperationQueue.run: "throws its errors as `AsyncOperation.finished()` does".
    // runAndWait(on:timeout:): "Throws: the operation's only error as it is".
    @Test
    func runAndRunAndWaitOnAQueueThatWasShutDown_throwQueueShutDown_andNothingExecutes() async {
        // Given a queue that was shut down
        let queue = AsyncOperationQueue()
        queue.name = uniqueName("shut")
        await queue.shutDown(gracePeriod: 1)
        #expect(queue.isShutDown)

        // When an operation is run on it, and another run and waited for on it
        let executed = Counter()
        let awaited = ResultBlockOperation { executed.increment() }
        let outcome = await boundedOutcome(of: Task { try await queue.run(awaited) })
        let blocking = AsyncBlockOperation { executed.increment() }
        let blockingOutcome = await offThePool { () -> Result<Void, any Error> in
            Result { try Self.runAndWait(blocking, on: queue) }
        }

        // Then both throw queueShutDown, and neither executed
        if case let .failure(error)? = outcome {
            #expect(error as? AsyncOperationError == .queueShutDown, "\(error)")
        } else {
            Issue.record("expected queueShutDown, got \(String(describing: outcome))")
        }
        if case let .failure(error) = blockingOutcome {
            #expect(error as? AsyncOperationError == .queueShutDown, "\(error)")
        } else {
            Issue.record("expected queueShutDown, got \(blockingOutcome)")
        }
        #expect(awaited.isFinished && blocking.isFinished)
        #expect(executed.current == 0)
    }

    // AsyncAwait.md: "It runs the operation on a private ``AsyncOperationQueue``, or on the queue
    // you pass"; runAndWait(on:timeout:): "with its dependencies, conditions, categories and
    // observers honoured as usual"; "`AsyncOperationError.waitTimedOut` if it has not finished
    // `timeout` seconds after the call: it is then cancelled with that error". API.md 2:
    // operations sharing a category "never execute at the same time".
    @Test
    func runAndWaitOnAPlainQueue_honoursTheCategory_timesOutWhileItIsHeld_andRunsOnceItIsFree() {
        // Given a category X held by an operation running on a queue of this package
        let (x, held, holderName, holder, queue) = startHoldingACategory()
        let plainQueue = OperationQueue()
        let executed = Recorder<String>()
        let name = uniqueName("on-a-plain-queue")
        let first = ResultBlockOperation { executed.append("first"); return 1 }
        first.name = name
        first.addCondition(ExclusiveCategory(x))

        // When an operation of X is run on a plain queue and waited for briefly
        // Then the wait times out without it executing, and it never executes afterwards
        #expect(throws: AsyncOperationError.waitTimedOut(operation: name, after: 0.3)) {
            try first.runAndWait(on: plainQueue, timeout: 0.3)
        }
        #expect(executed.all.isEmpty, "executed while X was held elsewhere in the process")

        // And once X is free, another one run the same way executes
        held.finish(holderName)
        #expect(waitUntilFinished([holder, first]))
        let second = ResultBlockOperation { executed.append("second"); return 2 }
        second.addCondition(ExclusiveCategory(x))
        #expect((try? second.runAndWait(on: plainQueue, timeout: generousTimeout)) == 2)
        #expect(executed.all == ["second"])
        #expect(first.errors.asOperationErrors == [.waitTimedOut(operation: name, after: 0.3)])
        withExtendedLifetime(queue) {}
    }

    // README: "`multipleErrors(operation:errors:)` | thrown by `runAndWait()`, `finished()` and
    // `value` for an operation that finished with several errors". AsyncOperationError
    // .multipleErrors: "listed in `errors` in the order it collected them". API.md 1: "the
    // operation finishes with one error per failed condition".
    @Test
    func operationFailedByTwoConditions_throwsTheSameMultipleErrorsFromEveryWait() async {
        // Given a result operation refused by two conditions
        let name = uniqueName("refused-twice")
        let (first, second) = (StubError("first refusal"), StubError("second refusal"))
        let operation = ResultBlockOperation { 1 }
        operation.name = name
        operation.addCondition(StubCondition.failing(first, name: "First"))
        operation.addCondition(StubCondition.failing(second, name: "Second"))
        AsyncOperationQueue().addOperation(operation)
        #expect(await eventually { operation.isFinished })

        // When it is awaited three ways
        let expected = AsyncOperationError.multipleErrors(operation: name, errors: operation.errors)
        let value = await boundedOutcome(of: Task { try await operation.value })
        let finished = await boundedOutcome(of: Task { try await operation.finished() })
        let blocking = await offThePool { Result { try Self.runAndWait(operation, on: nil) } }

        // Then each throws multipleErrors naming it, with its errors in the order it kept them
        #expect(Set(operation.errors.compactMap { ($0 as? StubError)?.label }) == [first.label, second.label])
        for (label, outcome) in [("value", value.map { $0.map { _ in () } }), ("finished", finished), ("runAndWait", Optional(blocking))] {
            if case let .failure(error)? = outcome {
                #expect(error as? AsyncOperationError == expected, "\(label): \(error)")
            } else {
                Issue.record("\(label): expected multipleErrors, got \(String(describing: outcome))")
            }
        }
        #expect("\(expected)".hasPrefix("'\(name)' failed with 2 errors: "), "\(expected)")
    }

    // AsyncAwait.md: runAndWait "runs any operation, a group included"; "After `timeout` seconds
    // it cancels the operation with ``AsyncOperationError/waitTimedOut(operation:after:)`` and
    // throws that error." API.md 7: "Cancelling the group cancels its children"; "its `errors` hold
    // every child's errors and its own". GroupOperation: "it still finishes only once they have."
    @Test
    func runAndWaitGivingUpOnAGroup_cancelsItsChildren_andTheGroupKeepsTheTimeoutOnce() {
        // Given a group whose children never call their continuations
        let children = (0..<3).map { index in
            let child = AsyncBlockOperation { _ in }
            child.name = uniqueName("silent-\(index)")
            return child
        }
        let name = uniqueName("stuck-group")
        let group = GroupOperation(operations: children)
        group.name = name

        // When it is run and waited for briefly
        // Then the wait throws waitTimedOut, and the group finishes after its cancelled children,
        // with that error once
        let expected = AsyncOperationError.waitTimedOut(operation: name, after: 0.3)
        #expect(throws: expected) { try group.runAndWait(timeout: 0.3) }
        #expect(waitUntilFinished(children + [group]))
        #expect(children.allSatisfy { $0.isCancelled && $0.errors.isEmpty })
        #expect(group.errors.asOperationErrors == [expected], "\(group.errors)")
    }

    // AsyncAwait.md: "Cancelling the waiting task cancels the operation, and the wait ends at once
    // with `CancellationError`, whatever the operation does: the operation finishes on its own";
    // finished(): "promptly unless ... its queue is suspended"; "a suspended one waits for its
    // resume, as Foundation's does". runAndWait: "The call returns once `isFinished` is true";
    // "`CancellationError` for an operation cancelled without an error".
    @Test
    func taskWaitCancelledForAnOperationOnASuspendedQueue_endsAtOnce_whileABlockedWaitEndsAtTheResume() async {
        // Given an operation on a suspended queue, awaited by a task and by a blocked thread
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        let executed = Counter()
        let operation = AsyncBlockOperation { executed.increment() }
        queue.addOperation(operation)
        let awaiting = Task { try await operation.finished() }
        let blocked = Recorder<String>()
        let blockedDone = runOnOwnThread {
            do {
                try operation.runAndWait(timeout: blockingTimeout)
                blocked.append("returned")
            } catch {
                blocked.append(error is CancellationError ? "CancellationError" : "\(error)")
            }
        }
        try? await Task.sleep(nanoseconds: 50_000_000) // a chance for the waits to begin

        // When the task is cancelled
        awaiting.cancel()

        // Then its wait ends at once with CancellationError, while the blocked thread still waits
        // for the operation, which is cancelled and finishes without executing once the queue
        // resumes, ending the blocked wait with CancellationError
        let outcome = await boundedOutcome(of: awaiting)
        #expect(outcome.map(isCancellationError) == true, "\(String(describing: outcome))")
        #expect(operation.isCancelled)
        try? await Task.sleep(nanoseconds: 100_000_000) // a chance for a wrong end of the blocked wait
        #expect(blocked.all.isEmpty, "the blocked wait ended before the operation finished: \(blocked.all)")
        #expect(!operation.isFinished)
        queue.isSuspended = false
        #expect(await eventually { blockedDone.wait(timeout: 0) })
        #expect(blocked.all == ["CancellationError"])
        #expect(operation.isFinished)
        #expect(executed.current == 0)
    }

    // MARK: - Helpers

    /// Runs `operation` on `queue` and blocks until it finished (outside async code, where
    /// `runAndWait` is unavailable).
    private static func runAndWait(_ operation: AsyncOperation, on queue: OperationQueue?) throws {
        try operation.runAndWait(on: queue, timeout: generousTimeout)
    }

    /// The operation a `waitWouldDeadlock` error names, if `error` is one.
    private static func deadlockOperation(_ error: any Error) -> String? {
        guard case let .waitWouldDeadlock(operation, _)? = error as? AsyncOperationError else { return nil }
        return operation
    }
}
