import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// Round 11 of the adversarial probes: the paths a newcomer takes, waits that always end, and
// messages that say where. runAndWait (its timeout, its waitTimedOut and waitWouldDeadlock
// errors), Foundation's blocking waits on an AsyncOperationQueue (waitUntilFinished,
// waitUntilAllOperationsAreFinished, addOperations(_:waitUntilFinished:)), the async bridges
// (finished(), value, a wait raced against a timeout, an operation awaited before it is queued),
// ResultOperation outcomes, retries and delays run and waited for, TimeoutObserver shared by
// operations, and the errors these waits throw naming the operation and the queue involved. Each
// probe quotes the sentence it checks. Every wait for something that must happen is bounded, a
// blocking wait that could hang runs on a thread of its own, and nothing asserts on wall-clock
// speed.
//
// FOUND (fixed): runAndWait(timeout:) does not end at its timeout while an operationDidFinish observer of
//        the operation blocks: past the timeout it waits for the finish being delivered, for as
//        long as the observer takes; on the main thread, with an observer that calls
//        DispatchQueue.main.sync, it never ends (runAndWaitWithATimeout_endsAtItsTimeout_
//        whileAFinishedObserverOfTheOperationStillBlocks, and the child-process scenario
//        mainThreadRunAndWaitWithATimeout_forAnOperationWhoseFinishedObserverHopsToMain_ends).
// FOUND (fixed): runAndWait(timeout:) cancels the operation on the waiting thread, which runs its
//        operationDidCancel observers there: a blocking one keeps the wait past its timeout
//        (runAndWaitWithATimeout_endsAtItsTimeout_whileACancelledObserverOfTheOperationBlocks).
// FOUND (fixed): a ResultOperation whose Output is an existential (any Sendable) that finished
//        without producing succeeds with () from runAndWait, value and result, though output is
//        nil, instead of throwing finishedWithoutOutput
//        (resultOperationOfAnExistentialOutput_finishedWithoutProducing_throwsFinishedWithoutOutput).
// FOUND (fixed): waitWouldDeadlock's reason calls a group's own queue 'GroupOperation children', not after
//        its group as every other message does ("children of <group>")
//        (runAndWaitInsideASerialGroupsChild_forAChildAfterIt_throwsWaitWouldDeadlock_namingTheGroup_andTheGroupStillRunsIt).

/// What a blocking wait run on a thread of its own ended with: `nil` while it has not ended.
private final class BlockingOutcome<Value: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `outcome` is only touched while holding `lock`.
    private let lock = NSLock()
    private var outcome: Result<Value, any Error>?

    func record(_ body: () throws -> Value) {
        let result = Result { try body() }
        lock.lock()
        defer { lock.unlock() }
        outcome = result
    }

    var value: Result<Value, any Error>? {
        lock.lock()
        defer { lock.unlock() }
        return outcome
    }

    /// The error the wait threw, if it ended with one.
    var error: (any Error)? {
        if case let .failure(error)? = value { return error }
        return nil
    }
}

/// The `waitWouldDeadlock` error's parts, if `error` is one.
private func deadlockParts(_ error: (any Error)?) -> (operation: String, reason: String)? {
    guard case let .waitWouldDeadlock(operation, reason)? = error as? AsyncOperationError else { return nil }
    return (operation, reason)
}

@Suite("Newcomer path probes, round 11")
struct NewcomerPathProbeTests {
    // MARK: - runAndWait

    // AsyncAwait.md: runAndWait "throws the operation's only error as it is". API.md 5:
    // "cancel(with:) before the operation starts: it finishes without executing, with that error".
    @Test
    func runAndWaitOfAnOperationCancelledWithAnErrorBeforeAnyQueue_throwsThatError_andNeverExecutes() {
        // Given an operation on no queue, cancelled with an error
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        let reason = StubError("not today")
        operation.cancel(with: reason)

        // When it is run and waited for
        // Then the wait ends with that error, and the block never ran
        #expect(throws: reason) { try operation.runAndWait(timeout: generousTimeout) }
        #expect(operation.isFinished)
        #expect(ran.current == 0)
    }

    // AsyncAwait.md: "an operation that is already on a queue of this package is only waited
    // for. It returns once isFinished is true." README: "a ResultOperation returns its output".
    @Test
    func runAndWaitCalledAgainOnAFinishedResultOperation_givesTheSameOutput_runsNothingAgain_andReportsNothing() throws {
        // Given a result operation run and waited for once
        let name = uniqueName("twice")
        let ran = Counter()
        let answer = ResultBlockOperation<Int> {
            ran.increment()
            return 42
        }
        answer.name = name
        #expect(try answer.runAndWait(timeout: generousTimeout) == 42)

        // When it is run and waited for again
        let again = try answer.runAndWait(timeout: generousTimeout)

        // Then it gives the same output at once, without running the block or adding it anywhere
        #expect(again == 42)
        #expect(ran.current == 1)
        #expect(DiagnosticsLog.shared.kinds(about: name).isEmpty, "\(DiagnosticsLog.shared.diagnostics(about: name))")
    }

    // ResultOperation.runAndWait: "an operation that finished without errors, without being
    // cancelled and without an output throws AsyncOperationError.finishedWithoutOutput";
    // ResultOperation.result: "the answer is always the one result gives".
    @Test
    func resultOperationOfAnExistentialOutput_finishedWithoutProducing_throwsFinishedWithoutOutput() {
        // Given a result operation whose output type is an existential, finished without output
        let name = uniqueName("anything")
        let silent = ClosureResultOperation<any Sendable>(name: name) { $0.finish() }

        // When it is run and waited for
        let outcome = Result { try silent.runAndWait(timeout: generousTimeout) }

        // Then the wait throws finishedWithoutOutput, as for any other output type, and result
        // agrees with output
        #expect(silent.isFinished)
        #expect(silent.output == nil)
        if case .success? = silent.result {
            Issue.record("result is a success while output is nil")
        }
        guard case let .failure(error) = outcome else {
            Issue.record("the wait succeeded with \(String(describing: try? outcome.get())) for an operation that produced nothing")
            return
        }
        #expect(error as? AsyncOperationError == .finishedWithoutOutput(operation: name), "\(error)")
    }

    // AsyncAwait.md: "Where the wait could never end it throws waitWouldDeadlock at once, without
    // starting anything: ... inside an operation of the target queue when all of that queue's
    // concurrency slots are taken by operations waiting like this one (a serial queue waiting for
    // itself, say)". README: misuse gives "an AsyncOperationError that says why".
    @Test
    func runAndWaitInsideAnAsyncOperationOfASerialQueue_forANewOperationThere_throwsWaitWouldDeadlock_namingItAndTheQueue_andStartsNothing() {
        // Given a named serial queue whose operation runs a new operation there and waits for it
        let queueName = uniqueName("ledger")
        let queue = serialAsyncQueue(queueName)
        let innerName = uniqueName("inner")
        let innerRan = Counter()
        let inner = AsyncBlockOperation { innerRan.increment() }
        inner.name = innerName
        let waited = BlockingOutcome<Void>()
        let outer = AsyncBlockOperation { waited.record { try inner.runAndWait(on: queue, timeout: generousTimeout) } }

        // When the outer operation runs
        queue.addOperation(outer)
        #expect(waitUntilFinished([outer]))

        // Then the wait throws waitWouldDeadlock naming the inner operation and the queue, and
        // the inner operation was left untouched, so it can still run elsewhere
        let parts = deadlockParts(waited.error)
        #expect(parts?.operation == innerName, "\(String(describing: waited.value))")
        #expect(parts?.reason.contains(queueName) == true, "\(String(describing: waited.value))")
        #expect(waited.error.map { "\($0)" }?.contains(innerName) == true)
        #expect(!inner.isFinished && !inner.isCancelled && !inner.isExecuting)
        #expect(!queue.allOperations.contains(inner))
        #expect(innerRan.current == 0)
        #expect((try? inner.runAndWait(timeout: generousTimeout)) != nil)
        #expect(innerRan.current == 1)
    }

