import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// A fourth round of adversarial probes (after `FoundationParityProbeTests` 1 to 3 and the other
// probe suites of this folder), each checking one documented behaviour earlier rounds left alone:
// shutting a queue down (API.md 12) with operations held by dependencies, conditions, categories
// and a suspension, adds during the grace period, groups on a queue being shut down, a second
// call, a cancelled caller; what `debugDescription` says ("Seeing inside"); a group's progress; a
// serial group's order (API.md 9); what a finished operation leaves behind (API.md 8); and
// points 3 to 6 under races. Every wait for something that must happen is bounded; events are
// ordered with gates, never sleeps; nothing asserts on wall-clock speed.

@Suite("Foundation parity probes, round 4")
struct FoundationParityProbeTests4 {
    // MARK: - Shutting down

    // API.md 12 / shutDown(gracePeriod:): "every operation still waiting (for dependencies, conditions, categories ...) is cancelled with queueShutDown and finishes without executing"; each "exactly once"; "Other queues are unaffected."
    @Test
    func shutDownAndWait_cancelsOperationsHeldByADependencyAConditionAndACategory_eachFinishingOnce_andLetsTheRunningOneFinish() {
        // Given another queue whose operation holds category X
        let (x, held, holderName, holder, otherQueue) = startHoldingACategory()
        // and a queue running an operation, with operations waiting for it, for a condition that
        // has not answered, and for X
        let queue = AsyncOperationQueue()
        let runningName = uniqueName("running")
        let running = held.make(runningName)
        queue.addOperation(running)
        #expect(held.waitUntilStarted(runningName))
        let executed = Recorder<String>()
        let gate = HeldCallback<ConditionResult>()
        let completions = Counter()
        func waiter(_ label: String) -> AsyncBlockOperation {
            let operation = AsyncBlockOperation { executed.append(label) }
            operation.name = uniqueName(label)
            operation.completionBlock = { _ = completions.increment() }
            return operation
        }
        let forDependency = waiter("for-dependency")
        forDependency.addDependency(running)
        let forCondition = waiter("for-condition")
        forCondition.addCondition(StubCondition(name: "Held") { _, completion in gate.hold(completion) })
        let forCategory = waiter("for-category")
        forCategory.addCondition(ExclusiveCategory(x))
        let plain = BlockOperation { executed.append("plain") }
        plain.addDependency(running)
        let waiters: [AsyncOperation] = [forDependency, forCondition, forCategory]
        let logs = waiters.map { operation in
            let log = EventLogObserver()
            operation.addObserver(log)
            return log
        }
        queue.addOperations(waiters + [plain], waitUntilFinished: false)
        #expect(gate.waitUntilHeld())
        #expect(waitUntil { forCategory.snapshot().state == .waitingForCategories })

        // When the queue is shut down with a grace period without end, from a thread of its own
        let returned = Flag()
        let done = runOnOwnThread {
            queue.shutDownAndWait(gracePeriod: .infinity)
            returned.raise()
        }

        // Then the waiting AsyncOperations finish at once, cancelled, while the running one goes on
        #expect(waitUntilFinished(waiters, timeout: 10))
        #expect(queue.isShutDown)
        for operation in waiters {
            #expect(operation.errors.asOperationErrors == [.queueShutDown], "\(operation.name ?? ""): \(operation.errors)")
        }
        #expect(!running.isCancelled && !running.isFinished && !returned.isRaised)
        // and a late answer of the condition changes nothing
        gate.call(.satisfied)
        held.finish(runningName)
        #expect(done.wait(timeout: 10), "shutDownAndWait never returned")
        #expect(running.isFinished && running.errors.isEmpty)
        #expect(plain.isFinished && plain.isCancelled)
        #expect(executed.all.isEmpty, "\(executed.all)")
        // and each finished exactly once, heard as cancelled, never started
        #expect(waitUntil(timeout: 10) { completions.current >= 3 })
        #expect(completions.current == 3)
        for log in logs {
            #expect(log.log.all == ["didCancel", "didFinish"], "\(log.log.all)")
        }
        // and the other queue's holder runs on, uncancelled, and X goes on to its next operation
        #expect(!holder.isCancelled && !holder.isFinished)
        held.finish(holderName)
        let next = AsyncBlockOperation { executed.append("next") }
        next.addCondition(ExclusiveCategory(x))
        otherQueue.addOperation(next)
        #expect(waitUntilFinished([holder, next], timeout: 10))
        #expect(executed.all == ["next"] && holder.errors.isEmpty)
    }

    // shutDown(gracePeriod:): "Calling it again ... joins the shut-down under way; a shorter grace period ends it sooner."
    @Test
    func secondShutDownCall_withAShorterGracePeriod_cancelsTheRunningOperation_andBothCallsReturn() async {
        // Given a queue running an operation, with another waiting for it
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let runningName = uniqueName("running")
        let running = held.make(runningName)
        let log = EventLogObserver()
        running.addObserver(log)
        let waiting = AsyncBlockOperation {}
        waiting.addDependency(running)
        queue.addOperations([running, waiting], waitUntilFinished: false)
        #expect(await eventually { held.startCount(runningName) == 1 })

        // When a first call lets running operations go on for ever
        let firstReturned = Flag()
        Task {
            await queue.shutDown(gracePeriod: .infinity)
            firstReturned.raise()
        }
        #expect(await eventually(timeout: 10) { waiting.isFinished }) // the shut-down swept the queue
        #expect(!running.isCancelled && !firstReturned.isRaised)

        // and a second one asks for no grace at all
        await queue.shutDown(gracePeriod: 0)

        // Then the running operation was cancelled with the shut-down error, and both calls returned
        #expect(running.isFinished)
        #expect(running.errors.asOperationErrors == [.queueShutDown], "\(running.errors)")
        #expect(log.log.all == ["didStart", "didCancel", "didFinish"], "\(log.log.all)")
        #expect(await eventually(timeout: 10) { firstReturned.isRaised }, "the first shutDown call never returned")
        held.finish(runningName) // a late continuation call, ignored
    }

