import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// Adversarial probes, second round, of observers and timeouts, the logging hook
// (`OperationLogger`, `PrintLogger`, the events and their order), snapshots (why an operation
// waits), stall reports and a group's progress. Sources: /work/shared/API.md, README.md, the DocC
// articles ObserversAndTimeouts.md and DebuggingAQueue.md, and the `///` comments of the public
// symbols. Each test quotes the sentence it checks; none repeats what ObservationProbeTests or
// the unit tests check. Every wait is bounded; no test asserts on wall-clock speed; nothing is
// left running.

@Suite("Observation probes, round 2")
struct ObservationProbeTests2 {
    // MARK: - Observers

    // AsyncOperation.finish(with:): "Observers hear `operationDidFinish`, then the operation
    // becomes `isFinished`". ObserversAndTimeouts.md: "`operationDidFinish(_:errors:)` exactly
    // once, last, with ``AsyncOperation/errors`` already final." OperationSnapshot.State.finishing:
    // "Its errors are final; its observers are hearing that it finished."
    @Test(arguments: ["finished with an error", "failed condition", "cancelled while waiting", "timed out"])
    func didFinish_comesBeforeIsFinished_withTheErrorsItKeeps_whileTheSnapshotSaysFinishing(path: String) {
        // Given an operation whose observer notes, as it hears the finish, what the operation
        // says of itself
        let held = HeldOperations()
        let dependencyName = uniqueName("dependency")
        let error = StubError(path)
        let operation: AsyncOperation
        switch path {
        case "finished with an error":
            operation = AsyncBlockOperation { throw error }
        case "failed condition":
            operation = AsyncBlockOperation {}
            operation.addCondition(StubCondition.failing(error))
        case "cancelled while waiting":
            operation = AsyncBlockOperation {}
            operation.addDependency(held.make(dependencyName))
        default:
            operation = AsyncBlockOperation { _ in } // never calls its continuation
            operation.addObserver(TimeoutObserver(timeout: 0.1))
        }
        let seen = Recorder<(isFinished: Bool, state: OperationSnapshot.State, heard: [String], read: [String])>()
        operation.addObserver(FinishedObserver { operation, errors in
            seen.append((operation.isFinished, operation.snapshot().state, errors.map { "\($0)" }, operation.errors.map { "\($0)" }))
        })
        let queue = AsyncOperationQueue()

        // When it finishes that way
        queue.addOperation(operation)
        if path == "cancelled while waiting" {
            let dependency = operation.dependencies[0]
            queue.addOperation(dependency)
            #expect(held.waitUntilStarted(dependencyName))
            operation.cancel(with: error)
        }

        // Then its observer heard the finish once, before it became finished, with the errors it
        // keeps, while its snapshot said it was finishing
        #expect(waitUntilFinished([operation]))
        held.finish(dependencyName)
        #expect(seen.count == 1)
        let expectedErrors = path == "timed out" ? ["\(AsyncOperationError.timedOut(after: 0.1))"] : ["\(error)"]
        if let heard = seen.all.first {
            #expect(!heard.isFinished, "isFinished was already true as observers heard the finish")
            #expect(heard.state == .finishing, "\(heard.state)")
            #expect(heard.heard == expectedErrors)
            #expect(heard.read == expectedErrors)
        }
        #expect(operation.errors.map { "\($0)" } == expectedErrors)
    }

    // ObserversAndTimeouts.md: "Add them with ``AsyncOperation/addObserver(_:)``; an observer
    // added once the operation's finish has begun is reported (`.configuredTooLate`) and
    // ignored" -- one added before that is not; "`operationDidCancel(_:)` at most once";
    // "`operationDidFinish(_:errors:)` exactly once, last". AsyncOperation.cancel(with:): "While
    // it executes, cancellation is cooperative".
    @Test
    func observerAddedWhileTheOperationExecutes_hearsItsCancelAndItsFinish_once() {
        // Given a subclass executing, which finishes only when told
        let name = uniqueName("executing")
        let started = Signal()
        let operation = ClosureOperation(name: name) { _ in started.signal() }
        AsyncOperationQueue().addOperation(operation)
        #expect(started.wait(timeout: generousTimeout))

        // When an observer is added now, and the operation is cancelled with an error, then finishes
        let events = EventLogObserver()
        operation.addObserver(events)
        let error = StubError("cancelled while executing")
        operation.cancel(with: error)
        #expect(waitUntil { events.log.all == ["didCancel"] })
        operation.finish()

        // Then the observer heard the cancel and the finish, once each, with the cancel's error,
        // and nothing was reported
        #expect(waitUntilFinished([operation]))
        #expect(events.log.all == ["didCancel", "didFinish"])
        #expect(events.finishedErrors.all.map(\.asStubErrors) == [[error]])
        #expect(DiagnosticsLog.shared.kinds(about: name).isEmpty)
    }

