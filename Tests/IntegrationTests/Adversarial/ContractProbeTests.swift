import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// Adversarial probes of the documented contract (/work/shared/API.md, README.md, the DocC
// articles, and Foundation's documentation of `Operation` and `OperationQueue` where the queue
// claims parity): edge cases and races a demanding user meets, each not covered elsewhere. Every
// test names the sentence it checks. Every wait is bounded; none asserts on wall-clock speed.

@Suite("Contract probes")
struct ContractProbeTests {
    // MARK: - Foundation parity

    /// What one completion block saw when it ran.
    private struct CompletionCall: Sendable {
        let label: String
        let sawFinished: Bool
        let errorCount: Int
    }

    // Foundation, `Operation.completionBlock`: "The completion block you provide is executed when
    // the value in the isFinished property changes to true". API.md: `errors` is "final once
    // isFinished is true".
    @Test
    func completionBlock_runsOnceAfterTheFinish_whetherTheOperationRanWasCancelledOrFailedItsCondition() {
        // Given an operation that runs, one cancelled while its condition has not answered, and
        // one whose condition fails, each with a completion block
        let queue = AsyncOperationQueue()
        let calls = Recorder<CompletionCall>()
        let ran = AsyncBlockOperation {}
        let answer = HeldCallback<ConditionResult>()
        let cancelled = AsyncBlockOperation {}
        cancelled.addCondition(StubCondition(name: "Held") { _, completion in answer.hold(completion) })
        let failed = AsyncBlockOperation {}
        failed.addCondition(StubCondition.failing(StubError("no")))
        for (label, operation) in [("ran", ran), ("cancelled", cancelled), ("failed", failed)] {
            operation.completionBlock = { [weak operation] in
                calls.append(CompletionCall(
                    label: label,
                    sawFinished: operation?.isFinished ?? false,
                    errorCount: operation?.errors.count ?? -1
                ))
            }
        }

        // When they are added, and the held one is cancelled
        queue.addOperations([ran, cancelled, failed], waitUntilFinished: false)
        #expect(answer.waitUntilHeld())
        cancelled.cancel()
        #expect(waitUntilFinished([ran, cancelled, failed]))
        #expect(waitUntil { calls.count >= 3 })
        answer.call(.satisfied) // a late answer changes nothing
        Thread.sleep(forTimeInterval: 0.05) // a second call of any block would come now

        // Then each block ran exactly once, after its operation was finished, its errors final
        let byLabel = Dictionary(grouping: calls.all, by: { $0.label })
        #expect(byLabel["ran"]?.count == 1)
        #expect(byLabel["cancelled"]?.count == 1)
        #expect(byLabel["failed"]?.count == 1)
        #expect(calls.all.allSatisfy { $0.sawFinished })
        #expect(byLabel["ran"]?.first?.errorCount == 0)
        #expect(byLabel["cancelled"]?.first?.errorCount == 0)
        #expect(byLabel["failed"]?.first?.errorCount == 1)
    }

    // AsyncOperationQueue's documentation: `waitUntilAllOperationsAreFinished()` "behave[s] as
    // Foundation documents": "Blocks the current thread until all of the receiver's queued and
    // executing operations finish executing", counting operations held in the scheduler.
    @Test(arguments: [false, true])
    func waitUntilAllOperationsAreFinished_waitsForAnOperationAddedByARunningOne(producerIsPlain: Bool) {
        // Given a queue whose one operation, as it runs, adds another that a condition holds back
        let queue = AsyncOperationQueue()
        let answer = HeldCallback<ConditionResult>()
        let added = AsyncBlockOperation {}
        added.addCondition(StubCondition(name: "AnswersLater") { _, completion in answer.hold(completion) })
        let producer: Operation
        if producerIsPlain {
            producer = BlockOperation { queue.addOperation(added) }
        } else {
            producer = AsyncBlockOperation { queue.addOperation(added) }
        }
        queue.addOperation(producer)

        // When a thread waits for the queue, and the added operation's condition answers only
        // once the producer has finished
        let addedWasFinished = Recorder<Bool>()
        let waitEnded = runOnOwnThread {
            queue.waitUntilAllOperationsAreFinished()
            addedWasFinished.append(added.isFinished)
        }
        #expect(answer.waitUntilHeld())
        #expect(waitUntilFinished([producer]))
        Thread.sleep(forTimeInterval: 0.1) // a chance for a wrong queue to end the wait now
        answer.call(.satisfied)

        // Then the wait ended only once the added operation had finished
        #expect(waitEnded.wait(timeout: generousTimeout))
        #expect(addedWasFinished.all == [true])
    }

