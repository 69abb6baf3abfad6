import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// A second round of adversarial probes of parity with Foundation (the first is
// `FoundationParityProbeTests`): `AsyncOperationQueue` is an `OperationQueue` and `AsyncOperation`
// an `Operation`, and where the package's documentation (API.md, README.md, the `///` comments)
// says nothing else, they should behave as Apple documents `OperationQueue` and `Operation`, and
// as swift-corelibs-foundation implements them on Linux. Where what Foundation does is not spelled
// out, each probe first runs the same scenario on a plain `OperationQueue` with `BlockOperation`s
// and compares. Every wait is bounded; none asserts on wall-clock speed.

@Suite struct FoundationParityProbeTests2 {
    // MARK: - Scenario kinds

    /// What keeps an `AsyncOperation` from going to Foundation's queue at once.
    enum HeldBackBy: String, Sendable, CaseIterable {
        case nothing, condition, category, suspension
    }

    /// How an operation's life ends.
    enum Fate: String, Sendable, CaseIterable {
        case ran, conditionFailed, cancelledWhileWaitingForACategory, cancelledWhileExecuting
    }

    /// The kinds of operation an `AsyncOperationQueue` takes (see `makeOperation(_:_:)`).
    enum Kind: String, Sendable, CaseIterable {
        case asyncOperation, conditionedOperation, plainOperation
    }

    enum Outer: String, Sendable, CaseIterable {
        case plainOperation, asyncOperation
    }

    enum BarrierScene: String, Sendable, CaseIterable {
        case emptyQueue, queueHoldingAnOperation
    }

    enum DependencyKind: String, Sendable, CaseIterable {
        case asyncOnAsyncQueue, plainOnPlainQueue
    }

    enum HandStarted: String, Sendable, CaseIterable {
        case plainOperation, asyncOperation
    }

    // MARK: - Completion blocks

    // Apple, `Operation.completionBlock`: "The exact execution context for your completion block
    // is not guaranteed but is typically a secondary thread"; it runs when "the value in the
    // isFinished property changes to true". corelibs dispatches it to a global dispatch queue once
    // the operation is finished: not on the queue's underlying dispatch queue, and with no
    // `OperationQueue.current`.
    @Test(arguments: Fate.allCases)
    func completionBlock_runsOnceAfterTheFinish_offTheQueueAndItsDispatchQueue_asABlockOperationsDoes(fate: Fate) {
        // Given Foundation's answer, on a queue with a dispatch queue of its own
        let plainMarker = DispatchMarker()
        let plainQueue = OperationQueue()
        plainQueue.underlyingQueue = plainMarker.makeQueue(serial: false)
        let plainSightings = Recorder<CompletionSighting>()
        let plain = BlockOperation {}
        plain.completionBlock = { [weak plain] in
            plainSightings.append(CompletionSighting(plain, queue: plainQueue, marker: plainMarker))
        }
        plainQueue.addOperation(plain)
        #expect(waitUntilFinished([plain]))
        #expect(waitUntil { plainSightings.count >= 1 })
        Thread.sleep(forTimeInterval: 0.05) // a second call would come now
        let reference = plainSightings.all
        #expect(reference == [CompletionSighting(finished: true, executing: false, onItsQueue: false, onUnderlyingQueue: false)])

        // and an AsyncOperation that ends as `fate` says, on such a queue
        let marker = DispatchMarker()
        let queue = AsyncOperationQueue()
        queue.underlyingQueue = marker.makeQueue(serial: false)
        let held = HeldOperations()
        let runnerName = uniqueName("runner")
        let holding = fate == .cancelledWhileWaitingForACategory ? startHoldingACategory() : nil
        let operation: AsyncOperation
        switch fate {
        case .ran:
            operation = AsyncBlockOperation {}
        case .conditionFailed:
            operation = AsyncBlockOperation {}
            operation.addCondition(StubCondition.failing(StubError("no")))
        case .cancelledWhileWaitingForACategory:
            operation = AsyncBlockOperation {}
            operation.addCondition(ExclusiveCategory(holding?.x ?? uniqueName("X")))
        case .cancelledWhileExecuting:
            operation = held.make(runnerName)
        }
        let sightings = Recorder<CompletionSighting>()
        operation.completionBlock = { [weak operation] in
            sightings.append(CompletionSighting(operation, queue: queue, marker: marker))
        }

        // When it is added, and cancelled where `fate` says
        queue.addOperation(operation)
        switch fate {
        case .ran, .conditionFailed:
            break
        case .cancelledWhileWaitingForACategory:
            #expect(waitUntil { queue.allOperationCount == 1 })
            Thread.sleep(forTimeInterval: 0.05)
            operation.cancel()
        case .cancelledWhileExecuting:
            #expect(held.waitUntilStarted(runnerName))
            operation.cancel()
        }
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { sightings.count >= 1 })
        Thread.sleep(forTimeInterval: 0.05) // a second call would come now
        if let holding { holding.held.finish(holding.holderName) }