    // RunningOperationsInAService.md: "one added later finishes at once without executing, cancelled with queueShutDown, and its observers hear it"; a plain one added later "is cancelled".
    @Test
    func operationsAddedDuringTheGracePeriod_finishAtOnceCancelled_evenWaitingForARunningDependency() async {
        // Given a queue shutting down while an operation still runs in its grace period
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let runningName = uniqueName("running")
        let running = held.make(runningName)
        queue.addOperation(running)
        #expect(await eventually { held.startCount(runningName) == 1 })
        let returned = Flag()
        Task {
            await queue.shutDown(gracePeriod: .infinity)
            returned.raise()
        }
        #expect(await eventually { queue.isShutDown })

        // When an operation depending on the running one, and a plain operation, are added
        let executed = Counter()
        let late = AsyncBlockOperation { _ = executed.increment() }
        late.addDependency(running)
        let log = EventLogObserver()
        late.addObserver(log)
        let latePlain = BlockOperation { _ = executed.increment() }
        queue.addOperation(late)
        queue.addOperation(latePlain)

        // Then both finish, cancelled, without executing, while the running operation still runs
        #expect(await eventually(timeout: 10) { late.isFinished && latePlain.isFinished })
        #expect(!running.isFinished && !running.isCancelled)
        #expect(late.errors.asOperationErrors == [.queueShutDown], "\(late.errors)")
        #expect(log.log.all == ["didCancel", "didFinish"], "\(log.log.all)")
        #expect(latePlain.isCancelled)
        #expect(executed.current == 0)
        // and the shut-down returns once the running one finished, uncancelled
        #expect(!returned.isRaised)
        held.finish(runningName)
        #expect(await eventually(timeout: 10) { returned.isRaised }, "shutDown never returned")
        #expect(running.errors.isEmpty)
    }

    // shutDown(gracePeriod:): "A suspended queue is resumed, so that the operations it cancelled can finish (none of them executes)"; API.md 10: "A suspended queue evaluates no condition, takes no category and starts nothing."
    @Test
    func shutDownOfASuspendedQueue_evaluatesNoCondition_takesNoCategory_andFinishesEveryOperationOnce() async {
        // Given a suspended queue holding an operation with a condition, one with a category, a
        // group, and a plain operation
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        let executed = Counter()
        let evaluated = Counter()
        let x = uniqueName("X")
        let conditioned = AsyncBlockOperation { _ = executed.increment() }
        conditioned.addCondition(BlockCondition {
            evaluated.increment()
            return true
        })
        let exclusive = AsyncBlockOperation { _ = executed.increment() }
        exclusive.addCondition(ExclusiveCategory(x))
        let children = (0..<2).map { _ in AsyncBlockOperation { _ = executed.increment() } }
        let group = GroupOperation(operations: children)
        let plain = BlockOperation { _ = executed.increment() }
        let asyncOperations: [AsyncOperation] = [conditioned, exclusive, group]
        let finishes = Recorder<String>()
        for (index, operation) in asyncOperations.enumerated() {
            operation.addObserver(FinishedObserver { _, _ in finishes.append("\(index)") })
        }
        queue.addOperations(asyncOperations + [plain], waitUntilFinished: false)

        // When it is shut down
        await queue.shutDown(gracePeriod: 10)

        // Then every operation finished, cancelled, none executed, no condition was evaluated
        #expect((asyncOperations + children + [plain]).allSatisfy { $0.isFinished && $0.isCancelled })
        #expect(executed.current == 0)
        #expect(evaluated.current == 0)
        for operation in asyncOperations {
            #expect(operation.errors.asOperationErrors == [.queueShutDown], "\(operation.errors)")
        }
        #expect(finishes.all.sorted() == ["0", "1", "2"], "\(finishes.all)")
        #expect(!queue.isSuspended)
        // and X was left free: an operation of another queue takes it
        let next = AsyncBlockOperation { _ = executed.increment() }
        next.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(next)
        #expect(await eventually(timeout: 10) { next.isFinished })
        #expect(executed.current == 1)
    }

    // API.md 12: running operations "may finish within the grace period, then are cancelled"; API.md 7: "Cancelling the group cancels its children" and it "finishes only after every child ... has finished".
    @Test
    func runningGroupOnAQueueShutDownWithoutGrace_cancelsItsChildren_andFinishesOnlyAfterTheLastOne() async {
        // Given a group running a held child, a child waiting for it, and a child that ignores
        // cancellation until the test lets it finish
        let held = HeldOperations()
        let heldName = uniqueName("held-child")
        let heldChild = held.make(heldName)
        let executed = Counter()
        let dependentChild = AsyncBlockOperation { _ = executed.increment() }
        dependentChild.addDependency(heldChild)
        let stubbornStarted = Flag()
        let stubborn = ClosureOperation(name: uniqueName("stubborn")) { _ in stubbornStarted.raise() }
        let group = GroupOperation(operations: [heldChild, dependentChild, stubborn])
        let log = EventLogObserver()
        group.addObserver(log)
        let queue = AsyncOperationQueue()
        queue.addOperation(group)
        #expect(await eventually { held.startCount(heldName) == 1 && stubbornStarted.isRaised })

        // When the queue is shut down with no grace period
        let returned = Flag()
        Task {
            await queue.shutDown(gracePeriod: 0)
            returned.raise()
        }

        // Then the group and its children are cancelled; those that honour it finish at once, the
        // group waits for the stubborn one
        #expect(await eventually(timeout: 10) { group.isCancelled && heldChild.isFinished && dependentChild.isFinished })
        #expect(await eventually(timeout: 10) { stubborn.isCancelled })
        // (the group cancels its progress once it has reacted to its cancel: its children first)
        #expect(await eventually(timeout: 10) { group.progress.isCancelled })
        #expect(!group.isFinished && !returned.isRaised)
        stubborn.finish()
        #expect(await eventually(timeout: 10) { returned.isRaised }, "shutDown never returned")
        #expect(group.isFinished)
        #expect(group.errors.asOperationErrors == [.queueShutDown], "\(group.errors)")
        #expect(executed.current == 0)
        #expect(log.log.all == ["didStart", "didCancel", "didFinish"], "\(log.log.all)")
    }

