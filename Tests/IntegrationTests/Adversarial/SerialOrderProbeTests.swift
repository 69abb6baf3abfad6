import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// Round 7 of the adversarial probes: the serial queue's turn, which now lasts until the operation
// has finished and its dependents have been told. Cancellation, failing conditions, timeouts,
// finishes by hand and refused adds at every stage of an operation's way through a serial queue
// (or serial group); suspension, width changes, barriers, shutdown and every kind of wait around
// it; order between dependents released by a finish and operations added later, with priorities
// and plain operations mixed in; and the new threading, where the next operation's conditions
// run on the thread that finished the one before, and an operation started by hand executes on a
// Dispatch thread once granted its category. Each probe quotes the sentence it checks. Every
// wait for something that must happen is bounded, and nothing asserts on wall-clock speed. Three
// probes failed as first written: a long line of operations whose conditions fail overflowed the
// stack of the thread that finished the one before them (each failure let the next one through,
// nested; fixed); an operation Foundation started after it gave its category back executed on a
// Dispatch thread, off its queue, once another finish granted it the category (it now executes
// on the queue's underlyingQueue, as documented); and an AsyncOperation waiting behind a plain one
// on a serial queue is given to Foundation with it, which starts the higher priority first (now
// among the README's known limitations; the probe checks Foundation's order).

/// A new `AsyncOperationQueue` with `maxConcurrentOperationCount = 1`.
private func serialQueue(_ name: String = uniqueName("serial")) -> AsyncOperationQueue {
    let queue = AsyncOperationQueue()
    queue.name = name
    queue.maxConcurrentOperationCount = 1
    return queue
}

/// An operation that appends `label` to `log` as it executes.
private func recording(_ label: String, _ log: Recorder<String>) -> AsyncBlockOperation {
    let operation = AsyncBlockOperation { log.append(label) }
    operation.name = label
    return operation
}

/// A condition whose completion the test holds in `answer`.
private func heldCondition(_ answer: HeldCallback<ConditionResult>, name: String = "Held") -> StubCondition {
    StubCondition(name: name) { _, completion in answer.hold(completion) }
}

/// Whether `errors` holds `AsyncOperationError.timedOut`.
private func hasTimedOut(_ errors: [any Error]) -> Bool {
    errors.contains { error in
        if case .timedOut? = error as? AsyncOperationError { return true }
        return false
    }
}

/// Whether `errors` holds `AsyncOperationError.dependencyCycle`.
private func hasDependencyCycle(_ errors: [any Error]) -> Bool {
    errors.contains { error in
        if case .dependencyCycle? = error as? AsyncOperationError { return true }
        return false
    }
}

/// A `DispatchQueue` that tells whether the current code runs on it.
private final class MarkedDispatchQueue: @unchecked Sendable {
    private static let key = DispatchSpecificKey<String>()
    let queue: DispatchQueue
    let mark: String

    init() {
        mark = uniqueName("underlying")
        queue = DispatchQueue(label: mark, attributes: .concurrent)
        queue.setSpecific(key: Self.key, value: mark)
    }

    var isCurrent: Bool {
        DispatchQueue.getSpecific(key: Self.key) == mark
    }
}

@Suite("Serial order probes, round 7")
struct SerialOrderProbeTests {
    init() {
        _ = DiagnosticsLog.shared // capture diagnostics before any test reports one
    }

    // MARK: - Cancellation at every stage

    // API.md 5: "an AsyncBlockOperation whose continuation has not been called yet finishes at
    // once". API.md 9: a serial queue starts "the operations whose dependencies have finished in
    // the order they were added".
    @Test
    func cancellingTheExecutingOperation_letsTheNextOneRun() {
        // Given a serial queue executing an operation that never calls its continuation, and one behind it
        let queue = serialQueue()
        let log = Recorder<String>()
        let stuck = AsyncBlockOperation { _ in log.append("stuck") }
        let next = recording("next", log)
        queue.addOperations([stuck, next], waitUntilFinished: false)
        #expect(waitUntil { log.count == 1 })

        // When the executing one is cancelled
        stuck.cancel()

        // Then it finishes, and the next one runs
        #expect(waitUntilFinished([stuck, next]), "\(queue.debugDescription)")
        #expect(log.all == ["stuck", "next"])
    }

    // API.md 5: "cancel(with:) before the operation starts: it finishes without executing". README:
    // "cancelling an AsyncOperation that waits for dependencies on a suspended queue finishes it
    // at once" (on a running queue, as on Foundation's, sooner still).
    @Test
    func cancellingAnOperationWaitingForItsDependency_whileAnotherRuns_keepsTheLineMoving() {
        // Given a dependency running on another queue, and a serial queue running an operation,
        // with one waiting for that dependency and one more behind
        let held = HeldOperations()
        let dependencyName = uniqueName("dependency")
        let dependency = held.make(dependencyName)
        AsyncOperationQueue().addOperation(dependency)
        #expect(held.waitUntilStarted(dependencyName))
        let queue = serialQueue()
        let log = Recorder<String>()
        let runnerName = uniqueName("runner")
        let runner = held.make(runnerName)
        let waiting = recording("waiting", log)
        waiting.addDependency(dependency)
        let later = recording("later", log)
        queue.addOperations([runner, waiting, later], waitUntilFinished: false)
        #expect(held.waitUntilStarted(runnerName))

        // When the waiting one is cancelled, and the running one finishes
        waiting.cancel()
        held.finish(runnerName)

        // Then the waiting one finishes without executing, and the later one runs, while the
        // dependency still runs
        #expect(waitUntilFinished([runner, waiting, later]), "\(queue.debugDescription)")
        #expect(log.all == ["later"])
        #expect(!dependency.isFinished)
        held.finish(dependencyName)
        #expect(waitUntilFinished([dependency]))
    }

    // API.md 5: "cancel(with:) before the operation starts: it finishes without executing".
    // API.md 9: the others start "in the order they were added".
    @Test
    func cancellingAnOperationWaitingInLine_finishesIt_andTheRestRunInAddOrder() {
        // Given a serial queue running an operation, with three behind it
        let queue = serialQueue()
        let held = HeldOperations()
        let runnerName = uniqueName("runner")
        let runner = held.make(runnerName)
        let log = Recorder<String>()
        let first = recording("first", log)
        let cancelled = recording("cancelled", log)
        cancelled.addCondition(StubCondition.satisfied())
        cancelled.addCondition(ExclusiveCategory(uniqueName("own")))
        let last = recording("last", log)
        queue.addOperations([runner, first, cancelled, last], waitUntilFinished: false)
        #expect(held.waitUntilStarted(runnerName))

        // When the third is cancelled while it waits for its turn, and the running one finishes
        cancelled.cancel()
        held.finish(runnerName)

        // Then the cancelled one never executes, and the others run in add order
        #expect(waitUntilFinished([runner, first, cancelled, last]), "\(queue.debugDescription)")
        #expect(log.all == ["first", "last"])
    }

    // API.md 5: "cancel(with:) before the operation starts: it finishes without executing".
    // API.md 9: "A queue with maxConcurrentOperationCount = 1 ... start[s] the operations whose
    // dependencies have finished in the order they were added". A cancelled operation has nothing
    // left to wait for: its unanswered condition must not keep the serial queue's turn.
    @Test
    func cancellingAnOperationWhoseConditionHasNotAnswered_letsTheNextOneRun() {
        // Given a serial queue whose first operation's condition has not answered (and would not
        // time out for minutes), and one behind it
        let queue = serialQueue()
        queue.conditionEvaluationTimeout = 600
        let answer = HeldCallback<ConditionResult>()
        let log = Recorder<String>()
        let pending = recording("pending", log)
        pending.addCondition(heldCondition(answer))
        let next = recording("next", log)
        queue.addOperations([pending, next], waitUntilFinished: false)
        #expect(answer.waitUntilHeld())

        // When the first is cancelled
        pending.cancel()

        // Then it finishes without executing, and the next one runs
        #expect(waitUntilFinished([pending, next]), "\(pending.snapshot()) | \(queue.debugDescription)")
        #expect(log.all == ["next"])
        answer.call(.satisfied) // late: changes nothing
        #expect(waitUntilFinished([pending, next]))
        #expect(log.all == ["next"])
    }

    // API.md 5: "cancel(with:) before the operation starts: it finishes without executing". Its
    // condition answering `.satisfied` after the cancel must not make it execute.
    @Test
    func conditionSatisfiedAfterTheOperationWasCancelled_doesNotExecuteIt_andTheNextRuns() {
        // Given a serial queue whose first operation's condition has not answered, and one behind it
        let queue = serialQueue()
        let answer = HeldCallback<ConditionResult>()
        let log = Recorder<String>()
        let pending = recording("pending", log)
        pending.addCondition(heldCondition(answer))
        let next = AsyncBlockOperation { log.append(pending.isFinished ? "next after pending finished" : "next before pending finished") }
        queue.addOperations([pending, next], waitUntilFinished: false)
        #expect(answer.waitUntilHeld())

        // When it is cancelled, and the condition then answers `.satisfied`
        pending.cancel()
        #expect(answer.call(.satisfied))

        // Then it never executes, and the next one runs once it finished
        #expect(waitUntilFinished([pending, next]), "\(queue.debugDescription)")
        #expect(log.all == ["next after pending finished"])
    }