        // Then its completion block ran once, as Foundation's: after the finish, off the queue
        #expect(sightings.all == reference)
    }

    // Apple, `completionBlock`: "The block to execute after the operation's main task is
    // completed." corelibs reads it once, as the operation finishes: of two blocks set before
    // then, only the latter runs; one set afterwards never runs.
    @Test(arguments: Kind.allCases)
    func completionBlock_isTheOneSetWhenTheOperationFinishes_andOneSetAfterwardsNeverRuns_asOnABlockOperation(kind: Kind) {
        // Given Foundation's answer
        let reference = completionBlocksThatRan(on: OperationQueue(), BlockOperation {})
        #expect(reference == ["current"])

        // When the same is done on an AsyncOperationQueue with an operation of `kind`
        let ran = completionBlocksThatRan(on: AsyncOperationQueue(), makeOperation(kind) {})

        // Then the same blocks ran
        #expect(ran == reference)
    }

    // MARK: - Waiting

    // Apple, `Operation.waitUntilFinished()`: "Blocks execution of the current thread until the
    // operation object finishes its task"; `cancel()` "does not force your operation code to
    // stop", and an operation on no queue finishes only once started. corelibs: a cancelled
    // operation is not finished until `start()` runs. README: an AsyncOperation cancelled on no
    // queue "stays cancelled and finishes once added or started".
    @Test(arguments: [false, true], [Kind.asyncOperation, .conditionedOperation])
    func waitUntilFinished_onAnOperationNeverAdded_lastsUntilItIsStartedByHand_cancelledOrNot_asOnABlockOperation(cancelledFirst: Bool, kind: Kind) {
        // Given Foundation's answer
        let plainExecuted = Counter()
        let reference = waitForAnOperationNeverAdded(BlockOperation { _ = plainExecuted.increment() }, executed: plainExecuted, cancelledFirst: cancelledFirst)
        #expect(reference == UnaddedWait(endedBeforeTheStart: false, sawFinished: [true], executed: cancelledFirst ? 0 : 1))

        // When a thread waits for an AsyncOperation on no queue, cancelled or not, then started
        let executed = Counter()
        let outcome = waitForAnOperationNeverAdded(makeOperation(kind) { _ = executed.increment() }, executed: executed, cancelledFirst: cancelledFirst)

        // Then the wait lasted until the start, as Foundation's
        #expect(outcome == reference)
    }

    // Apple, `addOperations(_:waitUntilFinished:)`: "If true, the current thread is blocked until
    // all of the specified operations finish executing." From an operation of the same queue,
    // with slots to spare, corelibs runs them beside it and the call returns.
    @Test(arguments: Outer.allCases, [OperationQueue.defaultMaxConcurrentOperationCount, 2])
    func addOperationsWaitingUntilFinished_fromInsideAnOperationOfTheSameQueue_returnsOnceTheyFinished_asOnAPlainQueue(outer: Outer, width: Int) {
        // Given Foundation's answer
        let plainQueue = OperationQueue()
        plainQueue.maxConcurrentOperationCount = width
        let referenceSaw = Recorder<Bool>()
        let plainOuter = BlockOperation {
            let inner = (0..<3).map { _ in BlockOperation {} }
            plainQueue.addOperations(inner, waitUntilFinished: true)
            referenceSaw.append(inner.allSatisfy(\.isFinished))
        }
        plainQueue.addOperation(plainOuter)
        #expect(waitUntilFinished([plainOuter]))
        #expect(referenceSaw.all == [true])

        // When an operation of an AsyncOperationQueue of the same width adds operations of every
        // kind to it, and waits for them
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = width
        let saw = Recorder<Bool>()
        let executed = Counter()
        let addAndWait: @Sendable () -> Void = {
            let inner = Kind.allCases.map { makeOperation($0) { _ = executed.increment() } }
            queue.addOperations(inner, waitUntilFinished: true)
            saw.append(inner.allSatisfy(\.isFinished))
        }
        let outerOperation: Operation = outer == .plainOperation ? BlockOperation(block: addAndWait) : AsyncBlockOperation { addAndWait() }
        queue.addOperation(outerOperation)

        // Then the call returned once every one of them had finished, as on the plain queue
        #expect(waitUntilFinished([outerOperation]))
        #expect(saw.all == referenceSaw.all)
        #expect(executed.current == Kind.allCases.count)
    }

    // MARK: - Width and suspension

    // Apple, `maxConcurrentOperationCount`: "The maximum number of queued operations that can run
    // at the same time." corelibs starts nothing while it is 0, and each raise starts at once as
    // many waiting operations as the new width allows.
    @Test
    func maxConcurrentOperationCountOfZero_startsNothing_andEachRaiseStartsAsManyMore_asOnAPlainQueue() {
        // Given Foundation's answer for four operations added to a queue of width 0, then widened
        // to 2 and to 4
        let reference = startCountsThroughRaisesFromZero(on: OperationQueue()) { log in
            (0..<4).map { log.plain("plain \($0)") }
        }
        #expect(reference == [0, 2, 4])

        // When the same is done on an AsyncOperationQueue, with operations of every kind
        let counts = startCountsThroughRaisesFromZero(on: AsyncOperationQueue()) { log in
            [log.plain("plain"), log.async("async"), conditioned(log.async("conditioned")), exclusive(log.async("exclusive"))]
        }

        // Then as many started at each step
        #expect(counts == reference)
    }

    // Apple, `isSuspended`: "When the value of this property is false, the queue actively starts
    // operations that are in the queue and ready to execute." corelibs starts a serial queue's
    // operations in add order, however often it was suspended and resumed meanwhile. API.md 9:
    // a serial queue starts in add order "also across a suspension".
    @Test
    func isSuspendedToggledRapidlyWhileOperationsAreAdded_runsEachOnceInAddOrder_onASerialQueue_asOnAPlainQueue() {
        // Given Foundation's answer
        let reference = orderThroughRapidSuspensions(of: OperationQueue()) { index, ran in
            BlockOperation { ran.append(index) }
        }
        #expect(reference == Array(0..<40))

        // When operations of every kind are added to a serial AsyncOperationQueue while another
        // thread suspends and resumes it again and again
        let order = orderThroughRapidSuspensions(of: AsyncOperationQueue()) { index, ran in
            makeOperation(Kind.allCases[index % Kind.allCases.count]) { ran.append(index) }
        }

        // Then each ran once, in the order added
        #expect(order == reference)
    }

    // Apple, `isSuspended`: a Boolean property, not a count (unlike `DispatchQueue.suspend()`):
    // corelibs stores the flag, so one `false` after two `true`s resumes the queue.
    @Test(arguments: Kind.allCases)
    func isSuspended_isAFlagNotACount_oneResumeAfterTwoSuspensionsRunsTheQueue_asOnAPlainQueue(kind: Kind) {
        // Given Foundation's answer
        let reference = suspendTwiceResumeOnce(OperationQueue(), BlockOperation {})
        #expect(reference == TwiceSuspended(finishedWhileSuspended: false, suspendedAfterTheResume: false, finishedAfterTheResume: true))

        // When an AsyncOperationQueue is suspended twice and resumed once
        let outcome = suspendTwiceResumeOnce(AsyncOperationQueue(), makeOperation(kind) {})

        // Then it runs, as the plain queue does
        #expect(outcome == reference)
    }

    // MARK: - Cancelling

    // Apple, `cancelAllOperations()`: "Cancels all queued and executing operations" of the
    // receiver; a cancelled operation waiting for dependencies is started sooner, and a
    // dependency's cancellation does not cancel its dependents. corelibs walks only the
    // receiver's own list.
    @Test(arguments: Kind.allCases)
    func cancelAllOperations_reachesOnlyItsOwnQueue_andADependentOnAnotherQueueRunsUncancelled_asOnPlainQueues(kind: Kind) {
        // Given Foundation's answer: an operation on queue A waits for one running on queue C; on
        // queue B, a dependent of it and a bystander waiting for the one on C
        let reference = cancelAllAcrossQueues(makeQueue: { OperationQueue() }) { label, executed in
            BlockOperation { executed.append(label) }
        }
        #expect(reference == CrossQueueCancel(executed: ["dependent", "bystander"], cancelled: ["waiting"], dependencyStillRanWhenTheDependentHadFinished: true))

        // When the same is done with AsyncOperationQueues and operations of `kind`, and A's
        // operations are all cancelled
        let outcome = cancelAllAcrossQueues(makeQueue: { AsyncOperationQueue() }) { label, executed in
            makeOperation(kind) { executed.append(label) }
        }

        // Then only A's operation was cancelled, and B's ran as on plain queues
        #expect(outcome == reference)
    }

    // Apple, `Operation.cancel()`: it "does not force your operation code to stop"; `addDependency`:
    // the receiver is not ready "until all of its dependent operations have finished executing".
    // corelibs: a cancelled operation that executes is not finished, and its dependents wait.
    @Test(arguments: DependencyKind.allCases, Kind.allCases)
    func dependencyCancelledWhileItExecutes_holdsItsDependentUntilItFinishes_asOnAPlainQueue(dependencyKind: DependencyKind, dependentKind: Kind) {
        // Given Foundation's answer
        let plainStarted = Signal()
        let plainRelease = Signal()
        let plainDependency = BlockOperation {
            plainStarted.signal()
            _ = plainRelease.wait(timeout: blockingTimeout)
        }
        let reference = dependentOfACancelledRunningDependency(
            plainDependency, on: OperationQueue(), started: plainStarted, release: plainRelease, dependentQueue: OperationQueue()
        ) { body in BlockOperation { body() } }
        #expect(reference == CancelledDependency(ranBeforeTheFinish: false, sawTheDependencyFinished: [true], dependentCancelled: false))

        // When a dependency of `dependencyKind`, which ignores its cancellation until told to
        // finish, is cancelled while it executes, with a dependent of `dependentKind` waiting on
        // an AsyncOperationQueue
        let started = Signal()
        let release = Signal()
        let dependency: Operation
        let dependencyQueue: OperationQueue
        switch dependencyKind {
        case .asyncOnAsyncQueue:
            dependency = ClosureOperation { operation in
                started.signal()
                _ = release.wait(timeout: blockingTimeout)
                operation.finish()
            }
            dependencyQueue = AsyncOperationQueue()
        case .plainOnPlainQueue:
            dependency = BlockOperation {
                started.signal()
                _ = release.wait(timeout: blockingTimeout)
            }
            dependencyQueue = OperationQueue()
        }
        let outcome = dependentOfACancelledRunningDependency(
            dependency, on: dependencyQueue, started: started, release: release, dependentQueue: AsyncOperationQueue()
        ) { body in makeOperation(dependentKind, body) }

        // Then the dependent ran only once its dependency had finished, and was not cancelled
        #expect(outcome == reference)
    }

    // Apple, `Operation.cancel()`: an operation "waiting on unfinished dependent operations" has
    // them "subsequently ignored ... this behavior allows the operation queue to call the
    // operation's start() method sooner"; a suspended queue starts nothing ("isSuspended").
    // corelibs: the cancelled operation is ready at once, but finishes only once its queue
    // resumes and starts it. API.md 10: "A suspended queue ... starts nothing." The package
    // documents one difference (`AsyncOperation.cancel(with:)`, `cancelAllOperations()`): an
    // `AsyncOperation` waiting for dependencies finishes at once, without executing, so its
    // dependents on other queues go on.
    @Test(arguments: Kind.allCases)
    func cancellingAnOperationWaitingForADependencyOnASuspendedQueue_finishesAsDocumented(kind: Kind) {
        // Given Foundation's answer
        let reference = cancelWaitingForADependencyOnASuspendedQueue(OperationQueue()) { body in BlockOperation { body() } }
        #expect(reference == SuspendedCancel(
            readyWhileSuspended: true, finishedWhileSuspended: false, dependentRanWhileSuspended: false,
            executed: ["dependent"], dependencyStillRan: true
        ))

        // When the same is done on a suspended AsyncOperationQueue with an operation of `kind`
        let outcome = cancelWaitingForADependencyOnASuspendedQueue(AsyncOperationQueue(), finishesAtOnce: kind != .plainOperation) { body in makeOperation(kind, body) }

        // Then a plain operation finished only once the queue resumed, and its dependent waited
        // until then; an AsyncOperation finished at once, and its dependent ran
        if kind == .plainOperation {
            #expect(outcome == reference)
        } else {
            #expect(outcome == SuspendedCancel(
                readyWhileSuspended: true, finishedWhileSuspended: true, dependentRanWhileSuspended: true,
                executed: ["dependent"], dependencyStillRan: true
            ))
        }
    }

    // MARK: - Priority

    // corelibs `_addOperations`: an operation without an explicit `queuePriority`, on a queue
    // wider than 1, waits for a slot with the priority its own `qualityOfService` stands for
    // (`.userInitiated` is `.high`, `.utility` is `.low`); Apple, `qualityOfService`: "The
    // relative amount of importance for granting system resources to the operation."
    // AsyncOperationQueue: "Operations waiting for a slot start as on Foundation's queue".
    @Test(arguments: HeldBackBy.allCases)
    func qualityOfServiceOfAnOperationWithoutAPriority_decidesWhichOfTwoWaitingForASlotStartsFirst_asOnAPlainQueue(heldBackBy: HeldBackBy) {
        // Given Foundation's answer: both slots of a width-2 queue taken, a `.utility` operation
        // added, then a `.userInitiated` one
        let giveQualities: (Operation, Operation) -> Void = { first, second in
            first.qualityOfService = .utility
            second.qualityOfService = .userInitiated
        }
        let reference = plainStartOrderOfTwoWaitingForASlot(configure: giveQualities, change: { _, _ in })
        #expect(reference == ["second", "first"])
        #expect(AsyncBlockOperation {}.qualityOfService == BlockOperation().qualityOfService)

        // When the same is done on an AsyncOperationQueue, held back as `heldBackBy` says
        let order = asyncStartOrderOfTwoWaitingForASlot(heldBackBy: heldBackBy, configure: giveQualities, change: { _, _ in })

        // Then the operation of the higher quality of service started first
        #expect(order == reference)
    }

    // Apple, `queuePriority`: "the operation queue uses the priority level to determine which
    // ready operation to start next"; corelibs `changePriority` moves an operation already in the
    // queue to its new priority's list. AsyncOperationQueue: "Operations waiting for a slot start
    // as on Foundation's queue: the highest queuePriority first".
    @Test(arguments: HeldBackBy.allCases)
    func queuePriorityRaisedWhileTheOperationWaitsForASlot_letsItStartFirst_asOnAPlainQueue(heldBackBy: HeldBackBy) {
        // Given Foundation's answer: both slots of a width-2 queue taken, two operations of the
        // same priority added, and the later one raised to `.high` while both wait
        let raiseTheSecond: (Operation, Operation) -> Void = { _, second in second.queuePriority = .high }
        let reference = plainStartOrderOfTwoWaitingForASlot(configure: { _, _ in }, change: raiseTheSecond)
        #expect(reference == ["second", "first"])

        // When the same is done on an AsyncOperationQueue, held back as `heldBackBy` says
        let order = asyncStartOrderOfTwoWaitingForASlot(heldBackBy: heldBackBy, configure: { _, _ in }, change: raiseTheSecond)

        // Then the raised operation started first
        #expect(order == reference)
    }

    // Apple, `OperationQueue`: "Operations within a queue are organized according to their
    // readiness, priority level, and interoperation dependencies"; corelibs, resumed, walks its
    // priority lists from `.veryHigh` down. The package: "Operations waiting for a slot start as
    // on Foundation's queue: the highest queuePriority first". (`.suspension` is the scenario
    // itself.)
    @Test(arguments: [HeldBackBy.nothing, .condition, .category])
    func resumingASuspendedQueue_startsTheHighestPriorityOperationsFirst_asOnAPlainQueue(heldBackBy: HeldBackBy) {
        // Given Foundation's answer: a suspended queue of width 2, two `.low` operations added,
        // then two `.high` ones, and the queue resumed
        let reference = firstTwoStartedOnResume(of: OperationQueue()) { log, label in log.plain(label) }
        #expect(reference == ["high", "high"])

        // When the same is done on an AsyncOperationQueue, held back as `heldBackBy` says too
        let firstTwo = firstTwoStartedOnResume(of: AsyncOperationQueue()) { log, label in
            let operation = log.async(label)
            holdBack(operation, by: heldBackBy)
            return operation
        }

        // Then the two high-priority operations started first
        #expect(firstTwo == reference)
    }

    // MARK: - Where operations run

    // Apple, `underlyingQueue`: "The dispatch queue used to execute operations." corelibs hands
    // each operation's start to it: a serial dispatch queue runs one operation at a time however
    // wide the queue, each with `OperationQueue.current` the queue.
    @Test
    func serialUnderlyingQueue_runsOneOperationAtATime_everyKindOnIt_asOnAPlainQueue() {
        // Given Foundation's answer for plain operations
        let reference = sightingsOnASerialUnderlyingQueue(OperationQueue()) { _, body in BlockOperation { body() } }
        #expect(reference == SerialSightings(mostAtOnce: 1, allOnTheDispatchQueue: true, allOnTheQueue: true, count: 12))

        // When operations of every kind run on an AsyncOperationQueue with a serial dispatch queue
        let sightings = sightingsOnASerialUnderlyingQueue(AsyncOperationQueue()) { index, body in
            makeOperation(Kind.allCases[index % Kind.allCases.count], body)
        }

        // Then they ran one at a time, on it, as on the plain queue
        #expect(sightings == reference)
    }

    // MARK: - Barriers

    // Apple, `addBarrierBlock(_:)`: "Invokes a block when the queue finishes all enqueued
    // operations, and prevents subsequent operations from starting until the block has
    // completed." corelibs: on a queue with no operation the block goes straight to its dispatch
    // queue, and runs even while the queue is suspended; behind an operation, it waits for it,
    // and so for the queue to resume. The package (`addBarrierBlock(_:)`, API.md 10): a suspended
    // queue starts nothing, the barrier included, until it resumes.
    @Test(arguments: BarrierScene.allCases)
    func barrierBlockOnASuspendedQueue_runsInFoundationsOrder_onceTheQueueResumes(scene: BarrierScene) {
        // Given Foundation's answer: a barrier placed on a suspended queue, empty or holding an
        // operation, then an operation added after it
        let reference = barrierOnASuspendedQueue(OperationQueue(), scene: scene, expectsBarrierWhileSuspended: scene == .emptyQueue) { label, log in
            BlockOperation { log.append(label) }
        }
        switch scene {
        case .emptyQueue:
            #expect(reference == SuspendedBarrier(whileSuspended: ["barrier"], all: ["barrier", "later"]))
        case .queueHoldingAnOperation:
            #expect(reference == SuspendedBarrier(whileSuspended: [], all: ["earlier", "barrier", "later"]))
        }

        // When the same is done on an AsyncOperationQueue, with operations that have a condition
        let outcome = barrierOnASuspendedQueue(AsyncOperationQueue(), scene: scene) { label, log in
            makeOperation(.conditionedOperation) { log.append(label) }
        }

        // Then the barrier ran in the same order as Foundation's, on an empty queue only once the
        // queue resumed
        switch scene {
        case .emptyQueue:
            #expect(outcome == SuspendedBarrier(whileSuspended: [], all: ["barrier", "later"]))
        case .queueHoldingAnOperation:
            #expect(outcome == reference)
        }
    }

    // Apple, `BlockOperation`: "The operation itself is considered finished only when all blocks
    // have finished executing"; `addBarrierBlock(_:)` waits for every enqueued operation.
    // corelibs runs the blocks one after another in `main()`.
    @Test(arguments: [Kind.asyncOperation, .conditionedOperation])
    func blockOperationWithSeveralExecutionBlocks_onAnAsyncOperationQueue_finishesAfterAllOfThem_beforeItsDependentAndABarrier(dependentKind: Kind) {
        // Given Foundation's answer
        let reference = runBlockOperationWithThreeBlocks(on: OperationQueue()) { body in BlockOperation { body() } }
        #expect(reference == SeveralBlocks(log: ["block", "block", "block", "dependent", "barrier"], blockCount: 3, completions: 1))

        // When a BlockOperation with three execution blocks runs on an AsyncOperationQueue, with
        // an AsyncOperation depending on it and a barrier after both
        let outcome = runBlockOperationWithThreeBlocks(on: AsyncOperationQueue()) { body in makeOperation(dependentKind, body) }

        // Then it finished after its three blocks, before its dependent and the barrier
        #expect(outcome == reference)
    }

    // MARK: - Dependencies and state

    // Apple, `addDependency(_:)`: the receiver is not ready "until all of its dependent operations
    // have finished executing", wherever they run; `start()` runs an operation on the calling
    // thread. corelibs: a dependency on no queue, started by hand, releases its dependents.
    @Test(arguments: HandStarted.allCases, Kind.allCases)
    func dependencyOnNoQueue_holdsItsDependentUntilStartedByHand_asOnAPlainQueue(dependencyKind: HandStarted, dependentKind: Kind) {
        // Given Foundation's answer
        let reference = dependentOfAnOperationStartedByHand(BlockOperation {}, dependentQueue: OperationQueue()) { body in
            BlockOperation { body() }
        }
        #expect(reference == HandStartedDependency(ranBeforeTheStart: false, sawItFinished: [true]))

        // When a dependent of `dependentKind` waits on an AsyncOperationQueue for an operation of
        // `dependencyKind` on no queue, which is then started by hand
        let dependency: Operation = dependencyKind == .plainOperation ? BlockOperation {} : AsyncBlockOperation {}
        let outcome = dependentOfAnOperationStartedByHand(dependency, dependentQueue: AsyncOperationQueue()) { body in
            makeOperation(dependentKind, body)
        }

        // Then the dependent waited for the start, and ran once after it
        #expect(outcome == reference)
    }

    // corelibs: `isReady` is true when no dependency is unfinished (whether the queue is suspended
    // or not), `isExecuting` and `isFinished` false until the queue starts the operation. The
    // package, `isReady`: "all dependencies have finished ..., and on an AsyncOperationQueue its
    // conditions passed and its categories are held" (these have none).
    @Test(arguments: [Kind.asyncOperation, .plainOperation])
    func flagsOfOperationsWaitingOnASuspendedQueue_areThoseOfBlockOperations(kind: Kind) {
        // Given Foundation's answer for an operation without dependencies, one whose dependency
        // has finished and one whose dependency runs, on a suspended queue
        let reference = flagsWaitingOnASuspendedQueue(OperationQueue()) { BlockOperation {} }
        let waiting = StateFlags(ready: true, executing: false, finished: false, cancelled: false)
        #expect(reference == [
            waiting, waiting,
            StateFlags(ready: false, executing: false, finished: false, cancelled: false),
        ])

        // When the same is done on a suspended AsyncOperationQueue
        let flags = flagsWaitingOnASuspendedQueue(AsyncOperationQueue()) { makeOperation(kind) {} }

        // Then they show the same flags
        #expect(flags == reference)
    }

    // Apple, `Operation`: `isReady` once the dependencies finished, `isExecuting` while the
    // operation runs, `isCancelled` at once after `cancel()`, which "does not force your operation
    // code to stop", `isFinished` once done. Polled from the test's thread, without key-value
    // observing, at each known point of a life; and `operationDidStart` (called "before
    // execute()") sees what the operation's own code sees as it begins.
    @Test
    func stateFlagsPolledFromAnotherThread_atEachPointOfALife_andSeenByOperationDidStart_areThoseOfABlockOperation() {
        // Given Foundation's answer
        let reference = flagsThroughALife(on: OperationQueue()) { started, release, points in
            let operation = BlockOperation()
            operation.addExecutionBlock { [weak operation] in
                if let operation { points.append(FlagsAt("inside", operation)) }
                started.signal()
                _ = release.wait(timeout: blockingTimeout)
            }
            return operation
        }
        #expect(reference == [
            FlagsAt("unqueued, waiting for a dependency", StateFlags(ready: false, executing: false, finished: false, cancelled: false)),
            FlagsAt("queued, waiting for a dependency", StateFlags(ready: false, executing: false, finished: false, cancelled: false)),
            FlagsAt("inside", StateFlags(ready: true, executing: true, finished: false, cancelled: false)),
            FlagsAt("executing", StateFlags(ready: true, executing: true, finished: false, cancelled: false)),
            FlagsAt("executing, cancelled", StateFlags(ready: true, executing: true, finished: false, cancelled: true)),
            FlagsAt("finished", StateFlags(ready: true, executing: false, finished: true, cancelled: true)),
        ])

        // When an AsyncOperation that ignores its cancellation lives the same life on an
        // AsyncOperationQueue, with an observer
        let points = flagsThroughALife(on: AsyncOperationQueue()) { started, release, points in
            let operation = ClosureOperation { operation in
                points.append(FlagsAt("inside", operation))
                started.signal()
                _ = release.wait(timeout: blockingTimeout)
                operation.finish()
            }
            operation.addObserver(BlockObserver(didStart: { operation in
                points.append(FlagsAt("operationDidStart", operation))
            }))
            return operation
        }

        // Then it showed the same flags at each point, and its observer saw what its code saw
        #expect(points.filter { $0.point != "operationDidStart" } == reference)
        let inside = reference.first { $0.point == "inside" }?.flags
        #expect(points.filter { $0.point == "operationDidStart" }.map(\.flags) == [inside])
    }
}