    // API.md 12: "Other queues are unaffected"; API.md 2: "Cancelling or failing an operation frees its categories."
    @Test
    func operationOfAnotherQueue_waitingForAShutDownQueuesOperationAndCategory_runsOnceUncancelled() async {
        // Given a queue whose running operation holds X, with an operation waiting for it
        let x = uniqueName("X")
        let stopping = AsyncOperationQueue()
        let held = HeldOperations()
        let holderName = uniqueName("holder")
        let holder = held.make(holderName)
        holder.addCondition(ExclusiveCategory(x))
        stopping.addOperation(holder)
        #expect(await eventually { held.startCount(holderName) == 1 })
        let executed = Recorder<String>()
        let waitingThere = AsyncBlockOperation { executed.append("waiting-there") }
        waitingThere.addDependency(holder)
        stopping.addOperation(waitingThere)
        // and on another queue an operation needing X that depends on the waiting one
        let dependent = AsyncBlockOperation { executed.append("dependent") }
        dependent.addDependency(waitingThere)
        dependent.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(dependent)

        // When the first queue is shut down with no grace period
        await stopping.shutDown(gracePeriod: 0)

        // Then its operations were cancelled, and the other queue's runs, once, uncancelled
        #expect(holder.errors.asOperationErrors == [.queueShutDown], "\(holder.errors)")
        #expect(waitingThere.errors.asOperationErrors == [.queueShutDown], "\(waitingThere.errors)")
        #expect(await eventually(timeout: 10) { dependent.isFinished })
        #expect(!dependent.isCancelled && dependent.errors.isEmpty, "\(dependent.errors)")
        #expect(executed.all == ["dependent"])
    }

    // RunningOperationsInAService.md: "Cancelling the task that awaits it ends the grace period at once: what still runs is cancelled, and the call still returns only once it has finished."
    @Test
    func cancellingTheTaskAwaitingShutDown_cancelsWhatRuns_andTheCallReturnsOnlyOnceItFinished() async {
        // Given a queue running an operation that ignores cancellation until the test finishes it
        let queue = AsyncOperationQueue()
        let started = Flag()
        let stubborn = ClosureOperation(name: uniqueName("stubborn")) { _ in started.raise() }
        queue.addOperation(stubborn)
        #expect(await eventually { started.isRaised })
        let returned = Flag()
        let shutdown = Task {
            await queue.shutDown(gracePeriod: .infinity)
            returned.raise()
        }
        #expect(await eventually { queue.isShutDown })
        #expect(!stubborn.isCancelled)

        // When the task awaiting the shut-down is cancelled
        shutdown.cancel()

        // Then the running operation is cancelled with the shut-down error, and the call waits for it
        #expect(await eventually(timeout: 10) { stubborn.isCancelled })
        #expect(!returned.isRaised)
        stubborn.finish()
        #expect(await eventually(timeout: 10) { returned.isRaised }, "shutDown never returned")
        #expect(stubborn.errors.asOperationErrors == [.queueShutDown], "\(stubborn.errors)")
    }

    // API.md 12: "every operation that was on the queue finishes exactly once; the call returns when the queue is empty"; shutDown: "From the moment it is called the queue takes no new operation".
    @Test
    func addsFromFourThreadsRacingTheShutDown_eachOperationFinishesOnceCancelled_andNoneIsLeft() {
        for round in 0..<5 {
            // Given operations that only a cancellation ends, added from four threads
            let queue = AsyncOperationQueue()
            let prefix = uniqueName("raced-add-\(round)")
            let finishes = Recorder<String>()
            let batches: [[AsyncBlockOperation]] = (0..<4).map { thread in
                (0..<25).map { index in
                    let operation = AsyncBlockOperation { _ in }
                    operation.name = "\(prefix)-\(thread)-\(index)"
                    operation.addObserver(FinishedObserver { finished, _ in finishes.append(finished.name ?? "?") })
                    return operation
                }
            }

            // When a fifth thread shuts the queue down without grace meanwhile
            let returned = race(5, timeout: 10) { index in
                if index == 4 {
                    queue.shutDownAndWait(gracePeriod: 0)
                } else {
                    for operation in batches[index] { queue.addOperation(operation) }
                }
            }

            // Then the call returned, and every operation finished once, cancelled by the shut-down
            #expect(returned, "an add or the shut-down never returned")
            let all = batches.flatMap { $0 }
            #expect(waitUntilFinished(all, timeout: 10))
            #expect(waitUntil(timeout: 10) { finishes.count >= all.count })
            #expect(finishes.all.sorted() == all.map { $0.name ?? "" }.sorted())
            let wrong = all.filter { $0.errors.asOperationErrors != [.queueShutDown] }
            #expect(wrong.isEmpty, "\(wrong.map { "\($0.name ?? ""): \($0.errors)" })")
            #expect(queue.allOperationCount == 0 && queue.isShutDown)
        }
    }

    // shutDown: "nothing new runs on that queue"; "Each operation that was on the queue finishes exactly once"; one added later "finishes at once without executing".
    @Test
    func pendingBarrierBlock_neverRunsOnAQueueShutDown_andAWaitingAddAfterwardsReturns() async {
        // Given a queue running an operation, a barrier block behind it, and an operation behind that
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let runningName = uniqueName("running")
        let running = held.make(runningName)
        queue.addOperation(running)
        #expect(await eventually { held.startCount(runningName) == 1 })
        let ran = Recorder<String>()
        queue.addBarrierBlock { ran.append("barrier") }
        let behind = AsyncBlockOperation { ran.append("behind") }
        queue.addOperation(behind)

        // When it is shut down, letting the running operation finish
        let returned = Flag()
        Task {
            await queue.shutDown(gracePeriod: .infinity)
            returned.raise()
        }
        #expect(await eventually(timeout: 10) { behind.isFinished })
        held.finish(runningName)

        // Then the call returns without the barrier block or the operation behind it having run
        #expect(await eventually(timeout: 10) { returned.isRaised }, "shutDown never returned")
        #expect(ran.all.isEmpty, "\(ran.all)")
        #expect(behind.errors.asOperationErrors == [.queueShutDown])
        // and an add that waits for its operation afterwards returns, the operation not executed
        let late = AsyncBlockOperation { ran.append("late") }
        let added = runOnOwnThread { queue.addOperations([late], waitUntilFinished: true) }
        #expect(await offThePool { added.wait(timeout: 10) }, "addOperations(_:waitUntilFinished: true) never returned")
        #expect(late.isFinished && late.isCancelled && ran.all.isEmpty)
    }

    // MARK: - Seeing inside