    // API.md 2: "Cancelling or failing an operation frees its categories." API.md 9: the next one
    // starts in add order.
    @Test
    func cancellingAnOperationWaitingForACategory_letsTheNextOneRun_whileTheCategoryIsStillHeld() {
        // Given X held on another queue, and a serial queue whose first operation waits for X
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let queue = serialQueue()
        let log = Recorder<String>()
        let waiting = recording("waiting", log)
        waiting.addCondition(ExclusiveCategory(x))
        let next = recording("next", log)
        queue.addOperations([waiting, next], waitUntilFinished: false)
        #expect(waitUntil { waiting.snapshot().state == .waitingForCategories })

        // When the waiting one is cancelled
        waiting.cancel()

        // Then it finishes without executing, and the next one runs, the holder still running
        #expect(waitUntilFinished([waiting, next]), "\(queue.debugDescription)")
        #expect(log.all == ["next"])
        #expect(!holder.isFinished)
        held.finish(holderName)
        #expect(waitUntilFinished([holder]))
    }

    // API.md 5: "cancel(with:) before the operation starts: it finishes without executing".
    // A plain operation keeps a serial queue's turn while it runs, so the next `AsyncOperation`
    // waits in line behind it: cancelled there, it must still let the queue go on.
    @Test
    func cancellingAnOperationWaitingBehindARunningPlainOne_letsTheQueueGoOn() {
        // Given a serial queue running a plain operation, with an operation waiting in line
        // behind it and one more
        let queue = serialQueue()
        let log = Recorder<String>()
        let release = Signal()
        let plain = gatedOperation("plain", started: log, release: release)
        let inLine = recording("inLine", log)
        let last = recording("last", log)
        queue.addOperations([plain, inLine, last], waitUntilFinished: false)
        #expect(waitUntil { log.all == ["plain"] })
        #expect(waitUntil { inLine.snapshot().state == .waitingInLine }, "\(inLine.snapshot())")

        // When the one in line is cancelled, and the plain one then returns
        inLine.cancel()
        release.signal()

        // Then the cancelled one finishes without executing, and the last one runs
        #expect(waitUntilFinished([plain, inLine, last]), "\(queue.debugDescription)")
        #expect(log.all == ["plain", "last"])
    }

    // MARK: - Timeouts, failing conditions, finishes by hand

    // API.md 6: "An AsyncBlockOperation that never calls its continuation therefore cannot block
    // its queue when it has a timeout."
    @Test
    func operationThatNeverAnswers_withATimeout_doesNotBlockTheSerialQueue() {
        // Given a serial queue whose first operation never calls its continuation, with a timeout
        let queue = serialQueue()
        let log = Recorder<String>()
        let silent = AsyncBlockOperation { _ in log.append("silent") }
        silent.addObserver(TimeoutObserver(timeout: 0.2))
        let next = recording("next", log)

        // When it runs
        queue.addOperations([silent, next], waitUntilFinished: false)

        // Then it times out, and the next one runs
        #expect(waitUntilFinished([silent, next]), "\(queue.debugDescription)")
        #expect(hasTimedOut(silent.errors), "\(silent.errors)")
        #expect(log.all == ["silent", "next"])
    }

    // API.md 1: "If any condition fails, execute() is never called; the operation finishes with
    // one error per failed condition". API.md 9: the rest start in add order.
    @Test
    func operationWhoseConditionFails_letsItsDependentFailAndTheRestRunInAddOrder() {
        // Given a serial queue with an operation whose condition fails, a dependent requiring no
        // failed dependencies, and two more
        let queue = serialQueue()
        let log = Recorder<String>()
        let failing = recording("failing", log)
        failing.addCondition(StubCondition(name: "FailsLater") { _, completion in
            DispatchQueue.global().async { completion(.failed(StubError("no"))) }
        })
        let dependent = recording("dependent", log)
        dependent.addDependency(failing)
        dependent.addCondition(NoFailedDependencies())
        let second = recording("second", log)
        let third = recording("third", log)
        third.addCondition(StubCondition.failing(StubError("no either")))
        let fourth = recording("fourth", log)

        // When they run
        queue.addOperations([failing, dependent, second, third, fourth], waitUntilFinished: false)

        // Then only those whose conditions pass execute, in add order
        #expect(waitUntilFinished([failing, dependent, second, third, fourth]), "\(queue.debugDescription)")
        #expect(log.all == ["second", "fourth"])
        #expect(failing.errors.count == 1 && third.errors.count == 1 && dependent.isFailed)
    }

    // API.md 3: "finish(with:) is idempotent: the first call wins". AsyncOperation.finish(with:):
    // "Call it exactly once when the work is done, from any thread." Finished by hand while its
    // condition is evaluated, the operation must not keep the serial queue's turn.
    @Test
    func finishedByHandWhileItsConditionIsEvaluated_letsTheNextOneRun_andNeverExecutes() {
        // Given a serial queue whose first operation's condition has not answered, and one behind it
        let queue = serialQueue()
        queue.conditionEvaluationTimeout = 600
        let answer = HeldCallback<ConditionResult>()
        let log = Recorder<String>()
        let early = ClosureOperation(name: "early") { operation in
            log.append("early")
            operation.finish()
        }
        early.addCondition(heldCondition(answer))
        let next = recording("next", log)
        queue.addOperations([early, next], waitUntilFinished: false)
        #expect(answer.waitUntilHeld())

        // When it is finished by hand with an error, and the condition answers afterwards
        let reason = StubError("finished by hand")
        early.finish(with: reason)
        #expect(waitUntilFinished([early, next]), "\(early.snapshot()) | \(queue.debugDescription)")
        answer.call(.satisfied)

        // Then it never executed, its error is kept, and the next one ran
        #expect(waitUntilFinished([early, next]))
        #expect(log.all == ["next"])
        #expect(early.errors.asStubErrors.contains(reason), "\(early.errors)")
    }

    // API.md 3 and API.md 9, as above: finished by hand while it waits for its turn.
    @Test
    func finishedByHandWhileWaitingInLine_letsTheQueueGoOnInAddOrder() {
        // Given a serial queue running an operation, with three behind it
        let queue = serialQueue()
        let held = HeldOperations()
        let runnerName = uniqueName("runner")
        let runner = held.make(runnerName)
        let log = Recorder<String>()
        let first = recording("first", log)
        let early = ClosureOperation(name: "early") { operation in
            log.append("early")
            operation.finish()
        }
        early.addCondition(StubCondition.satisfied())
        let last = recording("last", log)
        queue.addOperations([runner, first, early, last], waitUntilFinished: false)
        #expect(held.waitUntilStarted(runnerName))

        // When the third is finished by hand, and the running one then finishes
        early.finish()
        held.finish(runnerName)

        // Then the others run in add order, and the third never executes
        #expect(waitUntilFinished([runner, first, early, last]), "\(queue.debugDescription)")
        #expect(log.all == ["first", "last"])
    }

    // README, "When it is misused": "dependencies that form a cycle ... the operation that closes
    // the cycle ... finishes with AsyncOperationError.dependencyCycle when queued, so the rest runs
    // instead of hanging". API.md 9: in add order.
    @Test
    func dependencyCycleOnASerialQueue_finishesTheOperationThatClosesIt_andTheRestRunInOrder() {
        // Given two operations that depend on each other, and one more
        let queue = serialQueue()
        let log = Recorder<String>()
        let first = recording("first", log)
        let second = recording("second", log)
        first.addDependency(second)
        second.addDependency(first) // closes the cycle
        let third = recording("third", log)

        // When they are added to a serial queue
        queue.addOperations([first, second, third], waitUntilFinished: false)

        // Then the one that closed the cycle finishes with that error, and the others run in add order
        #expect(waitUntilFinished([first, second, third]), "\(queue.debugDescription)")
        #expect(hasDependencyCycle(second.errors), "\(second.errors)")
        #expect(log.all == ["first", "third"])
    }

    // MARK: - Adds that finish or are refused