    // MARK: - Timeouts

    // ObserversAndTimeouts.md: "A subclass decides for itself how to react to cancellation (check
    // `isCancelled`), so a timeout frees its categories once it finishes." API.md 6:
    // `TimeoutObserver(timeout:)` "cancels the operation with a timeout error if it has not
    // finished that long after it started".
    @Test
    func timeoutOfASubclassIgnoringCancellation_freesItsCategoryOnlyOnceItFinishes() {
        // Given a subclass in category X that ignores cancellation, with a short timeout, and an
        // operation of X waiting on another queue
        let x = uniqueName("X")
        let started = Signal()
        let stubborn = ClosureOperation(name: uniqueName("stubborn")) { _ in started.signal() }
        stubborn.addCondition(ExclusiveCategory(x))
        stubborn.addObserver(TimeoutObserver(timeout: 0.2))
        AsyncOperationQueue().addOperation(stubborn)
        #expect(started.wait(timeout: generousTimeout))
        let nextRan = Counter()
        let next = AsyncBlockOperation { nextRan.increment() }
        next.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(next)

        // When the timeout fires
        #expect(waitUntil { stubborn.isCancelled })
        Thread.sleep(forTimeInterval: 0.2) // a chance for a wrong release of X

        // Then X stays held until the subclass finishes, and only then does the other run
        #expect(!stubborn.isFinished)
        #expect(nextRan.current == 0, "X was freed while the timed-out subclass still executed")
        #expect(next.snapshot().waitsFor.contains(.category(x, heldBy: stubborn.name, waitersAhead: 0)), "\(next.snapshot())")
        stubborn.finish()
        #expect(waitUntilFinished([stubborn, next]))
        #expect(nextRan.current == 1)
        #expect(stubborn.errors.asOperationErrors == [.timedOut(after: 0.2)])
    }

    // API.md 6: "An `AsyncBlockOperation` that never calls its continuation therefore cannot
    // block its queue when it has a timeout." API.md 7: "Cancelling the group cancels its
    // children"; "its `errors` hold every child's errors and its own." GroupOperation: "it still
    // finishes only once they have."
    @Test
    func timeoutOfAGroupWhoseChildNeverAnswers_cancelsTheChild_andTheGroupFinishesWithTheTimeoutOnce() {
        // Given a group, with a short timeout, whose child never calls its continuation
        let child = AsyncBlockOperation { _ in }
        child.name = uniqueName("silent child")
        let group = GroupOperation(operations: [child])
        group.name = uniqueName("timed group")
        group.addObserver(TimeoutObserver(timeout: 0.2))
        let finishes = Counter()
        group.addObserver(FinishedObserver { _, _ in finishes.increment() })

        // When it runs
        AsyncOperationQueue().addOperation(group)

        // Then the timeout cancels the group and its child, and the group finishes once, after the
        // child, with the timeout as its only error
        #expect(waitUntilFinished([group, child]))
        #expect(child.isCancelled && group.isCancelled)
        #expect(group.errors.asOperationErrors == [.timedOut(after: 0.2)], "\(group.errors)")
        #expect(finishes.current == 1)
    }

    // MARK: - The logging hook

    // PrintLogger: "Each line is the event's level in brackets, its queue's name (when the queue
    // was given one) and the event's `description`", e.g. "// [warning] ledger: sync: finished
    // with errors: the operation did not finish within 30 s of starting". OperationLogLevel:
    // "`info`: Started, and finished without errors"; "`notice`: Cancelled"; "`warning`:
    // Finished with errors."
    @Test
    func printLogger_writesTheDocumentedLines_forAnOperationStoppedByItsTimeout() {
        // Given a named queue logging from .info up through a PrintLogger that writes to the test
        let lines = Recorder<String>()
        let queue = AsyncOperationQueue()
        let queueName = uniqueName("ledger")
        queue.name = queueName
        queue.logger = PrintLogger(minimumLevel: .info) { lines.append($0) }
        let name = uniqueName("sync")
        let operation = AsyncBlockOperation { _ in } // never answers
        operation.name = name
        operation.addObserver(TimeoutObserver(timeout: 0.2))

        // When an operation that never answers is stopped by its timeout
        queue.addOperation(operation)
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { lines.count >= 3 })

