import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// Adversarial probes of parity with Foundation: `AsyncOperationQueue` is an `OperationQueue` and
// `AsyncOperation` an `Operation`, and where the package's documentation (API.md, README.md, the
// `///` comments) says nothing else, they should behave as Apple documents `OperationQueue` and
// `Operation`, and as swift-corelibs-foundation implements them on Linux. Where what Foundation
// does is not spelled out, each probe first runs the same scenario on a plain `OperationQueue`
// with `BlockOperation`s and compares. Every wait is bounded; none asserts on wall-clock speed.

@Suite struct FoundationParityProbeTests {
    // MARK: - Scenario kinds

    enum Holdback: String, Sendable, CaseIterable {
        case nothing, condition, category, suspension
    }

    enum Dependents: String, Sendable, CaseIterable {
        case asyncOperations, plainOperations
    }

    enum QueueKind: String, Sendable, CaseIterable {
        case asyncQueue, plainQueue
    }

    enum Wait: String, Sendable, CaseIterable {
        case conditionAnsweredElsewhere, categoryFreedElsewhere
    }

    enum Ending: String, Sendable, CaseIterable {
        case conditionAnswered, conditionFailed, cancelledWhileWaitingForACategory
    }

    enum PlainAdd: String, Sendable, CaseIterable {
        case blockOperation, block
    }

    enum Waiter: String, Sendable, CaseIterable {
        case plainOperation, asyncOperation
    }

    enum Outcome: String, Sendable, CaseIterable {
        case ran, conditionFailed, threw
    }

    enum Crossing: String, Sendable, CaseIterable {
        case asyncOnAsyncQueue_afterPlainOnPlainQueue
        case plainOnPlainQueue_afterAsyncOnAsyncQueue
        case plainOnPlainQueue_afterAsyncWhoseConditionFailed
        case asyncOnPlainQueue_afterPlainOnSuspendedAsyncQueue
    }

    enum Placement: String, Sendable, CaseIterable {
        case plainOnPlainQueue, plainOnAsyncQueue, asyncOnAsyncQueue, asyncOnPlainQueue
    }

    // MARK: - queuePriority

    // Apple, `Operation.queuePriority`: "the relative priority of an operation waiting to be
    // executed ... the operation queue uses the priority level to determine which ready
    // operation to start next" (OperationQueue: "Operations within a queue are organized
    // according to their readiness, priority level, and interoperation dependencies").
    // swift-corelibs-foundation `_schedule()` walks its priority lists from `.veryHigh` down.
    // (On a queue of width 1 the package documents add order instead: API.md item 9. These use
    // width 2.)
    @Test(arguments: Holdback.allCases)
    func queuePriority_decidesWhichOfTwoOperationsWaitingForASlotStartsFirst_asOnAPlainQueue(holdback: Holdback) {
        // Given Foundation's answer: on a plain queue of width 2 with both slots taken, a
        // low-priority operation added before a high-priority one
        let reference = plainStartOrderOfLowThenHighWaitingForASlot()
        #expect(reference == ["high", "low"])

        // and the same on an AsyncOperationQueue, the two held back as `holdback` says
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let (first, second) = takeBothSlots(of: queue, with: held)
        let started = Recorder<String>()
        let low = AsyncBlockOperation { started.append("low") }
        low.queuePriority = .low
        let high = AsyncBlockOperation { started.append("high") }
        high.queuePriority = .high
        switch holdback {
        case .nothing, .suspension:
            break
        case .condition:
            low.addCondition(StubCondition.satisfied())
            high.addCondition(StubCondition.satisfied())
        case .category:
            low.addCondition(ExclusiveCategory(uniqueName("low")))
            high.addCondition(ExclusiveCategory(uniqueName("high")))
        }
        if holdback == .suspension { queue.isSuspended = true }
        queue.addOperation(low)
        queue.addOperation(high)
        if holdback == .suspension { queue.isSuspended = false }
        #expect(waitUntil { queue.allOperationCount == 4 })
        Thread.sleep(forTimeInterval: 0.05) // both are waiting, wherever the queue keeps them
        #expect(started.count == 0)

        // When one slot frees up
        held.finish(first)
        #expect(waitUntil { started.count == 2 })
        held.finish(second)

        // Then the high-priority operation started first, as on the plain queue
        #expect(started.all == reference)
    }

    // The same documentation: among operations that became ready together (their one dependency
    // finished) while only one slot is free, the higher priority starts first. In corelibs the
    // dependency's finish marks its dependents ready before its slot is given back, and the slot
    // then goes to the highest priority.
    @Test(arguments: Dependents.allCases)
    func queuePriority_decidesWhichOfTwoOperationsReleasedByOneDependencyStartsFirst_asOnAPlainQueue(dependents: Dependents) {
        // Given Foundation's answer on a plain queue of width 2: a blocker and a dependency run,
        // a low-priority and then a high-priority operation wait for the dependency
        let reference = plainStartOrderOfLowThenHighReleasedByOneDependency()
        #expect(reference == ["high", "low"])

        // and the same on an AsyncOperationQueue
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 2
        let held = HeldOperations()
        let blocker = uniqueName("blocker")
        let dependencyName = uniqueName("dependency")
        let dependency = held.make(dependencyName)
        queue.addOperations([held.make(blocker), dependency], waitUntilFinished: false)
        #expect(held.waitUntilStarted(blocker) && held.waitUntilStarted(dependencyName))
        let started = Recorder<String>()
        let low: Operation
        let high: Operation
        switch dependents {
        case .asyncOperations:
            low = AsyncBlockOperation { started.append("low") }
            high = AsyncBlockOperation { started.append("high") }
        case .plainOperations:
            low = BlockOperation { started.append("low") }
            high = BlockOperation { started.append("high") }
        }
        low.queuePriority = .low
        high.queuePriority = .high
        low.addDependency(dependency)
        high.addDependency(dependency)
        queue.addOperations([low, high], waitUntilFinished: false)
        #expect(waitUntil { queue.allOperationCount == 4 })

        // When the dependency finishes, freeing one slot
        held.finish(dependencyName)
        #expect(waitUntil { started.count == 2 })
        held.finish(blocker)

        // Then the high-priority operation started first, as on the plain queue
        #expect(started.all == reference)
    }