    // AsyncOperationQueueDelegate's willAdd runs on the adding thread, in the middle of the add.
    // API.md 5: cancelled before it starts, "it finishes without executing"; API.md 9: the rest
    // start in add order. An operation that finishes while it is being added must not keep the turn.
    @Test(arguments: [false, true])
    func operationCancelledOrFinishedWhileBeingAdded_doesNotKeepTheTurn(finishByHand: Bool) {
        // Given a serial queue whose delegate cancels (or finishes by hand) the operation named
        // "victim" as it is being added
        let queue = serialQueue()
        let log = Recorder<String>()
        let victimName = uniqueName("victim")
        let hook = WillAddHook { operation in
            guard operation.name == victimName, let operation = operation as? AsyncOperation else { return }
            if finishByHand {
                operation.finish(with: StubError("finished while added"))
            } else {
                operation.cancel()
            }
        }
        queue.delegate = hook
        let victim = recording("victim", log)
        victim.name = victimName
        victim.addCondition(StubCondition.satisfied())
        let next = recording("next", log)

        // When it is added, then another one, one by one
        queue.addOperation(victim)
        queue.addOperation(next)

        // Then the victim never executes, and the next one runs
        #expect(waitUntilFinished([victim, next]), "\(queue.debugDescription)")
        #expect(log.all == ["next"])
        #expect(queue.allOperationCount == 0 || waitUntil { queue.allOperationCount == 0 })
        withExtendedLifetime(hook) {}
    }

    // README, "When it is misused": "adding an operation that is already on a queue ... the second
    // add is ignored"; "adding a finished or executing operation ... ignored". A refused add must
    // not keep a serial queue from going on, nor its wait for all operations from ending.
    @Test
    func refusedAdds_doNotStallTheSerialQueue_norItsWaitForAllOperations() {
        // Given an operation waiting on a suspended queue, and a finished one
        let elsewhere = AsyncOperationQueue()
        elsewhere.isSuspended = true
        let log = Recorder<String>()
        let onAnotherQueue = recording("onAnotherQueue", log)
        elsewhere.addOperation(onAnotherQueue)
        let finished = recording("finished", log)
        #expect((try? finished.runAndWait(timeout: generousTimeout)) != nil)

        // When both are added to a serial queue, and then a fresh one
        let queue = serialQueue()
        queue.addOperation(onAnotherQueue)
        queue.addOperations([finished], waitUntilFinished: false)
        let fresh = recording("fresh", log)
        queue.addOperation(fresh)

        // Then the fresh one runs, and a wait for the queue ends
        #expect(waitUntilFinished([fresh]), "\(queue.debugDescription)")
        let waited = runOnOwnThread { queue.waitUntilAllOperationsAreFinished() }
        #expect(waited.wait(timeout: generousTimeout), "\(queue.debugDescription)")
        #expect(log.all == ["finished", "fresh"])
        elsewhere.isSuspended = false
        #expect(waitUntilFinished([onAnotherQueue]))
    }

    // MARK: - Suspension at each stage

    // API.md 10: "A suspended queue evaluates no condition, takes no category and starts
    // nothing." API.md 9: "also across a suspension".
    @Test
    func suspendedWhileAnOperationExecutes_itsFinishEvaluatesAndStartsNothing_untilTheResume() {
        // Given a serial queue executing an operation, with one with a condition and a category
        // behind it, and one more
        let queue = serialQueue()
        let held = HeldOperations()
        let runnerName = uniqueName("runner")
        let runner = held.make(runnerName)
        let log = Recorder<String>()
        let evaluated = Counter()
        let conditioned = recording("conditioned", log)
        conditioned.addCondition(StubCondition(name: "Counts") { _, completion in
            evaluated.increment()
            completion(.satisfied)
        })
        conditioned.addCondition(ExclusiveCategory(uniqueName("own")))
        let last = recording("last", log)
        queue.addOperations([runner, conditioned, last], waitUntilFinished: false)
        #expect(held.waitUntilStarted(runnerName))

        // When the queue is suspended and the running one then finishes
        queue.isSuspended = true
        held.finish(runnerName)
        #expect(waitUntilFinished([runner]))
        Thread.sleep(forTimeInterval: 0.2) // a chance to go wrong

        // Then nothing is evaluated or started until the queue resumes, and then in add order
        #expect(evaluated.current == 0)
        #expect(log.all.isEmpty)
        queue.isSuspended = false
        #expect(waitUntilFinished([conditioned, last]), "\(queue.debugDescription)")
        #expect(log.all == ["conditioned", "last"])
    }

    // API.md 10: "A suspended queue ... starts nothing." API.md 9: "also across a suspension".
    @Test
    func conditionSatisfiedWhileTheQueueIsSuspended_startsNothingUntilTheResume() {
        // Given a serial queue whose first operation's condition has not answered, and one behind it
        let queue = serialQueue()
        let answer = HeldCallback<ConditionResult>()
        let log = Recorder<String>()
        let pending = recording("pending", log)
        pending.addCondition(heldCondition(answer))
        let next = recording("next", log)
        queue.addOperations([pending, next], waitUntilFinished: false)
        #expect(answer.waitUntilHeld())

        // When the queue is suspended, and the condition then answers `.satisfied`
        queue.isSuspended = true
        #expect(answer.call(.satisfied))
        Thread.sleep(forTimeInterval: 0.2) // a chance to go wrong

        // Then nothing starts until the queue resumes, and then in add order
        #expect(log.all.isEmpty)
        queue.isSuspended = false
        #expect(waitUntilFinished([pending, next]), "\(queue.debugDescription)")
        #expect(log.all == ["pending", "next"])
    }

    // API.md 10: "A suspended queue ... takes no category and starts nothing." API.md 9: "also
    // across a suspension".
    @Test
    func categoryFreedWhileTheQueueIsSuspended_startsNothingUntilTheResume() {
        // Given X held on another queue, and a serial queue whose first operation waits for X
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let queue = serialQueue()
        let log = Recorder<String>()
        let waiting = recording("waiting", log)
        waiting.addCondition(ExclusiveCategory(x))
        let next = recording("next", log)
        queue.addOperations([waiting, next], waitUntilFinished: false)
        #expect(waitUntil { waiting.snapshot().state == .waitingForCategories })

        // When the queue is suspended, and the holder then finishes
        queue.isSuspended = true
        held.finish(holderName)
        #expect(waitUntilFinished([holder]))
        Thread.sleep(forTimeInterval: 0.2) // a chance to go wrong

        // Then nothing starts until the queue resumes, and then in add order
        #expect(log.all.isEmpty)
        queue.isSuspended = false
        #expect(waitUntilFinished([waiting, next]), "\(queue.debugDescription)")
        #expect(log.all == ["waiting", "next"])
    }

    // API.md 10: "A suspended queue ... starts nothing." API.md 9: "also across a suspension".
    // A plain operation keeps a serial queue's turn while it runs.
    @Test
    func suspendedWhileAPlainOperationRuns_startsTheNextOnlyOnTheResume() {
        // Given a serial queue running a plain operation, with an operation waiting in line
        // behind it and one more
        let queue = serialQueue()
        let log = Recorder<String>()
        let release = Signal()
        let plain = gatedOperation("plain", started: log, release: release)
        let inLine = recording("inLine", log)
        let last = recording("last", log)
        queue.addOperations([plain, inLine, last], waitUntilFinished: false)
        #expect(waitUntil { log.all == ["plain"] })
        #expect(waitUntil { inLine.snapshot().state == .waitingInLine }, "\(inLine.snapshot())")

        // When the queue is suspended, and the plain one then returns
        queue.isSuspended = true
        release.signal()
        #expect(waitUntilFinished([plain]))
        Thread.sleep(forTimeInterval: 0.2) // a chance to go wrong

        // Then nothing starts until the resume, and then in add order
        #expect(log.all == ["plain"])
        queue.isSuspended = false
        #expect(waitUntilFinished([inLine, last]), "\(queue.debugDescription)")
        #expect(log.all == ["plain", "inLine", "last"])
    }

    // `addBarrierBlock(_:)`: "A suspended queue runs the barrier only once it resumes"; API.md 9:
    // "also across a suspension".
    @Test
    func barrierOnASuspendedSerialQueue_runsInAddOrderOnceItResumes() {
        // Given a suspended serial queue given an operation with a condition, a barrier, and an
        // operation in a category
        let queue = serialQueue()
        queue.isSuspended = true
        let log = Recorder<String>()
        let before = conditioned(recording("before", log))
        queue.addOperation(before)
        queue.addBarrierBlock { log.append("barrier") }
        let after = exclusive(recording("after", log))
        queue.addOperation(after)
        Thread.sleep(forTimeInterval: 0.1) // a chance to go wrong
        #expect(log.all.isEmpty)

        // When it resumes
        queue.isSuspended = false

        // Then they run in add order
        #expect(waitUntilFinished([before, after]), "\(queue.debugDescription)")
        #expect(waitUntil { log.count == 3 })
        #expect(log.all == ["before", "barrier", "after"])
    }