        // Then the lines are exactly the documented ones, in order
        #expect(lines.all == [
            "[info] \(queueName): \(name): started",
            "[notice] \(queueName): \(name): cancelled",
            "[warning] \(queueName): \(name): finished with errors: the operation did not finish within 0.2 s of starting",
        ])
    }

    // AsyncOperationQueue.logger: "Hears the lifecycle of every operation added from now on".
    // OperationLogger: "Hears the lifecycle of every operation on a queue that has it as its
    // `logger` ... Each event comes once."
    @Test
    func loggerReplacedWhileAnOperationRuns_theNewOneHearsOnlyWhatIsAddedAfter_theOldOneHearsItsOperationToTheEnd() {
        // Given a queue logging to A, running an operation added under A
        let (a, b) = (RecordingLogger(), RecordingLogger())
        let queue = AsyncOperationQueue()
        queue.logger = a
        let held = HeldOperations()
        let firstName = uniqueName("added-under-a")
        let first = held.make(firstName)
        queue.addOperation(first)
        #expect(held.waitUntilStarted(firstName))

        // When the queue's logger becomes B, another operation is added, and both finish
        queue.logger = b
        let secondName = uniqueName("added-under-b")
        let second = AsyncBlockOperation {}
        second.name = secondName
        queue.addOperation(second)
        held.finish(firstName)
        #expect(waitUntilFinished([first, second]))
        #expect(waitUntil { b.kinds(of: secondName).last == .finished(errors: []) })
        #expect(waitUntil { a.kinds(of: firstName).last == .finished(errors: []) }, "\(a.kinds(of: firstName))")

        // Then B heard the second one's whole life and nothing of the first; A nothing of the second
        #expect(b.kinds(of: firstName).isEmpty, "\(b.kinds(of: firstName))")
        #expect(b.kinds(of: secondName).first == .added)
        #expect(a.kinds(of: secondName).isEmpty, "\(a.kinds(of: secondName))")
        #expect(a.kinds(of: firstName) == [.added, .started, .finished(errors: [])])
    }

    // OperationLogEvent.Kind.conditionsAnswered: "Every condition answered; `failures` of them
    // failed." API.md 1: "If any condition fails, `execute()` is never called; the operation
    // finishes with one error per failed condition". OperationLogEvent.errors: "for `.finished`,
    // the operation's final errors".
    @Test
    func loggerHearsHowManyConditionsFailed_andAFinishWithOneErrorPerFailure_withoutAStart() {
        // Given a logging queue and an operation with two failing conditions and a passing one
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let name = uniqueName("twice-refused")
        let (first, second) = (StubError("first refusal"), StubError("second refusal"))
        let executed = Counter()
        let operation = AsyncBlockOperation { executed.increment() }
        operation.name = name
        operation.addCondition(StubCondition.failing(first, name: "First"))
        operation.addCondition(StubCondition.satisfied(name: "Passing"))
        operation.addCondition(StubCondition.failing(second, name: "Second"))

        // When it is added
        queue.addOperation(operation)
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { logger.kinds(of: name).last.map { if case .finished = $0 { true } else { false } } == true })

        // Then the logger heard two failures, then the finish with both errors, and no start
        let kinds = logger.kinds(of: name)
        #expect(kinds.contains(.conditionsAnswered(failures: 2)), "\(kinds)")
        #expect(!kinds.contains(.started), "\(kinds)")
        #expect(executed.current == 0)
        let finished = logger.events(of: name).last
        #expect(Set(finished?.errors.compactMap { ($0 as? StubError)?.label } ?? []) == [first.label, second.label], "\(String(describing: finished?.errors))")
        if case let .finished(described)? = finished?.kind {
            #expect(Set(described) == ["\(first)", "\(second)"], "\(described)")
        }
    }

    // MARK: - Why an operation waits

    // API.md, Seeing inside: `debugDescription` says "each category it waits for with the name of
    // the operation holding it"; DebuggingAQueue.md: "its own place in line".
    // OperationSnapshot.Reason.category: "how many operations stand ahead of this one in the
    // category's line". API.md 2: "Cancelling or failing an operation frees its categories."
    @Test
    func secondInACategorysLine_movesUpToFirst_whenTheWaiterAheadOfItIsCancelled() {
        // Given X held on one queue, and two operations waiting for it on two other queues
        let (x, held, holderName, holder, queue) = startHoldingACategory()
        let ahead = AsyncBlockOperation {}
        ahead.name = uniqueName("ahead")
        ahead.addCondition(ExclusiveCategory(x))
        let behind = AsyncBlockOperation {}
        behind.name = uniqueName("behind")
        behind.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(ahead)
        #expect(waitUntil { ahead.snapshot().waitsFor == [.category(x, heldBy: holderName, waitersAhead: 0)] }, "\(ahead.snapshot())")
        AsyncOperationQueue().addOperation(behind)
        #expect(waitUntil { behind.snapshot().waitsFor == [.category(x, heldBy: holderName, waitersAhead: 1)] }, "\(behind.snapshot())")
        #expect(behind.debugDescription.hasSuffix("(held by '\(holderName)'; 2nd in line)"), "\(behind.debugDescription)")

        // When the one ahead is cancelled
        ahead.cancel()
        #expect(waitUntilFinished([ahead]))

        // Then the other says it is first in line, and runs once X is free
        #expect(behind.snapshot().waitsFor == [.category(x, heldBy: holderName, waitersAhead: 0)], "\(behind.snapshot())")
        #expect(behind.debugDescription.hasSuffix("(held by '\(holderName)'; 1st in line)"), "\(behind.debugDescription)")
        held.finish(holderName)
        #expect(waitUntilFinished([holder, behind]))
        #expect(behind.errors.isEmpty)
        withExtendedLifetime(queue) {}
    }

    // AsyncOperationQueue.snapshot(): "every unfinished operation on it (those still held in its
    // scheduler included, and the operation behind a barrier block, named `barrier`), in add
    // order". allOperations: "As Foundation's lists, it leaves out the operation behind
    // `addBarrierBlock(_:)`." QueueSnapshot: "the queue's `debugDescription` is its
    // `description`".
    @Test
    func queueSnapshot_listsTheBarrierInAddOrderAsBarrier_whileAllOperationsLeavesItOut() {
        // Given a suspended queue with an operation, a barrier block and another operation
        let queue = AsyncOperationQueue()
        queue.name = uniqueName("with-barrier")
        queue.isSuspended = true
        let (first, last) = (AsyncBlockOperation {}, AsyncBlockOperation {})
        first.name = uniqueName("before-barrier")
        last.name = uniqueName("after-barrier")
        let barrierRan = Counter()
        queue.addOperation(first)
        queue.addBarrierBlock { barrierRan.increment() }
        queue.addOperation(last)

        // When the queue is looked at
        let snapshot = queue.snapshot()

        // Then the snapshot lists the barrier between the two, named `barrier`; allOperations
        // leaves it out
        #expect(snapshot.operations.map(\.name) == [first.name!, "barrier", last.name!])
        #expect(queue.allOperations.map(\.name) == [first.name, last.name])
        #expect(queue.debugDescription == snapshot.description)
        #expect(queue.debugDescription.contains("\n  barrier: "), "\(queue.debugDescription)")
        queue.isSuspended = false
        #expect(waitUntilFinished([first, last]))
        #expect(waitUntil { barrierRan.current == 1 })
    }

    // MARK: - Stall reports

    // DebuggingAQueue.md: `stallReportThreshold` "reports each operation that has waited, not
    // executed, longer than the threshold, once, as a `.stalled` diagnostic ... with the
    // explanation above". AsyncOperationQueue.snapshot(): "every unfinished operation on it", so
    // plain ones too. OperationSnapshot.State.ready: "Cleared to run: handed to Foundation's queue,
    // which starts it when it has a slot" -- waiting, not executing.
    @Test
    func stallWatch_reportsWhatWaitsBehindAnExecutingOperation_plainOnesIncluded_butNeverTheExecutingOne() {
        // Given a watched serial queue running an operation that runs until told, then an
        // operation and a plain operation waiting behind it
        let queue = AsyncOperationQueue()
        queue.name = uniqueName("watched-serial")
        queue.maxConcurrentOperationCount = 1
        let held = HeldOperations()
        let runningName = uniqueName("long-runner")
        let waiterName = uniqueName("waiter")
        let waiter = AsyncBlockOperation {}
        waiter.name = waiterName
        let plainName = uniqueName("plain-waiter")
        let plain = BlockOperation {}
        plain.name = plainName
        queue.addOperation(held.make(runningName))
        #expect(held.waitUntilStarted(runningName))
        queue.addOperations([waiter, plain], waitUntilFinished: false)

        // When the queue is watched with a short threshold, for a while
        queue.stallReportThreshold = 0.1
        let waiterKinds = DiagnosticsLog.shared.kinds(about: waiterName, onceThereAre: 1)
        let plainKinds = DiagnosticsLog.shared.kinds(about: plainName, onceThereAre: 1)
        Thread.sleep(forTimeInterval: 0.5) // many more looks

        // Then each waiting one is reported once, with its explanation; the executing one never
        #expect(waiterKinds == [.stalled])
        #expect(plainKinds == [.stalled])
        #expect(DiagnosticsLog.shared.kinds(about: waiterName) == [.stalled])
        #expect(DiagnosticsLog.shared.kinds(about: plainName) == [.stalled])
        #expect(DiagnosticsLog.shared.kinds(about: runningName).isEmpty, "an executing operation was reported as stalled")
        for name in [waiterName, plainName] {
            let message = DiagnosticsLog.shared.diagnostics(about: name).first?.message ?? ""
            #expect(message.hasPrefix("has waited ") && message.contains("without executing: \(name): "), "\(message)")
        }
        queue.stallReportThreshold = nil
        held.finish(runningName)
        #expect(waitUntilFinished([waiter, plain]))
    }

    // MARK: - Progress

    // API.md, Seeing inside: "`totalUnitCount` is the number of children admitted,
    // `completedUnitCount` the number finished". GroupOperation: "`fractionCompleted` is 1 once the
    // group has finished". API.md 7: "Children may be added while the group runs".
    @Test
    func groupProgress_neverCountsMoreFinishedThanAdmitted_andNeitherCountGoesBack_whileChildrenAreAddedAndFinish() {
        // Given a running group kept open by a child that runs until told, and a thread that keeps
        // reading its progress
        let held = HeldOperations()
        let keeperName = uniqueName("keeper")
        let group = GroupOperation(operations: [held.make(keeperName)])
        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted(keeperName))
        let samples = Recorder<(completed: Int64, total: Int64)>()
        let stop = Flag()
        let sampler = runOnOwnThread {
            while !stop.isRaised {
                let completed = group.progress.completedUnitCount // read first: both only grow
                samples.append((completed, group.progress.totalUnitCount))
                usleep(200)
            }
        }
        #expect(waitUntil { !samples.all.isEmpty }) // the sampler reads while children come and go

        // When children are added one at a time and in batches while earlier ones finish
        var children: [Operation] = []
        for round in 0..<20 {
            let one = AsyncBlockOperation {}
            let batch = (0..<3).map { _ in AsyncBlockOperation {} }
            children += [one] + batch
            group.addChild(one)
            group.addChildren(round.isMultiple(of: 2) ? batch : batch.reversed())
        }
        #expect(waitUntilFinished(children))
        held.finish(keeperName)
        #expect(waitUntilFinished([group]))
        stop.raise()
        #expect(sampler.wait(timeout: generousTimeout))

        // Then no reading had more finished than admitted, and neither count ever went back
        let readings = samples.all
        #expect(!readings.isEmpty)
        #expect(readings.allSatisfy { $0.completed <= $0.total }, "\(readings.first { $0.completed > $0.total }.map { "\($0)" } ?? "")")
        #expect(zip(readings, readings.dropFirst()).allSatisfy { $0.completed <= $1.completed && $0.total <= $1.total })
        #expect(group.progress.totalUnitCount == 81)
        #expect(group.progress.completedUnitCount == 81)
        #expect(group.progress.fractionCompleted == 1)
    }
}