// MARK: - Scenarios, run on either kind of queue

/// An operation of `kind` that runs `body`: an `AsyncBlockOperation`; one with a condition that
/// answers from another thread and a category of its own; or a plain `BlockOperation`.
private func makeOperation(_ kind: FoundationParityProbeTests2.Kind, _ body: @escaping @Sendable () -> Void) -> Operation {
    switch kind {
    case .asyncOperation:
        return AsyncBlockOperation { body() }
    case .conditionedOperation:
        return exclusive(conditioned(AsyncBlockOperation { body() }))
    case .plainOperation:
        return BlockOperation { body() }
    }
}

/// Holds `operation` back as `heldBackBy` says (a suspension is the caller's to make).
private func holdBack(_ operation: AsyncOperation, by heldBackBy: FoundationParityProbeTests2.HeldBackBy) {
    switch heldBackBy {
    case .nothing, .suspension:
        break
    case .condition:
        operation.addCondition(StubCondition.satisfied())
    case .category:
        operation.addCondition(ExclusiveCategory(uniqueName("own")))
    }
}

/// A dispatch queue marked with a dispatch-specific key, to tell it by. (`DispatchSpecificKey`
/// is not `Sendable`; it is immutable once made.)
private final class DispatchMarker: @unchecked Sendable {
    let key = DispatchSpecificKey<String>()
    let label = uniqueName("marker")