    // corelibs `OperationQueue.addOperation(_ block:)`: "let op = BlockOperation(block: block);
    // if let qos = __propertyQoS { op.qualityOfService = qos }". Apple, `OperationQueue
    // .qualityOfService`: "The default service level to apply to operations executed using the
    // queue." On a queue wider than 1, corelibs gives an operation without an explicit priority
    // the priority of its quality of service (`.userInitiated` is `.high`).
    @Test
    func addOperationWithABlock_givesItTheQueuesQualityOfService_andThePriorityItMeans_asOnAPlainQueue() {
        // Given Foundation's answer: a queue of width 2 with quality of service `.userInitiated`
        // and both slots taken; an operation with an explicit `.normal` priority, then a block
        let reference = plainQualityAndStartOrderOfABlockAddedAfterAnExplicitlyNormalOperation()
        #expect(reference.blockQuality == .userInitiated)
        #expect(reference.order == ["block", "explicit"])

        // and the same on an AsyncOperationQueue
        let queue = AsyncOperationQueue()
        queue.qualityOfService = .userInitiated
        let held = HeldOperations()
        let (first, second) = takeBothSlots(of: queue, with: held)
        let started = Recorder<String>()
        let explicit = BlockOperation { started.append("explicit") }
        explicit.queuePriority = .normal
        queue.addOperation(explicit)
        queue.addOperation { started.append("block") }
        #expect(waitUntil { queue.allOperationCount == 4 })
        let blockQuality = queue.allOperations.last?.qualityOfService

        // When one slot frees up
        held.finish(first)
        #expect(waitUntil { started.count == 2 })
        held.finish(second)

        // Then the block's operation had the queue's quality of service, and started first
        #expect(blockQuality == reference.blockQuality)
        #expect(started.all == reference.order)
    }

    // MARK: - Where an operation runs

    /// What an operation saw of where it ran.
    struct Sighting: Sendable, Equatable {
        let place: String
        let onItsQueue: Bool
        let onUnderlyingQueue: Bool
    }

    // Apple, `OperationQueue.current`: "the operation queue that started the current operation";
    // `underlyingQueue`: "The dispatch queue used to execute operations." The package,
    // `AsyncOperation.execute()`: on an `AsyncOperationQueue`, called "on the thread Foundation's
    // queue starts the operation on"; started by a plain queue, "on the thread that let it
    // through".
    @Test(arguments: QueueKind.allCases, Wait.allCases)
    func executeAndOperationDidStart_runOnTheQueueThatStartedTheOperation_andItsUnderlyingQueue(queueKind: QueueKind, wait: Wait) {
        // Given a queue on a dispatch queue of its own
        let marker = QueueMarker()
        let underlying = DispatchQueue(label: uniqueName("underlying"), attributes: .concurrent)
        underlying.setSpecific(key: marker.key, value: marker.label)
        let queue: OperationQueue = queueKind == .asyncQueue ? AsyncOperationQueue() : OperationQueue()
        queue.underlyingQueue = underlying
        let sightings = Recorder<Sighting>()
        let look: @Sendable (String) -> Void = { place in
            sightings.append(Sighting(
                place: place,
                onItsQueue: OperationQueue.current === queue,
                onUnderlyingQueue: DispatchQueue.getSpecific(key: marker.key) == marker.label
            ))
        }
        // (Foundation's own operation, for reference)
        let plain = BlockOperation { look("plain block") }
        queue.addOperation(plain)
        #expect(waitUntilFinished([plain]))

        // and an operation that waits for a condition or a category, freed on another thread
        let operation = AsyncBlockOperation { look("execute") }
        operation.addObserver(BlockObserver(didStart: { _ in look("operationDidStart") }))
        let answer = HeldCallback<ConditionResult>()
        let holding = startHoldingACategory()
        switch wait {
        case .conditionAnsweredElsewhere:
            operation.addCondition(StubCondition(name: "AnswersLater") { _, completion in answer.hold(completion) })
        case .categoryFreedElsewhere:
            operation.addCondition(ExclusiveCategory(holding.x))
        }

        // When it is added, and what it waits for comes from another thread
        queue.addOperation(operation)
        if wait == .conditionAnsweredElsewhere {
            #expect(answer.waitUntilHeld())
        }
        Thread.sleep(forTimeInterval: 0.05)
        #expect(!operation.isFinished)
        let freed = runOnOwnThread {
            switch wait {
            case .conditionAnsweredElsewhere: _ = answer.call(.satisfied)
            case .categoryFreedElsewhere: holding.held.finish(holding.holderName)
            }
        }
        #expect(freed.wait(timeout: generousTimeout))
        #expect(waitUntilFinished([operation]))
        holding.held.finish(holding.holderName)

        // Then, on an AsyncOperationQueue, everything ran on the queue, on its underlying
        // dispatch queue; on a plain queue, the operation went on where it was let through (its
        // documented difference: the package cannot hand it back to a queue it does not run)
        let onTheQueue = queueKind == .asyncQueue
        let expected = [
            Sighting(place: "plain block", onItsQueue: true, onUnderlyingQueue: true),
            Sighting(place: "operationDidStart", onItsQueue: onTheQueue, onUnderlyingQueue: onTheQueue),
            Sighting(place: "execute", onItsQueue: onTheQueue, onUnderlyingQueue: onTheQueue),
        ]
        #expect(sightings.all == expected)
    }

    // MARK: - Waiting

    // Apple, `Operation.waitUntilFinished()`: "Blocks execution of the current thread until the
    // operation object finishes its task." corelibs waits on a condition broadcast when the
    // operation announces `isFinished`.
    @Test(arguments: Ending.allCases)
    func waitUntilFinished_fromAnotherThread_returnsOnlyOnceTheHeldOperationHasFinished(ending: Ending) {
        // Given an operation held back by a condition that has not answered, or by a category
        let queue = AsyncOperationQueue()
        let answer = HeldCallback<ConditionResult>()
        let holding = startHoldingACategory()
        let executed = Counter()
        let operation = AsyncBlockOperation { _ = executed.increment() }
        if ending == .cancelledWhileWaitingForACategory {
            operation.addCondition(ExclusiveCategory(holding.x))
        } else {
            operation.addCondition(StubCondition(name: "AnswersLater") { _, completion in answer.hold(completion) })
        }
        queue.addOperation(operation)
        if ending != .cancelledWhileWaitingForACategory {
            #expect(answer.waitUntilHeld())
        }

        // When another thread waits for it
        let sawFinished = Recorder<Bool>()
        let waitEnded = runOnOwnThread {
            operation.waitUntilFinished()
            sawFinished.append(operation.isFinished)
        }
        Thread.sleep(forTimeInterval: 0.1)
        let endedEarly = sawFinished.count > 0
        switch ending {
        case .conditionAnswered: _ = answer.call(.satisfied)
        case .conditionFailed: _ = answer.call(.failed(StubError("no")))
        case .cancelledWhileWaitingForACategory: operation.cancel()
        }

        // Then the wait ended only after the operation finished
        #expect(waitEnded.wait(timeout: generousTimeout))
        holding.held.finish(holding.holderName)
        #expect(!endedEarly)
        #expect(sawFinished.all == [true])
        #expect(executed.current == (ending == .conditionAnswered ? 1 : 0))
    }