    // API.md, Seeing inside: debugDescription says "unfinished dependencies by name"; the queue's "lists every unfinished operation ... with the same explanation".
    @Test
    func debugDescription_namesOnlyTheUnfinishedDependencies_andTheQueueListsTheSameLine() {
        // Given an operation depending on a finished operation, a running one, and a plain one
        // waiting on a suspended queue
        let held = HeldOperations()
        let finishedName = uniqueName("finished-dependency")
        let runningName = uniqueName("running-dependency")
        let plainName = uniqueName("plain-dependency")
        let finishedDependency = AsyncBlockOperation {}
        finishedDependency.name = finishedName
        let runningDependency = held.make(runningName)
        let plainDependency = BlockOperation {}
        plainDependency.name = plainName
        let suspended = AsyncOperationQueue()
        suspended.isSuspended = true
        suspended.addOperation(plainDependency)
        let queue = AsyncOperationQueue()
        queue.name = uniqueName("inspected")
        queue.addOperations([finishedDependency, runningDependency], waitUntilFinished: false)
        #expect(waitUntilFinished([finishedDependency], timeout: 10) && held.waitUntilStarted(runningName))
        let waiter = AsyncBlockOperation {}
        waiter.name = uniqueName("waiter")
        for dependency in [finishedDependency, runningDependency, plainDependency] {
            waiter.addDependency(dependency)
        }

        // When it is added to a queue
        queue.addOperation(waiter)

        // Then it says it waits for the two unfinished ones, by name, and not the finished one
        #expect(waitUntil(timeout: 10) { waiter.snapshot().state == .waitingForDependencies })
        let description = waiter.debugDescription
        #expect(description.contains("dependency '\(runningName)'"), "\(description)")
        #expect(description.contains("dependency '\(plainName)'"), "\(description)")
        #expect(!description.contains(finishedName), "\(description)")
        #expect(queue.debugDescription.components(separatedBy: "\n").contains("  \(description)"), "\(queue.debugDescription)")
        // and once one of them finishes, only the other
        held.finish(runningName)
        #expect(waitUntil(timeout: 10) { !waiter.debugDescription.contains(runningName) }, "\(waiter.debugDescription)")
        #expect(waiter.debugDescription.contains("dependency '\(plainName)'"), "\(waiter.debugDescription)")
        suspended.isSuspended = false
        #expect(waitUntilFinished([waiter], timeout: 10))
    }

    // API.md, Seeing inside: debugDescription says "conditions not yet answered by name".
    @Test
    func debugDescription_namesTheConditionNotYetAnswered_andNotTheOneThatAnswered() {
        // Given an operation with a condition that answers at once, then one that holds its answer
        let quickName = uniqueName("Quick")
        let slowName = uniqueName("Slow")
        let gate = HeldCallback<ConditionResult>()
        let executed = Counter()
        let operation = AsyncBlockOperation { _ = executed.increment() }
        operation.name = uniqueName("evaluated")
        operation.addCondition(StubCondition.satisfied(name: quickName))
        operation.addCondition(StubCondition(name: slowName) { _, completion in gate.hold(completion) })
        let queue = AsyncOperationQueue()

        // When it is added and the second condition is asked
        queue.addOperation(operation)
        #expect(gate.waitUntilHeld())

        // Then it says it evaluates its conditions and waits for the second, by name, only
        let snapshot = operation.snapshot()
        #expect(snapshot.state == .evaluatingConditions, "\(snapshot)")
        #expect(snapshot.waitsFor == [.condition(slowName)], "\(snapshot)")
        #expect(operation.debugDescription.contains("condition '\(slowName)'"), "\(operation.debugDescription)")
        #expect(!operation.debugDescription.contains(quickName), "\(operation.debugDescription)")
        #expect(queue.debugDescription.contains("  \(operation.debugDescription)"), "\(queue.debugDescription)")
        gate.call(.satisfied)
        #expect(waitUntilFinished([operation], timeout: 10))
        #expect(executed.current == 1)
    }