    // API.md 7: "Cancelling the group cancels its children"; API.md 5: cancelled before it starts,
    // "it finishes without executing". A group cancelled while it waits for its turn on a serial
    // queue holds its finish until its children are done: the queue must still go on.
    @Test
    func groupCancelledWhileWaitingForItsTurn_finishes_andTheQueueGoesOn() {
        // Given a serial queue running an operation, with a group behind it and one more
        let queue = serialQueue()
        let held = HeldOperations()
        let runnerName = uniqueName("runner")
        let runner = held.make(runnerName)
        let log = Recorder<String>()
        let children: [Operation] = [recording("child1", log), conditioned(recording("child2", log))]
        let group = GroupOperation(operations: children)
        group.maxConcurrentOperationCount = 1
        let last = recording("last", log)
        queue.addOperations([runner, group, last], waitUntilFinished: false)
        #expect(held.waitUntilStarted(runnerName))

        // When the group is cancelled, and the running one then finishes
        group.cancel()
        held.finish(runnerName)

        // Then the group finishes without running its children, and the last one runs
        #expect(waitUntilFinished([runner, group, last] + children), "\(queue.debugDescription)")
        #expect(log.all == ["last"])
    }

    // MARK: - Width changes

    // AsyncOperationQueue.maxConcurrentOperationCount: "1 makes the queue serial: operations then
    // start in the order they were added". Foundation's own queue, made serial while three run,
    // starts nothing more until all three have finished (checked here first, as the reference).
    @Test
    func madeSerialAgainWhileThreeRun_startsTheNextOnlyOnceAllThreeFinished_asFoundationsQueueDoes() {
        // Given a serial queue running one operation, widened to 3 while two more start, then made
        // serial again, with two operations added after
        func scenario(on queue: OperationQueue, running make: (String) -> (Operation, () -> Void)) -> (sawAllFinished: Bool, order: [String], finished: Bool) {
            queue.maxConcurrentOperationCount = 1
            let (a, finishA) = make("a")
            queue.addOperation(a)
            queue.maxConcurrentOperationCount = 3
            let (b, finishB) = make("b")
            let (c, finishC) = make("c")
            queue.addOperations([b, c], waitUntilFinished: false)
            #expect(waitUntil { a.isExecuting && b.isExecuting && c.isExecuting })
            queue.maxConcurrentOperationCount = 1
            let order = Recorder<String>()
            let sawAllFinished = Flag()
            let d = BlockOperation {
                if a.isFinished && b.isFinished && c.isFinished { sawAllFinished.raise() }
                order.append("d")
            }
            let e = BlockOperation { order.append("e") }
            queue.addOperations([d, e], waitUntilFinished: false)

            // When the three finish, one by one
            finishC()
            finishA()
            finishB()
            let finished = waitUntilFinished([a, b, c, d, e])
            return (sawAllFinished.isRaised, order.all, finished)
        }
        let foundation = scenario(on: OperationQueue()) { _ in
            let release = Signal()
            return (BlockOperation { _ = release.wait(timeout: blockingTimeout) }, release.signal)
        }
        let held = HeldOperations()
        let package = scenario(on: serialQueue()) { label in
            let name = uniqueName(label)
            return (held.make(name), { held.finish(name) })
        }

        // Then the next starts only once all three have finished, and the last after it
        #expect(foundation.finished && foundation.sawAllFinished && foundation.order == ["d", "e"], "Foundation's own queue: \(foundation)")
        #expect(package.finished && package.sawAllFinished && package.order == ["d", "e"], "AsyncOperationQueue: \(package)")
    }

    // AsyncOperationQueue.maxConcurrentOperationCount: "1 makes the queue serial: operations then
    // start in the order they were added (once their dependencies finished), whatever their
    // conditions". Widened while its first operation evaluates a condition and made serial again,
    // the queue must still start the operation added after that after it.
    @Test
    func widenedAndMadeSerialAgain_whileTheFirstEvaluatesItsCondition_theOneAddedAfterWaitsForIt() {
        // Given a serial queue whose first operation's condition has not answered
        let queue = serialQueue()
        let answer = HeldCallback<ConditionResult>()
        let log = Recorder<String>()
        let first = recording("first", log)
        first.addCondition(heldCondition(answer))
        queue.addOperation(first)
        #expect(answer.waitUntilHeld())

        // When it is widened, an operation is added (and runs), it is made serial again and one
        // more is added, and the condition then answers
        queue.maxConcurrentOperationCount = 2
        let during = recording("during", log)
        queue.addOperation(during)
        #expect(waitUntilFinished([during]))
        queue.maxConcurrentOperationCount = 1
        let firstFinished = Flag()
        let after = AsyncBlockOperation {
            if first.isFinished { firstFinished.raise() }
            log.append("after")
        }
        queue.addOperation(after)
        #expect(answerAfterAChanceToGoWrong(answer))

        // Then the one added once it was serial again starts after the first finished
        #expect(waitUntilFinished([first, during, after]), "\(queue.debugDescription)")
        #expect(log.all == ["during", "first", "after"])
        #expect(firstFinished.isRaised)
    }

    // MARK: - Barriers

    // API.md 9: in add order, conditions included. `addBarrierBlock(_:)`: "Runs barrier once every
    // operation added before it has finished, and before any operation added after it starts".
    // Foundation's serial queue runs the same in add order (checked here first, as the reference).
    @Test
    func barrierOnASerialQueue_runsAfterTheOperationsBefore_andBeforeThoseAfter_asFoundationsQueueDoes() {
        func scenario(on queue: OperationQueue, make: (String, Recorder<String>) -> Operation) -> [String] {
            // Given a serial queue with a slow operation, one with a condition, a barrier and one more
            queue.maxConcurrentOperationCount = 1
            let order = Recorder<String>()
            let slow = make("slow", order)
            let conditioned = make("conditioned", order)
            queue.addOperations([slow, conditioned], waitUntilFinished: false)
            queue.addBarrierBlock { order.append("barrier") }
            let after = make("after", order)
            queue.addOperation(after)

            // When they run
            #expect(waitUntilFinished([slow, conditioned, after]))
            #expect(waitUntil { order.count == 4 })
            return order.all
        }
        let foundation = scenario(on: OperationQueue()) { label, order in
            BlockOperation {
                if label == "slow" { usleep(50_000) }
                order.append(label)
            }
        }
        let package = scenario(on: AsyncOperationQueue()) { label, order in
            let operation = AsyncBlockOperation {
                if label == "slow" { usleep(50_000) }
                order.append(label)
            }
            if label == "conditioned" { _ = conditioned(operation) }
            return operation
        }

        // Then both run them in add order
        #expect(foundation == ["slow", "conditioned", "barrier", "after"], "Foundation's own serial queue: \(foundation)")
        #expect(package == ["slow", "conditioned", "barrier", "after"], "AsyncOperationQueue: \(package)")
    }

    // MARK: - Shutting down

    // API.md 12: "After shutDown begins, nothing new runs on that queue; running operations may
    // finish within the grace period ...; every operation that was on the queue finishes exactly
    // once; the call returns when the queue is empty."
    @Test
    func shutDownWhileASerialQueueRunsOne_finishesTheLineWithoutRunningIt_andReturns() async {
        // Given a serial queue running an operation, with operations of every kind behind it,
        // each of which counts its finishes
        let queue = serialQueue()
        let held = HeldOperations()
        let runnerName = uniqueName("runner")
        let runner = held.make(runnerName)
        let log = Recorder<String>()
        let waiting = operationsOfEveryKind(log: log).compactMap { $0 as? AsyncOperation }
        let finishes = Recorder<String>()
        for operation in [runner] + waiting {
            let name = operation.name ?? "?"
            operation.addObserver(FinishedObserver { _, _ in finishes.append(name) })
        }
        queue.addOperations([runner] + waiting, waitUntilFinished: false)
        #expect(await eventually { held.startCount(runnerName) == 1 })

        // When the queue shuts down with a long grace period, and the running one then finishes
        // (those waiting behind it are cancelled at once; like Foundation's, the serial queue may
        // finish them only once the running one has)
        let shutDown = Task { () async throws in await queue.shutDown(gracePeriod: 60) }
        #expect(await eventually { waiting.allSatisfy(\.isCancelled) }, "\(queue.debugDescription)")
        held.finish(runnerName)

        // Then the call returns; the waiting ones never ran and finished once, with queueShutDown;
        // the running one finished without it
        let outcome = await boundedOutcome(of: shutDown)
        #expect(outcome != nil, "shutDown did not return: \(queue.debugDescription)")
        #expect(log.all.isEmpty)
        #expect(waiting.allSatisfy { $0.errors.asOperationErrors.contains(.queueShutDown) })
        #expect(runner.isFinished && runner.errors.isEmpty, "\(runner.errors)")
        #expect(await eventually { finishes.count == 4 })
        #expect(Set(finishes.all).count == 4, "\(finishes.all)")
    }