    func makeQueue(serial: Bool) -> DispatchQueue {
        let queue = DispatchQueue(label: label, attributes: serial ? [] : .concurrent)
        queue.setSpecific(key: key, value: label)
        return queue
    }

    /// Whether the calling code runs on the marked queue.
    var isCurrent: Bool {
        DispatchQueue.getSpecific(key: key) == label
    }
}

/// Operations that record the order they start in and run until `releaseAll()`: an async one
/// keeps its continuation, a plain one blocks its thread. One starting after the release finishes
/// at once. (@unchecked Sendable: `lock` guards every stored property but the semaphore, which is
/// thread-safe.)
private final class StartLog: @unchecked Sendable {
    private let lock = NSLock()
    private var labels: [String] = []
    private var continuations: [AsyncBlockOperation.Continuation] = []
    private var released = false
    private var blockedThreads = 0
    private let plainGate = DispatchSemaphore(value: 0)

    /// The labels of the operations that started, in the order they did.
    var order: [String] {
        lock.lock()
        defer { lock.unlock() }
        return labels
    }

    var count: Int { order.count }

    func async(_ label: String) -> AsyncBlockOperation {
        AsyncBlockOperation { finish in self.asyncStarted(label, finish) }
    }

    func plain(_ label: String) -> BlockOperation {
        BlockOperation { self.plainStarted(label) }
    }