    // API.md, Seeing inside: "each category it waits for with the name of the operation holding it"; DebuggingAQueue.md: "... and its own place in line"; the queue lists them "in add order".
    @Test
    func debugDescription_namesTheCategorysHolderAndEachWaitersPlaceInLine_asTheHolderChanges() {
        // Given an operation holding X on a queue, and two operations waiting for X on it
        let (x, held, holderName, holder, queue) = startHoldingACategory()
        queue.name = uniqueName("line")
        let firstName = uniqueName("first")
        let secondName = uniqueName("second")
        let first = held.make(firstName)
        first.addCondition(ExclusiveCategory(x))
        let second = held.make(secondName)
        second.addCondition(ExclusiveCategory(x))
        queue.addOperations([first, second], waitUntilFinished: false)

        // Then each names the holder and its own place in line
        let firstLine = "\(firstName): waiting for categories; waits for category '\(x)' (held by '\(holderName)'; 1st in line)"
        let secondLine = "\(secondName): waiting for categories; waits for category '\(x)' (held by '\(holderName)'; 2nd in line)"
        #expect(waitUntil(timeout: 10) { first.debugDescription == firstLine && second.debugDescription == secondLine },
                "\(first.debugDescription) / \(second.debugDescription)")
        // and the queue lists the three in add order
        let lines = queue.debugDescription.components(separatedBy: "\n")
        #expect(lines == [
            "AsyncOperationQueue '\(queue.name!)': running, 3 unfinished operations",
            "  \(holderName): executing",
            "  \(firstLine)",
            "  \(secondLine)",
        ], "\(lines)")

        // When the holder finishes
        held.finish(holderName)

        // Then the second names the first, which now holds X, and is first in line
        #expect(held.waitUntilStarted(firstName))
        let secondNow = "\(secondName): waiting for categories; waits for category '\(x)' (held by '\(firstName)'; 1st in line)"
        #expect(waitUntil(timeout: 10) { second.debugDescription == secondNow }, "\(second.debugDescription)")
        held.finish(firstName)
        #expect(held.waitUntilStarted(secondName))
        held.finish(secondName)
        #expect(waitUntilFinished([holder, first, second], timeout: 10))
    }

    // OperationSnapshot.Reason.groupToStart: "It is a child of a group (by name) that has not started executing."
    @Test
    func childOfAGroupWaitingForADependency_saysItWaitsForItsGroup_andTheGroupNamesItsDependency() {
        // Given a group waiting for a running operation
        let held = HeldOperations()
        let dependencyName = uniqueName("dependency")
        let dependency = held.make(dependencyName)
        let child = AsyncBlockOperation {}
        child.name = uniqueName("child")
        let group = GroupOperation(operations: [child])
        group.name = uniqueName("group")
        group.addDependency(dependency)
        let queue = AsyncOperationQueue()
        queue.addOperations([dependency, group], waitUntilFinished: false)
        #expect(held.waitUntilStarted(dependencyName))

        // Then the group waits for its dependency, and its child for the group
        #expect(waitUntil(timeout: 10) { group.snapshot().waitsFor == [.dependency(dependencyName)] }, "\(group.snapshot())")
        #expect(child.snapshot().waitsFor == [.groupToStart(group.name!)], "\(child.snapshot())")
        #expect(child.debugDescription.contains("its group '\(group.name!)' to start"), "\(child.debugDescription)")
        held.finish(dependencyName)
        #expect(waitUntilFinished([group, child], timeout: 10))
    }

    // MARK: - A group's progress

    // API.md, Seeing inside: "totalUnitCount is the number of children admitted, completedUnitCount the number finished"; GroupOperation: "(growing as children are added or produced) ... fractionCompleted is 1 once the group has finished".
    @Test
    func groupProgress_countsChildrenAdmittedAddedAndProduced_andThoseFinished() {
        // Given a group of two held children
        let held = HeldOperations()
        let names = (0..<4).map { uniqueName("child\($0)") }
        let first = held.make(names[0])
        let second = held.make(names[1])
        let group = GroupOperation(operations: [first, second])
        #expect(group.progress.totalUnitCount == 2)
        #expect(group.progress.completedUnitCount == 0)
        let queue = AsyncOperationQueue()
        queue.addOperation(group)
        #expect(held.waitUntilStarted(names[0]) && held.waitUntilStarted(names[1]))

        // When a child is added while it runs, and a child produces another
        group.addChild(held.make(names[2]))
        first.produce(held.make(names[3]))

        // Then both count as admitted
        #expect(waitUntil(timeout: 10) { group.progress.totalUnitCount == 4 }, "\(group.progress.totalUnitCount)")
        #expect(held.waitUntilStarted(names[2]) && held.waitUntilStarted(names[3]))
        // and each finish counts as one
        for (index, name) in names.dropLast().enumerated() {
            held.finish(name)
            #expect(waitUntil(timeout: 10) { group.progress.completedUnitCount == Int64(index + 1) }, "\(group.progress.completedUnitCount)")
        }
        #expect(!group.isFinished && group.progress.fractionCompleted < 1)
        held.finish(names[3])
        #expect(waitUntilFinished([group], timeout: 10))
        #expect(group.progress.totalUnitCount == 4)
        #expect(group.progress.completedUnitCount == 4)
        #expect(group.progress.fractionCompleted == 1)
    }

    // API.md, Seeing inside: "cancelling the progress cancels the group"; GroupOperation: "and cancelling the group cancels its progress".
    @Test
    func cancellingAGroupsProgress_cancelsTheGroupAndItsChildren_andCancellingAGroupCancelsItsProgress() {
        // Given a running group with a held child
        let held = HeldOperations()
        let childName = uniqueName("child")
        let child = held.make(childName)
        let group = GroupOperation(operations: [child])
        let log = EventLogObserver()
        group.addObserver(log)
        let queue = AsyncOperationQueue()
        queue.addOperation(group)
        #expect(held.waitUntilStarted(childName))

        // When its progress is cancelled
        group.progress.cancel()

        // Then the group is cancelled, cancels its child, and finishes after it
        #expect(waitUntilFinished([group, child], timeout: 10))
        #expect(group.isCancelled && child.isCancelled)
        #expect(log.log.all == ["didStart", "didCancel", "didFinish"], "\(log.log.all)")

        // And a group cancelled while it waits has its progress cancelled
        let waiting = GroupOperation(operations: [AsyncBlockOperation {}])
        let suspended = AsyncOperationQueue()
        suspended.isSuspended = true
        suspended.addOperation(waiting)
        waiting.cancel()
        #expect(waitUntil(timeout: 10) { waiting.progress.isCancelled })
        suspended.isSuspended = false
        #expect(waitUntilFinished([waiting], timeout: 10))
    }

    // GroupOperation.progress: "A child group's progress is a child of its parent's, as Foundation's child progress works, so nested groups report partial progress."
    @Test
    func nestedGroupProgress_rollsUpPartially_andCountsTheInnerGroupAsOneChildOnceFinished() {
        // Given an outer group of an inner group of two held children, and a held child
        let held = HeldOperations()
        let names = (0..<3).map { uniqueName("child\($0)") }
        let inner = GroupOperation(operations: [held.make(names[0]), held.make(names[1])])
        let outer = GroupOperation(operations: [inner, held.make(names[2])])
        AsyncOperationQueue().addOperation(outer)
        #expect(names.allSatisfy { held.waitUntilStarted($0) })
        #expect(outer.progress.totalUnitCount == 2)

        // When one of the inner group's children finishes
        held.finish(names[0])

        // Then the outer group is a quarter done, none of its own children finished yet
        #expect(waitUntil(timeout: 10) { outer.progress.fractionCompleted == 0.25 }, "\(outer.progress.fractionCompleted)")
        #expect(outer.progress.completedUnitCount == 0)
        // and once the inner group finished, it counts as one child finished
        held.finish(names[1])
        #expect(waitUntilFinished([inner], timeout: 10))
        #expect(waitUntil(timeout: 10) { outer.progress.completedUnitCount == 1 }, "\(outer.progress.completedUnitCount)")
        #expect(outer.progress.fractionCompleted == 0.5)
        held.finish(names[2])
        #expect(waitUntilFinished([outer], timeout: 10))
        #expect(outer.progress.completedUnitCount == 2 && outer.progress.fractionCompleted == 1)
    }

    // MARK: - A serial group's order

    // API.md 9: "a GroupOperation with maxConcurrentOperationCount = 1 start[s] the operations whose dependencies have finished in the order they were added, conditions and categories included".
    @Test
    func serialGroup_startsChildrenInAddOrder_throughConditionsCategoriesAPlainChildAndADependency() {
        // Given a serial group of children of every kind; the sixth depends on the seventh
        let operations = RecordingOperations("serial-group")
        let sixth = operations.make("f")
        let seventh = operations.make("g")
        sixth.addDependency(seventh)
        let children: [Operation] = [
            conditioned(operations.make("a")),
            exclusive(operations.make("b")),
            operations.makePlain("c"),
            conditioned(exclusive(operations.make("d"))),
            operations.make("e"),
            sixth,
            seventh,
        ]
        let group = GroupOperation(operations: children)
        group.maxConcurrentOperationCount = 1

        // When it runs
        AsyncOperationQueue().addOperation(group)

        // Then they ran one after another in add order, the dependent after its dependency
        #expect(waitUntilFinished([group], timeout: 10))
        #expect(operations.executed.all == ["a", "b", "c", "d", "e", "g", "f"], "\(operations.executed.all)")
        #expect(group.errors.isEmpty, "\(group.errors)")
    }

    // API.md 9 for a group: add order, "categories included"; API.md 7: "Children may be added while the group runs".
    @Test
    func serialGroup_startsNoChildAddedAfterOneWaitingForACategoryHeldElsewhere_beforeIt() {
        // Given an operation of another queue holding X, and a running serial group
        let (x, held, holderName, holder, queue) = startHoldingACategory()
        let operations = RecordingOperations("serial-group-category")
        let gateName = uniqueName("gate")
        let group = GroupOperation(operations: [held.make(gateName)])
        group.maxConcurrentOperationCount = 1
        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted(gateName))

        // When a child needing X, then a child needing nothing, are added
        let needsX = operations.make("needs-x")
        needsX.addCondition(ExclusiveCategory(x))
        let free = operations.make("free")
        group.addChildren([needsX, free])
        held.finish(gateName)

        // Then the first waits for X and the second for its turn, behind it
        #expect(waitUntil(timeout: 10) { needsX.snapshot().state == .waitingForCategories }, "\(needsX.snapshot())")
        #expect(waitUntil(timeout: 10) {
            free.snapshot().waitsFor.contains { if case .turnOnSerialQueue = $0 { return true } else { return false } }
        }, "\(free.snapshot())")
        #expect(operations.executed.all.isEmpty, "\(operations.executed.all)")
        // and once X is free they run in add order
        held.finish(holderName)
        #expect(waitUntilFinished([holder, group], timeout: 10))
        #expect(operations.executed.all == ["needs-x", "free"], "\(operations.executed.all)")
        withExtendedLifetime(queue) {}
    }

    // MARK: - What a finished operation leaves behind

    enum EndOfLife: String, CaseIterable, Sendable {
        case cancelledBeforeStart, failedCondition, timedOut, shutDown, cancelledWhileWaitingForACategory
    }

    // API.md 8: "A finished operation is released by the framework: nothing it owns (observers, conditions, blocks, dependencies) is kept alive by the queue afterwards."
    @Test(arguments: EndOfLife.allCases)
    func operationThatEndedWithoutRunningNormally_leavesNothingAliveOnItsQueue(_ end: EndOfLife) {
        // Given an operation with an observer, a condition, a block and a dependency, each keeping
        // an object, that ends in the way given, on a queue that stays alive
        let queue = AsyncOperationQueue()
        let probes = runToItsEnd(end, on: queue)

        // Then the operation and everything it owned are released
        #expect(probes.operation.isReleased(timeout: 10), "the operation was kept alive")
        #expect(probes.observer.isReleased(timeout: 10), "its observer was kept alive")
        #expect(probes.condition.isReleased(timeout: 10), "its condition was kept alive")
        #expect(probes.block.isReleased(timeout: 10), "its block was kept alive")
        #expect(probes.dependency.isReleased(timeout: 10), "its dependency was kept alive")
        probes.cleanUp()
        withExtendedLifetime(queue) {}
    }

    enum GroupEnd: String, CaseIterable, Sendable {
        case finishedNormally, cancelledBeforeStart, shutDownWhileRunning
    }

    // API.md 8: "A finished operation is released by the framework: nothing it owns ... is kept alive by the queue afterwards", for a group and its children.
    @Test(arguments: GroupEnd.allCases)
    func groupThatEnded_leavesItselfItsChildAndWhatTheChildOwnedReleased(_ end: GroupEnd) {
        // Given a group whose child keeps an object in its block and in its observer, that ends
        // in the way given, on a queue that stays alive
        let queue = AsyncOperationQueue()
        let probes = runGroupToItsEnd(end, on: queue)

        // Then the group, its child and what the child owned are released
        #expect(probes.group.isReleased(timeout: 10), "the group was kept alive")
        #expect(probes.child.isReleased(timeout: 10), "its child was kept alive")
        #expect(probes.keepsakes.allSatisfy { $0.isReleased(timeout: 10) }, "what its child owned was kept alive")
        withExtendedLifetime(queue) {}
    }

    // MARK: - Races

    // API.md 3: "finish(with:) is idempotent: the first call wins, later calls change nothing and never crash"; 4: "operationDidFinish exactly once, last, with errors already final"; README: each late call is reported as .finishedTwice.
    @Test
    func finishCalledFromEightThreadsAtOnce_keepsOneError_heardOnce_andReportsTheSevenOthers() {
        // Given an executing operation
        let started = Flag()
        let name = uniqueName("raced-finish")
        let operation = ClosureOperation(name: name) { _ in started.raise() }
        let log = EventLogObserver()
        operation.addObserver(log)
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntil(timeout: 10) { started.isRaised })

        // When eight threads finish it at once, each with its own error
        let errors = (0..<8).map { StubError("finish-\($0)") }
        #expect(race(8, timeout: 10) { index in operation.finish(with: errors[index]) })

        // Then one error was kept, observers heard the finish once with it, the rest were reported
        #expect(waitUntilFinished([operation], timeout: 10))
        let kept = operation.errors.asStubErrors
        #expect(kept.count == 1 && errors.contains { $0 == kept.first }, "\(operation.errors)")
        #expect(log.log.all == ["didStart", "didFinish"], "\(log.log.all)")
        #expect(log.finishedErrors.all.first?.asStubErrors == kept)
        let kinds = DiagnosticsLog.shared.kinds(about: name, onceThereAre: 7)
        #expect(kinds == Array(repeating: .finishedTwice, count: 7), "\(kinds)")
    }

    // API.md 4: "operationDidStart exactly once, before execute(); operationDidFinish exactly once, last; operationDidCancel at most once"; 5: cancel(with:) "before the operation starts: it finishes without executing, with that error".
    @Test
    func cancelRacingTheAdd_alwaysEndsInOneConsistentStory() {
        let queue = AsyncOperationQueue()
        var stories: [String] = []
        for _ in 0..<100 {
            // Given an operation that logs its execution beside its observer's events
            let log = Recorder<String>()
            let operation = AsyncBlockOperation { log.append("execute") }
            operation.addObserver(EventLogObserver(log: log))
            let error = StubError("cancel")

            // When one thread adds it while another cancels it
            #expect(race(2, timeout: 10) { index in
                if index == 0 { queue.addOperation(operation) } else { operation.cancel(with: error) }
            })
            #expect(waitUntilFinished([operation], timeout: 10))

            // Then the events tell one of the stories the contract allows
            let events = log.all
            let count = { (event: String) in events.filter { $0 == event }.count }
            let executedAfterStart = !events.contains("execute")
                || (events.firstIndex(of: "didStart") ?? .max) < (events.firstIndex(of: "execute") ?? -1)
            let consistent = count("didFinish") == 1 && events.last == "didFinish"
                && count("didStart") <= 1 && count("didCancel") <= 1 && count("execute") <= 1
                && executedAfterStart
                && operation.isCancelled == (operation.errors.asStubErrors == [error])
                && operation.isCancelled == (count("didCancel") == 1)
                && (operation.isCancelled || (operation.errors.isEmpty && count("execute") == 1))
            if !consistent {
                stories.append("\(events), cancelled: \(operation.isCancelled), errors: \(operation.errors)")
            }
        }
        #expect(stories.isEmpty, "\(stories)")
    }

    // API.md 5: an AsyncBlockOperation "whose continuation has not been called yet finishes at once; a late continuation call is ignored"; 3: "the first call wins".
    @Test
    func continuationRacingACancel_keepsTheWinnersErrorOnly_andObserversHearTheSameStory() {
        let queue = AsyncOperationQueue()
        var stories: [String] = []
        for _ in 0..<100 {
            // Given an executing block operation holding its continuation
            let gate = HeldCallback<(any Error)?>()
            let operation = AsyncBlockOperation { finish in gate.hold(finish) }
            let log = EventLogObserver()
            operation.addObserver(log)
            queue.addOperation(operation)
            #expect(gate.waitUntilHeld(timeout: 10))
            let finished = StubError("continuation")
            let cancelled = StubError("cancel")

            // When one thread calls the continuation with an error while another cancels it with one
            #expect(race(2, timeout: 10) { index in
                if index == 0 { gate.call(finished) } else { operation.cancel(with: cancelled) }
            })
            #expect(waitUntilFinished([operation], timeout: 10))

            // Then exactly one of the two errors was kept, and the observers agree
            let kept = operation.errors.asStubErrors
            let events = log.log.all
            let consistent = (kept == [finished] || kept == [cancelled])
                && operation.isCancelled == (kept == [cancelled])
                && events.filter { $0 == "didFinish" }.count == 1 && events.last == "didFinish"
                && events.filter { $0 == "didCancel" }.count == (operation.isCancelled ? 1 : 0)
                && log.finishedErrors.all.first?.asStubErrors == kept
            if !consistent {
                stories.append("\(events), cancelled: \(operation.isCancelled), errors: \(operation.errors)")
            }
        }
        #expect(stories.isEmpty, "\(stories)")
    }

    // shutDown: waiting operations are "cancelled with queueShutDown"; "the shut-down's cancellations never run at the same time, so an operation it cancelled once is not given the error twice"; API.md 4: "operationDidCancel at most once"; API.md 5: `cancel(with:)` before the start: "it finishes without executing, with that error (if any) in `errors`" (so a cancel(with:) that comes second, before the start, adds its error too).
    @Test
    func cancelRacingTheShutDownOfASuspendedQueue_keepsOneCancellationError_heardOnce() {
        var stories: [String] = []
        for _ in 0..<50 {
            // Given an operation waiting on a suspended queue
            let queue = AsyncOperationQueue()
            queue.isSuspended = true
            let executed = Counter()
            let operation = AsyncBlockOperation { _ = executed.increment() }
            let log = EventLogObserver()
            operation.addObserver(log)
            queue.addOperation(operation)
            let error = StubError("user")

            // When one thread shuts the queue down while another cancels the operation
            #expect(race(2, timeout: 10) { index in
                if index == 0 { queue.shutDownAndWait(gracePeriod: 0) } else { operation.cancel(with: error) }
            })
            #expect(waitUntilFinished([operation], timeout: 10))

            // Then it was cancelled once, heard once, and holds each cancellation's error at most
            // once: the first's, and the second's if it came before the finish
            let errors = operation.errors
            let fromTheUser = errors.asStubErrors.filter { $0 == error }.count
            let fromTheShutDown = errors.asOperationErrors.filter { $0 == .queueShutDown }.count
            let consistent = !errors.isEmpty
                && errors.count == fromTheUser + fromTheShutDown && fromTheUser <= 1 && fromTheShutDown <= 1
                && log.log.all == ["didCancel", "didFinish"]
                && executed.current == 0
            if !consistent {
                stories.append("\(log.log.all), errors: \(errors), executed: \(executed.current)")
            }
        }
        #expect(stories.isEmpty, "\(stories)")
    }

    // API.md 6: "An AsyncBlockOperation that never calls its continuation therefore cannot block its queue when it has a timeout"; API.md 2: "Cancelling ... an operation frees its categories."
    @Test
    func timedOutHolderOfACategoryOnASerialQueue_freesTheQueueAndTheCategory() {
        // Given, on a serial queue, a holder of X that never calls its continuation, with a short
        // timeout, and an operation behind it
        let x = uniqueName("X")
        let events = Recorder<String>()
        let stuck = AsyncBlockOperation { _ in events.append("stuck executes") }
        stuck.addCondition(ExclusiveCategory(x))
        stuck.addObserver(TimeoutObserver(timeout: 0.2))
        stuck.addObserver(FinishedObserver { _, _ in events.append("stuck finished") })
        let behind = AsyncBlockOperation { events.append("behind") }
        let serial = AsyncOperationQueue()
        serial.maxConcurrentOperationCount = 1
        serial.addOperations([stuck, behind], waitUntilFinished: false)
        #expect(waitUntil(timeout: 10) { events.all.contains("stuck executes") })
        // and on another queue an operation needing X, with a long timeout
        let waiter = AsyncBlockOperation { events.append("waiter") }
        waiter.addCondition(ExclusiveCategory(x))
        waiter.addObserver(TimeoutObserver(timeout: 60))
        AsyncOperationQueue().addOperation(waiter)

        // Then the stuck one times out, and both the one behind it and the waiter run
        #expect(waitUntilFinished([stuck, behind, waiter], timeout: 10))
        #expect(stuck.errors.asOperationErrors == [.timedOut(after: 0.2)], "\(stuck.errors)")
        #expect(behind.errors.isEmpty && waiter.errors.isEmpty && !waiter.isCancelled, "\(waiter.errors)")
        let all = events.all
        let stuckFinished = all.firstIndex(of: "stuck finished") ?? .max
        #expect(stuckFinished < (all.firstIndex(of: "waiter") ?? -1), "\(all)")
        #expect(stuckFinished < (all.firstIndex(of: "behind") ?? -1), "\(all)")
    }
}