    // AsyncAwait.md: waitWouldDeadlock "inside an operation of the target queue when all of that
    // queue's concurrency slots are taken by operations waiting like this one"; a wait that leaves
    // a slot free is allowed.
    @Test
    func nestedRunAndWaitsOnAQueueOfWidthTwo_theFirstIsAllowed_theSecondThrowsWaitWouldDeadlock_sayingOneAlreadyWaits() {
        // Given a queue of width 2 whose outer operation waits for a middle one there, which in
        // turn waits for an innermost one there
        let queueName = uniqueName("pair")
        let queue = AsyncOperationQueue()
        queue.name = queueName
        queue.maxConcurrentOperationCount = 2
        let innermostName = uniqueName("innermost")
        let innermostRan = Counter()
        let innermost = AsyncBlockOperation { innermostRan.increment() }
        innermost.name = innermostName
        let middleWait = BlockingOutcome<Void>()
        let middle = AsyncBlockOperation { middleWait.record { try innermost.runAndWait(on: queue, timeout: generousTimeout) } }
        let outerWait = BlockingOutcome<Void>()
        let outer = AsyncBlockOperation { outerWait.record { try middle.runAndWait(on: queue, timeout: generousTimeout) } }

        // When the outer operation runs
        queue.addOperation(outer)
        #expect(waitUntilFinished([outer, middle]))

        // Then the outer wait (one slot left for the middle one) ends normally, and the middle
        // wait (no slot left) throws waitWouldDeadlock, naming the queue and the waiter before it
        #expect(outerWait.error == nil, "\(String(describing: outerWait.value))")
        let parts = deadlockParts(middleWait.error)
        #expect(parts?.operation == innermostName, "\(String(describing: middleWait.value))")
        #expect(parts?.reason.contains(queueName) == true, "\(parts?.reason ?? "")")
        #expect(parts?.reason.contains("1 already waiting") == true, "\(parts?.reason ?? "")")
        #expect(innermostRan.current == 0)
        #expect(!innermost.isFinished)
    }

    // AsyncAwait.md: waitWouldDeadlock for "a serial queue waiting for itself"; API.md 9: a
    // GroupOperation with maxConcurrentOperationCount = 1 runs its children one after another.
    // OperationDiagnostic.queueNames / README: messages name "the queues involved", and a group's
    // own queue is called after its group ("children of <group>").
    @Test
    func runAndWaitInsideASerialGroupsChild_forAChildAfterIt_throwsWaitWouldDeadlock_namingTheGroup_andTheGroupStillRunsIt() {
        // Given a named serial group whose first child waits for the second
        let groupName = uniqueName("refresh")
        let siblingName = uniqueName("sibling")
        let siblingRan = Counter()
        let sibling = AsyncBlockOperation { siblingRan.increment() }
        sibling.name = siblingName
        let waited = BlockingOutcome<Void>()
        let first = AsyncBlockOperation { waited.record { try sibling.runAndWait(timeout: generousTimeout) } }
        let group = GroupOperation(operations: [first, sibling])
        group.name = groupName
        group.maxConcurrentOperationCount = 1

        // When the group runs
        AsyncOperationQueue().addOperation(group)
        #expect(waitUntilFinished([group]))

        // Then the wait throws waitWouldDeadlock at once, and the group still runs the sibling
        let parts = deadlockParts(waited.error)
        #expect(parts?.operation == siblingName, "\(String(describing: waited.value))")
        #expect(siblingRan.current == 1)
        #expect(group.errors.isEmpty, "\(group.errors)")
        // and the reason names the queue as messages call it: after its group
        #expect(parts?.reason.contains(groupName) == true, "\(parts?.reason ?? "")")
    }

    // AsyncOperationError.waitTimedOut: "runAndWait(timeout:) gave up after `after` seconds. The
    // operation was cancelled with this error". OperationDiagnostic.operationName: "its name, or
    // its type when it has none". README: "each with a readable description".
    @Test
    func runAndWaitGivingUp_throwsWaitTimedOutNamingTheOperation_orItsTypeWhenUnnamed_andTheOperationKeepsThatError() {
        // Given a named and an unnamed block operation that never call their continuations
        let name = uniqueName("slow")
        let named = AsyncBlockOperation { _ in }
        named.name = name
        let unnamed = AsyncBlockOperation { _ in }

        // When each is run and waited for with a short timeout
        let namedOutcome = Result { try named.runAndWait(timeout: 0.2) }
        let unnamedOutcome = Result { try unnamed.runAndWait(timeout: 0.2) }

        // Then each wait throws waitTimedOut naming it, with a description that says so, and
        // each operation finished cancelled with that error alone
        let namedError = AsyncOperationError.waitTimedOut(operation: name, after: 0.2)
        let unnamedError = AsyncOperationError.waitTimedOut(operation: "AsyncBlockOperation", after: 0.2)
        if case let .failure(error) = namedOutcome {
            #expect(error as? AsyncOperationError == namedError, "\(error)")
            #expect("\(error)" == "gave up waiting for '\(name)' after 0.2 s and cancelled it")
        } else {
            Issue.record("the wait for \(name) did not give up")
        }
        if case let .failure(error) = unnamedOutcome {
            #expect(error as? AsyncOperationError == unnamedError, "\(error)")
        } else {
            Issue.record("the wait for the unnamed operation did not give up")
        }
        #expect(waitUntilFinished([named, unnamed]))
        #expect(named.errors.asOperationErrors == [namedError], "\(named.errors)")
        #expect(unnamed.errors.asOperationErrors == [unnamedError], "\(unnamed.errors)")
    }

    // AsyncOperation.runAndWait(on:timeout:) with a Duration: "runAndWait(on:timeout:) with a
    // Duration".
    @Test
    func runAndWaitWithADurationTimeout_givesUpAsTheSecondsDo() {
        // Given a block operation that never calls its continuation
        let name = uniqueName("duration")
        let operation = AsyncBlockOperation { _ in }
        operation.name = name

        // When it is waited for with a timeout of 250 milliseconds
        let outcome = Result { try operation.runAndWait(timeout: .milliseconds(250)) }

        // Then the wait throws waitTimedOut after 0.25 s, as with the TimeInterval overload
        guard case let .failure(error) = outcome,
              case let .waitTimedOut(operation: named, after: seconds)? = error as? AsyncOperationError else {
            Issue.record("expected waitTimedOut, got \(outcome)")
            return
        }
        #expect(named == name)
        #expect(abs(seconds - 0.25) < 1e-9, "\(seconds)")
        #expect(waitUntilFinished([operation]))
    }

    // RetryOperation: "maxAttempts: how many attempts to make at most, the first included; at
    // least one is made whatever the value"; "its errors are the last attempt's errors".
    // AsyncAwait.md: runAndWait "throws the operation's only error as it is".
    @Test(arguments: [0, 1, 3])
    func runAndWaitOfARetryWhoseAttemptsAllFail_throwsTheLastAttemptsErrorAsItIs(maxAttempts: Int) {
        // Given a retry whose every attempt fails with an error naming its number
        let prefix = uniqueName("attempt")
        let retry = RetryOperation(maxAttempts: maxAttempts) { number in
            AsyncBlockOperation { throw StubError("\(prefix) \(number)") }
        }

        // When it is run and waited for
        let outcome = Result { try retry.runAndWait(timeout: generousTimeout) }

        // Then it made max(maxAttempts, 1) attempts and the wait throws the last one's error
        let expected = max(maxAttempts, 1)
        #expect(retry.attemptCount == expected)
        guard case let .failure(error) = outcome else {
            Issue.record("the retry succeeded")
            return
        }
        #expect(error as? StubError == StubError("\(prefix) \(expected)"), "\(error)")
    }