    // API.md 12: "running operations may finish within the grace period, then are cancelled ...
    // the call returns when the queue is empty."
    @Test
    func shutDownAndWait_whenTheRunningOperationNeverFinishes_cancelsItAfterTheGracePeriod_andReturns() {
        // Given a serial queue running an operation that never calls its continuation, with one behind it
        let queue = serialQueue()
        let log = Recorder<String>()
        let stuck = AsyncBlockOperation { _ in log.append("stuck") }
        let next = recording("next", log)
        queue.addOperations([stuck, next], waitUntilFinished: false)
        #expect(waitUntil { log.count == 1 })

        // When the queue shuts down with a short grace period, from a thread of the test's own
        let returned = runOnOwnThread { queue.shutDownAndWait(gracePeriod: 0.2) }

        // Then the call returns; the running one was cancelled; the next never ran
        #expect(returned.wait(timeout: generousTimeout), "\(queue.debugDescription)")
        #expect(stuck.isFinished && stuck.errors.asOperationErrors.contains(.queueShutDown), "\(stuck.errors)")
        #expect(next.isFinished && log.all == ["stuck"])
    }

    // MARK: - Waiting

    // OperationQueue.waitUntilAllOperationsAreFinished(), which AsyncOperationQueue documents as
    // behaving "as Foundation documents them", here from a thread other than the one finishing.
    @Test
    func waitUntilAllOperationsAreFinished_fromAnotherThread_endsAfterAChainWithConditionsAndCategories() {
        // Given a serial queue running a chain: a held operation, a dependent with a condition
        // answering from another thread, one in a category, a plain one and one that depends on
        // an operation of another queue
        let queue = serialQueue()
        let held = HeldOperations()
        let runnerName = uniqueName("runner")
        let runner = held.make(runnerName)
        let log = Recorder<String>()
        let dependent = conditioned(recording("dependent", log))
        dependent.addDependency(runner)
        let exclusiveOne = exclusive(recording("exclusive", log))
        let plain = BlockOperation { log.append("plain") }
        let otherQueue = AsyncOperationQueue()
        let remoteName = uniqueName("remote")
        let remote = held.make(remoteName)
        otherQueue.addOperation(remote)
        let waitsForRemote = recording("waitsForRemote", log)
        waitsForRemote.addDependency(remote)
        queue.addOperations([runner, dependent, exclusiveOne, plain, waitsForRemote], waitUntilFinished: false)
        #expect(held.waitUntilStarted(runnerName))

        // When a thread of the test's own waits for the queue, and the held ones finish
        let waited = runOnOwnThread { queue.waitUntilAllOperationsAreFinished() }
        held.finish(runnerName)
        #expect(held.waitUntilStarted(remoteName))
        held.finish(remoteName)

        // Then the wait ends, everything having run in add order
        #expect(waited.wait(timeout: generousTimeout), "\(queue.debugDescription)")
        #expect(log.all == ["dependent", "exclusive", "plain", "waitsForRemote"])
    }

    // README: "runAndWait(on:timeout:) runs an operation and blocks until it finished".
    @Test
    func runAndWait_onASerialQueueBusyWithAnotherOperation_returnsOnceItRan() {
        // Given a serial queue running an operation
        let queue = serialQueue()
        let held = HeldOperations()
        let runnerName = uniqueName("runner")
        let runner = held.make(runnerName)
        queue.addOperation(runner)
        #expect(held.waitUntilStarted(runnerName))

        // When a thread of the test's own runs an operation with a condition there and waits
        let ran = Flag()
        let operation = conditioned(AsyncBlockOperation { ran.raise() })
        let outcome = Recorder<String>()
        let returned = runOnOwnThread {
            do {
                try operation.runAndWait(on: queue, timeout: generousTimeout)
                outcome.append("returned")
            } catch {
                outcome.append("threw \(error)")
            }
        }
        #expect(waitUntil { operation.snapshot().state == .waitingInLine }, "\(operation.snapshot())")
        held.finish(runnerName)

        // Then the wait ends once it ran
        #expect(returned.wait(timeout: generousTimeout + 5), "\(queue.debugDescription)")
        #expect(outcome.all == ["returned"])
        #expect(ran.isRaised)
    }

    // README: "try await operation.finished() waits for any operation without blocking a thread".
    @Test
    func finished_awaitedForEveryOperationOfASerialChain_returnsForEach() async {
        // Given a serial queue with a chain whose links have conditions and categories
        let queue = serialQueue()
        let log = Recorder<String>()
        let first = conditioned(recording("first", log))
        let second = exclusive(recording("second", log))
        second.addDependency(first)
        let third = conditioned(exclusive(recording("third", log)))
        third.addDependency(second)
        let unrelated = recording("unrelated", log)

        // When they are added, and each is awaited
        queue.addOperations([third, second, first, unrelated], waitUntilFinished: false)
        var ended = 0
        for operation in [third, second, first, unrelated] {
            let wait = Task { () async throws in try await operation.finished() }
            if let outcome = await boundedOutcome(of: wait), case .success = outcome { ended += 1 }
        }

        // Then every wait returns, and they ran in dependency order, the unrelated one last
        #expect(ended == 4, "\(queue.debugDescription)")
        #expect(log.all == ["first", "second", "third", "unrelated"])
    }

    // MARK: - Order

