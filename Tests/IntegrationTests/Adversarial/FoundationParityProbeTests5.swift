import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// A fifth round of adversarial probes of Foundation's documented behaviour of `Operation` and
// `OperationQueue`, through the package's queue and operations, in corners the first four rounds
// left alone: completion blocks and `waitUntilFinished()` of groups and of operations started by
// hand, `addOperations(_:waitUntilFinished: true)` with conditions that fail late, an operation
// given twice in one call or to a group while it is elsewhere, `removeDependency(_:)` and
// `cancel()` making an operation ready, a barrier behind operations waiting for a category, and a
// queue suspended while its group runs. (The probe that found a break, a group whose progress
// already has a parent, is in `BreakProbeTests5`.) Every wait for something that must happen is
// bounded; nothing asserts on wall-clock speed.

@Suite("Foundation parity probes, round 5")
struct FoundationParityProbeTests5 {
    // MARK: - completionBlock and waitUntilFinished()

    // Apple, `Operation.completionBlock`: "The completion block you provide is executed when the
    // value in the isFinished property changes to true", also for a cancelled operation. API.md 7:
    // "A GroupOperation finishes only after every child ... has finished."
    @Test
    func completionBlock_ofAGroupCancelledWhileItWaitsForADependency_runsOnce_afterItAndEveryChildFinished() {
        // Given a group of two children, waiting on a running queue for a dependency that runs
        // until told
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let blockerName = uniqueName("blocker")
        let blocker = held.make(blockerName)
        let executed = Recorder<String>()
        let asyncChild = AsyncBlockOperation { executed.append("async child") }
        let plainChild = BlockOperation { executed.append("plain child") }
        let group = GroupOperation(operations: [asyncChild, plainChild])
        group.addDependency(blocker)
        let seen = Recorder<[Bool]>()
        group.completionBlock = { [weak group] in
            seen.append([group?.isFinished ?? false, asyncChild.isFinished, plainChild.isFinished])
        }
        queue.addOperations([blocker, group], waitUntilFinished: false)
        #expect(held.waitUntilStarted(blockerName))

        // When the group is cancelled while it waits
        group.cancel()

        // Then it finishes without running its children, and its completion block runs once,
        // seeing the group and both children finished
        #expect(waitUntilFinished([group], timeout: 10))
        #expect(waitUntil(timeout: 10) { seen.count >= 1 })
        Thread.sleep(forTimeInterval: 0.1) // a chance for a second call
        #expect(seen.all == [[true, true, true]], "\(seen.all)")
        #expect(executed.all.isEmpty, "\(executed.all)")
        #expect(asyncChild.isCancelled && plainChild.isCancelled)
        held.finish(blockerName)
        #expect(waitUntilFinished([blocker]))
    }

    // Apple, `Operation.waitUntilFinished()`: "Blocks execution of the current thread until the
    // operation object finishes its task." `completionBlock`: executed once "when the value in the
    // isFinished property changes to true". API.md 1: "If any condition fails, execute() is never
    // called; the operation finishes with one error per failed condition." `AsyncOperation.start()`:
    // "Called by hand ..., the operation evaluates its conditions ... itself".
    @Test
    func waitUntilFinished_fromAnotherThread_onAnOperationStartedByHand_lastsUntilItsLateConditionFailsIt_andTheCompletionBlockRunsOnce() {
        // Given an operation on no queue whose condition answers only when told, with a completion
        // block, and a thread waiting for it
        let answer = HeldCallback<ConditionResult>()
        let executed = Counter()
        let operation = AsyncBlockOperation { executed.increment() }
        operation.addCondition(StubCondition(name: "AnswersLater") { _, completion in answer.hold(completion) })
        let completions = Counter()
        operation.completionBlock = { completions.increment() }
        let returned = Flag()
        let waiter = runOnOwnThread {
            operation.waitUntilFinished()
            returned.raise()
        }

        // When it is started by hand, and its condition fails later from another thread
        operation.start()
        #expect(answer.waitUntilHeld())
        Thread.sleep(forTimeInterval: 0.1)
        #expect(!returned.isRaised && !operation.isFinished)
        let error = StubError("late failure")
        let answered = runOnOwnThread { answer.call(.failed(error)) }

        // Then the wait ends once it finished with the condition's error, never executed, and
        // the completion block ran once
        #expect(answered.wait(timeout: 10))
        #expect(waiter.wait(timeout: 10), "waitUntilFinished() never returned")
        #expect(operation.isFinished)
        #expect(operation.errors.asStubErrors == [error], "\(operation.errors)")
        #expect(executed.current == 0)
        #expect(waitUntil(timeout: 10) { completions.current >= 1 })
        Thread.sleep(forTimeInterval: 0.1)
        #expect(completions.current == 1)
    }