    // DelayOperation: "cancelled before, it finishes without waiting". AsyncAwait.md: runAndWait
    // throws "CancellationError for an operation cancelled without an error".
    @Test
    func runAndWaitOfALongDelayCancelledBeforeItRuns_throwsCancellationError_withoutWaitingForIt() {
        // Given an hour-long delay, cancelled before it was queued
        let delay = DelayOperation(3_600)
        delay.cancel()

        // When it is run and waited for, with a timeout far shorter than the delay
        let outcome = Result { try delay.runAndWait(timeout: generousTimeout) }

        // Then the wait ends with CancellationError, not with the wait's timeout
        guard case let .failure(error) = outcome else {
            Issue.record("the cancelled delay succeeded")
            return
        }
        #expect(error is CancellationError, "\(error)")
        #expect(delay.isFinished)
    }

    // DelayOperation.init(until:): "finishes at date (at once if it has passed when the
    // operation starts executing)"; init(_:): "Zero, a negative interval or NaN finishes at once".
    @Test
    func runAndWaitOfDelaysThatHaveNothingToWaitFor_returnsWithoutErrors() throws {
        // Given delays until a past date, of a negative interval and of NaN
        let delays = [DelayOperation(until: Date(timeIntervalSinceNow: -60)), DelayOperation(-5), DelayOperation(.nan)]

        // When each is run and waited for
        for delay in delays {
            try delay.runAndWait(timeout: generousTimeout)
        }

        // Then each finished without errors
        #expect(delays.allSatisfy { $0.isFinished && $0.errors.isEmpty })
    }

    // ObserversAndTimeouts.md: TimeoutObserver "cancels the operation with timedOut(after:)";
    // AsyncAwait.md: runAndWait "throws the operation's only error as it is" (not waitTimedOut:
    // the wait itself has no timeout).
    @Test
    func runAndWaitOfABlockThatNeverAnswersButHasATimeoutObserver_throwsTimedOutAsItIs() {
        // Given a block operation that never calls its continuation, with a 0.2 s timeout
        let operation = AsyncBlockOperation { _ in }
        operation.addObserver(TimeoutObserver(timeout: 0.2))

        // When it is run and waited for without a timeout of the wait's own (on a thread of its
        // own, so that a wait that never ended would fail the test instead of hanging it)
        let waited = BlockingOutcome<Void>()
        let done = runOnOwnThread { waited.record { try operation.runAndWait() } }

        // Then the wait ends with the observer's timeout error, as it is
        #expect(done.wait(timeout: generousTimeout))
        #expect(waited.error as? AsyncOperationError == .timedOut(after: 0.2), "\(String(describing: waited.value))")
    }

    // AsyncOperation.runAndWait: "One that is already on a queue of this package (or was started
    // by hand) is not added again: the call waits for it where it is."
    @Test
    func runAndWaitOfAnOperationStartedByHandOnAnotherThread_onlyWaitsForIt_andReportsNothing() {
        // Given a subclass started by hand on a thread of its own, running until told to finish
        let name = uniqueName("by-hand")
        let started = Recorder<ClosureOperation>()
        let operation = ClosureOperation(name: name) { started.append($0) }
        _ = runOnOwnThread { operation.start() }
        #expect(waitUntil { started.count == 1 })

        // When another thread runs and waits for it
        let waited = BlockingOutcome<Void>()
        let done = runOnOwnThread { waited.record { try operation.runAndWait(timeout: generousTimeout) } }

        // Then the wait lasts until the operation finishes, and ends without errors
        #expect(!done.wait(timeout: 0.3))
        operation.finish()
        #expect(done.wait(timeout: generousTimeout))
        #expect(waited.value != nil && waited.error == nil, "\(String(describing: waited.value))")
        #expect(DiagnosticsLog.shared.kinds(about: name).isEmpty, "\(DiagnosticsLog.shared.diagnostics(about: name))")
    }

    // README: runAndWait "runs any operation, a group included"; API.md 7: a group's "errors hold
    // every child's errors and its own"; AsyncAwait.md: "It throws the operation's only error as
    // it is, several as multipleErrors(operation:errors:)".
    @Test
    func runAndWaitOfAGroup_throwsItsOnlyChildsErrorAsItIs_andSeveralAsMultipleErrorsNamingTheGroup() {
        // Given a group with one failing child, and a named group with two
        let lone = StubError("lone")
        let first = StubError("first")
        let second = StubError("second")
        let oneFailure = GroupOperation(operations: [AsyncBlockOperation {}, AsyncBlockOperation { throw lone }])
        let groupName = uniqueName("two-failures")
        let twoFailures = GroupOperation(operations: [AsyncBlockOperation { throw first }, AsyncBlockOperation { throw second }])
        twoFailures.name = groupName
        twoFailures.maxConcurrentOperationCount = 1

        // When each is run and waited for
        let oneOutcome = Result { try oneFailure.runAndWait(timeout: generousTimeout) }
        let twoOutcome = Result { try twoFailures.runAndWait(timeout: generousTimeout) }

        // Then the first throws the child's error as it is, the second multipleErrors naming the
        // group and listing both errors in its description
        if case let .failure(error) = oneOutcome {
            #expect(error as? StubError == lone, "\(error)")
        } else {
            Issue.record("the group with a failing child succeeded")
        }
        guard case let .failure(error) = twoOutcome else {
            Issue.record("the group with two failing children succeeded")
            return
        }
        #expect(error as? AsyncOperationError == .multipleErrors(operation: groupName, errors: [first, second]), "\(error)")
        #expect("\(error)" == "'\(groupName)' failed with 2 errors: \(first); \(second)", "\(error)")
    }

    // AsyncAwait.md: "runAndWait ends at its timeout"; "After timeout seconds it cancels the
    // operation with waitTimedOut and throws that error"; it "returns once isFinished is true".
    // (A FinishedObserver that hops to the thread blocked in runAndWait, DispatchQueue.main.sync
    // from the main thread's wait, say, blocks the same way.)
    @Test
    func runAndWaitWithATimeout_endsAtItsTimeout_whileAFinishedObserverOfTheOperationStillBlocks() {
        // Given an operation on a queue that has run, whose finished observer blocks until the
        // test lets it go
        let name = uniqueName("observed")
        let release = Signal()
        let observing = Flag()
        let operation = AsyncBlockOperation {}
        operation.name = name
        operation.addObserver(FinishedObserver { _, _ in
            observing.raise()
            _ = release.wait()
        })
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntil { observing.isRaised })

        // When it is waited for with a 0.3 s timeout
        let waited = BlockingOutcome<Void>()
        let done = runOnOwnThread { waited.record { try operation.runAndWait(timeout: 0.3) } }