    // API.md 9: "start the operations whose dependencies have finished in the order they were
    // added". Foundation's serial queue, given the same operations, starts the dependent released
    // while another runs before a later one (checked here first, as the reference).
    @Test
    func dependentReleasedByAnotherQueueWhileOneRuns_goesBeforeALaterOne_asFoundationsSerialQueueDoes() {
        // Given a serial queue running an operation, with one that depends on an operation of
        // another queue, and a later one
        func scenario(on queue: OperationQueue, other: OperationQueue, make: (String, Recorder<String>) -> (Operation, () -> Void)) -> [String] {
            queue.maxConcurrentOperationCount = 1
            let order = Recorder<String>()
            let (remote, finishRemote) = make("remote", order)
            other.addOperation(remote)
            let (runner, finishRunner) = make("runner", order)
            let (dependent, _) = make("dependent", order)
            dependent.addDependency(remote)
            let (later, _) = make("later", order)
            queue.addOperations([runner, dependent, later], waitUntilFinished: false)
            #expect(waitUntil { runner.isExecuting && remote.isExecuting })

            // When the remote one finishes while the runner runs, and the runner then finishes
            finishRemote()
            #expect(waitUntilFinished([remote]))
            finishRunner()
            #expect(waitUntilFinished([runner, dependent, later]))
            return order.all.filter { $0 != "remote" }
        }
        let foundation = scenario(on: OperationQueue(), other: OperationQueue()) { label, order in
            let release = Signal()
            let operation = BlockOperation {
                if label == "remote" || label == "runner" { _ = release.wait(timeout: blockingTimeout) }
                order.append(label)
            }
            return (operation, release.signal)
        }
        let package = scenario(on: AsyncOperationQueue(), other: AsyncOperationQueue()) { label, order in
            let answer = HeldCallback<(any Error)?>()
            let operation = AsyncBlockOperation { finish in
                if label == "remote" || label == "runner" {
                    answer.hold { error in
                        order.append(label)
                        finish(error)
                    }
                } else {
                    order.append(label)
                    finish(nil)
                }
            }
            return (operation, { #expect(answer.waitUntilHeld()); answer.call(nil) })
        }

        // Then both start the dependent before the later one
        #expect(foundation == ["runner", "dependent", "later"], "Foundation's own serial queue: \(foundation)")
        #expect(package == ["runner", "dependent", "later"], "AsyncOperationQueue: \(package)")
    }

    // API.md 9: "in the order they were added", and SerialOrderTests / QueueScheduler: "priorities
    // never reorder it". (Foundation's own serial queue would start the later, higher-priority one
    // first, which is why the package keeps the turn.)
    @Test
    func dependentReleasedByAFinish_withLowPriority_goesBeforeLaterHighPriorityOnes() {
        // Given a serial queue running an operation, with a very-low-priority dependent (with a
        // condition) and very-high-priority later ones
        let queue = serialQueue()
        let held = HeldOperations()
        let runnerName = uniqueName("runner")
        let runner = held.make(runnerName)
        let log = Recorder<String>()
        let dependent = conditioned(recording("dependent", log))
        dependent.addDependency(runner)
        dependent.queuePriority = .veryLow
        let later = recording("later", log)
        later.queuePriority = .veryHigh
        let laterStill = exclusive(recording("laterStill", log))
        laterStill.queuePriority = .veryHigh
        laterStill.qualityOfService = .userInteractive
        queue.addOperations([runner, dependent, later, laterStill], waitUntilFinished: false)
        #expect(held.waitUntilStarted(runnerName))

        // When the runner finishes
        held.finish(runnerName)

        // Then they start in add order
        #expect(waitUntilFinished([runner, dependent, later, laterStill]), "\(queue.debugDescription)")
        #expect(log.all == ["dependent", "later", "laterStill"])
    }

    // API.md 9: a serial queue starts "the operations whose dependencies have finished in the
    // order they were added". Until a plain operation kept the turn while it ran, an
    // AsyncOperation right behind it reached Foundation with it and started by priority against
    // it, as on Foundation's own serial queue (a known limitation then).
    @Test
    func asyncOperationWithHighPriority_behindAnEarlierPlainOne_startsInAddOrder() {
        // Given a serial queue running an operation, with a very-low-priority plain operation and
        // a very-high-priority AsyncOperation behind it
        let queue = serialQueue()
        let held = HeldOperations()
        let runnerName = uniqueName("runner")
        let runner = held.make(runnerName)
        queue.addOperation(runner)
        #expect(held.waitUntilStarted(runnerName))
        let log = Recorder<String>()
        let plain = BlockOperation { log.append("plain") }
        plain.queuePriority = .veryLow
        let asyncOne = recording("async", log)
        asyncOne.queuePriority = .veryHigh
        queue.addOperations([plain, asyncOne], waitUntilFinished: false)

        // When the runner finishes
        held.finish(runnerName)

        // Then they start in add order
        #expect(waitUntilFinished([runner, plain, asyncOne]), "\(queue.debugDescription)")
        #expect(log.all == ["plain", "async"])
    }

    // API.md 9, with Foundation's serial queue as the reference: a chain added last link first,
    // with an independent operation added after it, runs the chain through before the independent one.
    @Test
    func chainAddedLastLinkFirst_withConditionsAndCategories_runsThroughBeforeALaterOne_asFoundationsSerialQueueDoes() {
        func scenario(on queue: OperationQueue, make: (String, Recorder<String>) -> Operation) -> [String] {
            // Given a serial queue given a chain, last link first, and an independent operation
            queue.maxConcurrentOperationCount = 1
            let order = Recorder<String>()
            let (a, b, c, later) = (make("a", order), make("b", order), make("c", order), make("later", order))
            b.addDependency(a)
            c.addDependency(b)

            // When they are added
            queue.addOperations([c, b, a, later], waitUntilFinished: false)
            #expect(waitUntilFinished([a, b, c, later]))
            return order.all
        }
        let foundation = scenario(on: OperationQueue()) { label, order in
            BlockOperation { order.append(label) }
        }
        let package = scenario(on: AsyncOperationQueue()) { label, order in
            let operation = recording(label, order)
            switch label {
            case "b": return conditioned(operation)
            case "c": return exclusive(operation)
            default: return operation
            }
        }

        // Then both run the chain through first
        #expect(foundation == ["a", "b", "c", "later"], "Foundation's own serial queue: \(foundation)")
        #expect(package == ["a", "b", "c", "later"], "AsyncOperationQueue: \(package)")
    }

    // MARK: - Groups

    // API.md 9: "a GroupOperation with maxConcurrentOperationCount = 1, start[s] the operations ...
    // in the order they were added". API.md 7: "A GroupOperation finishes only after every child
    // (and every operation a child produced) has finished". `produce(_:)`: "adds it to the queue
    // (or group) this operation runs in".
    @Test
    func serialGroup_operationProducedByAChild_runsAfterTheChildrenAddedBefore_andTheGroupWaitsForIt() {
        // Given a serial group whose first child produces an operation as it executes
        let log = Recorder<String>()
        let produced = AsyncBlockOperation {
            usleep(20_000)
            log.append("produced")
        }
        let producer = ClosureOperation(name: "producer") { operation in
            log.append("producer")
            operation.produce(produced)
            operation.finish()
        }
        let second = recording("second", log)
        let third = conditioned(recording("third", log))
        let group = GroupOperation(operations: [producer, second, third])
        group.maxConcurrentOperationCount = 1
        let producedFinishedFirst = Flag()
        group.addObserver(FinishedObserver { _, _ in
            if produced.isFinished { producedFinishedFirst.raise() }
        })

        // When it runs
        AsyncOperationQueue().addOperation(group)

        // Then the produced one runs after the children added before it, and the group waits for it
        #expect(waitUntilFinished([group]), "\(group.snapshot())")
        #expect(log.all == ["producer", "second", "third", "produced"])
        #expect(producedFinishedFirst.isRaised)
    }

    // API.md 9 for a serial group nested in a serial group; API.md 7: "Groups nest".
    @Test
    func serialGroupInASerialGroup_runsEveryChildInAddOrder() {
        // Given a serial group whose first child is a serial group, with children of every kind in both
        let log = Recorder<String>()
        let innerChildren: [Operation] = [
            conditioned(recording("i1", log)),
            exclusive(recording("i2", log)),
            BlockOperation { log.append("i3") },
        ]
        let inner = GroupOperation(operations: innerChildren)
        inner.maxConcurrentOperationCount = 1
        let o2 = recording("o2", log)
        let o3 = conditioned(recording("o3", log))
        o3.addDependency(innerChildren[0])
        let outer = GroupOperation(operations: [inner, o2, o3])
        outer.maxConcurrentOperationCount = 1

        // When it runs
        AsyncOperationQueue().addOperation(outer)

        // Then every child runs in add order
        #expect(waitUntilFinished([outer]), "\(outer.snapshot())")
        #expect(log.all == ["i1", "i2", "i3", "o2", "o3"])
    }

    // API.md 5 ("an AsyncBlockOperation whose continuation has not been called yet finishes at
    // once") and API.md 9 in a serial group; API.md 7: the group "finishes only after every child
    // ... has finished".
    @Test
    func serialGroup_childCancelledWhileExecuting_letsTheNextChildRun_andTheGroupFinishes() {
        // Given a serial group whose first child never calls its continuation
        let log = Recorder<String>()
        let stuck = AsyncBlockOperation { _ in log.append("stuck") }
        let next = conditioned(recording("next", log))
        let group = GroupOperation(operations: [stuck, next])
        group.maxConcurrentOperationCount = 1
        AsyncOperationQueue().addOperation(group)
        #expect(waitUntil { log.count == 1 })

        // When the child is cancelled
        stuck.cancel()

        // Then the next runs, and the group finishes
        #expect(waitUntilFinished([group]), "\(group.snapshot())")
        #expect(log.all == ["stuck", "next"])
    }

    // API.md 7: "Cancelling the group cancels its children." A serial group whose running child
    // never answers must still finish once cancelled, without running the children behind it.
    @Test
    func serialGroupCancelledWhileAChildRuns_finishes_withoutRunningTheRest() {
        // Given a serial group whose first child never calls its continuation, with three behind it
        let log = Recorder<String>()
        let stuck = AsyncBlockOperation { _ in log.append("stuck") }
        let rest: [Operation] = [conditioned(recording("a", log)), exclusive(recording("b", log)), recording("c", log)]
        let group = GroupOperation(operations: [stuck] + rest)
        group.maxConcurrentOperationCount = 1
        AsyncOperationQueue().addOperation(group)
        #expect(waitUntil { log.count == 1 })

        // When the group is cancelled
        group.cancel()

        // Then it finishes, and nothing else ran
        #expect(waitUntilFinished([group] + rest), "\(group.snapshot())")
        #expect(log.all == ["stuck"])
    }

    // MARK: - Threading

    // AsyncOperation.execute(): "On an AsyncOperationQueue, on the thread Foundation's queue starts
    // the operation on (its underlyingQueue, with OperationQueue.current the queue)." The next
    // operation's conditions now run on the thread that finished the one before (OperationCondition:
    // "that finished what the operation waited for (... on a serial queue the operation before
    // it)"); its execution must still be the queue's.
    @Test
    func nextOperationAfterAFinishFromATestThread_executesOnTheQueuesUnderlyingQueue_withTheQueueCurrent() {
        // Given a serial queue on an underlying queue of its own, running an operation, with one
        // with a condition and a category behind it
        let underlying = MarkedDispatchQueue()
        let queue = serialQueue()
        queue.underlyingQueue = underlying.queue
        let held = HeldOperations()
        let runnerName = uniqueName("runner")
        let runner = held.make(runnerName)
        let seen = Recorder<String>()
        let next = AsyncBlockOperation {
            seen.append(OperationQueue.current === queue ? "current is the queue" : "current is \(String(describing: OperationQueue.current?.name))")
            seen.append(underlying.isCurrent ? "on the underlying queue" : "elsewhere")
        }
        next.addCondition(StubCondition.satisfied())
        next.addCondition(ExclusiveCategory(uniqueName("own")))
        queue.addOperations([runner, next], waitUntilFinished: false)
        #expect(held.waitUntilStarted(runnerName))

        // When a thread of the test's own finishes the running one
        let finished = runOnOwnThread { held.finish(runnerName) }
        #expect(finished.wait(timeout: generousTimeout))

        // Then the next executes on the queue
        #expect(waitUntilFinished([runner, next]), "\(queue.debugDescription)")
        #expect(seen.all == ["current is the queue", "on the underlying queue"])
    }

    // OperationCondition.evaluate: the calling thread "may be ... that finished what the operation
    // waited for (... on a serial queue the operation before it)"; AsyncOperation.execute(): on an
    // AsyncOperationQueue, on the thread Foundation's queue starts it on. So the finish that lets
    // the next operation through must return while that operation executes.
    @Test
    func finishThatLetsTheNextOperationThrough_returnsWhileThatOneExecutes() {
        // Given a serial queue running an operation, with one behind it (with a condition and a
        // category) that blocks as it executes
        let queue = serialQueue()
        let held = HeldOperations()
        let runnerName = uniqueName("runner")
        let runner = held.make(runnerName)
        let release = Signal()
        let executing = Flag()
        let blocking = AsyncBlockOperation {
            executing.raise()
            _ = release.wait(timeout: blockingTimeout)
        }
        blocking.addCondition(StubCondition.satisfied())
        blocking.addCondition(ExclusiveCategory(uniqueName("own")))
        queue.addOperations([runner, blocking], waitUntilFinished: false)
        #expect(held.waitUntilStarted(runnerName))

        // When a thread of the test's own finishes the running one
        let finished = runOnOwnThread { held.finish(runnerName) }

        // Then that finish returns while the next one executes
        #expect(finished.wait(timeout: generousTimeout), "the finish did not return")
        #expect(waitUntil { executing.isRaised })
        release.signal()
        #expect(waitUntilFinished([runner, blocking]))
    }

    // AsyncOperation.execute(): one "that gave its categories back as its queue narrowed and asks
    // for them again once Foundation starts it" executes "on its queue's underlyingQueue if it has
    // one, where OperationQueue.current is not the queue" (never inside another operation's
    // finish). As maxConcurrentOperationCount says, those "already with Foundation when the queue
    // was made serial" give their categories back.
    @Test
    func operationThatAsksForItsCategoryAgainOnceStarted_executesOnItsQueuesUnderlyingQueue_whenAnotherFinishGrantsIt() {
        // Given a queue of width 2 on an underlying queue of its own, both slots taken by plain
        // operations, and an operation in X handed to Foundation behind them
        let underlying = MarkedDispatchQueue()
        let queue = AsyncOperationQueue()
        queue.underlyingQueue = underlying.queue
        let started = Recorder<String>()
        let (releaseFirst, releaseSecond) = takeBothSlots(of: queue, started: started)
        let x = uniqueName("X")
        let seen = Recorder<String>()
        let waiting = AsyncBlockOperation {
            seen.append(OperationQueue.current === queue ? "current is the queue" : "current is \(String(describing: OperationQueue.current?.name))")
            seen.append(underlying.isCurrent ? "on the underlying queue" : "elsewhere")
        }
        waiting.name = "waiting"
        waiting.addCondition(ExclusiveCategory(x))
        queue.addOperation(waiting)
        #expect(waitUntil { waiting.snapshot().state == .ready }, "\(waiting.snapshot())")

        // When the queue is made serial (the operation gives X back), another queue's operation
        // takes X, the plain ones return (Foundation starts the waiting one, which asks for X
        // again), and a thread of the test's own finishes the holder
        queue.maxConcurrentOperationCount = 1
        let held = HeldOperations()
        let holderName = uniqueName("holder")
        let holder = held.make(holderName)
        holder.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(holder)
        #expect(held.waitUntilStarted(holderName), "\(holder.snapshot())")
        releaseFirst.signal()
        releaseSecond.signal()
        #expect(waitUntil { waiting.snapshot().state == .waitingForCategories || waiting.snapshot().state == .executing }, "\(waiting.snapshot())")
        let finished = runOnOwnThread { held.finish(holderName) }
        #expect(finished.wait(timeout: generousTimeout))

        // Then it executes on its queue's underlying queue
        #expect(waitUntilFinished([holder, waiting]), "\(queue.debugDescription)")
        #expect(seen.all.last == "on the underlying queue", "\(seen.all)")
    }

    // Foundation's `completionBlock` runs once the operation has finished, and Foundation's serial
    // queue may then start its next operation: a completion block that waits for an operation it
    // adds to the same serial queue gets it (checked here first, on Foundation's own queue, as the
    // reference). AsyncOperationQueue: operations "behave as Foundation documents them"; the turn
    // now lasts until the operation "has finished and told its dependents".
    @Test
    func completionBlockThatWaitsForAnOperationItAddsToTheSameSerialQueue_seesItRun_asOnFoundationsQueue() {
        func scenario(on queue: OperationQueue, make: @escaping @Sendable (@escaping @Sendable () -> Void) -> Operation) -> (ran: Bool, finished: Bool) {
            // Given a serial queue, and an operation whose completion block adds another one to
            // the same queue and waits (a bounded while) for it to run
            queue.maxConcurrentOperationCount = 1
            let outcome = Recorder<Bool>()
            let first = make {}
            first.completionBlock = {
                let done = Signal()
                queue.addOperation(make { done.signal() })
                outcome.append(done.wait(timeout: 10))
            }

            // When the first runs
            queue.addOperation(first)

            // Then the one its completion block added ran while the block waited (a bounded while)
            let finished = waitUntilFinished([first], timeout: generousTimeout) && waitUntil(timeout: generousTimeout) { outcome.count == 1 }
            return (outcome.all == [true], finished)
        }
        let foundation = scenario(on: OperationQueue()) { body in BlockOperation(block: body) }
        let package = scenario(on: AsyncOperationQueue()) { body in AsyncBlockOperation(body) }
        #expect(foundation.ran && foundation.finished, "Foundation's own serial queue: \(foundation)")
        #expect(package.ran && package.finished, "AsyncOperationQueue: \(package)")
    }

    // OperationCondition.evaluate: "Call completion exactly once, on any thread, now or later"; it
    // may run on "the thread ... that finished ... on a serial queue the operation before it".
    // A condition that adds an operation to its own queue as it evaluates (as conditions that
    // make follow-up work do) must not deadlock that thread, and API.md 9 keeps add order.
    @Test
    func conditionThatAddsAnOperationToItsOwnSerialQueue_onTheFinishingThread_neitherDeadlocksNorReorders() {
        // Given a serial queue running an operation, with one behind it whose condition adds a
        // follow-up to the same queue as it evaluates, and one more
        let queue = serialQueue()
        let held = HeldOperations()
        let runnerName = uniqueName("runner")
        let runner = held.make(runnerName)
        let log = Recorder<String>()
        let followUp = recording("followUp", log)
        let adding = recording("adding", log)
        adding.addCondition(StubCondition(name: "AddsAFollowUp") { _, completion in
            queue.addOperation(followUp)
            queue.addBarrierBlock { log.append("barrier") }
            completion(.satisfied)
        })
        let later = recording("later", log)
        queue.addOperations([runner, adding, later], waitUntilFinished: false)
        #expect(held.waitUntilStarted(runnerName))

        // When a thread of the test's own finishes the running one
        let finished = runOnOwnThread { held.finish(runnerName) }

        // Then the finish returns, and everything runs in add order
        #expect(finished.wait(timeout: generousTimeout), "the finish did not return")
        #expect(waitUntilFinished([runner, adding, later, followUp]), "\(queue.debugDescription)")
        #expect(waitUntil { log.count == 4 })
        #expect(log.all == ["adding", "later", "followUp", "barrier"])
    }

    // MARK: - Started by hand, granted a category later

    // AsyncOperation.execute(): "One granted its categories on another thread (by the finish of the
    // operation that held one) ... executes on a Dispatch thread of its qualityOfService: never
    // inside another operation's finish, which would keep that operation's dependents waiting until
    // this one returns."
    @Test
    func operationStartedByHand_grantedItsCategoryByAFinish_executesOutsideThatFinish() {
        // Given X held by an operation with a dependent, and an operation in X started by hand
        // (blocking as it executes)
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let log = Recorder<String>()
        let holdersDependent = recording("holdersDependent", log)
        holdersDependent.addDependency(holder)
        AsyncOperationQueue().addOperation(holdersDependent)
        let release = Signal()
        let byHand = AsyncBlockOperation {
            log.append("byHand executes")
            _ = release.wait(timeout: blockingTimeout)
        }
        byHand.addCondition(ExclusiveCategory(x))
        byHand.start()
        #expect(byHand.snapshot().state == .waitingForCategories, "\(byHand.snapshot())")

        // When a thread of the test's own finishes the holder
        let finished = runOnOwnThread { held.finish(holderName) }

        // Then that finish returns, and the holder's dependent runs, while the one started by hand executes
        #expect(finished.wait(timeout: generousTimeout), "the holder's finish did not return")
        #expect(waitUntilFinished([holder, holdersDependent]))
        #expect(waitUntil { log.all.contains("byHand executes") })
        release.signal()
        #expect(waitUntilFinished([byHand]))
    }

    // API.md 5: "cancel(with:) before the operation starts: it finishes without executing";
    // API.md 2: "Cancelling ... an operation frees its categories" (here, its place in line).
    @Test
    func operationStartedByHand_cancelledWhileWaitingForItsCategory_finishesWithoutExecuting_andTheNextWaiterGetsIt() {
        // Given X held, an operation in X started by hand, and an operation of a queue waiting for X behind it
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let log = Recorder<String>()
        let byHand = recording("byHand", log)
        byHand.addCondition(ExclusiveCategory(x))
        byHand.start()
        let queued = recording("queued", log)
        queued.addCondition(ExclusiveCategory(x))
        serialQueue().addOperation(queued)
        #expect(waitUntil { queued.snapshot().state == .waitingForCategories })

        // When the one started by hand is cancelled, and the holder then finishes
        byHand.cancel()
        #expect(waitUntilFinished([byHand]), "\(byHand.snapshot())")
        held.finish(holderName)

        // Then it never executed, and the queued one got X
        #expect(waitUntilFinished([holder, queued]), "\(queued.snapshot())")
        #expect(log.all == ["queued"])
    }

    // API.md 5 and 4 ("operationDidStart comes exactly once, before execute(); operationDidFinish
    // exactly once"), API.md 2 ("Cancelling ... an operation frees its categories"): an operation
    // started by hand, cancelled just as another operation's finish grants it its category.
    @Test
    func operationStartedByHand_cancelledAsItIsGrantedItsCategory_finishesOnce_andFreesIt() {
        for round in 0..<30 {
            // Given X held, and an operation in X started by hand, observed
            let (x, held, holderName, holder, _) = startHoldingACategory()
            let events = Recorder<String>()
            let byHand = AsyncBlockOperation { finish in
                events.append("execute")
                DispatchQueue.global().async { finish(nil) }
            }
            byHand.addCondition(ExclusiveCategory(x))
            byHand.addObserver(EventLogObserver(log: events))
            byHand.start()

            // When the holder finishes on one thread while the operation is cancelled on another
            #expect(race(2) { index in
                if index == 0 {
                    spin(turns: round * 300)
                    held.finish(holderName)
                } else {
                    spin(turns: (29 - round) * 300)
                    byHand.cancel()
                }
            })

            // Then it finishes once, its observers in order, and X is free again
            #expect(waitUntilFinished([holder, byHand]), "round \(round): \(byHand.snapshot())")
            #expect(waitUntil { events.all.last == "didFinish" })
            let seen = events.all
            #expect(seen.filter { $0 == "didFinish" }.count == 1, "round \(round): \(seen)")
            #expect(seen.filter { $0 == "didStart" }.count <= 1, "round \(round): \(seen)")
            if let execute = seen.firstIndex(of: "execute") {
                #expect(seen.firstIndex(of: "didStart").map { $0 < execute } == true, "round \(round): \(seen)")
            }
            let after = recording("after", Recorder())
            after.addCondition(ExclusiveCategory(x))
            AsyncOperationQueue().addOperation(after)
            #expect(waitUntilFinished([after]), "round \(round): X was not freed")
        }
    }