    // Apple, `OperationQueue.waitUntilAllOperationsAreFinished()`: "Blocks the current thread
    // until all of the receiver's queued and executing operations finish executing." An
    // operation on a suspended queue is queued: corelibs waits for every operation its list
    // holds. AsyncOperationQueue's documentation: `waitUntilAllOperationsAreFinished()` and
    // `isSuspended` "behave as Foundation documents them", counting held operations.
    @Test(arguments: PlainAdd.allCases)
    func waitUntilAllOperationsAreFinished_onASuspendedQueueHoldingOnlyPlainOperations_waitsUntilTheyRan(add: PlainAdd) {
        // Given Foundation's answer: on a suspended plain queue, the wait lasts until it resumes
        let plainQueue = OperationQueue()
        let reference = waitOnSuspendedQueue(plainQueue, add: add)
        #expect(reference.endedWhileSuspended == false)
        #expect(reference.ranWhenTheWaitEnded == 1)

        // When the same is done on an AsyncOperationQueue
        let outcome = waitOnSuspendedQueue(AsyncOperationQueue(), add: add)

        // Then the wait lasted until the operation ran, as on the plain queue
        #expect(outcome.endedWhileSuspended == reference.endedWhileSuspended)
        #expect(outcome.ranWhenTheWaitEnded == reference.ranWhenTheWaitEnded)
    }

    // Apple, `addOperations(_:waitUntilFinished:)`: "If true, the current thread is blocked until
    // all of the specified operations finish executing." The package: it "honour[s] conditions".
    @Test
    func addOperationsWaitingUntilFinished_returnsOnlyOnceEveryOperationFinished_heldOnesIncluded() {
        // Given an operation whose condition answers later, a plain operation depending on it,
        // and an operation whose condition brings a dependency that runs until told
        let queue = AsyncOperationQueue()
        let answer = HeldCallback<ConditionResult>()
        let conditioned = AsyncBlockOperation {}
        conditioned.addCondition(StubCondition(name: "AnswersLater") { _, completion in answer.hold(completion) })
        let plain = BlockOperation {}
        plain.addDependency(conditioned)
        let held = HeldOperations()
        let broughtName = uniqueName("brought")
        let bringing = AsyncBlockOperation {}
        bringing.addCondition(StubCondition.satisfied(bringing: held.make(broughtName)))
        let operations: [Operation] = [conditioned, plain, bringing]

        // When another thread adds them and waits
        let sawAllFinished = Recorder<Bool>()
        let waitEnded = runOnOwnThread {
            queue.addOperations(operations, waitUntilFinished: true)
            sawAllFinished.append(operations.allSatisfy(\.isFinished))
        }
        #expect(answer.waitUntilHeld())
        #expect(held.waitUntilStarted(broughtName))
        Thread.sleep(forTimeInterval: 0.05)
        let endedBeforeTheAnswer = sawAllFinished.count > 0
        _ = answer.call(.satisfied)
        #expect(waitUntilFinished([conditioned, plain]))
        Thread.sleep(forTimeInterval: 0.05)
        let endedBeforeTheDependency = sawAllFinished.count > 0
        held.finish(broughtName)

        // Then the call returned only once all of them had finished
        #expect(waitEnded.wait(timeout: generousTimeout))
        #expect(!endedBeforeTheAnswer)
        #expect(!endedBeforeTheDependency)
        #expect(sawAllFinished.all == [true])
    }

    // corelibs `waitUntilAllOperationsAreFinished()` loops until its list is empty, so once it
    // returns `operations` and `operationCount` are empty at once. API.md: `allOperations` is
    // "every unfinished operation"; nothing is unfinished once the wait returned.
    @Test
    func afterWaitUntilAllOperationsAreFinishedReturns_noOperationIsListedAnyMore() {
        // Given a queue with operations of every fate: one that runs until told, one whose
        // condition answers later, one whose condition fails, one cancelled while it waits, a
        // plain one waiting for the first, and a barrier
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let runnerName = uniqueName("runner")
        let runner = held.make(runnerName)
        let answer = HeldCallback<ConditionResult>()
        let conditioned = AsyncBlockOperation {}
        conditioned.addCondition(StubCondition(name: "AnswersLater") { _, completion in answer.hold(completion) })
        let failing = AsyncBlockOperation {}
        failing.addCondition(StubCondition.failing(StubError("no")))
        let cancelledAnswer = HeldCallback<ConditionResult>()
        let cancelled = AsyncBlockOperation {}
        cancelled.addCondition(StubCondition(name: "NeverAnswers") { _, completion in cancelledAnswer.hold(completion) })
        let plain = BlockOperation {}
        plain.addDependency(runner)
        queue.addOperations([runner, conditioned, failing, cancelled, plain], waitUntilFinished: false)
        queue.addBarrierBlock {}
        #expect(held.waitUntilStarted(runnerName))
        #expect(answer.waitUntilHeld() && cancelledAnswer.waitUntilHeld())

        // When another thread waits for the queue while the rest finish
        let counts = Recorder<[Int]>()
        let waitEnded = runOnOwnThread {
            queue.waitUntilAllOperationsAreFinished()
            counts.append([queue.allOperationCount, queue.allOperations.count, queue.operationCount, queue.operations.count])
        }
        cancelled.cancel()
        _ = answer.call(.satisfied)
        held.finish(runnerName)

        // Then, as the wait returned, nothing was listed any more
        #expect(waitEnded.wait(timeout: generousTimeout))
        #expect(counts.all == [[0, 0, 0, 0]])
        _ = cancelledAnswer.call(.satisfied)
    }