    // AsyncOperationQueue.cancelAllOperations(): "Cancels every operation on the queue, including
    // those still waiting. Waiting operations finish at once, without executing."
    // AsyncOperation.isReady: false until "its conditions passed". `allOperations`: "every
    // unfinished operation, those held in the scheduler included".
    @Test
    func cancelAllOperations_endsTheWaitForAnOperationWhoseConditionNeverAnswers() {
        // Given an operation whose condition never answers
        let queue = AsyncOperationQueue()
        let answer = HeldCallback<ConditionResult>()
        let executed = Counter()
        let stuck = AsyncBlockOperation { _ = executed.increment() }
        stuck.addCondition(StubCondition(name: "Silent") { _, completion in answer.hold(completion) })
        queue.addOperation(stuck)
        #expect(answer.waitUntilHeld())
        #expect(!stuck.isReady && !stuck.isExecuting && !stuck.isFinished)
        #expect(queue.allOperationCount == 1)
        #expect(queue.allOperations.first === stuck)

        // When every operation is cancelled and a thread waits for the queue
        queue.cancelAllOperations()
        let waitEnded = runOnOwnThread { queue.waitUntilAllOperationsAreFinished() }

        // Then the wait ends, the operation finished cancelled without executing, and a late
        // answer changes nothing
        #expect(waitEnded.wait(timeout: generousTimeout))
        #expect(stuck.isFinished && stuck.isCancelled)
        #expect(queue.allOperationCount == 0)
        answer.call(.satisfied)
        Thread.sleep(forTimeInterval: 0.05)
        #expect(executed.current == 0)
    }