    // API.md 6: "TimeoutObserver(timeout:) cancels the operation with a timeout error if it has not
    // finished that long after it started." README: an operation started by hand that waited for
    // a category "executes on a Dispatch thread once granted it".
    @Test
    func operationStartedByHand_grantedItsCategoryLate_withATimeout_timesOutAndFreesTheCategory() {
        // Given X held, and an operation in X started by hand that never calls its continuation,
        // with a timeout
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let executed = Counter()
        let byHand = AsyncBlockOperation { _ in executed.increment() }
        byHand.addCondition(ExclusiveCategory(x))
        byHand.addObserver(TimeoutObserver(timeout: 0.2))
        byHand.start()

        // When the holder finishes
        held.finish(holderName)

        // Then it executes once, times out, and X is free again
        #expect(waitUntilFinished([holder, byHand]), "\(byHand.snapshot())")
        #expect(executed.current == 1)
        #expect(hasTimedOut(byHand.errors), "\(byHand.errors)")
        let after = recording("after", Recorder())
        after.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(after)
        #expect(waitUntilFinished([after]), "X was not freed")
    }

    // README: "started by a plain OperationQueue (or by hand), an AsyncOperation ... that waited
    // for a category executes on a Dispatch thread once granted it." Foundation's serial queue
    // then goes on to its next operation once it finished.
    @Test
    func plainSerialOperationQueue_whoseOperationWaitsForACategory_goesOnOnceItIsGranted() {
        // Given X held, and a plain serial OperationQueue given an operation in X and one more
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let log = Recorder<String>()
        let waiting = recording("waiting", log)
        waiting.addCondition(ExclusiveCategory(x))
        let next = BlockOperation { log.append("next") }
        queue.addOperations([waiting, next], waitUntilFinished: false)
        #expect(waitUntil { waiting.snapshot().state == .waitingForCategories }, "\(waiting.snapshot())")

        // When the holder finishes
        held.finish(holderName)

        // Then both run, in order
        #expect(waitUntilFinished([holder, waiting, next]), "\(waiting.snapshot())")
        #expect(log.all == ["waiting", "next"])
    }