    // MARK: - What the queue lists

    // corelibs `operations` and `operationCount` leave barriers out (`_operations(includingBarriers:
    // false)`, `!(operation is _BarrierOperation)`): `addBarrierBlock(_:)` adds no operation the
    // caller could see. API.md: `allOperations` is "every unfinished operation ... in add order".
    @Test
    func allOperations_leavesOutABarrierBlock_asFoundationsOperationsDo() {
        // Given Foundation's answer: a running operation, a barrier block, another operation
        let plainQueue = OperationQueue()
        let release = Signal()
        let started = Recorder<String>()
        let plainFirst = gatedOperation("first", started: started, release: release)
        plainQueue.addOperation(plainFirst)
        #expect(waitUntil { started.count == 1 })
        plainQueue.addBarrierBlock {}
        let plainSecond = BlockOperation {}
        plainQueue.addOperation(plainSecond)
        let referenceList = plainQueue.operations.map(ObjectIdentifier.init)
        let referenceCount = plainQueue.operationCount
        release.signal()
        plainQueue.waitUntilAllOperationsAreFinished()
        #expect(referenceList == [ObjectIdentifier(plainFirst), ObjectIdentifier(plainSecond)])
        #expect(referenceCount == 2)

        // When the same is done on an AsyncOperationQueue
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let firstName = uniqueName("first")
        let first = held.make(firstName)
        queue.addOperation(first)
        #expect(held.waitUntilStarted(firstName))
        queue.addBarrierBlock {}
        let second = AsyncBlockOperation {}
        queue.addOperation(second)
        let list = queue.allOperations.map(ObjectIdentifier.init)
        let count = queue.allOperationCount
        held.finish(firstName)
        #expect(waitUntilFinished([first, second]))

        // Then the barrier is not listed, as Foundation does not list its own
        #expect(list == [ObjectIdentifier(first), ObjectIdentifier(second)])
        #expect(count == referenceCount)
    }

    // corelibs keeps `operations` in add order (`__firstOperation` ... `__nextOperation`), on a
    // suspended queue too. API.md: `allOperations` is every unfinished operation "in add order".
    @Test
    func allOperationsOfASuspendedQueue_listsPlainAndAsyncOperationsInAddOrder_asFoundationsOperationsDo() {
        // Given a mix of plain and async operations, some waiting for others
        func mix() -> [Operation] {
            let plainFirst = BlockOperation {}
            let simple = AsyncBlockOperation {}
            let conditioned = AsyncBlockOperation {}
            conditioned.addCondition(StubCondition.satisfied())
            let plainDependent = BlockOperation {}
            plainDependent.addDependency(simple)
            let asyncDependent = AsyncBlockOperation {}
            asyncDependent.addDependency(plainFirst)
            return [plainFirst, simple, conditioned, plainDependent, asyncDependent]
        }
        let plainQueue = OperationQueue()
        plainQueue.isSuspended = true
        let plainOperations = mix()
        plainQueue.addOperations(Array(plainOperations[0..<2]), waitUntilFinished: false)
        for operation in plainOperations[2...] { plainQueue.addOperation(operation) }
        let reference = plainQueue.operations.map(ObjectIdentifier.init)
        plainQueue.isSuspended = false
        #expect(waitUntilFinished(plainOperations))
        #expect(reference == plainOperations.map(ObjectIdentifier.init))

        // When they are added the same way to a suspended AsyncOperationQueue
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        let operations = mix()
        queue.addOperations(Array(operations[0..<2]), waitUntilFinished: false)
        for operation in operations[2...] { queue.addOperation(operation) }
        let listed = queue.allOperations.map(ObjectIdentifier.init)
        let count = queue.allOperationCount
        queue.isSuspended = false
        #expect(waitUntilFinished(operations))

        // Then `allOperations` lists them as Foundation lists its own
        #expect(listed == operations.map(ObjectIdentifier.init))
        #expect(count == operations.count)
    }

    // Apple, `OperationQueue.progress`: with `totalUnitCount` set, "each operation will
    // contribute 1 unit of completion to the overall progress of the queue for operations that
    // are finished by the end of main (operations that override start and do not invoke super
    // will not contribute to progress)". corelibs counts them in `_execute(_:)`.
    // The queues are serial: corelibs' `Progress` is not safe for two operations of one queue
    // counted at once (the test process crashed once in `Progress._updateFractionCompleted`,
    // under `OperationQueue._execute`, with both plain operations running together).
    @Test
    func queueProgress_countsThePlainOperationsThatRan_heldBackBySuspensionToo_asOnAPlainQueue() {
        // Given Foundation's answer for two plain operations and an AsyncOperation added to a
        // suspended serial queue reporting progress, then resumed
        func run(on queue: OperationQueue) -> Int64 {
            queue.maxConcurrentOperationCount = 1
            queue.progress.totalUnitCount = 3
            queue.isSuspended = true
            let operations: [Operation] = [BlockOperation {}, AsyncBlockOperation {}, BlockOperation {}]
            queue.addOperations(operations, waitUntilFinished: false)
            queue.isSuspended = false
            #expect(waitUntilFinished(operations))
            _ = waitUntil { queue.progress.completedUnitCount >= 2 } // counted after the finish
            Thread.sleep(forTimeInterval: 0.05) // a third unit would be counted now
            return queue.progress.completedUnitCount
        }
        let reference = run(on: OperationQueue())
        #expect(reference == 2)

        // When the same runs on an AsyncOperationQueue
        let completed = run(on: AsyncOperationQueue())

        // Then its progress counts the same
        #expect(completed == reference)
    }

    // corelibs: a queue's default name is "NSOperationQueue <address>", and setting it to nil
    // stores ""; an operation's name is nil until set.
    @Test
    func names_areFoundationsByDefault_andWhenCleared() {
        // Given Foundation's answers
        let plainQueue = OperationQueue()
        let plainDefault = plainQueue.name
        plainQueue.name = "x"
        plainQueue.name = nil
        let plainCleared = plainQueue.name

        // When the same is asked of the package's types
        let queue = AsyncOperationQueue()
        let asyncDefault = queue.name
        queue.name = "x"
        queue.name = nil
        let asyncCleared = queue.name

        // Then they answer alike
        #expect(plainDefault?.hasPrefix("NSOperationQueue ") == true)
        #expect(asyncDefault?.hasPrefix("NSOperationQueue ") == true)
        #expect(asyncCleared == plainCleared)
        #expect(AsyncOperation().name == BlockOperation().name)
        #expect(AsyncBlockOperation {}.name == nil)
    }