    private func asyncStarted(_ label: String, _ finish: @escaping AsyncBlockOperation.Continuation) {
        lock.lock()
        labels.append(label)
        let finishNow = released
        if !finishNow { continuations.append(finish) }
        lock.unlock()
        if finishNow { finish(nil) }
    }

    private func plainStarted(_ label: String) {
        lock.lock()
        labels.append(label)
        let returnNow = released
        if !returnNow { blockedThreads += 1 }
        lock.unlock()
        if !returnNow { _ = plainGate.wait(timeout: .now() + blockingTimeout) }
    }

    func releaseAll() {
        lock.lock()
        released = true
        let finishes = continuations
        continuations = []
        let blocked = blockedThreads
        blockedThreads = 0
        lock.unlock()
        for _ in 0..<blocked { plainGate.signal() }
        for finish in finishes { finish(nil) }
    }
}

/// What a completion block saw of where it ran.
private struct CompletionSighting: Sendable, Equatable {
    let finished: Bool
    let executing: Bool
    let onItsQueue: Bool
    let onUnderlyingQueue: Bool
}

extension CompletionSighting {
    init(_ operation: Operation?, queue: OperationQueue, marker: DispatchMarker) {
        finished = operation?.isFinished ?? false
        executing = operation?.isExecuting ?? true
        onItsQueue = OperationQueue.current === queue
        onUnderlyingQueue = marker.isCurrent
    }
}

/// Sets a completion block on `operation`, adds it to `queue` suspended, replaces the block,
/// resumes the queue, and sets another block once the operation finished: the blocks that ran.
private func completionBlocksThatRan(on queue: OperationQueue, _ operation: Operation) -> [String] {
    let ran = Recorder<String>()
    queue.isSuspended = true
    operation.completionBlock = { ran.append("replaced") }
    queue.addOperation(operation)
    operation.completionBlock = { ran.append("current") }
    queue.isSuspended = false
    #expect(waitUntilFinished([operation]))
    #expect(waitUntil { ran.count >= 1 })
    operation.completionBlock = { ran.append("late") }
    Thread.sleep(forTimeInterval: 0.1) // a late or a second block would run now
    return ran.all
}

/// What a thread waiting for an operation on no queue saw.
private struct UnaddedWait: Sendable, Equatable {
    let endedBeforeTheStart: Bool
    let sawFinished: [Bool]
    let executed: Int
}