    // Apple, `Foundation.OperationQueue` / API.md 7: a group finishes only after every child has;
    // `Operation.waitUntilFinished()` "Blocks execution of the current thread until the operation
    // object finishes its task"; `completionBlock` runs once isFinished is true.
    @Test
    func waitUntilFinished_onARunningGroup_fromAnotherThread_returnsOnlyOnceItsLastChildFinished() {
        // Given a group whose second child runs until told
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let lastName = uniqueName("last-child")
        let quick = AsyncBlockOperation {}
        let last = held.make(lastName)
        let group = GroupOperation(operations: [quick, last])
        let completionSaw = Recorder<[Bool]>()
        group.completionBlock = { [weak group] in
            completionSaw.append([group?.isFinished ?? false, quick.isFinished, last.isFinished])
        }
        let returned = Flag()
        queue.addOperation(group)
        let waiter = runOnOwnThread {
            group.waitUntilFinished()
            returned.raise()
        }
        #expect(held.waitUntilStarted(lastName))
        #expect(waitUntil { quick.isFinished })

        // When the wait has had its chance, and then the last child finishes
        Thread.sleep(forTimeInterval: 0.1)
        let returnedEarly = returned.isRaised
        held.finish(lastName)

        // Then the wait returned only then, with the group finished, and the completion block
        // ran once, seeing every child finished
        #expect(!returnedEarly)
        #expect(waiter.wait(timeout: 10), "waitUntilFinished() never returned")
        #expect(group.isFinished)
        #expect(waitUntil(timeout: 10) { completionSaw.count >= 1 })
        Thread.sleep(forTimeInterval: 0.05)
        #expect(completionSaw.all == [[true, true, true]], "\(completionSaw.all)")
    }

    // MARK: - addOperations(_:waitUntilFinished:)

    // Apple, `addOperations(_:waitUntilFinished:)`: "If true, the current thread is blocked until
    // all of the specified operations finish executing." API.md 1, and `NoFailedDependencies`:
    // the dependent finishes without executing, with one error.
    @Test
    func addOperationsWaitingUntilFinished_returnsOnlyOnceALateFailingConditionAndTheDependentItStops_haveFinished() {
        // Given an operation whose condition answers only when told, and a dependent that needs it
        // to succeed
        let queue = AsyncOperationQueue()
        let answer = HeldCallback<ConditionResult>()
        let executed = Recorder<String>()
        let first = AsyncBlockOperation { executed.append("first") }
        first.addCondition(StubCondition(name: "AnswersLater") { _, completion in answer.hold(completion) })
        let second = AsyncBlockOperation { executed.append("second") }
        second.addDependency(first)
        second.addCondition(NoFailedDependencies())

        // When both are added, waiting until they finished, from a thread of the test's own
        let returned = Flag()
        let adder = runOnOwnThread {
            queue.addOperations([first, second], waitUntilFinished: true)
            returned.raise()
        }
        #expect(answer.waitUntilHeld())
        Thread.sleep(forTimeInterval: 0.1)
        let returnedEarly = returned.isRaised
        let error = StubError("no")
        answer.call(.failed(error))

        // Then the call returned only once both had finished, neither executed
        #expect(!returnedEarly)
        #expect(adder.wait(timeout: 10), "addOperations(_:waitUntilFinished: true) never returned")
        #expect(first.isFinished && second.isFinished)
        #expect(first.errors.asStubErrors == [error], "\(first.errors)")
        #expect(second.errors.count == 1, "\(second.errors)")
        #expect(executed.all.isEmpty, "\(executed.all)")
    }

    // README, "When it is misused" (README.md:286): adding an operation that is already on a queue
    // is reported `.addedTwice`, "the second add is ignored; the operation runs once". Apple,
    // `addOperations(_:waitUntilFinished:)`: with `true` it returns once they all finished.
    @Test
    func addOperationsWaitingUntilFinished_withTheSameOperationsTwiceInOneCall_runsEachOnce_reportsTheSecondAdds_andReturns() {
        // Given an operation of the package and a plain one
        let queue = AsyncOperationQueue()
        let runs = Recorder<String>()
        let asyncName = uniqueName("async-twice-in-one-call")
        let asyncOperation = AsyncBlockOperation { runs.append("async") }
        asyncOperation.name = asyncName
        let plainName = uniqueName("plain-twice-in-one-call")
        let plainOperation = BlockOperation { runs.append("plain") }
        plainOperation.name = plainName

        // When each is given twice in one call that waits until they finished
        let done = runOnOwnThread {
            queue.addOperations([asyncOperation, plainOperation, asyncOperation, plainOperation], waitUntilFinished: true)
        }

        // Then the call returns, each ran once, and each second add was reported
        #expect(done.wait(timeout: 10), "addOperations(_:waitUntilFinished: true) never returned")
        #expect(asyncOperation.isFinished && plainOperation.isFinished)
        #expect(runs.all.sorted() == ["async", "plain"], "\(runs.all)")
        #expect(DiagnosticsLog.shared.kinds(about: asyncName, onceThereAre: 1) == [.addedTwice])
        #expect(DiagnosticsLog.shared.kinds(about: plainName, onceThereAre: 1) == [.addedTwice])
    }