    // MARK: - Cancelling

    // AsyncOperationQueue.cancelAllOperations(): "One that waits for nothing but its turn (a
    // suspended queue, or a serial queue's line) finishes without executing when the queue gets
    // to it, as on Foundation's own queue." Apple, `cancel()`: it "does not force your operation
    // code to stop"; a cancelled operation still in a queue finishes once the queue starts it.
    @Test(arguments: Waiter.allCases)
    func cancelAllOperations_onASuspendedQueue_finishesAnOperationOnlyOnceTheQueueResumes_asFoundationDoes(waiter: Waiter) {
        // Given Foundation's answer for a plain operation on a suspended plain queue
        let reference = cancelOnSuspendedQueue(OperationQueue(), waiter: .plainOperation)
        #expect(reference == CancelOnSuspension(finishedWhileSuspended: false, executed: 0, completions: 1))

        // When the same is done on a suspended AsyncOperationQueue
        let outcome = cancelOnSuspendedQueue(AsyncOperationQueue(), waiter: waiter)

        // Then the operation finished only once the queue resumed, without executing
        #expect(outcome == reference)
    }

    // Apple, `Operation.cancel()`: "If the operation has already finished executing, this method
    // has no effect." corelibs: `if isFinished { return }`, so `isCancelled` stays false.
    // AsyncOperation.cancel(with:): "After the operation finished ... nothing changes."
    @Test(arguments: Outcome.allCases)
    func cancel_onAFinishedOperation_changesNothing_asOnABlockOperation(outcome: Outcome) {
        // Given Foundation's answer
        let plain = BlockOperation {}
        OperationQueue().addOperation(plain)
        #expect(waitUntilFinished([plain]))
        plain.cancel()
        #expect(plain.isCancelled == false)

        // and an operation that finished as `outcome` says, with a completion block and an observer
        let completions = Counter()
        let cancellations = Counter()
        let operation: AsyncOperation
        switch outcome {
        case .ran:
            operation = AsyncBlockOperation {}
        case .conditionFailed:
            operation = AsyncBlockOperation {}
            operation.addCondition(StubCondition.failing(StubError("no")))
        case .threw:
            operation = AsyncBlockOperation { throw StubError("thrown") }
        }
        operation.completionBlock = { _ = completions.increment() }
        operation.addObserver(BlockObserver(didCancel: { _ in _ = cancellations.increment() }))
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { completions.current == 1 })
        let errorsBefore = operation.errors.count

        // When it is cancelled, with and without an error
        operation.cancel()
        operation.cancel(with: StubError("late"))
        Thread.sleep(forTimeInterval: 0.05) // a second completion block would run now