/// Has another thread wait for `operation`, on no queue; cancels it if `cancelledFirst`; then
/// starts it by hand.
private func waitForAnOperationNeverAdded(_ operation: Operation, executed: Counter, cancelledFirst: Bool) -> UnaddedWait {
    let sawFinished = Recorder<Bool>()
    let waitEnded = runOnOwnThread {
        operation.waitUntilFinished()
        sawFinished.append(operation.isFinished)
    }
    Thread.sleep(forTimeInterval: 0.1)
    if cancelledFirst {
        operation.cancel()
        Thread.sleep(forTimeInterval: 0.1) // a wait ended by the cancellation would end now
    }
    let endedBeforeTheStart = sawFinished.count > 0
    operation.start()
    #expect(waitEnded.wait(timeout: generousTimeout))
    #expect(waitUntilFinished([operation]))
    return UnaddedWait(endedBeforeTheStart: endedBeforeTheStart, sawFinished: sawFinished.all, executed: executed.current)
}

/// Adds the operations `make` gives to `queue` at width 0, then widens it to 2 and to 4: how many
/// had started after each step.
private func startCountsThroughRaisesFromZero(on queue: OperationQueue, make: (StartLog) -> [Operation]) -> [Int] {
    let log = StartLog()
    queue.maxConcurrentOperationCount = 0
    let operations = make(log)
    queue.addOperations(operations, waitUntilFinished: false)
    Thread.sleep(forTimeInterval: 0.1) // one that should not start would start now
    var counts = [log.count]
    queue.maxConcurrentOperationCount = 2
    _ = waitUntil { log.count >= 2 }
    Thread.sleep(forTimeInterval: 0.1) // a third would start now
    counts.append(log.count)
    queue.maxConcurrentOperationCount = 4
    _ = waitUntil { log.count >= 4 }
    counts.append(log.count)
    log.releaseAll()
    #expect(waitUntilFinished(operations))
    return counts
}

/// Adds 40 operations to `queue`, made serial, from one thread while this one suspends and
/// resumes it again and again: the order they ran in.
private func orderThroughRapidSuspensions(of queue: OperationQueue, make: (Int, Recorder<Int>) -> Operation) -> [Int] {
    queue.maxConcurrentOperationCount = 1
    let ran = Recorder<Int>()
    let operations = (0..<40).map { make($0, ran) }
    let added = Counter()
    let addingEnded = runOnOwnThread {
        for operation in operations {
            queue.addOperation(operation)
            _ = added.increment()
        }
    }
    var toggles = 0
    while toggles < 5_000, added.current < operations.count || toggles < 200 {
        queue.isSuspended = toggles.isMultiple(of: 2)
        toggles += 1
        usleep(20)
    }
    queue.isSuspended = false
    #expect(addingEnded.wait(timeout: generousTimeout))
    #expect(waitUntilFinished(operations))
    return ran.all
}

/// What suspending a queue twice and resuming it once came to.
private struct TwiceSuspended: Sendable, Equatable {
    let finishedWhileSuspended: Bool
    let suspendedAfterTheResume: Bool
    let finishedAfterTheResume: Bool
}

private func suspendTwiceResumeOnce(_ queue: OperationQueue, _ operation: Operation) -> TwiceSuspended {
    queue.isSuspended = true
    queue.isSuspended = true
    queue.addOperation(operation)
    Thread.sleep(forTimeInterval: 0.05)
    let finishedWhileSuspended = operation.isFinished
    queue.isSuspended = false
    let suspended = queue.isSuspended
    return TwiceSuspended(finishedWhileSuspended: finishedWhileSuspended, suspendedAfterTheResume: suspended, finishedAfterTheResume: waitUntilFinished([operation]))
}

/// What `cancelAllOperations()` on one queue came to across three.
private struct CrossQueueCancel: Sendable, Equatable {
    let executed: [String]
    /// The labels of the operations cancelled, of "dependency", "waiting", "dependent" and
    /// "bystander".
    let cancelled: [String]
    let dependencyStillRanWhenTheDependentHadFinished: Bool
}

/// A plain dependency runs on its own queue; on queue A, "waiting" waits for it; on queue B,
/// "dependent" waits for "waiting", and "bystander" for the dependency. A's operations are
/// cancelled, then the dependency is let go.
private func cancelAllAcrossQueues(makeQueue: () -> OperationQueue, make: (String, Recorder<String>) -> Operation) -> CrossQueueCancel {
    let executed = Recorder<String>()
    let started = Signal()
    let release = Signal()
    let dependency = BlockOperation {
        started.signal()
        _ = release.wait(timeout: blockingTimeout)
    }
    let dependencyQueue = OperationQueue()
    dependencyQueue.addOperation(dependency)
    #expect(started.wait(timeout: generousTimeout))
    let queueA = makeQueue()
    let queueB = makeQueue()
    let waiting = make("waiting", executed)
    waiting.addDependency(dependency)
    let dependent = make("dependent", executed)
    dependent.addDependency(waiting)
    let bystander = make("bystander", executed)
    bystander.addDependency(dependency)
    queueA.addOperation(waiting)
    queueB.addOperations([dependent, bystander], waitUntilFinished: false)
    Thread.sleep(forTimeInterval: 0.05)
    #expect(executed.all.isEmpty)

    queueA.cancelAllOperations()
    #expect(waitUntilFinished([waiting, dependent]))
    let dependencyStillRan = !dependency.isFinished
    release.signal()
    #expect(waitUntilFinished([dependency, bystander]))
    let labelled: [(String, Operation)] = [("dependency", dependency), ("waiting", waiting), ("dependent", dependent), ("bystander", bystander)]
    return CrossQueueCancel(
        executed: executed.all,
        cancelled: labelled.filter { $0.1.isCancelled }.map(\.0),
        dependencyStillRanWhenTheDependentHadFinished: dependencyStillRan
    )
}

/// What the dependent of a dependency cancelled while it executes saw.
private struct CancelledDependency: Sendable, Equatable {
    let ranBeforeTheFinish: Bool
    let sawTheDependencyFinished: [Bool]
    let dependentCancelled: Bool
}

/// Runs `dependency` on `queue` until `release`; once it `started`, adds a dependent of it to
/// `dependentQueue` and cancels the dependency, then lets it finish.
private func dependentOfACancelledRunningDependency(
    _ dependency: Operation,
    on queue: OperationQueue,
    started: Signal,
    release: Signal,
    dependentQueue: OperationQueue,
    makeDependent: (@escaping @Sendable () -> Void) -> Operation
) -> CancelledDependency {
    let saw = Recorder<Bool>()
    let dependent = makeDependent { saw.append(dependency.isFinished) }
    dependent.addDependency(dependency)
    queue.addOperation(dependency)
    #expect(started.wait(timeout: generousTimeout))
    dependentQueue.addOperation(dependent)
    dependency.cancel()
    Thread.sleep(forTimeInterval: 0.1) // a dependent let through by the cancellation would run now
    let ranEarly = saw.count > 0
    release.signal()
    #expect(waitUntilFinished([dependency, dependent]))
    return CancelledDependency(ranBeforeTheFinish: ranEarly, sawTheDependencyFinished: saw.all, dependentCancelled: dependent.isCancelled)
}