    // Foundation, `Operation.removeDependency(_:)`: "Removes the receiver's dependence on the
    // specified operation." AsyncOperation.removeDependency: "Stops waiting for operation."
    @Test
    func removeDependency_whileTheOperationWaitsOnAQueue_letsItRunWithoutThatDependency() {
        // Given an operation waiting on a queue for a dependency that keeps running
        let held = HeldOperations()
        let slowName = uniqueName("slow")
        let slow = held.make(slowName)
        let executed = Counter()
        let operation = AsyncBlockOperation { _ = executed.increment() }
        operation.addDependency(slow)
        AsyncOperationQueue().addOperations([slow, operation], waitUntilFinished: false)
        #expect(held.waitUntilStarted(slowName))

        // When the dependency is removed
        operation.removeDependency(slow)

        // Then the operation runs while the former dependency still runs
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 1 && operation.errors.isEmpty)
        #expect(!slow.isFinished)
        held.finish(slowName)
        #expect(waitUntilFinished([slow]))
    }

    // AsyncOperationQueue.maxConcurrentOperationCount: behaves "as Foundation documents"; a queue
    // made wider lets operations waiting for their turn (or a slot) run together.
    @Test
    func raisingMaxConcurrentOperationCount_letsOperationsWaitingForTheirTurnRunTogether() {
        // Given a serial queue of three operations, each with a condition answering from another
        // thread and a category of its own, the first of which runs
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let held = HeldOperations()
        let prefix = uniqueName("widened")
        let keys = (0..<3).map { "\(prefix)-\($0)" }
        let operations = keys.map { key -> AsyncBlockOperation in
            let operation = held.make(key)
            operation.addCondition(ExclusiveCategory(uniqueName("own")))
            operation.addCondition(StubCondition(name: "AnswersFromAnotherThread") { _, completion in
                DispatchQueue.global().async { completion(.satisfied) }
            })
            return operation
        }
        queue.addOperations(operations, waitUntilFinished: false)
        #expect(held.waitUntilStarted(keys[0]))
        Thread.sleep(forTimeInterval: 0.05)
        #expect(held.startCount(keys[1]) == 0 && held.startCount(keys[2]) == 0)

        // When the queue is widened while the first still runs
        queue.maxConcurrentOperationCount = 3

        // Then the other two start beside it
        #expect(held.waitUntilStarted(keys[1]))
        #expect(held.waitUntilStarted(keys[2]))
        #expect(!operations[0].isFinished)
        keys.forEach { held.finish($0) }
        #expect(waitUntilFinished(operations))
    }

    // Foundation, `addBarrierBlock(_:)`: "Invokes a block when the queue finishes all enqueued
    // operations, and prevents subsequent operations from starting until the block has
    // completed." API.md 9 and 10: a serial queue starts in add order, also across a suspension;
    // a suspended queue evaluates no condition and starts nothing.
    @Test
    func barrierOnASuspendedSerialQueue_runsNothingUntilResumed_thenKeepsItsPlace() {
        // Given a suspended serial queue: an operation with a condition answering later, a plain
        // one, a barrier, then an operation in a category and one without conditions
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.isSuspended = true
        let events = Recorder<String>()
        let answer = HeldCallback<ConditionResult>()
        let conditioned = AsyncBlockOperation { events.append("conditioned") }
        conditioned.addCondition(StubCondition(name: "AnswersLater") { _, completion in answer.hold(completion) })
        let plain = BlockOperation { events.append("plain") }
        queue.addOperations([conditioned, plain], waitUntilFinished: false)
        queue.addBarrierBlock { events.append("barrier") }
        let exclusive = AsyncBlockOperation { events.append("exclusive") }
        exclusive.addCondition(ExclusiveCategory(uniqueName("category")))
        let after = AsyncBlockOperation { events.append("after") }
        queue.addOperations([exclusive, after], waitUntilFinished: false)
        Thread.sleep(forTimeInterval: 0.05)
        #expect(events.all.isEmpty)
        #expect(answer.timesHeld == 0)

        // When the queue resumes, and the condition answers after a chance to go wrong
        queue.isSuspended = false
        #expect(answerAfterAChanceToGoWrong(answer))

        // Then everything before the barrier ran first, the barrier next, the rest after it
        #expect(waitUntilFinished([conditioned, plain, exclusive, after]))
        #expect(events.all == ["conditioned", "plain", "barrier", "exclusive", "after"])
    }

    // API.md 9: "A queue with maxConcurrentOperationCount = 1 ... start[s] the operations whose
    // dependencies have finished in the order they were added, conditions and categories
    // included." Plain Foundation operations are operations of the queue too.
    @Test
    func serialQueue_aPlainOperationSharingADependency_doesNotOvertakeTheOneAddedBeforeIt() {
        // Given an operation running on another queue, and a serial queue holding an operation
        // whose condition answers only when told, then a plain operation, both waiting for that
        // running operation
        let held = HeldOperations()
        let dependencyName = uniqueName("shared-dependency")
        let dependency = held.make(dependencyName)
        AsyncOperationQueue().addOperation(dependency)
        #expect(held.waitUntilStarted(dependencyName))
        let order = Recorder<String>()
        let answer = HeldCallback<ConditionResult>()
        let first = AsyncBlockOperation { order.append("first") }
        first.addCondition(StubCondition(name: "AnswersWhenTold") { _, completion in answer.hold(completion) })
        first.addDependency(dependency)
        let second = BlockOperation { order.append("second") }
        second.addDependency(dependency)
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.addOperations([first, second], waitUntilFinished: false)

        // When their dependency finishes, and the first one's condition answers once the
        // second had every chance to start
        held.finish(dependencyName)
        #expect(answer.waitUntilHeld())
        _ = waitUntilFinished([second], timeout: 5) // true only if it overtook the first
        _ = answer.call(.satisfied)

        // Then they started in the order they were added
        #expect(waitUntilFinished([first, second]))
        #expect(order.all == ["first", "second"])
    }

    // MARK: - Mutual exclusion and slots

    // API.md 2: "an operation is never granted a category while it cannot take a slot on its
    // queue". A plain Foundation operation executing on a serial queue holds its only slot.
    @Test
    func plainOperationHoldingTheSerialQueuesSlot_keepsTheOperationBehindItFromTakingACategory() {
        // Given a serial queue whose only slot a plain operation holds
        let x = uniqueName("X")
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let busyStarted = Signal()
        let release = Signal()
        let busy = BlockOperation {
            busyStarted.signal()
            _ = release.wait(timeout: generousTimeout)
        }
        queue.addOperation(busy)
        #expect(busyStarted.wait(timeout: generousTimeout))

        // When an operation needing X is added to it, and settles: granted X and handed to
        // Foundation, or waiting for its turn (the plain one keeps it while it runs)
        let waiting = AsyncBlockOperation {}
        waiting.addCondition(ExclusiveCategory(x))
        queue.addOperation(waiting)
        #expect(waitUntil {
            let snapshot = waiting.snapshot()
            return snapshot.state == .ready || snapshot.waitsFor.contains { if case .turnOnSerialQueue = $0 { true } else { false } }
        })

        // Then it waits, holding no category (an operation of another queue needing X would wait
        // for it otherwise)
        #expect(waiting.snapshot().state != .ready, "X was granted to an operation that could not start")
        #expect(!waiting.isFinished)
        release.signal()
        #expect(waitUntilFinished([busy, waiting]))
    }

    // API.md 2 and AsyncOperation.start(): "Called by hand (or by a plain OperationQueue), the
    // operation evaluates its conditions and waits for its categories itself, then executes."
    // Categories are process-wide, whatever queue an operation sits on.
    @Test
    func operationOnAPlainQueue_waitsForItsCategory_heldOnAnAsyncOperationQueue() {
        // Given an operation holding X on an AsyncOperationQueue
        let x = uniqueName("X")
        let held = HeldOperations()
        let holderName = uniqueName("holder")
        let holder = held.make(holderName)
        holder.addCondition(ExclusiveCategory(x))
        let order = Recorder<String>()
        holder.addObserver(FinishedObserver { _, _ in order.append("holder") })
        AsyncOperationQueue().addOperation(holder)
        #expect(held.waitUntilStarted(holderName))

        // When an operation needing X is added to a plain Foundation queue
        let visitor = AsyncBlockOperation { order.append("visitor") }
        visitor.addCondition(ExclusiveCategory(x))
        OperationQueue().addOperation(visitor)
        Thread.sleep(forTimeInterval: 0.1)

        // Then it executes only once the holder has finished
        #expect(order.all.isEmpty)
        held.finish(holderName)
        #expect(waitUntilFinished([holder, visitor]))
        #expect(order.all == ["holder", "visitor"])
        #expect(visitor.errors.isEmpty)
    }

    // API.md 6: TimeoutObserver cancels the operation "if it has not finished that long after it
    // started": the time it waits for a category does not count.
    @Test
    func timeWaitingForACategory_doesNotCountTowardsTheTimeout() {
        // Given an operation holding X, and one needing X with a short timeout
        let (x, held, holderName, holder, queue) = startHoldingACategory()
        let waiter = AsyncBlockOperation {}
        waiter.addCondition(ExclusiveCategory(x))
        waiter.addObserver(TimeoutObserver(timeout: 1))

        // When it waits for X longer than its timeout
        queue.addOperation(waiter)
        Thread.sleep(forTimeInterval: 1.5)
        held.finish(holderName)

        // Then it runs as it would without a timeout
        #expect(waitUntilFinished([holder, waiter]))
        #expect(!waiter.isCancelled)
        #expect(waiter.errors.isEmpty, "\(waiter.errors)")
    }

    // MARK: - Waits that always end

    // README, runAndWait(on:timeout:): "AsyncOperationError.waitTimedOut ... runAndWait(timeout:)
    // gave up and cancelled the operation"; API.md 2: "Cancelling or failing an operation frees its
    // categories", so the next operation in the category's line gets it.
    @Test
    func runAndWaitTimingOut_whileWaitingForACategory_leavesTheCategoryToTheNextInLine() {
        // Given X held, and an operation then another waiting for it
        let (x, held, holderName, holder, queue) = startHoldingACategory()
        let name = uniqueName("impatient")
        let executed = Counter()
        let impatient = AsyncBlockOperation { _ = executed.increment() }
        impatient.name = name
        impatient.addCondition(ExclusiveCategory(x))
        let next = AsyncBlockOperation {}
        next.addCondition(ExclusiveCategory(x))
        queue.addOperations([impatient, next], waitUntilFinished: false)

        // When a wait for the first one times out
        let expected = AsyncOperationError.waitTimedOut(operation: name, after: 0.2)
        #expect(throws: expected) { try impatient.runAndWait(timeout: 0.2) }

        // Then it finishes cancelled without executing, and the next one gets X after the holder
        #expect(waitUntilFinished([impatient]))
        #expect(impatient.isCancelled && executed.current == 0)
        #expect(impatient.errors.asOperationErrors == [expected])
        held.finish(holderName)
        #expect(waitUntilFinished([holder, next]))
        #expect(!next.isCancelled && next.errors.isEmpty)
    }

    // README: "`runAndWait(on:timeout:)` runs an operation and blocks until it finished";
    // `waitTimedOut`: it "gave up and cancelled the operation". An operation whose dependency
    // never runs cannot hold the caller past the timeout.
    @Test
    func runAndWaitWithATimeout_endsForAnOperationWhoseDependencyNeverRuns() {
        // Given an operation depending on one that is on no queue
        let name = uniqueName("orphan")
        let executed = Counter()
        let operation = AsyncBlockOperation { _ = executed.increment() }
        operation.name = name
        operation.addDependency(AsyncBlockOperation {})

        // When it is run and waited for, with a timeout
        let expected = AsyncOperationError.waitTimedOut(operation: name, after: 0.2)
        #expect(throws: expected) { try operation.runAndWait(timeout: 0.2) }

        // Then it finishes, cancelled, without executing
        #expect(waitUntilFinished([operation]))
        #expect(operation.isCancelled && executed.current == 0)
    }

    // API.md, "Shutting down": "AsyncOperationError.queueShutDown: an operation added after
    // shutDown began"; `queue.run(_:)` "adds operation and waits ... throws its errors".
    @Test
    func runOnAQueueThatWasShutDown_throwsTheShutDownError_withoutExecuting() async {
        // Given a queue that has shut down
        let queue = AsyncOperationQueue()
        await queue.shutDown(gracePeriod: 0)
        #expect(queue.isShutDown)

        // When an operation is run on it
        let executed = Counter()
        let operation = AsyncBlockOperation { _ = executed.increment() }
        let running = Task { try await queue.run(operation) }

        // Then the wait ends with the shut-down error, and nothing executed
        #expect(await eventually { operation.isFinished })
        guard operation.isFinished else { return } // the run would never return
        await #expect(throws: AsyncOperationError.queueShutDown) { try await running.value }
        #expect(executed.current == 0)
        #expect(operation.isCancelled)
    }

    // API.md 12: "After shutDown begins, nothing new runs on that queue ... every operation that
    // was on the queue finishes exactly once; the call returns when the queue is empty. Other
    // queues are unaffected."
    @Test
    func shutDown_endsOperationsWaitingForAnotherQueue_andLeavesThatQueueAlone() async {
        // Given an operation running on one queue, and on a second queue an AsyncOperation and a
        // plain operation that both wait for it
        let other = AsyncOperationQueue()
        let held = HeldOperations()
        let elsewhereName = uniqueName("elsewhere")
        let elsewhere = held.make(elsewhereName)
        other.addOperation(elsewhere)
        #expect(await eventually { held.startCount(elsewhereName) == 1 })
        let stopping = AsyncOperationQueue()
        let executed = Counter()
        let dependent = AsyncBlockOperation { _ = executed.increment() }
        dependent.addDependency(elsewhere)
        let plainDependent = BlockOperation { _ = executed.increment() }
        plainDependent.addDependency(elsewhere)
        stopping.addOperations([dependent, plainDependent], waitUntilFinished: false)

        // When the second queue shuts down
        let returned = Flag()
        Task {
            await stopping.shutDown(gracePeriod: 10)
            returned.raise()
        }

        // Then the call returns with both cancelled, neither executed, and the first queue's
        // operation still runs, uncancelled, and finishes as usual
        #expect(await eventually { returned.isRaised }, "shutDown never returned")
        #expect(dependent.isFinished && dependent.isCancelled)
        #expect(dependent.errors.asOperationErrors == [.queueShutDown])
        #expect(plainDependent.isFinished && plainDependent.isCancelled)
        #expect(executed.current == 0)
        #expect(!elsewhere.isCancelled && !elsewhere.isFinished)
        held.finish(elsewhereName)
        #expect(await eventually { elsewhere.isFinished })
        #expect(elsewhere.errors.isEmpty)
    }

    // README, misuse table: "adding an operation that is already on a queue | .addedTwice | the
    // second add is ignored; the operation runs once". API.md 12: "Other queues are unaffected."
    @Test
    func queueThatWasShutDown_refusingOperationsOfAnotherQueue_leavesThemToRunThere() async {
        // Given a plain operation and an AsyncOperation waiting on a suspended queue
        let plainName = uniqueName("plain-elsewhere")
        let asyncName = uniqueName("async-elsewhere")
        let plainRan = Counter()
        let asyncRan = Counter()
        let plain = BlockOperation { _ = plainRan.increment() }
        plain.name = plainName
        let waiting = AsyncBlockOperation { _ = asyncRan.increment() }
        waiting.name = asyncName
        let home = AsyncOperationQueue()
        home.isSuspended = true
        home.addOperations([plain, waiting], waitUntilFinished: false)
        // and another queue, shut down
        let stopped = AsyncOperationQueue()
        stopped.name = uniqueName("stopped")
        await stopped.shutDown(gracePeriod: 0)

        // When both are added to the shut-down queue too, then their own queue resumes
        stopped.addOperation(plain)
        stopped.addOperation(waiting)
        home.isSuspended = false

        // Then each second add is refused, and each operation runs once, on its own queue
        #expect(await eventually { plain.isFinished && waiting.isFinished })
        #expect(!plain.isCancelled, "the refused add cancelled an operation of another queue")
        #expect(plainRan.current == 1)
        #expect(!waiting.isCancelled && asyncRan.current == 1)
        // and each refusal names the shut-down queue, which refused it
        for name in [plainName, asyncName] {
            let refusal = DiagnosticsLog.shared.diagnostics(about: name).first { $0.kind == .addedTwice }
            #expect(refusal?.queueNames.contains(stopped.name!) == true, "\(String(describing: refusal))")
        }
    }

    // README, misuse table: "adding an operation that is already on a queue | .addedTwice | the
    // second add is ignored; the operation runs once". Refused by a shut-down queue as by a running one.
    @Test
    func queueThatWasShutDown_refusingAnOperationExecutingElsewhere_reportsItAddedTwice() async {
        // Given an operation executing on a queue, and another queue, shut down
        let held = HeldOperations()
        let name = uniqueName("executing-elsewhere")
        let operation = held.make(name)
        AsyncOperationQueue().addOperation(operation)
        #expect(await eventually { held.startCount(name) == 1 })
        let stopped = AsyncOperationQueue()
        stopped.name = uniqueName("stopped")
        await stopped.shutDown(gracePeriod: 0)

        // When the operation is added to the shut-down queue
        stopped.addOperation(operation)

        // Then that queue refuses it as added twice, and it runs on, uncancelled
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.addedTwice])
        #expect(DiagnosticsLog.shared.diagnostics(about: name).first?.queueNames.contains(stopped.name!) == true)
        #expect(!operation.isCancelled)
        held.finish(name)
        #expect(await eventually { operation.isFinished })
        #expect(operation.errors.isEmpty)
    }

    // README, misuse table: "adding a finished or executing operation | .addedAfterFinishing | ignored".
    @Test
    func queueThatWasShutDown_refusingAFinishedOperation_namesItself() async {
        // Given a finished operation, and a queue shut down
        let name = uniqueName("finished-before")
        let operation = AsyncBlockOperation {}
        operation.name = name
        AsyncOperationQueue().addOperations([operation], waitUntilFinished: true)
        let stopped = AsyncOperationQueue()
        stopped.name = uniqueName("stopped")
        await stopped.shutDown(gracePeriod: 0)

        // When the operation is added to it
        stopped.addOperation(operation)

        // Then the add is refused by that queue, and the operation keeps its outcome
        let refusal = DiagnosticsLog.shared.diagnostics(about: name).first { $0.kind == .addedAfterFinishing }
        #expect(refusal?.queueNames.contains(stopped.name!) == true, "\(String(describing: refusal))")
        #expect(!operation.isCancelled && operation.errors.isEmpty)
    }

    // MARK: - Misuse, reported and survived

    // README, misuse table: "dependencies that form a cycle | .dependencyCycle | the operation
    // that closes the cycle ... finishes with AsyncOperationError.dependencyCycle when queued, so
    // the rest runs instead of hanging". Foundation, removeDependency(_:): "Removes the receiver's
    // dependence on the specified operation": once the closing dependency is removed there is no
    // cycle left to break.
    @Test
    func dependencyThatClosedACycle_removedBeforeTheAdd_leavesTheOperationToRun() {
        // Given a depends on b, b then on a (closing a cycle, which is reported), and b no longer
        let operations = RecordingOperations("uncycled")
        let a = operations.make("a")
        let b = operations.make("b")
        a.addDependency(b)
        b.addDependency(a)
        #expect(DiagnosticsLog.shared.kinds(about: operations.name("b")) == [.dependencyCycle])
        b.removeDependency(a)
        #expect(b.dependencies.isEmpty)

        // When both are added
        AsyncOperationQueue().addOperations([a, b], waitUntilFinished: false)

        // Then both run, b first, without errors
        #expect(waitUntilFinished([a, b]))
        #expect(b.errors.isEmpty, "\(b.errors)")
        #expect(a.errors.isEmpty, "\(a.errors)")
        #expect(operations.executed.all == ["b", "a"])
    }

    // The same for an operation made to depend on itself, then no longer.
    @Test
    func selfDependencyRemovedBeforeTheAdd_leavesTheOperationToRun() {
        // Given an operation that depended on itself (reported), and no longer does
        let operations = RecordingOperations("unselfed")
        let operation = operations.make("operation")
        operation.addDependency(operation)
        #expect(DiagnosticsLog.shared.kinds(about: operations.name("operation")) == [.dependencyCycle])
        operation.removeDependency(operation)

        // When it is added
        AsyncOperationQueue().addOperation(operation)

        // Then it runs, without errors
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.isEmpty, "\(operation.errors)")
        #expect(operations.executed.all == ["operation"])
    }

    // API.md 3: "finish(with:) is idempotent: the first call wins, later calls change nothing and
    // never crash"; 4: "operationDidFinish exactly once, last, with errors already final";
    // README, misuse table: finishing twice is `.finishedTwice`, `addObserver` after the finish is
    // `.configuredTooLate`.
    @Test
    func callsMadeFromInsideOperationDidFinish_areIgnored_andTheFinishStaysAsItWas() {
        // Given an operation failing with an error, whose observer, as it hears the finish,
        // finishes it again, cancels it and adds another observer
        let name = uniqueName("reentered")
        let error = StubError("first")
        let operation = AsyncBlockOperation { throw error }
        operation.name = name
        let events = EventLogObserver()
        let errorsSeenInside = Recorder<[StubError?]>()
        let lateObserverCalls = Counter()
        operation.addObserver(BlockObserver(didFinish: { operation, _ in
            operation.finish(with: StubError("late finish"))
            operation.cancel(with: StubError("late cancel"))
            operation.addObserver(FinishedObserver { _, _ in _ = lateObserverCalls.increment() })
            errorsSeenInside.append(operation.errors.asStubErrors)
        }))
        operation.addObserver(events)

        // When it runs
        AsyncOperationQueue().addOperation(operation)

        // Then it finished once, with its first error only, and the late calls were reported
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.asStubErrors == [error])
        #expect(errorsSeenInside.all == [[error]])
        #expect(!operation.isCancelled)
        #expect(events.log.all == ["didStart", "didFinish"])
        #expect(lateObserverCalls.current == 0)
        let kinds = DiagnosticsLog.shared.kinds(about: name, onceThereAre: 2)
        #expect(Set(kinds) == [.finishedTwice, .configuredTooLate], "\(kinds)")
    }

    // README, misuse table: "children added to a finished group | .configuredTooLate | ignored (a
    // late group's children run on a shared queue)"; GroupOperation.addChild: "later children are
    // reported as .configuredTooLate and run on a shared queue, so no work is lost".
    @Test
    func childAddedToAGroupThatFinishedNormally_isReported_andStillRuns() {
        // Given a group that finished without being cancelled
        let groupName = uniqueName("finished-group")
        let group = GroupOperation(operations: [AsyncBlockOperation {}])
        group.name = groupName
        AsyncOperationQueue().addOperation(group)
        #expect(waitUntilFinished([group]))

        // When a child is added to it
        let executed = Counter()
        let late = AsyncBlockOperation { _ = executed.increment() }
        group.addChild(late)

        // Then the child runs all the same, and the late add is reported about the group
        #expect(waitUntilFinished([late]))
        #expect(executed.current == 1)
        #expect(!late.isCancelled && late.errors.isEmpty)
        #expect(DiagnosticsLog.shared.kinds(about: groupName, onceThereAre: 1) == [.configuredTooLate])
        #expect(group.errors.isEmpty)
    }

    // MARK: - Groups and composites

    // GroupOperation's documentation and Composition.md: "Its errors hold every child's errors,
    // then its own. Cancelling it cancels the children and still waits for them." API.md 7: "its
    // errors hold every child's errors and its own".
    @Test
    func groupCancelledWithAnErrorWhileAChildRuns_holdsTheChildsErrors_thenItsOwn() {
        // Given a running group whose child ignores cancellation and finishes when told
        let childError = StubError("child")
        let groupError = StubError("group")
        let release = HeldCallback<(any Error)?>()
        let child = ClosureOperation { operation in
            release.hold { error in operation.finish(with: error) }
        }
        let group = GroupOperation(operations: [child])
        AsyncOperationQueue().addOperation(group)
        #expect(release.waitUntilHeld())

        // When the group is cancelled with an error, and the child then fails
        group.cancel(with: groupError)
        #expect(!group.isFinished) // it waits for its child
        release.call(childError)

        // Then the group finished after its child, with the child's error first, then its own
        #expect(waitUntilFinished([group, child]))
        #expect(child.errors.asStubErrors == [childError])
        #expect(group.isCancelled)
        #expect(group.errors.asStubErrors == [childError, groupError])
    }

    // API.md 7: "its errors hold every child's errors and its own ... Groups nest."
    @Test
    func grandchildsError_reachesTheOutermostGroup() {
        // Given a group nested in a group, with one failing child deep inside
        let error = StubError("grandchild")
        let inner = GroupOperation(operations: [AsyncBlockOperation { throw error }, AsyncBlockOperation {}])
        let outer = GroupOperation(operations: [inner, AsyncBlockOperation {}])

        // When the outer group runs
        AsyncOperationQueue().addOperation(outer)

        // Then the error is the inner group's and the outer group's
        #expect(waitUntilFinished([outer]))
        #expect(inner.errors.asStubErrors == [error])
        #expect(outer.errors.asStubErrors == [error])
        #expect(outer.isFailed && !outer.isCancelled)
    }

    // Composition.md: "Neither handler is called when the composite itself is cancelled, by
    // cancel(), an enclosing composite or group, or a timeout"; API.md 6: the timeout cancels
    // "with a timeout error".
    @Test
    func cascadeStoppedByItsTimeout_callsNeitherHandler_andBuildsNoMoreChildren() {
        // Given a cascade whose first child never finishes by itself, with handlers that would
        // carry on, and a short timeout
        let handlerCalls = Counter()
        let completions = Counter()
        let secondBuilt = Counter()
        let cascade = CascadeOperation { steps in
            steps.add { AsyncBlockOperation { _ in } } // never calls its continuation
            steps.add {
                _ = secondBuilt.increment()
                return AsyncBlockOperation {}
            }
        } completion: {
            _ = completions.increment()
        } cancellation: { _ in
            _ = handlerCalls.increment()
            return .carryOn
        }
        cascade.addObserver(TimeoutObserver(timeout: 0.1))

        // When it runs and times out
        AsyncOperationQueue().addOperation(cascade)

        // Then it finishes cancelled with the timeout error, and nothing else was decided or built
        #expect(waitUntilFinished([cascade]))
        #expect(cascade.isCancelled)
        #expect(cascade.errors.asOperationErrors.contains(.timedOut(after: 0.1)), "\(cascade.errors)")
        #expect(handlerCalls.current == 0)
        #expect(completions.current == 0)
        #expect(secondBuilt.current == 0)
    }
}