        // Then nothing changed
        #expect(operation.isCancelled == plain.isCancelled)
        #expect(operation.errors.count == errorsBefore)
        #expect(cancellations.current == 0)
        #expect(completions.current == 1)
        #expect(operation.isFinished && !operation.isExecuting)
    }

    // Apple, `Operation.cancel()`: "if the operation is in the queue but waiting on unfinished
    // dependent operations, those operations are subsequently ignored. Because it is already
    // cancelled, this behavior allows the operation queue to call the operation's start() method
    // sooner and clear the object out of the queue." corelibs sets its unfinished-dependency
    // count to 0 and announces it ready.
    @Test(arguments: Placement.allCases)
    func cancellingAnOperationWaitingForADependency_finishesItWithoutWaiting_andItsDependentRuns(placement: Placement) {
        // Given an operation waiting for a dependency that runs until told, on another queue,
        // and a dependent of it on its own queue
        let held = HeldOperations()
        let neverName = uniqueName("never")
        let never = held.make(neverName)
        let otherQueue = AsyncOperationQueue()
        otherQueue.addOperation(never)
        #expect(held.waitUntilStarted(neverName))
        let queue: OperationQueue = placement == .plainOnAsyncQueue || placement == .asyncOnAsyncQueue ? AsyncOperationQueue() : OperationQueue()
        let executed = Recorder<String>()
        let waiting: Operation = placement == .plainOnPlainQueue || placement == .plainOnAsyncQueue
            ? BlockOperation { executed.append("waiting") }
            : AsyncBlockOperation { executed.append("waiting") }
        waiting.addDependency(never)
        let dependent = BlockOperation { executed.append("dependent") }
        dependent.addDependency(waiting)
        queue.addOperations([waiting, dependent], waitUntilFinished: false)
        Thread.sleep(forTimeInterval: 0.05)
        #expect(executed.count == 0)

        // When it is cancelled
        waiting.cancel()

        // Then it finishes without executing, before its dependency, and its dependent runs
        #expect(waitUntilFinished([waiting, dependent]))
        #expect(executed.all == ["dependent"])
        #expect(!never.isFinished)
        held.finish(neverName)
    }

    // MARK: - State and dependencies

    /// The four flags Foundation's queue reads, at one moment.
    struct Flags: Sendable, Equatable {
        let ready: Bool
        let executing: Bool
        let finished: Bool
        let cancelled: Bool

        init(_ operation: Operation) {
            // isFinished first: a finished operation must never be seen executing afterwards
            finished = operation.isFinished
            executing = operation.isExecuting
            ready = operation.isReady
            cancelled = operation.isCancelled
        }
    }

    // Apple, `Operation`: while the operation runs `isExecuting` is true; "the isFinished ...
    // changes to true" before the completion block runs, and by then `isExecuting` is false.
    // corelibs: `isReady` stays true once the dependencies are done, also after the finish.
    @Test(arguments: [false, true])
    func stateFlags_seenWhileExecutingAndFromTheCompletionBlock_areThoseOfABlockOperation(cancelledBeforeStart: Bool) {
        // Given Foundation's answer: what a BlockOperation sees of itself as it runs and after
        let plainSeen = Recorder<(String, Flags)>()
        let plain = BlockOperation()
        plain.addExecutionBlock { [weak plain] in
            if let plain { plainSeen.append(("running", Flags(plain))) }
        }
        plain.completionBlock = { [weak plain] in
            if let plain { plainSeen.append(("completion", Flags(plain))) }
        }
        let plainQueue = OperationQueue()
        plainQueue.isSuspended = true
        plainQueue.addOperation(plain)
        if cancelledBeforeStart { plain.cancel() }
        plainQueue.isSuspended = false
        #expect(waitUntilFinished([plain]))
        #expect(waitUntil { plainSeen.all.contains { $0.0 == "completion" } })

        // When an AsyncOperation does the same (cancelled while its condition has not answered)
        let seen = Recorder<(String, Flags)>()
        let answer = HeldCallback<ConditionResult>()
        let operation = ClosureOperation { operation in
            seen.append(("running", Flags(operation)))
            operation.finish()
        }
        operation.addCondition(StubCondition(name: "AnswersLater") { _, completion in answer.hold(completion) })
        operation.completionBlock = { [weak operation] in
            if let operation { seen.append(("completion", Flags(operation))) }
        }
        AsyncOperationQueue().addOperation(operation)
        #expect(answer.waitUntilHeld())
        if cancelledBeforeStart {
            operation.cancel()
        } else {
            _ = answer.call(.satisfied)
        }
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { seen.all.contains { $0.0 == "completion" } })

        // Then it saw the same flags at the same moments
        #expect(seen.all.map(\.0) == plainSeen.all.map(\.0))
        #expect(seen.all.map(\.1) == plainSeen.all.map(\.1))
    }

    // Apple, `Operation.dependencies`: "An array of the operations that must finish executing
    // before the current object can begin executing"; `removeDependency(_:)`: "Removes the
    // receiver's dependence on the specified operation." corelibs: `addDependency` adds an
    // operation once, in order, finished ones included; the list stays while the operation runs;
    // `isReady` is true once the dependencies finished. (The package documents one difference:
    // empty once finished. corelibs' own `removeDependency` of an unfinished dependency leaves
    // its count of unfinished dependencies as it was, so the reference does not remove one.)
    @Test
    func dependencies_listEachOnceInAddOrder_keepFinishedOnes_andStayWhileExecuting_asOnABlockOperation() {
        // Given two operations configured alike: Foundation's and the package's (which also
        // takes a dependency and removes it again)
        let plainQueue = OperationQueue()
        let alreadyFinished = BlockOperation {}
        plainQueue.addOperation(alreadyFinished)
        #expect(waitUntilFinished([alreadyFinished]))
        let first = BlockOperation {}
        let removed = BlockOperation {}
        let seenWhileExecuting = Recorder<[ObjectIdentifier]>()
        let asyncOperation = ClosureOperation { operation in
            seenWhileExecuting.append(operation.dependencies.map(ObjectIdentifier.init))
            operation.finish()
        }
        let plainOperation = BlockOperation()
        for operation in [asyncOperation, plainOperation] as [Operation] {
            operation.addDependency(first)
            operation.addDependency(first)
            operation.addDependency(alreadyFinished)
        }
        asyncOperation.addDependency(removed)
        asyncOperation.removeDependency(removed)
        asyncOperation.removeDependency(BlockOperation {}) // never a dependency
        let expected = [ObjectIdentifier(first), ObjectIdentifier(alreadyFinished)]

        // Then both list the same, and are not ready
        #expect(plainOperation.dependencies.map(ObjectIdentifier.init) == expected)
        #expect(asyncOperation.dependencies.map(ObjectIdentifier.init) == expected)
        #expect(!plainOperation.isReady)
        #expect(!asyncOperation.isReady)

        // When the unfinished dependency finishes, on no queue of theirs
        plainQueue.addOperation(first)
        #expect(waitUntilFinished([first]))

        // Then both are ready, and still list their dependencies, while executing too
        #expect(waitUntil { plainOperation.isReady })
        #expect(waitUntil { asyncOperation.isReady })
        #expect(asyncOperation.dependencies.map(ObjectIdentifier.init) == expected)
        AsyncOperationQueue().addOperation(asyncOperation)
        #expect(waitUntilFinished([asyncOperation]))
        #expect(seenWhileExecuting.all == [expected])
    }

    // Apple, `Operation.addDependency(_:)`: "The receiver is not considered ready to execute until
    // all of its dependent operations have finished executing", whatever queue each is on.
    // The package: "plain Foundation operations run as usual"; API.md: a dependency's outcome
    // does not keep a dependent from running unless a condition says so.
    @Test(arguments: Crossing.allCases)
    func dependencyAcrossQueueKinds_holdsTheDependentUntilItFinished(crossing: Crossing) {
        // Given a dependent on one queue whose dependency is on another, of the other kind
        let asyncQueue = AsyncOperationQueue()
        let plainQueue = OperationQueue()
        let release = Signal()
        let answer = HeldCallback<ConditionResult>()
        let sawItFinished = Recorder<Bool>()
        let dependency: Operation
        let dependent: Operation
        switch crossing {
        case .asyncOnAsyncQueue_afterPlainOnPlainQueue:
            dependency = BlockOperation { _ = release.wait(timeout: blockingTimeout) }
            dependent = AsyncBlockOperation { [dependency] in sawItFinished.append(dependency.isFinished) }
        case .plainOnPlainQueue_afterAsyncOnAsyncQueue, .plainOnPlainQueue_afterAsyncWhoseConditionFailed:
            let conditioned = AsyncBlockOperation {}
            conditioned.addCondition(StubCondition(name: "AnswersLater") { _, completion in answer.hold(completion) })
            dependency = conditioned
            dependent = BlockOperation { sawItFinished.append(conditioned.isFinished) }
        case .asyncOnPlainQueue_afterPlainOnSuspendedAsyncQueue:
            dependency = BlockOperation {}
            dependent = AsyncBlockOperation { [dependency] in sawItFinished.append(dependency.isFinished) }
        }
        dependent.addDependency(dependency)

        // When both are added, the dependent first
        switch crossing {
        case .asyncOnAsyncQueue_afterPlainOnPlainQueue:
            asyncQueue.addOperation(dependent)
            plainQueue.addOperation(dependency)
        case .plainOnPlainQueue_afterAsyncOnAsyncQueue, .plainOnPlainQueue_afterAsyncWhoseConditionFailed:
            plainQueue.addOperation(dependent)
            asyncQueue.addOperation(dependency)
            #expect(answer.waitUntilHeld())
        case .asyncOnPlainQueue_afterPlainOnSuspendedAsyncQueue:
            asyncQueue.isSuspended = true
            plainQueue.addOperation(dependent)
            asyncQueue.addOperation(dependency)
        }
        Thread.sleep(forTimeInterval: 0.1)
        let ranEarly = sawItFinished.count > 0
        switch crossing {
        case .asyncOnAsyncQueue_afterPlainOnPlainQueue: release.signal()
        case .plainOnPlainQueue_afterAsyncOnAsyncQueue: _ = answer.call(.satisfied)
        case .plainOnPlainQueue_afterAsyncWhoseConditionFailed: _ = answer.call(.failed(StubError("no")))
        case .asyncOnPlainQueue_afterPlainOnSuspendedAsyncQueue: asyncQueue.isSuspended = false
        }

        // Then the dependent ran once, only after its dependency had finished
        #expect(waitUntilFinished([dependency, dependent]))
        #expect(!ranEarly)
        #expect(sawItFinished.all == [true])
    }

    // MARK: - Barriers

    // Apple, `addBarrierBlock(_:)`: "Invokes a block when the queue finishes all enqueued
    // operations, and prevents subsequent operations from starting until the block has
    // completed." The package counts "operations still waiting in the queue's scheduler".
    @Test
    func barrierBlock_runsAfterEveryEarlierOperation_andBeforeEveryLaterOne_plainAndAsyncAlike() {
        // Given earlier operations of every kind, each still to finish: a plain one waiting for
        // an operation of a plain queue, one whose condition answers later, one running
        let queue = AsyncOperationQueue()
        let log = Recorder<String>()
        let otherQueue = OperationQueue()
        let release = Signal()
        let gate = BlockOperation { _ = release.wait(timeout: blockingTimeout) }
        let plainEarlier = BlockOperation { log.append("plain earlier") }
        plainEarlier.addDependency(gate)
        let answer = HeldCallback<ConditionResult>()
        let conditionedEarlier = AsyncBlockOperation { log.append("conditioned earlier") }
        conditionedEarlier.addCondition(StubCondition(name: "AnswersLater") { _, completion in answer.hold(completion) })
        let held = HeldOperations()
        let runningName = uniqueName("running earlier")
        let runningEarlier = held.make(runningName)
        queue.addOperations([plainEarlier, conditionedEarlier, runningEarlier], waitUntilFinished: false)
        otherQueue.addOperation(gate)
        #expect(answer.waitUntilHeld())
        #expect(held.waitUntilStarted(runningName))

        // When a barrier is placed, and later operations of every kind added
        let earlier: [Operation] = [plainEarlier, conditionedEarlier, runningEarlier]
        let allEarlierFinished = Recorder<Bool>()
        queue.addBarrierBlock {
            allEarlierFinished.append(earlier.allSatisfy(\.isFinished))
            log.append("barrier")
        }
        let plainLater = BlockOperation { log.append("later") }
        let asyncLater = AsyncBlockOperation { log.append("later") }
        let conditionedLater = AsyncBlockOperation { log.append("later") }
        conditionedLater.addCondition(StubCondition.satisfied())
        queue.addOperations([plainLater, asyncLater], waitUntilFinished: false)
        queue.addOperation(conditionedLater)
        queue.addOperation { log.append("later") }
        Thread.sleep(forTimeInterval: 0.05)
        let startedBeforeTheEarlierFinished = log.all
        held.finish(runningName)
        _ = answer.call(.satisfied)
        release.signal()

        // Then the barrier ran once all earlier ones finished, and every later one after it
        #expect(waitUntil { log.count == 7 })
        #expect(startedBeforeTheEarlierFinished.isEmpty)
        #expect(allEarlierFinished.all == [true])
        let entries = log.all
        let barrierIndex = entries.firstIndex(of: "barrier") ?? -1
        #expect(barrierIndex == 2)
        #expect(entries.suffix(4) == ["later", "later", "later", "later"])
    }

    // MARK: - Width

    // Apple, `maxConcurrentOperationCount`: "The maximum number of queued operations that can run
    // at the same time." corelibs starts nothing while as many operations as the new width are
    // executing, so after narrowing an operation added later starts only when it runs alone.
    @Test
    func maxConcurrentOperationCount_boundsEveryKindOfOperation_andANarrowingWhileOperationsRun() {
        // Given a queue of width 2 running operations of every kind, each a little while
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 2
        let inside = InsideCount()
        let wideSeen = Recorder<Int>()
        let narrowSeen = Recorder<Int>()
        let wide = workOfEveryKind(count: 24) {
            wideSeen.append(inside.enter())
            usleep(2_000)
            inside.leave()
        }
        queue.addOperations(wide, waitUntilFinished: false)
        #expect(waitUntil { wideSeen.count >= 4 })

        // When the queue is narrowed to 1 while they run, and more are added
        queue.maxConcurrentOperationCount = 1
        let narrow = workOfEveryKind(count: 12) {
            narrowSeen.append(inside.enter())
            usleep(2_000)
            inside.leave()
        }
        queue.addOperations(narrow, waitUntilFinished: false)
        #expect(waitUntilFinished(wide + narrow))

        // Then never more than 2 executed at once, and each added later executed alone
        #expect(wideSeen.all.allSatisfy { $0 <= 2 })
        #expect(narrowSeen.all.count == 12)
        #expect(narrowSeen.all.allSatisfy { $0 == 1 })
    }
}