/// What cancelling an operation waiting for a dependency on a suspended queue came to.
private struct SuspendedCancel: Sendable, Equatable {
    let readyWhileSuspended: Bool
    let finishedWhileSuspended: Bool
    let dependentRanWhileSuspended: Bool
    let executed: [String]
    let dependencyStillRan: Bool
}

/// On suspended `queue`, an operation waits for a dependency running elsewhere, and a plain
/// operation of a third queue for it; it is cancelled, then the queue resumes.
/// `finishesAtOnce`: the documented outcome is a finish while suspended and a dependent that
/// runs, waited for (bounded) rather than given a fixed moment.
private func cancelWaitingForADependencyOnASuspendedQueue(_ queue: OperationQueue, finishesAtOnce: Bool = false, make: (@escaping @Sendable () -> Void) -> Operation) -> SuspendedCancel {
    let executed = Recorder<String>()
    let release = Signal()
    let dependency = BlockOperation { _ = release.wait(timeout: blockingTimeout) }
    let dependencyQueue = OperationQueue()
    dependencyQueue.addOperation(dependency)
    queue.isSuspended = true
    let waiting = make { executed.append("waiting") }
    waiting.addDependency(dependency)
    let dependent = BlockOperation { executed.append("dependent") }
    dependent.addDependency(waiting)
    queue.addOperation(waiting)
    OperationQueue().addOperation(dependent)
    Thread.sleep(forTimeInterval: 0.05)

    waiting.cancel()
    if finishesAtOnce {
        _ = waitUntil { executed.all.contains("dependent") }
    } else {
        Thread.sleep(forTimeInterval: 0.1) // a finish while suspended, and the dependent, would come now
    }
    let readyWhileSuspended = waiting.isReady
    let finishedWhileSuspended = waiting.isFinished
    let dependentRanWhileSuspended = executed.all.contains("dependent")
    queue.isSuspended = false
    #expect(waitUntilFinished([waiting, dependent]))
    let dependencyStillRan = !dependency.isFinished
    release.signal()
    #expect(waitUntilFinished([dependency]))
    return SuspendedCancel(
        readyWhileSuspended: readyWhileSuspended,
        finishedWhileSuspended: finishedWhileSuspended,
        dependentRanWhileSuspended: dependentRanWhileSuspended,
        executed: executed.all,
        dependencyStillRan: dependencyStillRan
    )
}

/// On a plain queue of width 2 with both slots taken, "first" then "second" added, set up by
/// `configure` before they are added and changed by `change` after: the order they start in once
/// one slot frees up.
private func plainStartOrderOfTwoWaitingForASlot(configure: (Operation, Operation) -> Void, change: (Operation, Operation) -> Void) -> [String] {
    let queue = OperationQueue()
    let started = Recorder<String>()
    let (releaseFirst, releaseSecond) = takeBothSlots(of: queue, started: started)
    let first = BlockOperation { started.append("first") }
    let second = BlockOperation { started.append("second") }
    configure(first, second)
    queue.addOperation(first)
    queue.addOperation(second)
    change(first, second)
    releaseFirst.signal()
    #expect(waitUntil { started.count == 4 })
    releaseSecond.signal()
    queue.waitUntilAllOperationsAreFinished()
    return started.all.filter { $0 != "blocker" }
}

/// The same on an AsyncOperationQueue, "first" and "second" held back as `heldBackBy` says.
private func asyncStartOrderOfTwoWaitingForASlot(
    heldBackBy: FoundationParityProbeTests2.HeldBackBy,
    configure: (Operation, Operation) -> Void,
    change: (Operation, Operation) -> Void
) -> [String] {
    let queue = AsyncOperationQueue()
    let held = HeldOperations()
    let (firstBlocker, secondBlocker) = takeBothSlots(of: queue, with: held)
    let started = Recorder<String>()
    let first = AsyncBlockOperation { started.append("first") }
    let second = AsyncBlockOperation { started.append("second") }
    configure(first, second)
    holdBack(first, by: heldBackBy)
    holdBack(second, by: heldBackBy)
    if heldBackBy == .suspension { queue.isSuspended = true }
    queue.addOperation(first)
    queue.addOperation(second)
    change(first, second)
    if heldBackBy == .suspension { queue.isSuspended = false }
    #expect(waitUntil { queue.allOperationCount == 4 })
    Thread.sleep(forTimeInterval: 0.05) // both are waiting, wherever the queue keeps them
    #expect(started.count == 0)
    held.finish(firstBlocker)
    #expect(waitUntil { started.count == 2 })
    held.finish(secondBlocker)
    return started.all
}

/// Adds two `.low` operations, then two `.high` ones, to `queue`, made suspended and of width 2,
/// then resumes it: the labels of the first two that started.
private func firstTwoStartedOnResume(of queue: OperationQueue, make: (StartLog, String) -> Operation) -> [String] {
    let log = StartLog()
    queue.maxConcurrentOperationCount = 2
    queue.isSuspended = true
    let plan: [(String, Operation.QueuePriority)] = [("low", .low), ("low", .low), ("high", .high), ("high", .high)]
    let operations = plan.map { label, priority -> Operation in
        let operation = make(log, label)
        operation.queuePriority = priority
        return operation
    }
    queue.addOperations(operations, waitUntilFinished: false)
    Thread.sleep(forTimeInterval: 0.05)
    queue.isSuspended = false
    #expect(waitUntil { log.count >= 2 })
    Thread.sleep(forTimeInterval: 0.1) // a third would start now
    let firstTwo = log.order
    log.releaseAll()
    #expect(waitUntilFinished(operations))
    return firstTwo
}

/// What operations on a queue with a serial dispatch queue saw.
private struct SerialSightings: Sendable, Equatable {
    let mostAtOnce: Int
    let allOnTheDispatchQueue: Bool
    let allOnTheQueue: Bool
    let count: Int
}

/// Runs 12 operations, each a little while, on `queue` given a serial dispatch queue.
private func sightingsOnASerialUnderlyingQueue(_ queue: OperationQueue, make: (Int, @escaping @Sendable () -> Void) -> Operation) -> SerialSightings {
    let marker = DispatchMarker()
    queue.underlyingQueue = marker.makeQueue(serial: true)
    let probe = ConcurrencyProbe()
    let onDispatchQueue = Recorder<Bool>()
    let onQueue = Recorder<Bool>()
    let operations = (0..<12).map { index in
        make(index) {
            probe.enter("serial")
            onDispatchQueue.append(marker.isCurrent)
            onQueue.append(OperationQueue.current === queue)
            usleep(2_000)
            probe.leave("serial")
        }
    }
    queue.addOperations(operations, waitUntilFinished: false)
    #expect(waitUntilFinished(operations))
    return SerialSightings(
        mostAtOnce: probe.maximum("serial"),
        allOnTheDispatchQueue: onDispatchQueue.all.allSatisfy { $0 },
        allOnTheQueue: onQueue.all.allSatisfy { $0 },
        count: onDispatchQueue.count
    )
}