    // MARK: - Long lines (in a child process: a stack overflow must end it alone)

    // API.md 1: "If any condition fails, execute() is never called; the operation finishes". On a
    // serial queue each such finish now lets the next one through on the same thread: a long line
    // of them must not nest one finish in the other.
    @Test
    func longLineOfOperationsWhoseConditionsFail_onASerialQueue_finishesWithoutOverflowingTheStack() {
        let outcome = runProbeScenarioInChildProcess(testName: "serialQueue_twentyThousandFailingConditions", scenario: "serialLineOfFailingConditions")
        #expect(outcome?.passed == true, "\(outcome?.description ?? "did not end within 300 s")")
    }

    // The same for a chain, each operation depending on the one before.
    @Test
    func longChainOfOperationsWhoseConditionsFail_onASerialQueue_finishesWithoutOverflowingTheStack() {
        let outcome = runProbeScenarioInChildProcess(testName: "serialQueue_tenThousandChainedFailingConditions", scenario: "serialChainOfFailingConditions")
        #expect(outcome?.passed == true, "\(outcome?.description ?? "did not end within 300 s")")
    }

    // API.md 1 and API.md 9, with NoFailedDependencies ("only if its dependencies succeeded"): a
    // failure that many dependents on one serial queue hear of fails them one after another.
    @Test
    func manyDependentsOfAFailedOperation_onASerialQueue_allFailWithoutOverflowingTheStack() {
        let outcome = runProbeScenarioInChildProcess(testName: "serialQueue_fiveThousandDependentsOfAFailure", scenario: "serialFanOutOfAFailure")
        #expect(outcome?.passed == true, "\(outcome?.description ?? "did not end within 300 s")")
    }
}

/// Scenarios that may crash the process, each run in a child process by a probe above; skipped in
/// every ordinary run.
@Suite("Serial order probe scenarios run in a child process, round 7")
struct SerialOrderProbeScenariosInAChildProcess {
    @Test(.enabled(if: isProbeScenario("serialLineOfFailingConditions")))
    func serialQueue_twentyThousandFailingConditions() {
        // A serial queue busy with one operation, with a long line of operations whose
        // conditions fail behind it
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let held = HeldOperations()
        queue.addOperation(held.make("runner"))
        #expect(held.waitUntilStarted("runner"))
        let ran = Counter()
        let count = Int(ProcessInfo.processInfo.environment["OPERATIONS_PROBE_COUNT"] ?? "") ?? 20_000
        let operations = (0..<count).map { _ -> AsyncBlockOperation in
            let operation = AsyncBlockOperation { ran.increment() }
            operation.addCondition(StubCondition.failing(StubError("no")))
            return operation
        }
        queue.addOperations(operations, waitUntilFinished: false)
        // The running one finishes: each failure lets the next one through
        held.finish("runner")
        #expect(waitUntilFinished(operations, timeout: 100))
        #expect(ran.current == 0)
    }

    @Test(.enabled(if: isProbeScenario("serialChainOfFailingConditions")))
    func serialQueue_tenThousandChainedFailingConditions() {
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let ran = Counter()
        let operations = (0..<10_000).map { _ -> AsyncBlockOperation in
            let operation = AsyncBlockOperation { ran.increment() }
            operation.addCondition(StubCondition.failing(StubError("no")))
            return operation
        }
        for (previous, next) in zip(operations, operations.dropFirst()) {
            next.addDependency(previous)
        }
        queue.addOperations(operations, waitUntilFinished: false)
        #expect(waitUntilFinished(operations, timeout: 100))
        #expect(ran.current == 0)
    }

    @Test(.enabled(if: isProbeScenario("serialFanOutOfAFailure")))
    func serialQueue_fiveThousandDependentsOfAFailure() {
        let failing = AsyncBlockOperation { throw StubError("failed") }
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let ran = Counter()
        let dependents = (0..<5_000).map { _ -> AsyncBlockOperation in
            let operation = AsyncBlockOperation { ran.increment() }
            operation.addCondition(NoFailedDependencies())
            operation.addDependency(failing)
            return operation
        }
        queue.addOperations(dependents, waitUntilFinished: false)
        AsyncOperationQueue().addOperation(failing)
        #expect(waitUntilFinished(dependents, timeout: 100))
        #expect(ran.current == 0)
    }
}