// MARK: - Foundation's answers, and helpers

/// A dispatch-specific key to tell a dispatch queue by. (`DispatchSpecificKey` is not
/// `Sendable`; it is immutable once made.)
private final class QueueMarker: @unchecked Sendable {
    let key = DispatchSpecificKey<String>()
    let label = uniqueName("marker")
}

/// How many pieces of work are inside at once. (@unchecked Sendable: `lock` guards `inside`.)
private final class InsideCount: @unchecked Sendable {
    private let lock = NSLock()
    private var inside = 0

    /// Enters, and returns how many are inside now, this one included.
    func enter() -> Int {
        lock.lock()
        defer { lock.unlock() }
        inside += 1
        return inside
    }

    func leave() {
        lock.lock()
        inside -= 1
        lock.unlock()
    }
}

/// `count` operations running `work`, of four kinds in turn: plain, async, async with a
/// condition, async with a category of its own.
private func workOfEveryKind(count: Int, _ work: @escaping @Sendable () -> Void) -> [Operation] {
    (0..<count).map { index -> Operation in
        switch index % 4 {
        case 0:
            return BlockOperation(block: work)
        case 1:
            return AsyncBlockOperation { work() }
        case 2:
            let conditioned = AsyncBlockOperation { work() }
            conditioned.addCondition(StubCondition.satisfied())
            return conditioned
        default:
            let exclusive = AsyncBlockOperation { work() }
            exclusive.addCondition(ExclusiveCategory(uniqueName("own")))
            return exclusive
        }
    }
}