        // Then the wait ends while the observer still blocks, with waitTimedOut (the operation
        // has not finished: isFinished is still false)
        let endedWhileBlocked = done.wait(timeout: generousTimeout)
        let finishedWhenItEnded = operation.isFinished
        release.signal()
        #expect(endedWhileBlocked || done.wait(timeout: generousTimeout))
        #expect(endedWhileBlocked, "the wait outlasted its timeout until the observer returned")
        #expect(waited.error as? AsyncOperationError == .waitTimedOut(operation: name, after: 0.3), "\(String(describing: waited.value))")
        #expect(!finishedWhenItEnded)
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    // AsyncAwait.md: "runAndWait ends at its timeout"; API.md 5: "an AsyncBlockOperation whose
    // continuation has not been called yet finishes at once"; API.md 4: operationDidStart comes
    // "before execute()", operationDidFinish "exactly once, last".
    @Test
    func runAndWaitWithATimeout_endsAtItsTimeout_whileAStartedObserverBlocks_andTheBlockNeverRunsAfterwards() {
        // Given a block operation on a queue whose started observer blocks until the test lets it go
        let release = Signal()
        let ran = Counter()
        let events = EventLogObserver()
        let name = uniqueName("slow-start")
        let operation = AsyncBlockOperation { ran.increment() }
        operation.name = name
        let observing = Flag()
        operation.addObserver(events)
        operation.addObserver(StartedObserver { _ in
            observing.raise()
            _ = release.wait()
        })
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntil { observing.isRaised })

        // When it is waited for with a 0.3 s timeout
        let waited = BlockingOutcome<Void>()
        let done = runOnOwnThread { waited.record { try operation.runAndWait(timeout: 0.3) } }