// MARK: - Helpers

/// An object an operation's parts keep, to see when they let go of it.
private final class Keepsake: Sendable {}

/// Weak references to an operation that has ended and to what it owned; `cleanUp` lets go of
/// anything the scenario still held (a category's holder).
private struct EndProbes {
    let operation: WeakProbe<Operation>
    let observer: WeakProbe<Keepsake>
    let condition: WeakProbe<Keepsake>
    let block: WeakProbe<Keepsake>
    let dependency: WeakProbe<Operation>
    let cleanUp: @Sendable () -> Void
}

/// Makes an operation with an observer, a condition, a block and a dependency, each keeping an
/// object of its own, ends it as `end` says on `queue`, and returns weak references once it has
/// finished; nothing here outlives the call but what the framework keeps.
private func runToItsEnd(_ end: FoundationParityProbeTests4.EndOfLife, on queue: AsyncOperationQueue) -> EndProbes {
    let observerKeepsake = Keepsake()
    let conditionKeepsake = Keepsake()
    let blockKeepsake = Keepsake()
    let operation = AsyncBlockOperation { finish in
        withExtendedLifetime(blockKeepsake) {}
        if end != .timedOut { finish(nil) }
    }
    operation.name = uniqueName("ended-\(end.rawValue)")
    operation.addObserver(BlockObserver(didFinish: { _, _ in withExtendedLifetime(observerKeepsake) {} }))
    operation.addCondition(StubCondition(name: "KeepsAKeepsake") { _, completion in
        withExtendedLifetime(conditionKeepsake) {}
        completion(end == .failedCondition ? .failed(StubError("condition")) : .satisfied)
    })
    let dependency = AsyncBlockOperation {}
    operation.addDependency(dependency)
    var cleanUp: @Sendable () -> Void = {}

    switch end {
    case .cancelledBeforeStart:
        operation.cancel()
        queue.addOperations([dependency, operation], waitUntilFinished: false)
    case .failedCondition:
        queue.addOperations([dependency, operation], waitUntilFinished: false)
    case .timedOut:
        operation.addObserver(TimeoutObserver(timeout: 0.05))
        queue.addOperations([dependency, operation], waitUntilFinished: false)
    case .shutDown:
        queue.isSuspended = true
        queue.addOperations([dependency, operation], waitUntilFinished: false)
        queue.shutDownAndWait(gracePeriod: 0)
    case .cancelledWhileWaitingForACategory:
        let (x, held, holderName, holder, holderQueue) = startHoldingACategory()
        operation.addCondition(ExclusiveCategory(x))
        queue.addOperations([dependency, operation], waitUntilFinished: false)
        #expect(waitUntil(timeout: 10) { operation.snapshot().state == .waitingForCategories }, "\(operation.snapshot())")
        operation.cancel()
        cleanUp = {
            held.finish(holderName)
            _ = waitUntilFinished([holder], timeout: 10)
            withExtendedLifetime(holderQueue) {}
        }
    }
    #expect(waitUntilFinished([dependency, operation], timeout: 10), "\(operation.snapshot())")
    return EndProbes(
        operation: WeakProbe<Operation>(operation),
        observer: WeakProbe(observerKeepsake),
        condition: WeakProbe(conditionKeepsake),
        block: WeakProbe(blockKeepsake),
        dependency: WeakProbe<Operation>(dependency),
        cleanUp: cleanUp
    )
}