/// What a barrier placed on a suspended queue came to.
private struct SuspendedBarrier: Sendable, Equatable {
    let whileSuspended: [String]
    let all: [String]
}

/// Suspends `queue`, adds "earlier" if `scene` says, places a barrier, adds "later", waits a
/// while, then resumes the queue.
/// `expectsBarrierWhileSuspended`: the barrier should run while the queue is suspended, and is
/// waited for (bounded) rather than given a fixed moment.
private func barrierOnASuspendedQueue(
    _ queue: OperationQueue,
    scene: FoundationParityProbeTests2.BarrierScene,
    expectsBarrierWhileSuspended: Bool = false,
    make: (String, Recorder<String>) -> Operation
) -> SuspendedBarrier {
    let log = Recorder<String>()
    queue.isSuspended = true
    var operations: [Operation] = []
    if scene == .queueHoldingAnOperation {
        let earlier = make("earlier", log)
        operations.append(earlier)
        queue.addOperation(earlier)
    }
    queue.addBarrierBlock { log.append("barrier") }
    let later = make("later", log)
    operations.append(later)
    queue.addOperation(later)
    if expectsBarrierWhileSuspended {
        _ = waitUntil { log.all.contains("barrier") }
    } else {
        Thread.sleep(forTimeInterval: 0.2) // a barrier that runs while suspended runs now
    }
    let whileSuspended = log.all
    queue.isSuspended = false
    #expect(waitUntilFinished(operations))
    #expect(waitUntil { log.count == operations.count + 1 })
    return SuspendedBarrier(whileSuspended: whileSuspended, all: log.all)
}

/// What a BlockOperation with several execution blocks came to.
private struct SeveralBlocks: Sendable, Equatable {
    let log: [String]
    let blockCount: Int
    let completions: Int
}

/// Runs a BlockOperation of three blocks on `queue`, a dependent of it, and a barrier after both.
private func runBlockOperationWithThreeBlocks(on queue: OperationQueue, makeDependent: (@escaping @Sendable () -> Void) -> Operation) -> SeveralBlocks {
    let log = Recorder<String>()
    let completions = Counter()
    let several = BlockOperation()
    for _ in 0..<3 {
        several.addExecutionBlock {
            usleep(2_000)
            log.append("block")
        }
    }
    several.completionBlock = { _ = completions.increment() }
    let dependent = makeDependent { log.append("dependent") }
    dependent.addDependency(several)
    queue.addOperations([several, dependent], waitUntilFinished: false)
    queue.addBarrierBlock { log.append("barrier") }
    #expect(waitUntilFinished([several, dependent]))
    #expect(waitUntil { log.count == 5 && completions.current >= 1 })
    Thread.sleep(forTimeInterval: 0.05) // a second completion would run now
    return SeveralBlocks(log: log.all, blockCount: several.executionBlocks.count, completions: completions.current)
}

/// What the dependent of an operation on no queue saw.
private struct HandStartedDependency: Sendable, Equatable {
    let ranBeforeTheStart: Bool
    let sawItFinished: [Bool]
}

/// Adds a dependent of `dependency` (on no queue) to `dependentQueue`, waits, then starts the
/// dependency by hand on this thread.
private func dependentOfAnOperationStartedByHand(
    _ dependency: Operation,
    dependentQueue: OperationQueue,
    makeDependent: (@escaping @Sendable () -> Void) -> Operation
) -> HandStartedDependency {
    let saw = Recorder<Bool>()
    let dependent = makeDependent { saw.append(dependency.isFinished) }
    dependent.addDependency(dependency)
    dependentQueue.addOperation(dependent)
    Thread.sleep(forTimeInterval: 0.1) // a dependent that does not wait would run now
    let ranEarly = saw.count > 0
    dependency.start()
    #expect(waitUntilFinished([dependency, dependent]))
    return HandStartedDependency(ranBeforeTheStart: ranEarly, sawItFinished: saw.all)
}

/// The four flags Foundation's queue reads, at one moment (`isFinished` first: a finished
/// operation must never be seen executing afterwards).
private struct StateFlags: Sendable, Equatable {
    let ready: Bool
    let executing: Bool
    let finished: Bool
    let cancelled: Bool
}

extension StateFlags {
    init(_ operation: Operation) {
        finished = operation.isFinished
        executing = operation.isExecuting
        ready = operation.isReady
        cancelled = operation.isCancelled
    }
}

/// On suspended `queue`: an operation without dependencies, one whose dependency has finished and
/// one whose dependency runs: their flags while they wait.
private func flagsWaitingOnASuspendedQueue(_ queue: OperationQueue, make: () -> Operation) -> [StateFlags] {
    let otherQueue = OperationQueue()
    let finishedDependency = BlockOperation {}
    otherQueue.addOperation(finishedDependency)
    #expect(waitUntilFinished([finishedDependency]))
    let release = Signal()
    let runningDependency = BlockOperation { _ = release.wait(timeout: blockingTimeout) }
    otherQueue.addOperation(runningDependency)
    queue.isSuspended = true
    let free = make()
    let afterFinished = make()
    afterFinished.addDependency(finishedDependency)
    let afterRunning = make()
    afterRunning.addDependency(runningDependency)
    let operations = [free, afterFinished, afterRunning]
    queue.addOperations(operations, waitUntilFinished: false)
    Thread.sleep(forTimeInterval: 0.05)
    let flags = operations.map { StateFlags($0) }
    queue.isSuspended = false
    release.signal()
    #expect(waitUntilFinished(operations + [runningDependency]))
    return flags
}

/// An operation's flags at a named point of its life.
private struct FlagsAt: Sendable, Equatable {
    let point: String
    let flags: StateFlags

    init(_ point: String, _ flags: StateFlags) {
        self.point = point
        self.flags = flags
    }

    init(_ point: String, _ operation: Operation) {
        self.init(point, StateFlags(operation))
    }
}

/// Makes an operation with `make` (it appends its own points, signals `started` as it executes
/// and returns once `release` fires), gives it a dependency running on another queue, adds it to
/// `queue`, lets the dependency finish, cancels the operation while it executes and lets it
/// finish: its flags at each point, polled from this thread, with those it appended.
private func flagsThroughALife(on queue: OperationQueue, make: (Signal, Signal, Recorder<FlagsAt>) -> Operation) -> [FlagsAt] {
    let points = Recorder<FlagsAt>()
    let started = Signal()
    let release = Signal()
    let operation = make(started, release, points)
    let dependencyRelease = Signal()
    let dependency = BlockOperation { _ = dependencyRelease.wait(timeout: blockingTimeout) }
    operation.addDependency(dependency)
    OperationQueue().addOperation(dependency)
    points.append(FlagsAt("unqueued, waiting for a dependency", operation))
    queue.addOperation(operation)
    Thread.sleep(forTimeInterval: 0.05)
    points.append(FlagsAt("queued, waiting for a dependency", operation))
    dependencyRelease.signal()
    #expect(started.wait(timeout: generousTimeout))
    points.append(FlagsAt("executing", operation))
    operation.cancel()
    points.append(FlagsAt("executing, cancelled", operation))
    release.signal()
    #expect(waitUntilFinished([operation]))
    points.append(FlagsAt("finished", operation))
    return points.all
}