    // README.md:286-287: an operation already on a queue is reported `.addedTwice` ("the second add
    // is ignored; the operation runs once"), a finished one `.addedAfterFinishing` ("ignored").
    // API.md, Seeing inside: a group's `totalUnitCount` is "the number of children admitted".
    @Test
    func groupChildrenAlreadyOnAQueueOrFinished_areReported_andTheGroupFinishesWithoutWaitingForThem() {
        // Given an operation waiting on a suspended queue, and one that has finished
        let suspended = AsyncOperationQueue()
        suspended.isSuspended = true
        let runs = Recorder<String>()
        let waitingName = uniqueName("waiting-elsewhere")
        let waiting = AsyncBlockOperation { runs.append("waiting") }
        waiting.name = waitingName
        suspended.addOperation(waiting)
        let finishedName = uniqueName("finished-before")
        let finished = AsyncBlockOperation { runs.append("finished") }
        finished.name = finishedName
        #expect((try? finished.runAndWait(timeout: 10)) != nil)
        let fresh = AsyncBlockOperation { runs.append("fresh") }

        // When a group is given both as children, beside a fresh one, and runs
        let group = GroupOperation(operations: [waiting, fresh])
        group.addChild(finished)
        let queue = AsyncOperationQueue()
        queue.addOperation(group)

        // Then both are reported, and the group runs the fresh child and finishes without them
        #expect(waitUntilFinished([group], timeout: 10), "the group waits for children it refused")
        #expect(runs.all == ["finished", "fresh"], "\(runs.all)")
        #expect(group.errors.isEmpty, "\(group.errors)")
        #expect(DiagnosticsLog.shared.kinds(about: waitingName, onceThereAre: 1) == [.addedTwice])
        #expect(DiagnosticsLog.shared.kinds(about: finishedName, onceThereAre: 1) == [.addedAfterFinishing])
        #expect(group.progress.totalUnitCount == 1 && group.progress.completedUnitCount == 1,
                "\(group.progress.completedUnitCount)/\(group.progress.totalUnitCount)")
        // and the operation waiting elsewhere runs there, once, when that queue resumes
        suspended.isSuspended = false
        #expect(waitUntilFinished([waiting], timeout: 10))
        #expect(runs.all == ["finished", "fresh", "waiting"], "\(runs.all)")
    }

    // MARK: - removeDependency(_:) and cancel() make an operation ready

    // Apple, `removeDependency(_:)`: "Removes the receiver’s dependence on the specified
    // operation"; `isReady`: the queue starts an operation once it is ready. The package: an
    // `AsyncOperation` started by a plain queue runs as Foundation's own would.
    @Test
    func removeDependency_ofAnOperationWaitingOnAPlainQueue_letsThePlainQueueStartIt() {
        // Given an operation of the package on a plain queue, waiting for an operation nobody runs
        let plainQueue = OperationQueue()
        let neverRun = BlockOperation {}
        let executed = Counter()
        let operation = AsyncBlockOperation { executed.increment() }
        operation.addDependency(neverRun)
        plainQueue.addOperation(operation)
        Thread.sleep(forTimeInterval: 0.1)
        #expect(!operation.isFinished && executed.current == 0)

        // When the dependency is removed
        operation.removeDependency(neverRun)

        // Then the plain queue starts it
        #expect(waitUntilFinished([operation], timeout: 10), "the operation never started")
        #expect(executed.current == 1 && operation.errors.isEmpty, "\(operation.errors)")
    }

    // Apple, `removeDependency(_:)`: "Removes the receiver’s dependence on the specified
    // operation." API.md 7: "A GroupOperation finishes only after every child ... has finished."
    @Test
    func removeDependency_ofAGroupsChildWaitingForAnOperationNobodyRuns_letsItRun_andTheGroupFinishes() {
        // Given a running group whose child waits for an operation nobody runs
        let queue = AsyncOperationQueue()
        let neverRun = AsyncBlockOperation {}
        let executed = Recorder<String>()
        let child = AsyncBlockOperation { executed.append("child") }
        child.addDependency(neverRun)
        let group = GroupOperation(operations: [child])
        queue.addOperation(group)
        #expect(waitUntil { group.isExecuting })
        Thread.sleep(forTimeInterval: 0.1)
        #expect(!child.isFinished)

        // When the child's dependency is removed
        child.removeDependency(neverRun)

        // Then it runs, and the group finishes
        #expect(waitUntilFinished([group], timeout: 10), "the child never ran")
        #expect(executed.all == ["child"] && group.errors.isEmpty, "\(executed.all) \(group.errors)")
    }

    // Apple, `isReady`: "if you call the cancel method on an operation that is waiting on the
    // completion of one or more dependent operations, those dependencies are thereafter ignored
    // and the value of this property is updated to reflect that it is now ready to run";
    // `removeDependency(_:)` removes the dependence. The package, `start()`: "Started by hand
    // before its dependencies finished, it finishes with startedBeforeDependenciesFinished".
    @Test
    func removeDependencyOrCancel_makeAnOperationOnNoQueueReady_andStartingItByHandIsThenNoMisuse() {
        // Given two operations on no queue, each waiting for an operation nobody runs
        let neverRun = AsyncBlockOperation {}
        let executed = Recorder<String>()
        let removing = AsyncBlockOperation { executed.append("removing") }
        removing.name = uniqueName("removes-its-dependency")
        removing.addDependency(neverRun)
        let cancelling = AsyncBlockOperation { executed.append("cancelling") }
        cancelling.name = uniqueName("cancelled-while-waiting")
        cancelling.addDependency(neverRun)
        #expect(!removing.isReady && !cancelling.isReady)

        // When one's dependency is removed, and the other is cancelled
        removing.removeDependency(neverRun)
        cancelling.cancel()

        // Then both are ready, and started by hand the first executes and the second finishes
        // cancelled, neither with a misuse error
        #expect(removing.isReady, "not ready after its only dependency was removed")
        #expect(cancelling.isReady, "not ready after it was cancelled")
        removing.start()
        cancelling.start()
        #expect(waitUntilFinished([removing, cancelling], timeout: 10))
        #expect(executed.all == ["removing"], "\(executed.all)")
        #expect(removing.errors.isEmpty, "\(removing.errors)")
        #expect(cancelling.isCancelled && cancelling.errors.isEmpty, "\(cancelling.errors)")
        #expect(DiagnosticsLog.shared.kinds(about: removing.name ?? "").isEmpty)
        #expect(DiagnosticsLog.shared.kinds(about: cancelling.name ?? "").isEmpty)
    }

    // MARK: - Barriers and cancellation with categories

    // Apple, `addBarrierBlock(_:)`: "Invokes a block when the queue finishes all enqueued
    // operations, and prevents subsequent operations from starting until the block has
    // completed." The package's `addBarrierBlock(_:)`: "counting operations still waiting in the
    // queue's scheduler".
    @Test
    func barrierBlock_waitsForAnEarlierOperationWaitingForACategoryHeldElsewhere_andOneWhoseConditionFailsLate_andLaterOnesWaitForIt() {
        // Given category X held on another queue, and on this queue an operation waiting for X
        // and one whose condition has not answered
        let (x, held, holderName, holder, otherQueue) = startHoldingACategory()
        let queue = AsyncOperationQueue()
        let log = Recorder<String>()
        let exclusiveEarlier = AsyncBlockOperation { log.append("exclusive earlier") }
        exclusiveEarlier.addCondition(ExclusiveCategory(x))
        let answer = HeldCallback<ConditionResult>()
        let failingEarlier = AsyncBlockOperation { log.append("failing earlier") }
        failingEarlier.addCondition(StubCondition(name: "FailsLater") { _, completion in answer.hold(completion) })
        queue.addOperations([exclusiveEarlier, failingEarlier], waitUntilFinished: false)
        #expect(answer.waitUntilHeld())
        #expect(waitUntil { exclusiveEarlier.snapshot().state == .waitingForCategories })

        // When a barrier is placed, and later operations added: one needing a free category, one
        // needing X, a plain one
        let barrierSaw = Recorder<[Bool]>()
        queue.addBarrierBlock {
            barrierSaw.append([exclusiveEarlier.isFinished, failingEarlier.isFinished])
            log.append("barrier")
        }
        let freeLater = AsyncBlockOperation { log.append("free later") }
        freeLater.addCondition(ExclusiveCategory(uniqueName("free")))
        let exclusiveLater = AsyncBlockOperation { log.append("exclusive later") }
        exclusiveLater.addCondition(ExclusiveCategory(x))
        let plainLater = BlockOperation { log.append("plain later") }
        queue.addOperations([freeLater, exclusiveLater, plainLater], waitUntilFinished: false)
        // and the condition fails, then X is let go
        answer.call(.failed(StubError("no")))
        #expect(waitUntilFinished([failingEarlier], timeout: 10))
        Thread.sleep(forTimeInterval: 0.1)
        let beforeXWasFreed = log.all
        held.finish(holderName)

        // Then nothing ran while X was held; the barrier ran after both earlier ones finished,
        // and every later one after it
        #expect(waitUntilFinished([holder, exclusiveEarlier, freeLater, exclusiveLater, plainLater], timeout: 10))
        #expect(waitUntil(timeout: 10) { log.count >= 5 })
        #expect(beforeXWasFreed.isEmpty, "\(beforeXWasFreed)")
        #expect(barrierSaw.all == [[true, true]], "\(barrierSaw.all)")
        let entries = log.all
        #expect(Array(entries.prefix(2)) == ["exclusive earlier", "barrier"], "\(entries)")
        #expect(Set(entries.dropFirst(2)) == ["free later", "exclusive later", "plain later"], "\(entries)")
        withExtendedLifetime(otherQueue) {}
    }

    // `AsyncOperationQueue.cancelAllOperations()`: "Operations waiting for dependencies, conditions
    // or categories finish at once, without executing." API.md 7: "Cancelling the group cancels
    // its children." API.md 4: `operationDidCancel` at most once, `operationDidFinish` once, last.
    @Test
    func cancelAllOperations_finishesAGroupWaitingForACategoryAtOnce_withoutRunningItsChildren() {
        // Given X held on another queue, and a group of two children waiting for X
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let queue = AsyncOperationQueue()
        let executed = Recorder<String>()
        let asyncChild = AsyncBlockOperation { executed.append("async child") }
        let plainChild = BlockOperation { executed.append("plain child") }
        let group = GroupOperation(operations: [asyncChild, plainChild])
        group.addCondition(ExclusiveCategory(x))
        let log = EventLogObserver()
        group.addObserver(log)
        queue.addOperation(group)
        #expect(waitUntil { group.snapshot().state == .waitingForCategories })

        // When every operation of the queue is cancelled
        queue.cancelAllOperations()

        // Then the group finishes while X is still held, cancelled, its children cancelled and
        // never run
        #expect(waitUntilFinished([group, asyncChild, plainChild], timeout: 10))
        #expect(!holder.isFinished)
        #expect(group.isCancelled && asyncChild.isCancelled && plainChild.isCancelled)
        #expect(executed.all.isEmpty, "\(executed.all)")
        #expect(log.log.all == ["didCancel", "didFinish"], "\(log.log.all)")
        held.finish(holderName)
        #expect(waitUntilFinished([holder]))
    }

    // MARK: - Suspension while a group runs

    // Apple, `OperationQueue.isSuspended`: suspending a queue does not affect operations that are
    // already executing ("Operations that are currently executing continue to run"). API.md 10
    // concerns the suspended queue; a running group's children are on the group's own queue
    // (Composition.md:16: "runs child operations on its own queue, with the full engine").
    @Test
    func suspendingTheQueueOfARunningGroup_letsItsChildrenGoOn_throughADependencyAConditionAndACategory() {
        // Given a running group whose first child runs until told, and whose later children wait
        // for it: one with a condition, one with a free category
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let firstName = uniqueName("first-child")
        let first = held.make(firstName)
        let executed = Recorder<String>()
        let conditionedChild = AsyncBlockOperation { executed.append("conditioned") }
        conditionedChild.addDependency(first)
        conditionedChild.addCondition(StubCondition.satisfied())
        let exclusiveChild = AsyncBlockOperation { executed.append("exclusive") }
        exclusiveChild.addDependency(first)
        exclusiveChild.addCondition(ExclusiveCategory(uniqueName("free")))
        let group = GroupOperation(operations: [first, conditionedChild, exclusiveChild])
        queue.addOperation(group)
        #expect(held.waitUntilStarted(firstName))

        // When the queue the group runs on is suspended, and then the first child finishes
        queue.isSuspended = true
        held.finish(firstName)

        // Then the group goes on while its queue stays suspended, and finishes
        #expect(waitUntilFinished([group], timeout: 10), "the group's children stopped with its suspended queue: \(group.debugDescription)")
        #expect(executed.all.sorted() == ["conditioned", "exclusive"], "\(executed.all)")
        #expect(queue.isSuspended)
        queue.isSuspended = false
    }
}