/// On a plain queue of width 2 with both slots taken, a low-priority operation added before a
/// high-priority one: the order they start in once one slot frees up.
private func plainStartOrderOfLowThenHighWaitingForASlot() -> [String] {
    let queue = OperationQueue()
    let started = Recorder<String>()
    let (releaseFirst, releaseSecond) = takeBothSlots(of: queue, started: started, labels: ("first", "second"))
    let low = BlockOperation { started.append("low") }
    low.queuePriority = .low
    let high = BlockOperation { started.append("high") }
    high.queuePriority = .high
    queue.addOperation(low)
    queue.addOperation(high)
    releaseFirst.signal()
    #expect(waitUntil { started.count == 4 })
    releaseSecond.signal()
    queue.waitUntilAllOperationsAreFinished()
    return started.all.filter { $0 == "low" || $0 == "high" }
}

/// On a plain queue of width 2, a blocker and a dependency running, a low-priority operation
/// and then a high-priority one waiting for the dependency: the order they start in once it
/// finishes.
private func plainStartOrderOfLowThenHighReleasedByOneDependency() -> [String] {
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = 2
    let started = Recorder<String>()
    let releaseBlocker = Signal()
    let releaseDependency = Signal()
    let dependency = gatedOperation("dependency", started: started, release: releaseDependency)
    queue.addOperation(gatedOperation("blocker", started: started, release: releaseBlocker))
    queue.addOperation(dependency)
    #expect(waitUntil { started.count == 2 })
    let low = BlockOperation { started.append("low") }
    low.queuePriority = .low
    let high = BlockOperation { started.append("high") }
    high.queuePriority = .high
    low.addDependency(dependency)
    high.addDependency(dependency)
    queue.addOperations([low, high], waitUntilFinished: false)
    releaseDependency.signal()
    #expect(waitUntil { started.count == 4 })
    releaseBlocker.signal()
    queue.waitUntilAllOperationsAreFinished()
    return started.all.filter { $0 == "low" || $0 == "high" }
}

/// On a plain queue of width 2 with quality of service `.userInitiated` and both slots taken, an
/// operation with an explicit `.normal` priority and then a block: the block's operation's
/// quality of service, and the order the two start in once one slot frees up.
private func plainQualityAndStartOrderOfABlockAddedAfterAnExplicitlyNormalOperation() -> (blockQuality: QualityOfService?, order: [String]) {
    let queue = OperationQueue()
    queue.qualityOfService = .userInitiated
    let started = Recorder<String>()
    let (releaseFirst, releaseSecond) = takeBothSlots(of: queue, started: started, labels: ("first", "second"))
    let explicit = BlockOperation { started.append("explicit") }
    explicit.queuePriority = .normal
    queue.addOperation(explicit)
    queue.addOperation { started.append("block") }
    let blockQuality = queue.operations.last?.qualityOfService
    releaseFirst.signal()
    #expect(waitUntil { started.count == 4 })
    releaseSecond.signal()
    queue.waitUntilAllOperationsAreFinished()
    return (blockQuality, started.all.filter { $0 == "explicit" || $0 == "block" })
}

/// What a thread waiting for a suspended queue saw.
private struct SuspendedWait: Sendable, Equatable {
    let endedWhileSuspended: Bool
    let ranWhenTheWaitEnded: Int
}

/// Adds one plain operation to `queue`, suspended, has another thread wait for the queue, then
/// resumes it.
private func waitOnSuspendedQueue(_ queue: OperationQueue, add: FoundationParityProbeTests.PlainAdd) -> SuspendedWait {
    queue.isSuspended = true
    let ran = Counter()
    switch add {
    case .blockOperation: queue.addOperation(BlockOperation { _ = ran.increment() })
    case .block: queue.addOperation { _ = ran.increment() }
    }
    let ranWhenTheWaitEnded = Recorder<Int>()
    let waitEnded = runOnOwnThread {
        queue.waitUntilAllOperationsAreFinished()
        ranWhenTheWaitEnded.append(ran.current)
    }
    Thread.sleep(forTimeInterval: 0.2)
    let endedWhileSuspended = ranWhenTheWaitEnded.count > 0
    queue.isSuspended = false
    #expect(waitEnded.wait(timeout: generousTimeout))
    #expect(waitUntil { ran.current == 1 })
    return SuspendedWait(endedWhileSuspended: endedWhileSuspended, ranWhenTheWaitEnded: ranWhenTheWaitEnded.all.first ?? -1)
}

/// What cancelling an operation waiting on a suspended queue came to.
private struct CancelOnSuspension: Sendable, Equatable {
    let finishedWhileSuspended: Bool
    let executed: Int
    let completions: Int
}

/// Adds one operation to `queue`, suspended, cancels everything, then resumes it.
private func cancelOnSuspendedQueue(_ queue: OperationQueue, waiter: FoundationParityProbeTests.Waiter) -> CancelOnSuspension {
    queue.isSuspended = true
    let executed = Counter()
    let completions = Counter()
    let operation: Operation = waiter == .plainOperation
        ? BlockOperation { _ = executed.increment() }
        : AsyncBlockOperation { _ = executed.increment() }
    operation.completionBlock = { _ = completions.increment() }
    queue.addOperation(operation)
    queue.cancelAllOperations()
    Thread.sleep(forTimeInterval: 0.1)
    let finishedWhileSuspended = operation.isFinished
    queue.isSuspended = false
    #expect(waitUntilFinished([operation]))
    #expect(waitUntil { completions.current >= 1 })
    Thread.sleep(forTimeInterval: 0.05) // a second completion block would run now
    return CancelOnSuspension(finishedWhileSuspended: finishedWhileSuspended, executed: executed.current, completions: completions.current)
}