        // Then the wait ends with waitTimedOut while the observer blocks, and once it returns the
        // cancelled block never runs, the lifecycle heard in order
        let endedWhileBlocked = done.wait(timeout: generousTimeout)
        release.signal()
        #expect(endedWhileBlocked || done.wait(timeout: generousTimeout))
        #expect(endedWhileBlocked, "the wait outlasted its timeout until the observer returned")
        #expect(waited.error as? AsyncOperationError == .waitTimedOut(operation: name, after: 0.3), "\(String(describing: waited.value))")
        #expect(waitUntilFinished([operation]))
        Thread.sleep(forTimeInterval: 0.2)
        #expect(ran.current == 0)
        #expect(events.log.all == ["didStart", "didCancel", "didFinish"], "\(events.log.all)")
    }

    // AsyncAwait.md: "runAndWait ends at its timeout"; "waits through other queues" that no check
    // can see are bounded by the timeout: a group's child waiting for an operation of the serial
    // queue its group holds. README: cancelled while it waits for its turn, an operation
    // "finishes when its queue gets to it".
    @Test
    func runAndWaitInsideAGroupsChild_forTheSerialQueueTheGroupHolds_endsByItsTimeout_andEverythingFinishes() {
        // Given a group on a serial queue whose child runs a new operation on that queue and waits
        let outer = serialAsyncQueue(uniqueName("outer"))
        let xName = uniqueName("behind-the-group")
        let xRan = Counter()
        let x = AsyncBlockOperation { xRan.increment() }
        x.name = xName
        let waited = BlockingOutcome<Void>()
        let child = AsyncBlockOperation { waited.record { try x.runAndWait(on: outer, timeout: 0.5) } }
        let group = GroupOperation(operations: [child])

        // When the group runs
        outer.addOperation(group)

        // Then the wait ends, refused or timed out, and the group and the operation both finish,
        // the operation cancelled without running
        #expect(waitUntilFinished([group, x]), "\(outer.debugDescription)")
        let error = waited.error as? AsyncOperationError
        let refused = deadlockParts(error) != nil
        #expect(refused || error == .waitTimedOut(operation: xName, after: 0.5), "\(String(describing: waited.value))")
        #expect(group.errors.isEmpty, "\(group.errors)")
        #expect(xRan.current == 0)
    }

    // ObserversAndTimeouts.md: operationDidFinish comes "with errors already final"; a
    // ResultOperation's output is "available once it finished successfully", and is what a
    // finished observer reports.
    @Test
    func finishedObserverOfAResultOperation_readsItsOutput() throws {
        // Given a result operation whose finished observer reads its output
        let seen = Recorder<Int?>()
        let answer = ResultBlockOperation { 42 }
        answer.addObserver(FinishedObserver { operation, _ in
            seen.append((operation as? ResultOperation<Int>)?.output)
        })

        // When it is run and waited for
        #expect(try answer.runAndWait(timeout: generousTimeout) == 42)

        // Then the observer read the output
        #expect(waitUntil { seen.count == 1 })
        #expect(seen.all == [42], "\(seen.all)")
    }

    // Migration.md: `TimeoutObserver(timeout: 10)` "cancels with timedOut(after:)"; README:
    // "started by a plain OperationQueue (or by hand)", an AsyncOperation honours its observers.
    @Test
    func timeoutObserverOnABlockOperationOfAPlainOperationQueue_endsItAndTheQueuesWait() {
        // Given a block operation that never answers, with a timeout, on Foundation's own queue
        let operation = AsyncBlockOperation { _ in }
        operation.addObserver(TimeoutObserver(timeout: 0.2))
        let queue = OperationQueue()
        queue.addOperation(operation)

        // When a thread waits for all of that queue's operations
        let done = runOnOwnThread { queue.waitUntilAllOperationsAreFinished() }

        // Then the wait returns, the operation finished with the timeout
        #expect(done.wait(timeout: generousTimeout))
        #expect(operation.errors.asOperationErrors == [.timedOut(after: 0.2)], "\(operation.errors)")
    }

    // AsyncAwait.md: "runAndWait ends at its timeout"; "After timeout seconds it cancels the
    // operation with waitTimedOut and throws that error". (A CancelledObserver that hops to the
    // thread blocked in runAndWait, DispatchQueue.main.sync from the main thread's wait, say,
    // blocks the same way.)
    @Test
    func runAndWaitWithATimeout_endsAtItsTimeout_whileACancelledObserverOfTheOperationBlocks() {
        // Given an operation that runs until told, whose cancelled observer blocks until the test
        // lets it go
        let held = HeldOperations()
        let name = uniqueName("cancel-observed")
        let operation = held.make(name)
        let release = Signal()
        operation.addObserver(CancelledObserver { _ in _ = release.wait() })
        AsyncOperationQueue().addOperation(operation)
        #expect(held.waitUntilStarted(name))

        // When it is waited for with a 0.3 s timeout
        let waited = BlockingOutcome<Void>()
        let done = runOnOwnThread { waited.record { try operation.runAndWait(timeout: 0.3) } }

        // Then the wait ends with waitTimedOut while the observer still blocks
        let endedWhileBlocked = done.wait(timeout: generousTimeout)
        release.signal()
        #expect(endedWhileBlocked || done.wait(timeout: generousTimeout))
        #expect(endedWhileBlocked, "the wait outlasted its timeout until the observer returned")
        #expect(waited.error as? AsyncOperationError == .waitTimedOut(operation: name, after: 0.3), "\(String(describing: waited.value))")
        #expect(waitUntilFinished([operation]))
    }

    // Composition.md / RetryOperation: "Cancelling the retry operation cancels the running
    // attempt, or the wait before the next one, and it then finishes without further attempts";
    // AsyncAwait.md: after timeout, runAndWait "cancels the operation with waitTimedOut and
    // throws that error".
    @Test
    func runAndWaitWithATimeout_ofARetryInAnHourLongBackoff_endsAtItsTimeout_andMakesNoOtherAttempt() {
        // Given a named retry whose first attempt failed, waiting an hour before the next
        let name = uniqueName("patient-retry")
        let failure = StubError("flaky")
        let retry = RetryOperation(maxAttempts: 3, backoff: .fixed(3_600)) { _ in
            AsyncBlockOperation { throw failure }
        }
        retry.name = name
        AsyncOperationQueue().addOperation(retry)
        #expect(waitUntil { retry.attemptCount == 1 && retry.lastAttempt?.isFinished == true })

        // When it is waited for with a 0.5 s timeout during its backoff
        let outcome = Result { try retry.runAndWait(timeout: 0.5) }

        // Then the wait throws waitTimedOut, and the retry finishes without another attempt,
        // keeping the attempt's error and the wait's
        guard case let .failure(error) = outcome else {
            Issue.record("the retry succeeded")
            return
        }
        #expect(error as? AsyncOperationError == .waitTimedOut(operation: name, after: 0.5), "\(error)")
        #expect(waitUntilFinished([retry]))
        #expect(retry.attemptCount == 1)
        #expect(retry.errors.contains { $0 as? StubError == failure }, "\(retry.errors)")
        #expect(retry.errors.contains { $0 as? AsyncOperationError == .waitTimedOut(operation: name, after: 0.5) }, "\(retry.errors)")
    }

    // AsyncAwait.md: "runAndWait ends at its timeout". The newcomer's deadlock: the main thread
    // runs and waits for an operation whose finished observer hops to the main queue
    // (DispatchQueue.main.sync), in a child process, where a wait that never ends ends only the
    // child.
    @Test
    func mainThreadRunAndWaitWithATimeout_forAnOperationWhoseFinishedObserverHopsToMain_ends() {
        // Given / When the scenario runs in a child process (see NewcomerPathScenarioTests)
        let outcome = runProbeScenarioInChildProcess(
            testName: "newcomerProbe_mainThreadWaitWithAnObserverHoppingToMain",
            scenario: "newcomerMainThreadWaitObserverHopsToMain",
            timeout: 90
        )

        // Then the child's wait ended at its timeout and the scenario passed
        #expect(outcome != nil, "the scenario did not end within its time: the wait outlasted its timeout")
        #expect(outcome?.passed == true, "\(outcome.map(String.init(describing:)) ?? "")")
    }

    // MARK: - Foundation's blocking waits on an AsyncOperationQueue

    // GettingStarted.md: `queue.addOperations([parse], waitUntilFinished: true)` then
    // `print(parse.output?.title ?? "failed: \(parse.errors)")`: the output (or the errors) are
    // there when the call returns.
    @Test
    func addOperationsWaitingUntilFinished_asGettingStartedShowsIt_returnsWithTheOutputOrTheErrorsInPlace() {
        // Given a parse that succeeds and one that fails
        struct Report: Decodable, Sendable { let title: String }
        let good = Data(#"{"title":"Q3"}"#.utf8)
        let bad = Data(#"{"name":"Q3"}"#.utf8)
        let parse = ResultBlockOperation { try JSONDecoder().decode(Report.self, from: good) }
        let broken = ResultBlockOperation { try JSONDecoder().decode(Report.self, from: bad) }
        let queue = AsyncOperationQueue()

        // When they are added with waitUntilFinished: true (on a thread of its own: bounded)
        let seen = Recorder<String>()
        let done = runOnOwnThread {
            queue.addOperations([parse, broken], waitUntilFinished: true)
            seen.append(parse.output?.title ?? "failed: \(parse.errors)")
            seen.append(broken.output?.title ?? "failed: \(broken.errors.count) error")
        }

        // Then the call returns with the output and the error in place
        #expect(done.wait(timeout: generousTimeout))
        #expect(seen.all == ["Q3", "failed: 1 error"], "\(seen.all)")
    }

    // API.md: addOperations(_:waitUntilFinished:) honours conditions; API.md 1: a failed condition
    // finishes the operation "without executing"; Foundation: with `wait` true "the current
    // thread is blocked until all of the specified operations finish executing".
    @Test
    func addOperationsWaitingUntilFinished_withAnOperationWhoseConditionFails_returnsOnceAllFinished() {
        // Given two operations, the second with a failing condition
        let ran = Recorder<String>()
        let first = AsyncBlockOperation { ran.append("first") }
        let refusal = StubError("refused")
        let second = AsyncBlockOperation { ran.append("second") }
        second.addCondition(StubCondition.failing(refusal, name: uniqueName("Refuses")))
        let queue = AsyncOperationQueue()

        // When both are added with waitUntilFinished: true
        let finishedAtReturn = Recorder<Bool>()
        let done = runOnOwnThread {
            queue.addOperations([first, second], waitUntilFinished: true)
            finishedAtReturn.append(first.isFinished && second.isFinished)
        }

        // Then the call returns once both finished, the second without executing
        #expect(done.wait(timeout: generousTimeout))
        #expect(finishedAtReturn.all == [true])
        #expect(ran.all == ["first"])
        #expect(second.errors.asStubErrors == [refusal], "\(second.errors)")
    }

    // README: "adding a finished or executing operation | .addedAfterFinishing | ignored";
    // "adding an operation that is already on a queue | .addedTwice | the second add is ignored;
    // the operation runs once". Foundation: with `wait` true, the call returns once all of the
    // operations finished.
    @Test
    func addOperationsWaitingUntilFinished_withAFinishedOneAndOneListedTwice_returns_andRunsEachOnce() throws {
        // Given a finished operation and a fresh one
        let finishedName = uniqueName("finished")
        let finished = AsyncBlockOperation {}
        finished.name = finishedName
        try finished.runAndWait(timeout: generousTimeout)
        let freshName = uniqueName("fresh")
        let ran = Counter()
        let fresh = AsyncBlockOperation { ran.increment() }
        fresh.name = freshName
        let queueName = uniqueName("refusing")
        let queue = AsyncOperationQueue()
        queue.name = queueName

        // When the finished one and the fresh one twice are added with waitUntilFinished: true
        let done = runOnOwnThread { queue.addOperations([finished, fresh, fresh], waitUntilFinished: true) }

        // Then the call returns, the fresh one ran once, and both refusals are reported, naming
        // the queue that refused them
        #expect(done.wait(timeout: generousTimeout))
        #expect(ran.current == 1)
        #expect(DiagnosticsLog.shared.kinds(about: finishedName) == [.addedAfterFinishing])
        #expect(DiagnosticsLog.shared.kinds(about: freshName) == [.addedTwice])
        #expect(DiagnosticsLog.shared.diagnostics(about: finishedName).first?.queueNames.contains(queueName) == true)
        #expect(DiagnosticsLog.shared.diagnostics(about: freshName).first?.queueNames.contains(queueName) == true)
    }

    // API.md 6: "An AsyncBlockOperation that never calls its continuation therefore cannot block
    // its queue when it has a timeout."
    @Test
    func addOperationsWaitingUntilFinished_ofABlockThatNeverAnswersButHasATimeout_returnsOnceItTimedOut() {
        // Given a block operation that never calls its continuation, with a 0.2 s timeout
        let operation = AsyncBlockOperation { _ in }
        operation.addObserver(TimeoutObserver(timeout: 0.2))
        let queue = AsyncOperationQueue()

        // When it is added with waitUntilFinished: true
        let done = runOnOwnThread { queue.addOperations([operation], waitUntilFinished: true) }

        // Then the call returns, the operation finished with the timeout
        #expect(done.wait(timeout: generousTimeout))
        #expect(operation.errors.asOperationErrors == [.timedOut(after: 0.2)], "\(operation.errors)")
    }

    // README: "A queue shuts down gracefully ... it refuses new operations"; queueShutDown: "the
    // operation's queue was shut down: it was added after that ... it was cancelled"; API.md 12:
    // "every operation that was on the queue finishes exactly once".
    @Test
    func addOperationsWaitingUntilFinished_onAQueueThatWasShutDown_returns_withQueueShutDown_andRunsNothing() {
        // Given a queue that was shut down
        let queue = AsyncOperationQueue()
        queue.shutDownAndWait(gracePeriod: 0)
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }

        // When an operation is added with waitUntilFinished: true
        let done = runOnOwnThread { queue.addOperations([operation], waitUntilFinished: true) }

        // Then the call returns, the operation finished with queueShutDown without running
        #expect(done.wait(timeout: generousTimeout))
        #expect(operation.isFinished)
        #expect(hasQueueShutDown(operation.errors), "\(operation.errors)")
        #expect(ran.current == 0)
    }

    // README: "dependencies that form a cycle | .dependencyCycle | the operation that closes the
    // cycle ... finishes with AsyncOperationError.dependencyCycle when queued, so the rest runs
    // instead of hanging".
    @Test
    func addOperationsWaitingUntilFinished_ofTwoOperationsDependingOnEachOther_returns_insteadOfHanging() {
        // Given two operations that depend on each other
        let ran = Recorder<String>()
        let aName = uniqueName("a")
        let bName = uniqueName("b")
        let a = AsyncBlockOperation { ran.append("a") }
        a.name = aName
        let b = AsyncBlockOperation { ran.append("b") }
        b.name = bName
        a.addDependency(b)
        b.addDependency(a)
        let queue = AsyncOperationQueue()

        // When both are added with waitUntilFinished: true
        let done = runOnOwnThread { queue.addOperations([a, b], waitUntilFinished: true) }

        // Then the call returns: one closed the cycle and failed with dependencyCycle, naming the
        // other, and the other ran
        #expect(done.wait(timeout: generousTimeout))
        let failed = [a, b].filter { !$0.errors.isEmpty }
        #expect(failed.count == 1, "a: \(a.errors), b: \(b.errors)")
        #expect(ran.count == 1, "\(ran.all)")
        if let failed = failed.first {
            let other = failed === a ? bName : aName
            #expect(failed.errors.asOperationErrors == [.dependencyCycle(operation: failed.name ?? "", dependency: other)], "\(failed.errors)")
        }
    }

    // AsyncOperationQueue.waitUntilAllOperationsAreFinished: "Blocks until every operation on the
    // queue, including those still waiting, has finished."
    @Test
    func waitUntilAllOperationsAreFinished_waitsForAnOperationHeldBackByACategoryHeldOnAnotherQueue() {
        // Given an operation waiting for a category that an operation of another queue holds
        let holding = startHoldingACategory()
        let ran = Counter()
        let waiter = AsyncBlockOperation { ran.increment() }
        waiter.addCondition(ExclusiveCategory(holding.x))
        let queue = AsyncOperationQueue()
        queue.addOperation(waiter)

        // When a thread waits for all of the queue's operations
        let ranAtReturn = Recorder<Int>()
        let done = runOnOwnThread {
            queue.waitUntilAllOperationsAreFinished()
            ranAtReturn.append(ran.current)
        }

        // Then it keeps waiting while the category is held, and returns once the waiter ran
        #expect(!done.wait(timeout: 0.5))
        holding.held.finish(holding.holderName)
        #expect(done.wait(timeout: generousTimeout))
        #expect(ranAtReturn.all == [1])
    }

    // Foundation: waitUntilAllOperationsAreFinished "blocks the current thread until all of the
    // receiver's queued and executing operations finish"; addBarrierBlock's block "runs as an
    // operation of the queue" (README, known differences).
    @Test
    func waitUntilAllOperationsAreFinished_returnsOnlyAfterABarrierBlockRan() {
        // Given a queue with a running operation and a barrier block after it
        let held = HeldOperations()
        let name = uniqueName("before-barrier")
        let queue = AsyncOperationQueue()
        queue.addOperation(held.make(name))
        #expect(held.waitUntilStarted(name))
        let barrierRan = Counter()
        queue.addBarrierBlock { barrierRan.increment() }

        // When a thread waits for all of the queue's operations
        let ranAtReturn = Recorder<Int>()
        let done = runOnOwnThread {
            queue.waitUntilAllOperationsAreFinished()
            ranAtReturn.append(barrierRan.current)
        }

        // Then it returns only once the barrier block ran
        #expect(!done.wait(timeout: 0.3))
        held.finish(name)
        #expect(done.wait(timeout: generousTimeout))
        #expect(ranAtReturn.all == [1])
    }

    // Foundation: Operation.waitUntilFinished "blocks execution of the current thread until the
    // operation object finishes its task"; API.md 1: a failed condition finishes the operation.
    @Test
    func foundationsWaitUntilFinished_onAnOperationWhoseConditionFails_returns() {
        // Given an operation with a failing condition, on a queue
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        let refusal = StubError("refused")
        operation.addCondition(StubCondition.failing(refusal, name: uniqueName("Refuses")))
        AsyncOperationQueue().addOperation(operation)

        // When a thread waits for it with Foundation's own wait
        let done = runOnOwnThread { operation.waitUntilFinished() }

        // Then the wait returns, and the operation failed without executing
        #expect(done.wait(timeout: generousTimeout))
        #expect(operation.errors.asStubErrors == [refusal])
        #expect(ran.current == 0)
    }

    // API.md 5: "cancel(with:) before the operation starts: it finishes without executing";
    // Foundation: waitUntilFinished returns once the operation finished.
    @Test
    func foundationsWaitUntilFinished_onAnOperationCancelledWhileItWaitsForADependency_returns() {
        // Given an operation waiting for a dependency that runs until told, on the same queue
        let held = HeldOperations()
        let dependencyName = uniqueName("dependency")
        let dependency = held.make(dependencyName)
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.addDependency(dependency)
        let queue = AsyncOperationQueue()
        queue.addOperations([dependency, operation], waitUntilFinished: false)
        #expect(held.waitUntilStarted(dependencyName))
        let done = runOnOwnThread { operation.waitUntilFinished() }

        // When it is cancelled with an error while it waits
        let reason = StubError("no longer needed")
        operation.cancel(with: reason)

        // Then Foundation's wait returns while the dependency still runs, and it never executed
        #expect(done.wait(timeout: generousTimeout))
        #expect(!dependency.isFinished)
        #expect(operation.errors.asStubErrors == [reason])
        #expect(ran.current == 0)
        held.finish(dependencyName)
        #expect(waitUntilFinished([dependency]))
    }

    // DelayOperation: "Cancelled while it waits, it finishes at once"; cancelAllOperations and
    // waitUntilAllOperationsAreFinished "behave as Foundation documents them" (GettingStarted.md).
    @Test
    func waitUntilAllOperationsAreFinished_onAQueueWithAnEndlessDelay_returnsOnceAllAreCancelled() {
        // Given a queue with an endless delay and an operation depending on it
        let queue = AsyncOperationQueue()
        let delay = DelayOperation(.infinity)
        let ran = Counter()
        let after = AsyncBlockOperation { ran.increment() }
        after.addDependency(delay)
        queue.addOperations([delay, after], waitUntilFinished: false)
        #expect(waitUntil { delay.isExecuting })
        let done = runOnOwnThread { queue.waitUntilAllOperationsAreFinished() }
        #expect(!done.wait(timeout: 0.3))

        // When all of the queue's operations are cancelled
        queue.cancelAllOperations()

        // Then the wait returns, and the dependent never ran
        #expect(done.wait(timeout: generousTimeout))
        #expect(delay.isFinished && after.isFinished)
        #expect(ran.current == 0)
        #expect(queue.allOperationCount == 0)
    }

    // MARK: - async/await

    // AsyncAwait.md: finished() and value "do not run the operation: add it to a queue, before or
    // after starting to wait"; AsyncOperation.finished(): "An operation still on no queue a second
    // after the wait began is reported as .awaitedOffQueue".
    @Test
    func valueAwaitedBeforeTheOperationIsQueued_endsWithItsOutput_andNothingIsReportedWhenItIsQueuedSoon() async {
        // Given a result operation awaited before it is on any queue
        let name = uniqueName("soon")
        let answer = ResultBlockOperation { 7 }
        answer.name = name
        let waiting = Task { try await answer.value }
        try? await Task.sleep(nanoseconds: 50_000_000)

        // When it is added to a queue soon after
        AsyncOperationQueue().addOperation(answer)

        // Then the wait ends with its output, and no off-queue report follows
        let outcome = await boundedOutcome(of: waiting)
        #expect((try? outcome?.get()) == 7, "\(String(describing: outcome))")
        try? await Task.sleep(nanoseconds: 1_500_000_000)
        #expect(DiagnosticsLog.shared.kinds(about: name).isEmpty, "\(DiagnosticsLog.shared.diagnostics(about: name))")
    }

    // AsyncAwait.md: "Cancelling the waiting task cancels the operation, and the wait ends at once
    // with CancellationError, whatever the operation does ... So a timeout raced against the wait
    // the usual way (a task group with a sleep, the loser cancelled) always ends."
    @Test
    func finishedRacedAgainstASleepInATaskGroup_forASubclassIgnoringCancellation_alwaysEnds() async {
        // Given a subclass that ignores cancellation and finishes only when told, running
        let name = uniqueName("stubborn")
        let started = Recorder<ClosureOperation>()
        let stubborn = ClosureOperation(name: name) { started.append($0) }
        AsyncOperationQueue().addOperation(stubborn)
        #expect(await eventually { started.count == 1 })

        // When its finish is raced against a 0.2 s sleep in a task group, the loser cancelled
        let race = Task { () throws -> String in
            try await withThrowingTaskGroup(of: String.self) { group in
                group.addTask {
                    try await stubborn.finished()
                    return "finished"
                }
                group.addTask {
                    try await Task.sleep(nanoseconds: 200_000_000)
                    return "timed out"
                }
                let first = try await group.next() ?? "nothing"
                group.cancelAll()
                return first
            }
        }

        // Then the race ends with the sleep, and the operation is cancelled but still runs
        let outcome = await boundedOutcome(of: race)
        #expect((try? outcome?.get()) == "timed out", "\(String(describing: outcome))")
        #expect(stubborn.isCancelled)
        #expect(!stubborn.isFinished)
        stubborn.finish()
        #expect(await eventually { stubborn.isFinished })
    }

    // AsyncOperation.finished(): "It does not run the operation: add it to a queue"; "the
    // operation ... finishes once started" (README, .awaitedOffQueue).
    @Test
    func finishedAwaitedForAnOperationOnNoQueue_endsOnceItIsStartedByHand() async {
        // Given an operation on no queue, awaited
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        let waiting = Task { try await operation.finished() }
        try? await Task.sleep(nanoseconds: 50_000_000)

        // When it is started by hand
        await offThePool { operation.start() }

        // Then the wait ends without errors, the block having run once
        let outcome = await boundedOutcome(of: waiting)
        #expect(outcome != nil, "the wait did not end")
        if case let .failure(error)? = outcome {
            Issue.record("the wait threw \(error)")
        }
        #expect(ran.current == 1)
    }

    // AsyncOperationQueue.run(_:) for a ResultOperation: "throws as ResultOperation.value does";
    // API.md 1: a failed condition's error; ConditionsAndMutualExclusion: NoFailedDependencies.
    @Test
    func queueRunOfAResultOperationAfterAFailedDependency_throwsTheConditionsErrorAsItIs() async {
        // Given a result operation with NoFailedDependencies, after a dependency that fails
        let queue = AsyncOperationQueue()
        let failure = StubError("download failed")
        let download = AsyncBlockOperation { throw failure }
        let ran = Counter()
        let parse = ResultBlockOperation<Int> {
            ran.increment()
            return 1
        }
        parse.addDependency(download)
        parse.addCondition(NoFailedDependencies())
        queue.addOperation(download)

        // When it is run on the queue and awaited
        let running = Task { try await queue.run(parse) }
        let outcome = await boundedOutcome(of: running)

        // Then it throws the condition's only error, and the block never ran
        guard case let .failure(error)? = outcome else {
            Issue.record("expected the condition's error, got \(String(describing: outcome))")
            return
        }
        #expect(!(error is CancellationError), "\(error)")
        #expect(parse.errors.count == 1, "\(parse.errors)")
        #expect("\(error)" == "\(parse.errors.first.map { "\($0)" } ?? "")")
        #expect(ran.current == 0)
    }

    // AsyncAwait.md: "Cancelling the waiting task cancels the operation, and the wait ends at once
    // with CancellationError, whatever the operation does".
    @Test
    func taskAwaitingAnOperationWhoseFinishedObserverBlocks_endsAtOnceWhenCancelled() async {
        // Given an operation that has run, whose finished observer blocks until the test lets it
        // go, awaited by a task
        let release = Signal()
        let observing = Flag()
        let operation = AsyncBlockOperation {}
        operation.addObserver(FinishedObserver { _, _ in
            observing.raise()
            _ = release.wait()
        })
        AsyncOperationQueue().addOperation(operation)
        #expect(await eventually { observing.isRaised })
        let waiting = Task { try await operation.finished() }
        try? await Task.sleep(nanoseconds: 100_000_000)

        // When the awaiting task is cancelled
        waiting.cancel()

        // Then the wait ends, although the observer still blocks
        let outcome = await boundedOutcome(of: waiting)
        #expect(outcome != nil, "the wait did not end while the observer blocked")
        release.signal()
        #expect(await eventually { operation.isFinished })
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    // MARK: - TimeoutObserver

    // TimeoutObserver: "One observer may be added to several operations; each gets its own timer."
    @Test
    func oneTimeoutObserverOnTwoOperations_timesOutOnlyTheOneThatOverruns() {
        // Given one 1 s timeout observer on a quick operation and on one that never answers
        let timeout = TimeoutObserver(timeout: 1)
        let quick = AsyncBlockOperation {}
        quick.addObserver(timeout)
        let stuck = AsyncBlockOperation { _ in }
        stuck.addObserver(timeout)
        let queue = AsyncOperationQueue()

        // When both run
        queue.addOperations([quick, stuck], waitUntilFinished: false)

        // Then only the one that overran is timed out
        #expect(waitUntilFinished([quick, stuck]))
        #expect(quick.errors.isEmpty, "\(quick.errors)")
        #expect(stuck.errors.asOperationErrors == [.timedOut(after: 1)], "\(stuck.errors)")
    }

    // TimeoutObserver: "The timer ... is cancelled when it finishes"; API.md 3: "finish(with:) is
    // idempotent"; API.md 4: operationDidCancel "at most once".
    @Test
    func timeoutObserverOfAnOperationThatFinishedInTime_neverCancelsItLater() {
        // Given an operation with a 0.2 s timeout that finishes at once
        let events = EventLogObserver()
        let operation = AsyncBlockOperation {}
        operation.addObserver(TimeoutObserver(timeout: 0.2))
        operation.addObserver(events)

        // When it has run, and the timeout has passed
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntilFinished([operation]))
        Thread.sleep(forTimeInterval: 0.5)

        // Then it was never cancelled
        #expect(!operation.isCancelled)
        #expect(operation.errors.isEmpty)
        #expect(events.log.all == ["didStart", "didFinish"], "\(events.log.all)")
    }

    // ObserversAndTimeouts.md: a timeout "covers an operation's execution, not its wait: to give
    // up waiting for an operation, use runAndWait(on:timeout:)".
    @Test
    func runAndWaitTimeout_givesUpOnAnOperationWaitingForACategory_whereItsTimeoutObserverNeverFires() {
        // Given an operation with a 0.2 s timeout observer, waiting for a category held elsewhere
        let holding = startHoldingACategory()
        let name = uniqueName("patient")
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.name = name
        operation.addCondition(ExclusiveCategory(holding.x))
        operation.addObserver(TimeoutObserver(timeout: 0.2))

        // When it is run and waited for with a 0.5 s timeout
        let outcome = Result { try operation.runAndWait(timeout: 0.5) }

        // Then the wait gives up with waitTimedOut, the observer's timeout never having fired
        guard case let .failure(error) = outcome else {
            Issue.record("the wait succeeded while the category was held")
            return
        }
        #expect(error as? AsyncOperationError == .waitTimedOut(operation: name, after: 0.5), "\(error)")
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.asOperationErrors == [.waitTimedOut(operation: name, after: 0.5)], "\(operation.errors)")
        #expect(ran.current == 0)
        holding.held.finish(holding.holderName)
    }

    // API.md 6 and 5: a timeout cancels a block operation whose continuation has not been called,
    // which "finishes at once; a late continuation call is ignored". README: the diagnostic
    // .continuationCalledTwice is for "calling a block operation's continuation twice".
    @Test
    func blockStoppedByItsTimeout_whoseWorkAnswersLater_isNotReportedAsCalledTwice() {
        // Given a block whose work answers 0.6 s later, with a 0.1 s timeout
        let name = uniqueName("late-answer")
        let answered = Flag()
        let operation = AsyncBlockOperation { finish in
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.6) {
                finish(nil)
                answered.raise()
            }
        }
        operation.name = name
        operation.addObserver(TimeoutObserver(timeout: 0.1))

        // When it runs, times out, and its work answers afterwards
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { answered.isRaised })

        // Then it finished with the timeout alone, and the single late call is not reported
        #expect(operation.errors.asOperationErrors == [.timedOut(after: 0.1)], "\(operation.errors)")
        #expect(!DiagnosticsLog.shared.kinds(about: name).contains(.continuationCalledTwice), "\(DiagnosticsLog.shared.diagnostics(about: name))")
        #expect(!DiagnosticsLog.shared.kinds(about: name).contains(.finishedTwice), "\(DiagnosticsLog.shared.diagnostics(about: name))")
    }

    // MARK: - Messages that say where

    // README: "Each diagnostic names the operation and the queues involved (queueNames)";
    // ".startedOutOfTurn | ignored" for "start() by hand on an operation a queue manages".
    @Test
    func startByHandOfAnOperationWaitingOnAQueue_isIgnored_andReportedNamingItsQueue() {
        // Given an operation waiting on a named queue for a dependency that runs until told
        let held = HeldOperations()
        let dependencyName = uniqueName("dependency")
        let dependency = held.make(dependencyName)
        let name = uniqueName("impatient")
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.name = name
        operation.addDependency(dependency)
        let queueName = uniqueName("managed")
        let queue = AsyncOperationQueue()
        queue.name = queueName
        queue.addOperations([dependency, operation], waitUntilFinished: false)
        #expect(held.waitUntilStarted(dependencyName))

        // When it is started by hand
        operation.start()

        // Then the call is reported naming the queue, and it runs once, after its dependency
        #expect(ran.current == 0)
        #expect(DiagnosticsLog.shared.kinds(about: name, onceThereAre: 1) == [.startedOutOfTurn])
        let report = DiagnosticsLog.shared.diagnostics(about: name).first
        #expect(report?.queueNames.first == queueName, "\(String(describing: report))")
        #expect(report?.description.contains("'\(queueName)'") == true, "\(String(describing: report))")
        held.finish(dependencyName)
        #expect(waitUntilFinished([operation]))
        #expect(ran.current == 1)
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    // README: "addChild on a RetryOperation (it makes its own attempts) ... | .notSupported | the
    // children finish cancelled on a shared queue"; "Each diagnostic names the operation".
    @Test
    func addChildOnARetry_isReportedAsNotSupported_andTheChildFinishesCancelledWithoutRunning() throws {
        // Given a retry running its only attempt
        let held = HeldOperations()
        let attemptName = uniqueName("attempt")
        let retryName = uniqueName("retry")
        let retry = RetryOperation(maxAttempts: 1) { _ in held.make(attemptName) }
        retry.name = retryName
        AsyncOperationQueue().addOperation(retry)
        #expect(held.waitUntilStarted(attemptName))

        // When a newcomer adds a child to it, as to any group
        let childName = uniqueName("extra")
        let ran = Counter()
        let child = AsyncBlockOperation { ran.increment() }
        child.name = childName
        retry.addChild(child)

        // Then the add is reported, and the child finishes cancelled without running
        #expect(waitUntilFinished([child]))
        #expect(child.isCancelled)
        #expect(ran.current == 0)
        let reports = DiagnosticsLog.shared.diagnostics(about: retryName) + DiagnosticsLog.shared.diagnostics(about: childName)
        #expect(reports.map(\.kind).contains(.notSupported), "\(reports)")
        #expect(reports.contains { $0.description.contains(retryName) }, "\(reports)")
        held.finish(attemptName)
        #expect(waitUntilFinished([retry]))
        #expect(retry.errors.isEmpty, "\(retry.errors)")
    }

    // README: "calling a block operation's continuation twice | .continuationCalledTwice |
    // ignored"; AsyncAwait.md: runAndWait returns "once isFinished is true" with the first
    // outcome.
    @Test
    func blockCallingItsContinuationTwice_isRunAndWaitedWithTheFirstOutcome_andTheSecondIsReported() throws {
        // Given a block that calls its continuation with success, then with an error
        let name = uniqueName("chatty")
        let late = StubError("late")
        let operation = AsyncBlockOperation { finish in
            finish(nil)
            finish(late)
        }
        operation.name = name

        // When it is run and waited for
        try operation.runAndWait(timeout: generousTimeout)

        // Then it succeeded, and the second call is reported naming the error it dropped
        #expect(operation.errors.isEmpty)
        #expect(DiagnosticsLog.shared.kinds(about: name, onceThereAre: 1) == [.continuationCalledTwice])
        let report = DiagnosticsLog.shared.diagnostics(about: name).first
        #expect(report?.message.contains("\(late)") == true, "\(String(describing: report))")
        // and it names the queue the operation ran on, the private one of runAndWait
        #expect(report?.queueNames.isEmpty == false, "\(String(describing: report))")
    }
}

@Suite("Newcomer path scenarios run in a child process, round 11")
struct NewcomerPathScenarioTests {
    @MainActor
    @Test(.enabled(if: isProbeScenario("newcomerMainThreadWaitObserverHopsToMain")))
    func newcomerProbe_mainThreadWaitWithAnObserverHoppingToMain() {
        let name = uniqueName("hops-to-main")
        let operation = AsyncBlockOperation {}
        operation.name = name
        operation.addObserver(FinishedObserver { _, _ in DispatchQueue.main.sync {} })
        let outcome = Result { try operation.runAndWait(timeout: 1) }
        guard case let .failure(error) = outcome else {
            Issue.record("the wait succeeded although the observer could not finish")
            return
        }
        #expect(error as? AsyncOperationError == .waitTimedOut(operation: name, after: 1), "\(error)")
    }
}
