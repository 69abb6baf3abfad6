import Foundation
import Operations
import Testing
import TestSupport

/// A queue shuts down gracefully: it refuses new operations, lets running ones finish within the
/// grace period, cancels what waits, and returns once every operation finished exactly once.
@Suite struct ShutdownTests {
    private func isShutDownError(_ errors: [any Error]) -> Bool {
        errors.count == 1 && (errors.first as? AsyncOperationError) == .queueShutDown
    }

    @Test func runningOperationsFinish_waitingOnesAreCancelled_andTheCallReturnsWhenAllFinished() async {
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let category = uniqueName("Shutdown")
        let running = held.make(uniqueName("running"))
        running.addCondition(ExclusiveStub(category))
        let waiting = AsyncBlockOperation {}
        waiting.addCondition(ExclusiveStub(category))
        let dependent = AsyncBlockOperation {}
        dependent.addDependency(running)
        let log = EventLogObserver()
        waiting.addObserver(log)
        queue.addOperations([running, waiting, dependent], waitUntilFinished: false)
        #expect(held.waitUntilStarted(running.name!))

        let shutdown = Task { await queue.shutDown(gracePeriod: .infinity) }
        #expect(await eventually { waiting.isFinished && dependent.isFinished })
        #expect(queue.isShutDown)
        #expect(waiting.isCancelled && isShutDownError(waiting.errors))
        #expect(dependent.isCancelled && isShutDownError(dependent.errors))
        #expect(log.log.all == ["didCancel", "didFinish"])
        #expect(!running.isFinished && !running.isCancelled)

        held.finish(running.name!)
        await shutdown.value
        #expect(running.isFinished && running.errors.isEmpty && !running.isCancelled)
        #expect(queue.allOperationCount == 0)
    }

    // Found by a race audit: the operations that wait were cancelled only once the adds in
    // flight had ended, and one whose dependency finished meanwhile executed after the
    // shut-down began.
    @Test func anOperationWhoseDependencyFinishesAsTheShutDownBegins_doesNotExecute_evenWhileAnAddIsInFlight() async {
        // Given an operation waiting for a running dependency, on a queue one of whose adds is
        // held in flight (its delegate blocks on the add)
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let dependencyName = uniqueName("dependency")
        let dependency = held.make(dependencyName)
        let executed = Flag()
        let waiting = AsyncBlockOperation { executed.raise() }
        waiting.addDependency(dependency)
        queue.addOperations([dependency, waiting], waitUntilFinished: false)
        #expect(held.waitUntilStarted(dependencyName))
        let addEntered = Signal()
        let addMayGoOn = Signal()
        let delegate = BlockingAddDelegate(entered: addEntered, mayGoOn: addMayGoOn)
        queue.delegate = delegate
        let late = AsyncBlockOperation {}
        Thread.detachNewThread { queue.addOperation(late) }
        #expect(addEntered.wait(timeout: generousTimeout))

        // When the shut-down begins, and the dependency then finishes
        let shutdown = Task { await queue.shutDown(gracePeriod: .infinity) }
        #expect(await eventually { queue.isShutDown })
        held.finish(dependencyName)

        // Then the waiting operation finishes cancelled, without executing
        #expect(await eventually { waiting.isFinished })
        #expect(!executed.isRaised)
        #expect(waiting.isCancelled && isShutDownError(waiting.errors))
        addMayGoOn.signal()
        await shutdown.value
        #expect(late.isFinished)
        withExtendedLifetime(delegate) {}
    }