/// Weak references to a group that has ended, its child, and the objects the child kept.
private struct GroupEndProbes {
    let group: WeakProbe<Operation>
    let child: WeakProbe<Operation>
    let keepsakes: [WeakProbe<Keepsake>]
}

/// Makes a group with one child whose block and observer each keep an object, ends it as `end`
/// says on `queue`, and returns weak references once it has finished.
private func runGroupToItsEnd(_ end: FoundationParityProbeTests4.GroupEnd, on queue: AsyncOperationQueue) -> GroupEndProbes {
    let blockKeepsake = Keepsake()
    let observerKeepsake = Keepsake()
    let started = Flag()
    let child = AsyncBlockOperation { finish in
        withExtendedLifetime(blockKeepsake) {}
        started.raise()
        if end == .finishedNormally { finish(nil) }
    }
    child.addObserver(BlockObserver(didFinish: { _, _ in withExtendedLifetime(observerKeepsake) {} }))
    let group = GroupOperation(operations: [child])
    group.name = uniqueName("ended-group-\(end.rawValue)")
    switch end {
    case .finishedNormally:
        queue.addOperation(group)
    case .cancelledBeforeStart:
        group.cancel()
        queue.addOperation(group)
    case .shutDownWhileRunning:
        queue.addOperation(group)
        #expect(waitUntil(timeout: 10) { started.isRaised })
        queue.shutDownAndWait(gracePeriod: 0)
    }
    #expect(waitUntilFinished([group, child], timeout: 10), "\(group.snapshot())")
    return GroupEndProbes(
        group: WeakProbe<Operation>(group),
        child: WeakProbe<Operation>(child),
        keepsakes: [WeakProbe(blockKeepsake), WeakProbe(observerKeepsake)]
    )
}