    @Test func anOperationAddedAfterwards_finishesAtOnce_withTheShutDownError() async {
        let queue = AsyncOperationQueue()
        #expect(!queue.isShutDown)
        await queue.shutDown(gracePeriod: 1)
        #expect(queue.isShutDown)

        let executed = Counter()
        let late = AsyncBlockOperation { _ = executed.increment() }
        let log = EventLogObserver()
        late.addObserver(log)
        queue.addOperation(late)
        #expect(late.isFinished)
        #expect(late.isCancelled && isShutDownError(late.errors))
        #expect(log.log.all == ["didCancel", "didFinish"])
        #expect(await eventually { log.finishedErrors.all.count == 1 })
        #expect(isShutDownError(log.finishedErrors.all[0]))

        let plainRan = Counter()
        let plain = BlockOperation { _ = plainRan.increment() }
        queue.addOperations([plain], waitUntilFinished: true)
        #expect(plain.isCancelled && plain.isFinished)
        #expect(executed.current == 0 && plainRan.current == 0)
    }

    @Test func pastTheGracePeriod_runningOperationsAreCancelledWithTheShutDownError() async {
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let running = held.make(uniqueName("slow"))
        queue.addOperation(running)
        #expect(held.waitUntilStarted(running.name!))

        await queue.shutDown(gracePeriod: 0.05)
        #expect(running.isFinished && running.isCancelled && isShutDownError(running.errors))
    }

    @Test @available(macOS 13, iOS 16, tvOS 16, watchOS 9, *)
    func aDurationGracePeriod_isTheSame() async {
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let running = held.make(uniqueName("slow"))
        queue.addOperation(running)
        #expect(held.waitUntilStarted(running.name!))
        await queue.shutDown(gracePeriod: .milliseconds(20))
        #expect(running.isCancelled && isShutDownError(running.errors))
    }

    @Test(arguments: [0, -1, TimeInterval.nan])
    func aGracePeriodOfNothing_cancelsTheRunningOperationsAtOnce(gracePeriod: TimeInterval) async {
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        queue.addOperation(running)
        #expect(held.waitUntilStarted(running.name!))
        await queue.shutDown(gracePeriod: gracePeriod)
        #expect(running.isCancelled && isShutDownError(running.errors))
    }

    @Test func cancellingTheCaller_endsTheGracePeriodAtOnce_andStillWaitsForEveryFinish() async {
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        queue.addOperation(running)
        #expect(held.waitUntilStarted(running.name!))

        let shutdown = Task { await queue.shutDown(gracePeriod: .infinity) }
        #expect(await eventually { queue.isShutDown })
        shutdown.cancel()
        await shutdown.value
        #expect(running.isFinished && running.isCancelled && isShutDownError(running.errors))
    }

    @Test func otherQueues_areUnaffected() async {
        let stopping = AsyncOperationQueue()
        let other = AsyncOperationQueue()
        other.isSuspended = true
        let elsewhere = AsyncBlockOperation {}
        other.addOperation(elsewhere)

        await stopping.shutDown(gracePeriod: 0)
        #expect(!other.isShutDown && !elsewhere.isCancelled)
        other.isSuspended = false
        let later = AsyncBlockOperation {}
        other.addOperations([later], waitUntilFinished: true)
        // `later` may finish first: the two run side by side once the queue resumes.
        #expect(waitUntilFinished([elsewhere]))
        #expect(elsewhere.errors.isEmpty && later.errors.isEmpty)
    }

    @Test func aSuspendedQueue_isDrained_withoutExecutingAnything() async {
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        let executed = Counter()
        let operations = (0..<5).map { _ in AsyncBlockOperation { _ = executed.increment() } }
        let plain = BlockOperation { _ = executed.increment() }
        queue.addOperations(operations + [plain], waitUntilFinished: false)

        await queue.shutDown(gracePeriod: 10)
        #expect(operations.allSatisfy { $0.isFinished && $0.isCancelled && isShutDownError($0.errors) })
        #expect(plain.isFinished && plain.isCancelled)
        #expect(executed.current == 0)
    }

    @Test func theBlockingTwin_returnsOnceEveryOperationFinished() {
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        queue.addOperation(running)
        #expect(held.waitUntilStarted(running.name!))
        let returned = Signal()
        Thread.detachNewThread {
            queue.shutDownAndWait(gracePeriod: .infinity)
            returned.signal()
        }
        #expect(waitUntil { queue.isShutDown })
        #expect(!returned.wait(timeout: 0.05))
        held.finish(running.name!)
        #expect(returned.wait())
        #expect(running.errors.isEmpty)
    }

    @Test func concurrentCalls_joinOneShutDown_andTheShorterGracePeriodWins() async {
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        queue.addOperation(running)
        #expect(held.waitUntilStarted(running.name!))
        async let long: Void = queue.shutDown(gracePeriod: .infinity)
        async let short: Void = queue.shutDown(gracePeriod: 0.02)
        _ = await (long, short)
        #expect(running.isCancelled && isShutDownError(running.errors))
    }

    @Test func operationsProducedDuringTheGracePeriod_areRefused() async {
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let producer = held.make(uniqueName("producer"))
        queue.addOperation(producer)
        #expect(held.waitUntilStarted(producer.name!))
        let shutdown = Task { await queue.shutDown(gracePeriod: .infinity) }
        #expect(await eventually { queue.isShutDown })
        let produced = AsyncBlockOperation {}
        producer.produce(produced)
        #expect(produced.isFinished && isShutDownError(produced.errors))
        held.finish(producer.name!)
        await shutdown.value
    }

    /// Many operations over a few categories, shut down while they run: each finishes exactly
    /// once, those that executed were not cancelled before the grace period, and nothing runs
    /// after the call returned.
    @Test(arguments: 0..<8) func underLoad_everyOperationFinishesExactlyOnce(seed: UInt64) async {
        var random = SplitMix64(seed: seed)
        let queue = AsyncOperationQueue()
        let finishes = Recorder<ObjectIdentifier>()
        let executed = Counter()
        let categories = (0..<4).map { _ in uniqueName("load") }
        var made: [AsyncOperation] = []
        for _ in 0..<200 {
            let delay = useconds_t(random.next() % 400)
            let operation = AsyncBlockOperation { finish in
                _ = executed.increment()
                DispatchQueue.global().async {
                    usleep(delay)
                    finish(nil)
                }
            }
            operation.addCondition(ExclusiveStub(categories[Int(random.next() % 4)]))
            operation.addObserver(FinishRecorder(finishes: finishes))
            made.append(operation)
        }
        let operations = made
        let adder = Task.detached {
            for operation in operations { queue.addOperation(operation) }
        }
        try? await Task.sleep(nanoseconds: UInt64(random.next() % 3_000_000))
        await queue.shutDown(gracePeriod: Double(random.next() % 3) / 1000)
        await adder.value
        let executedWhenReturned = executed.current

        #expect(await eventually { operations.allSatisfy(\.isFinished) })
        let counts = Dictionary(grouping: finishes.all, by: { $0 }).mapValues(\.count)
        #expect(counts.count == operations.count && counts.values.allSatisfy { $0 == 1 })
        for operation in operations where !operation.errors.isEmpty {
            #expect(isShutDownError(operation.errors) && operation.isCancelled, "\(operation.errors) cancelled: \(operation.isCancelled)")
        }
        try? await Task.sleep(nanoseconds: 20_000_000)
        #expect(executed.current == executedWhenReturned)
    }
}

private struct FinishRecorder: OperationObserver {
    let finishes: Recorder<ObjectIdentifier>

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        finishes.append(ObjectIdentifier(operation))
    }
}

/// Holds each add in flight until told: signals `entered` as an add begins, then waits for
/// `mayGoOn` (bounded).
private final class BlockingAddDelegate: AsyncOperationQueueDelegate {
    let entered: Signal
    let mayGoOn: Signal

    init(entered: Signal, mayGoOn: Signal) {
        self.entered = entered
        self.mayGoOn = mayGoOn
    }

    func operationQueue(_ queue: AsyncOperationQueue, willAdd operation: Operation) {
        entered.signal()
        _ = mayGoOn.wait(timeout: generousTimeout)
    }
}
