import Conditions
import Foundation
import Operations
import Testing
import TestSupport

// Round 10 of the adversarial probes: the plain gate (commit c785678) and the shut-down hold
// (commit e747690). A plain Foundation operation that still waits for unfinished dependencies
// when its turn comes on a serial `AsyncOperationQueue` is held back in Foundation behind a gate
// (an internal operation named "Operations.PlainGate" among its dependencies, removed after it
// finished); once its dependencies have finished it asks for its turn again by add order, and
// keeps the turn until it has finished and its dependents heard. From the moment `shutDown`
// begins, the scheduler lets nothing waiting in its lines go on until the sweep cancelled it.
//
// Wherever the docs say nothing else, Foundation's own serial `OperationQueue` is the reference
// (the scenario runs there too, all operations plain: `onBothQueues`); API.md 9 promises add
// order among the operations whose dependencies have finished; API.md 12 that nothing new runs
// after `shutDown` begins and that every operation finishes exactly once. Every wait is bounded,
// and nothing asserts on wall-clock speed.
//
// FOUND (probes below marked "FOUND:", which failed until the fixes that followed them):
// - a gated operation cancelled while its dependency still runs finishes, but keeps the gate
//   among its `dependencies` until that dependency finishes (the README: "listed among its
//   dependencies until it has finished"), also after a shut-down;
// - a plain operation on its way from a serial queue's scheduler to Foundation, in the hands of
//   a deliverer that is in no add (the thread that heard the previous turn end), is in neither
//   list the queue reads (`QueueScheduler.allWaiting`, Foundation's `operations`): a shut-down
//   never cancels it and it runs after the shut-down began (API.md 12), once its dependency
//   finishes behind its gate; `cancelAllOperations()` does not cancel it either; a barrier placed
//   then runs before it; `allOperations` leaves it out. Held open on purpose here (a subclass
//   whose `isReady` stalls the deliverer), the window was also hit without help, once in 20
//   rounds of `shutDown_withAddsOfGatedOnesInFlight_returns_andEachFinishesOnce`.
//
// FOUND in session 49 (fixed; probes at the end of `PlainGateProbeTests`): a gated operation
// cancelled while its dependency never finishes kept its gate and its queue alive; a plain
// operation whose dependency finished as the queue gated it ran without its turn.
//
// Not bugs of the package: swift-corelibs-foundation never makes an operation ready once an
// unfinished dependency was removed from it (its serial queue never runs it); the package's
// queue does the same (`dependencyRemovedWhileGated_...` compares the two).

/// The name the queue gives the gate of a plain operation (README, "Known limitations").
private let plainGateName = "Operations.PlainGate"

/// Whether `operation` lists a plain gate among its dependencies.
private func listsAGate(_ operation: Operation) -> Bool {
    operation.dependencies.contains { $0.name == plainGateName }
}

/// An operation of another (Foundation) queue, started, that runs until `release` fires.
private func runningElsewhere(_ label: String, release: Signal) -> BlockOperation {
    let started = Signal()
    let operation = BlockOperation {
        started.signal()
        _ = release.wait(timeout: blockingTimeout)
    }
    operation.name = uniqueName(label)
    OperationQueue().addOperation(operation)
    #expect(started.wait(timeout: generousTimeout), "\(label) did not start")
    return operation
}

/// A plain operation recording `label` in `log` as it runs and in `finishes` as it finishes.
private func counted(_ label: String, log: Recorder<String>, finishes: Recorder<String>) -> BlockOperation {
    let operation = BlockOperation { log.append(label) }
    operation.name = uniqueName(label)
    operation.completionBlock = { finishes.append(label) }
    return operation
}

/// How many times `label` finished, once duplicate finishes had a moment to show.
private func finishCount(of label: String, in finishes: Recorder<String>) -> Int {
    _ = waitUntil { finishes.all.contains(label) }
    usleep(50_000)
    return finishes.all.filter { $0 == label }.count
}

/// A plain operation whose dependency finishes while the queue decides how it goes on: the third
/// read of `dependencies` after `isReady` last answered `false` (its dependency still runs) first
/// runs `finishDependency`, which waits for the dependency to have finished.
/// That is the moment between the queue's first look (not ready, a dependency unfinished) and
/// its gating, which no timing from outside can hit reliably. Records `label` in `log` as it
/// runs, a moment after it starts.
private final class DependencyFinishingWhileGated: Operation, @unchecked Sendable {
    // @unchecked Sendable: `foundNotReady`, `readsSince` and `finishedBeforeGate` are only
    // touched while holding `lock`; the rest is immutable or Foundation's.
    private let lock = NSLock()
    private var foundNotReady = false
    private var readsSince = 0
    private let label: String
    private let log: Recorder<String>
    private let finishDependency: @Sendable () -> Void

    init(_ label: String, log: Recorder<String>, finishDependency: @escaping @Sendable () -> Void) {
        self.label = label
        self.log = log
        self.finishDependency = finishDependency
        super.init()
        name = uniqueName(label)
    }

    override var isReady: Bool {
        let ready = super.isReady
        lock.lock()
        if !ready { // counted from the latest look that found it not ready
            foundNotReady = true
            readsSince = 0
        }
        lock.unlock()
        return ready
    }

    /// Whether the dependency was finished (on the third read), and whether the gate was listed
    /// already then: the window is the moment before it goes in.
    private(set) var finishedDependencyBeforeTheGate: Bool? {
        get { lock.lock(); defer { lock.unlock() }; return finishedBeforeGate }
        set { lock.lock(); finishedBeforeGate = newValue; lock.unlock() }
    }
    private var finishedBeforeGate: Bool?

    override var dependencies: [Operation] {
        lock.lock()
        if foundNotReady { readsSince += 1 }
        let finishesNow = foundNotReady && readsSince == 3
        lock.unlock()
        if finishesNow {
            finishedDependencyBeforeTheGate = !super.dependencies.contains { $0.name == "Operations.PlainGate" }
            finishDependency()
        }
        return super.dependencies
    }

    override func main() {
        guard !isCancelled else { return }
        usleep(100_000) // long enough for an operation let go meanwhile to show
        log.append(label)
    }
}

/// A plain operation whose first read of `isReady` once armed (the serial queue's deliverer
/// reads it as it hands the operation to Foundation) announces itself through `entered` and
/// blocks until `proceed` fires: it holds the deliverer between taking it out of the scheduler
/// and giving it to Foundation. Records `label` in `log` as it runs.
private final class StallingReadinessOperation: Operation, @unchecked Sendable {
    // @unchecked Sendable: `armed` and `stalled` are only touched while holding `lock`; the rest
    // is immutable or Foundation's.
    private let lock = NSLock()
    private var armed = false
    private var stalled = false
    let entered = Signal()
    let proceed = Signal()
    private let label: String
    private let log: Recorder<String>

    init(_ label: String, log: Recorder<String>) {
        self.label = label
        self.log = log
        super.init()
        name = uniqueName(label)
    }

    /// From now on, the next read of `isReady` stalls.
    func arm() {
        lock.lock()
        armed = true
        lock.unlock()
    }

    override var isReady: Bool {
        lock.lock()
        let first = armed && !stalled
        if armed { stalled = true }
        lock.unlock()
        if first {
            entered.signal()
            _ = proceed.wait(timeout: generousTimeout)
        }
        return super.isReady
    }

    override func main() {
        guard !isCancelled else { return }
        log.append(label)
    }
}

/// A serial queue running a plain operation; behind it `stalling`, which waits for an operation
/// of another queue (released by the second signal). The runner is released, and the queue's
/// deliverer (the thread that heard the runner finish, in no add) is held inside the hand-off
/// of `stalling` when this returns.
private func holdTheDelivererWith(_ stalling: StallingReadinessOperation, log: Recorder<String>) -> (queue: AsyncOperationQueue, elsewhere: Operation, elsewhereRelease: Signal) {
    let queue = serialAsyncQueue()
    let runnerRelease = Signal(), elsewhereRelease = Signal()
    queue.addOperation(gatedOperation("runner", started: log, release: runnerRelease))
    #expect(waitUntil { log.count == 1 })
    let elsewhere = runningElsewhere("elsewhere", release: elsewhereRelease)
    stalling.addDependency(elsewhere)
    queue.addOperation(stalling)
    stalling.arm()
    runnerRelease.signal()
    #expect(stalling.entered.wait(timeout: generousTimeout), "the deliverer never read isReady")
    return (queue, elsewhere, elsewhereRelease)
}

@Suite("Plain gate probes, round 10")
struct PlainGateProbeTests {
    init() {
        _ = DiagnosticsLog.shared // capture diagnostics before any test reports one
    }

    // MARK: - Order, against Foundation's serial queue

    // API.md 9, Foundation's serial queue as the reference: a plain operation waiting for an
    // operation of another queue that finished while another ran goes next, before later ones.
    @Test
    func gatedOnOtherQueue_releasedWhileAnotherRuns_goesNext_asFoundationsSerialQueueDoes() {
        let orders = onBothQueues("otherQueue") { queue, ops in
            // Given a serial queue running an operation, and behind it a plain one waiting for an
            // operation of another queue, then a later plain one and a later AsyncOperation
            let runnerRelease = Signal(), elsewhereRelease = Signal()
            queue.addOperation(ops.gated("runner", runnerRelease))
            _ = waitUntil { ops.log.count == 1 }
            let elsewhere = runningElsewhere("elsewhere", release: elsewhereRelease)
            let waiting = ops.plain("waiting")
            waiting.addDependency(elsewhere)
            let all: [Operation] = [waiting, ops.plain("laterPlain"), ops.asynchronous("later")]
            queue.addOperations(all, waitUntilFinished: false)

            // When the other queue's operation finishes, and then the runner
            elsewhereRelease.signal()
            _ = waitUntilFinished([elsewhere])
            usleep(20_000)
            runnerRelease.signal()
            _ = waitUntilFinished(all)
            return ops.log.all
        }
        // Then the plain one goes right after the runner
        #expect(orders.foundation == ["runner", "waiting", "laterPlain", "later"])
        #expect(orders.package == orders.foundation, "AsyncOperationQueue: \(orders.package); Foundation: \(orders.foundation)")
    }

    // API.md 9, Foundation's serial queue as the reference: a plain operation waiting for an
    // AsyncOperation added after it runs right after it, before an operation added after both.
    @Test
    func gatedOnALaterAsyncOne_runsRightAfterIt_beforeALaterOne_asFoundationsSerialQueueDoes() {
        let orders = onBothQueues("laterAsync") { queue, ops in
            // Given [waiting (plain, waits for dependency), dependency, later] added at once
            let waiting = ops.plain("waiting")
            let dependency = ops.asynchronous("dependency")
            waiting.addDependency(dependency)
            let all: [Operation] = [waiting, dependency, ops.plain("later")]

            // When they are added to an idle serial queue
            queue.addOperations(all, waitUntilFinished: false)
            _ = waitUntilFinished(all)
            return ops.log.all
        }
        // Then the dependency, the plain one, then the later one
        #expect(orders.foundation == ["dependency", "waiting", "later"])
        #expect(orders.package == orders.foundation, "AsyncOperationQueue: \(orders.package); Foundation: \(orders.foundation)")
    }

    // API.md 9, Foundation's serial queue as the reference: a gated plain operation waiting for
    // another gated plain operation (which waits for another queue) runs right after it.
    @Test
    func gatedOnAnotherGatedOne_runsRightAfterIt_asFoundationsSerialQueueDoes() {
        let orders = onBothQueues("gatedOnGated") { queue, ops in
            // Given [first (waits for second), second (waits for another queue), free] on a
            // serial queue, free having run
            let release = Signal()
            let elsewhere = runningElsewhere("elsewhere", release: release)
            let first = ops.plain("first"), second = ops.plain("second")
            first.addDependency(second)
            second.addDependency(elsewhere)
            let all: [Operation] = [first, second, ops.plain("free")]
            queue.addOperations(all, waitUntilFinished: false)
            _ = waitUntil { ops.log.count == 1 }
            usleep(20_000)

            // When the other queue's operation finishes
            release.signal()
            _ = waitUntilFinished(all)
            return ops.log.all
        }
        // Then second, then first
        #expect(orders.foundation == ["free", "second", "first"])
        #expect(orders.package == orders.foundation, "AsyncOperationQueue: \(orders.package); Foundation: \(orders.foundation)")
    }

    // API.md 9, Foundation's serial queue as the reference: several plain operations waiting for
    // the same operation of another queue, released by its one finish while another runs, go in
    // add order before a later one.
    @Test
    func severalGatedReleasedByOneFinish_whileAnotherRuns_goInAddOrder_asFoundationsSerialQueueDoes() {
        let orders = onBothQueues("fanIn") { queue, ops in
            // Given a serial queue running an operation, then three plain operations waiting for
            // one operation of another queue, and a later AsyncOperation
            let runnerRelease = Signal(), elsewhereRelease = Signal()
            queue.addOperation(ops.gated("runner", runnerRelease))
            _ = waitUntil { ops.log.count == 1 }
            let elsewhere = runningElsewhere("elsewhere", release: elsewhereRelease)
            let waiting = ["w1", "w2", "w3"].map { label -> Operation in
                let operation = ops.plain(label)
                operation.addDependency(elsewhere)
                return operation
            }
            let all = waiting + [ops.asynchronous("later")]
            queue.addOperations(all, waitUntilFinished: false)

            // When the other queue's operation finishes, then the runner
            elsewhereRelease.signal()
            _ = waitUntilFinished([elsewhere])
            usleep(20_000)
            runnerRelease.signal()
            _ = waitUntilFinished(all)
            return ops.log.all
        }
        #expect(orders.foundation == ["runner", "w1", "w2", "w3", "later"])
        #expect(orders.package == orders.foundation, "AsyncOperationQueue: \(orders.package); Foundation: \(orders.foundation)")
    }

    // API.md 9: "start the operations whose dependencies have finished in the order they were
    // added", whatever their `queuePriority` (Foundation ranks by priority: not the reference).
    @Test
    func severalGatedReleasedByOneFinish_withPrioritiesAgainstTheirOrder_startInAddOrder() {
        // Given plain operations of rising priority waiting for an operation of another queue,
        // and one added after them, ready, that has run
        let queue = serialAsyncQueue()
        let ops = RecordingOperations("gatePriorities")
        let release = Signal()
        let elsewhere = runningElsewhere("elsewhere", release: release)
        let priorities: [Operation.QueuePriority] = [.veryLow, .low, .normal, .high, .veryHigh]
        let waiting = priorities.enumerated().map { index, priority -> Operation in
            let operation = ops.makePlain("w\(index)")
            operation.queuePriority = priority
            operation.addDependency(elsewhere)
            return operation
        }
        queue.addOperations(waiting + [ops.makePlain("free")], waitUntilFinished: false)
        #expect(waitUntil { ops.executed.all == ["free"] })

        // When the other queue's operation finishes
        release.signal()

        // Then they start in add order
        #expect(waitUntilFinished(waiting), "\(queue.debugDescription)")
        #expect(ops.executed.all == ["free", "w0", "w1", "w2", "w3", "w4"])
    }

    // API.md 9, Foundation's serial queue as the reference: a chain a1 <- p1 <- a2 <- p2 where p1
    // also waits for another queue: a later operation goes while p1 waits, then the chain.
    @Test
    func chainMixingKinds_withALinkWaitingForAnotherQueue_runsThroughOnceItFinishes_asFoundationsSerialQueueDoes() {
        let orders = onBothQueues("mixedChain") { queue, ops in
            // Given a1 <- p1 <- a2 <- p2, p1 waiting for another queue too, then a later one
            let release = Signal()
            let elsewhere = runningElsewhere("elsewhere", release: release)
            let a1 = ops.asynchronous("a1"), p1 = ops.plain("p1"), a2 = ops.asynchronous("a2"), p2 = ops.plain("p2")
            p1.addDependency(a1)
            p1.addDependency(elsewhere)
            a2.addDependency(p1)
            p2.addDependency(a2)
            let all: [Operation] = [a1, p1, a2, p2, ops.asynchronous("later")]
            queue.addOperations(all, waitUntilFinished: false)
            _ = waitUntil { ops.log.count == 2 }
            usleep(20_000)

            // When the other queue's operation finishes
            release.signal()
            _ = waitUntilFinished(all)
            return ops.log.all
        }
        #expect(orders.foundation == ["a1", "later", "p1", "a2", "p2"])
        #expect(orders.package == orders.foundation, "AsyncOperationQueue: \(orders.package); Foundation: \(orders.foundation)")
    }

    // Foundation's serial queue as the reference: an AsyncOperation dependent of a gated plain
    // operation goes right after it, before an operation added after both that is ready.
    @Test
    func asyncDependentOfAGatedOne_goesRightAfterIt_beforeALaterOne_asFoundationsSerialQueueDoes() {
        let orders = onBothQueues("gatedDependent") { queue, ops in
            // Given a serial queue running an operation; behind it a plain one waiting for another
            // queue, an AsyncOperation waiting for it, and a later one
            let runnerRelease = Signal(), elsewhereRelease = Signal()
            queue.addOperation(ops.gated("runner", runnerRelease))
            _ = waitUntil { ops.log.count == 1 }
            let elsewhere = runningElsewhere("elsewhere", release: elsewhereRelease)
            let waiting = ops.plain("waiting")
            waiting.addDependency(elsewhere)
            let dependent = ops.asynchronous("dependent")
            dependent.addDependency(waiting)
            let all: [Operation] = [waiting, dependent, ops.asynchronous("later")]
            queue.addOperations(all, waitUntilFinished: false)

            // When the runner finishes (the later one runs), then the other queue's operation
            runnerRelease.signal()
            _ = waitUntil { ops.log.count == 2 }
            usleep(20_000)
            elsewhereRelease.signal()
            _ = waitUntilFinished(all)
            return ops.log.all
        }
        #expect(orders.foundation == ["runner", "later", "waiting", "dependent"])
        #expect(orders.package == orders.foundation, "AsyncOperationQueue: \(orders.package); Foundation: \(orders.foundation)")
    }

    // API.md 9 and Foundation's serial queue: a gated operation whose dependency of the same queue
    // is cancelled while it waits for its turn goes in its place, before a later one.
    @Test
    func gatedOneWhoseDependencyIsCancelled_goesInItsPlace_asFoundationsSerialQueueDoes() {
        let orders = onBothQueues("cancelledDependency") { queue, ops in
            // Given a serial queue running an operation; behind it [waiting (waits for dependency),
            // dependency, later]
            let runnerRelease = Signal()
            queue.addOperation(ops.gated("runner", runnerRelease))
            _ = waitUntil { ops.log.count == 1 }
            let waiting = ops.plain("waiting")
            let dependency = ops.asynchronous("dependency")
            waiting.addDependency(dependency)
            let all: [Operation] = [waiting, dependency, ops.plain("later")]
            queue.addOperations(all, waitUntilFinished: false)

            // When the dependency is cancelled, and the runner finishes
            dependency.cancel()
            usleep(20_000)
            runnerRelease.signal()
            _ = waitUntilFinished(all)
            return ops.log.all
        }
        #expect(orders.foundation == ["runner", "waiting", "later"])
        #expect(orders.package == orders.foundation, "AsyncOperationQueue: \(orders.package); Foundation: \(orders.foundation)")
    }

    // MARK: - Dependencies changed while gated

    // Foundation's serial queue as the reference: a dependency added to a gated operation before
    // the one it waited for finished is waited for too.
    @Test
    func dependencyAddedWhileGated_beforeTheFirstFinishes_isWaitedFor_asFoundationsSerialQueueDoes() {
        let orders = onBothQueues("addedDependency") { queue, ops in
            // Given [waiting (waits for another queue), free] on a serial queue, free having run
            let firstRelease = Signal(), secondRelease = Signal()
            let first = runningElsewhere("first", release: firstRelease)
            let second = runningElsewhere("second", release: secondRelease)
            let waiting = ops.plain("waiting")
            waiting.addDependency(first)
            let all: [Operation] = [waiting, ops.plain("free")]
            queue.addOperations(all, waitUntilFinished: false)
            _ = waitUntil { ops.log.count == 1 }

            // When it is made to wait for a second operation, the first finishes, and a moment
            // later the second
            waiting.addDependency(second)
            firstRelease.signal()
            _ = waitUntilFinished([first])
            usleep(100_000)
            ops.log.append("second released")
            secondRelease.signal()
            _ = waitUntilFinished(all)
            return ops.log.all
        }
        // Then it runs only after the second
        #expect(orders.foundation == ["free", "second released", "waiting"])
        #expect(orders.package == orders.foundation, "AsyncOperationQueue: \(orders.package); Foundation: \(orders.foundation)")
    }

    // Foundation's serial queue as the reference: a dependency added to a gated operation after
    // its dependencies finished, while it waits for its turn behind a running one, is waited for;
    // the next one goes meanwhile, and the queue does not stall.
    @Test
    func dependencyAddedWhileWaitingForItsTurn_isWaitedFor_andTheNextGoesMeanwhile_asFoundationsSerialQueueDoes() {
        let orders = onBothQueues("addedInTurn") { queue, ops in
            // Given a serial queue running an operation; behind it a plain one whose dependency of
            // another queue has finished, then a later one
            let runnerRelease = Signal(), firstRelease = Signal(), secondRelease = Signal()
            queue.addOperation(ops.gated("runner", runnerRelease))
            _ = waitUntil { ops.log.count == 1 }
            let first = runningElsewhere("first", release: firstRelease)
            let waiting = ops.plain("waiting")
            waiting.addDependency(first)
            let all: [Operation] = [waiting, ops.plain("later")]
            queue.addOperations(all, waitUntilFinished: false)
            firstRelease.signal()
            _ = waitUntilFinished([first])
            usleep(50_000)

            // When it is made to wait for a second operation, and the runner finishes
            let second = runningElsewhere("second", release: secondRelease)
            waiting.addDependency(second)
            runnerRelease.signal()
            _ = waitUntil { ops.log.count == 2 }
            usleep(100_000)
            ops.log.append("second released")
            secondRelease.signal()
            _ = waitUntilFinished(all)
            return ops.log.all
        }
        #expect(orders.foundation == ["runner", "later", "second released", "waiting"])
        #expect(orders.package == orders.foundation, "AsyncOperationQueue: \(orders.package); Foundation: \(orders.foundation)")
    }

    // Foundation's serial queue as the reference: an unfinished dependency removed from a gated
    // operation. (swift-corelibs-foundation never makes an operation ready once an unfinished
    // dependency was removed from it, even after that dependency finishes; the package's queue
    // must do as it does, and a cancel must still finish it.)
    @Test
    func dependencyRemovedWhileGated_thenFinishing_asFoundationsSerialQueue_andACancelFinishesIt() {
        let outcomes = [true, false].map { onFoundation -> [String] in
            // Given [waiting (waits for another queue), free] on a serial queue, free having run
            let queue = onFoundation ? serialFoundationQueue() : serialAsyncQueue()
            let log = Recorder<String>(), finishes = Recorder<String>()
            let release = Signal()
            let elsewhere = runningElsewhere("elsewhere", release: release)
            let waiting = counted("waiting", log: log, finishes: finishes)
            waiting.addDependency(elsewhere)
            queue.addOperations([waiting, counted("free", log: log, finishes: finishes)], waitUntilFinished: false)
            _ = waitUntil { log.count == 1 }
            usleep(20_000)

            // When the dependency is removed, then finishes, and later it is cancelled
            waiting.removeDependency(elsewhere)
            usleep(100_000)
            log.append("removed")
            release.signal()
            _ = waitUntilFinished([elsewhere])
            usleep(200_000)
            log.append("dependency finished")
            waiting.cancel()
            let finished = waitUntilFinished([waiting])
            log.append(finished ? "finished" : "never finished")
            usleep(50_000)
            log.append("finishes: \(finishes.all.filter { $0 == "waiting" }.count)")
            return log.all
        }
        #expect(outcomes[1] == outcomes[0], "AsyncOperationQueue: \(outcomes[1]); Foundation: \(outcomes[0])")
        #expect(outcomes[1].suffix(2) == ["finished", "finishes: 1"], "AsyncOperationQueue: \(outcomes[1])")
    }

    // MARK: - Cancellation

    // API.md 5 and `cancelAllOperations()`'s promise: a gated operation cancelled while its
    // dependency runs finishes promptly, without running, once, and does not hold the queue.
    @Test
    func gatedCancelledWhileItsDependencyRuns_finishesOnceWithoutRunning_andTheQueueGoesOn() {
        // Given a gated plain operation on a serial queue
        let queue = serialAsyncQueue()
        let log = Recorder<String>(), finishes = Recorder<String>()
        let release = Signal()
        let elsewhere = runningElsewhere("elsewhere", release: release)
        let waiting = counted("waiting", log: log, finishes: finishes)
        waiting.addDependency(elsewhere)
        queue.addOperation(waiting)
        usleep(20_000)

        // When it is cancelled, and later ones are added
        waiting.cancel()
        let later = counted("later", log: log, finishes: finishes)
        queue.addOperation(later)

        // Then it finishes while its dependency runs, once, without running, and the later one runs
        #expect(waitUntilFinished([waiting, later]), "\(queue.debugDescription)")
        #expect(!elsewhere.isFinished)
        #expect(finishCount(of: "waiting", in: finishes) == 1)
        release.signal()
        #expect(waitUntilFinished([elsewhere]))
        usleep(50_000)
        #expect(log.all == ["later"])
        #expect(finishCount(of: "waiting", in: finishes) == 1)
    }

    // FOUND (fixed): a gated operation cancelled while its dependency runs finishes, but keeps the gate
    // among its `dependencies` until that dependency finishes (README: the gate is "listed among
    // its dependencies until it has finished"). `openGateOnceReady` removes the gate of a
    // finished operation only when a dependency it watches finishes (AsyncOperationQueue.swift,
    // `guard !operation.isFinished else { operation.removeDependency(gate) ... }`): nothing
    // watches the operation's own finish.
    @Test
    func gatedCancelledWhileItsDependencyRuns_noLongerListsTheGateOnceFinished() {
        // Given a gated plain operation on a serial queue
        let queue = serialAsyncQueue()
        let release = Signal()
        let elsewhere = runningElsewhere("elsewhere", release: release)
        let waiting = BlockOperation {}
        waiting.addDependency(elsewhere)
        queue.addOperation(waiting)
        #expect(waitUntil { listsAGate(waiting) }, "never gated: \(waiting.dependencies.map { $0.name ?? "?" })")

        // When it is cancelled and has finished
        waiting.cancel()
        #expect(waitUntilFinished([waiting]), "\(queue.debugDescription)")

        // Then its dependencies no longer list the gate (its dependency still runs)
        #expect(waitUntil { !listsAGate(waiting) }, "dependencies: \(waiting.dependencies.map { $0.name ?? "?" })")
        release.signal()
        #expect(waitUntilFinished([elsewhere]))
    }

    // Foundation's serial queue as the reference: a gated operation cancelled while it waits for
    // its turn (its dependency finished, another runs) finishes without running; the rest keep
    // their order.
    @Test
    func gatedCancelledWhileWaitingForItsTurn_finishesWithoutRunning_asFoundationsSerialQueueDoes() {
        let orders = onBothQueues("cancelledInTurn") { queue, ops in
            // Given a serial queue running an operation; behind it a plain one whose dependency of
            // another queue has finished, then a later one
            let runnerRelease = Signal(), elsewhereRelease = Signal()
            queue.addOperation(ops.gated("runner", runnerRelease))
            _ = waitUntil { ops.log.count == 1 }
            let elsewhere = runningElsewhere("elsewhere", release: elsewhereRelease)
            let waiting = ops.plain("waiting")
            waiting.addDependency(elsewhere)
            let all: [Operation] = [waiting, ops.asynchronous("later")]
            queue.addOperations(all, waitUntilFinished: false)
            elsewhereRelease.signal()
            _ = waitUntilFinished([elsewhere])
            usleep(50_000)

            // When it is cancelled, and the runner finishes
            waiting.cancel()
            runnerRelease.signal()
            _ = waitUntilFinished(all)
            return ops.log.all
        }
        #expect(orders.foundation == ["runner", "later"])
        #expect(orders.package == orders.foundation, "AsyncOperationQueue: \(orders.package); Foundation: \(orders.foundation)")
    }

    // API.md 5: a gated operation cancelled after its dependency finished and before its gate
    // opens is finished once, never run, even when its turn then comes.
    @Test
    func gatedCancelledWhileWaitingForItsTurn_finishesOnce_evenWhenItsTurnComes() {
        // Given a serial queue running an operation; behind it a gated plain one whose dependency
        // has finished
        let queue = serialAsyncQueue()
        let log = Recorder<String>(), finishes = Recorder<String>()
        let runnerRelease = Signal(), elsewhereRelease = Signal()
        queue.addOperation(gatedOperation("runner", started: log, release: runnerRelease))
        #expect(waitUntil { log.count == 1 })
        let elsewhere = runningElsewhere("elsewhere", release: elsewhereRelease)
        let waiting = counted("waiting", log: log, finishes: finishes)
        waiting.addDependency(elsewhere)
        let later = counted("later", log: log, finishes: finishes)
        queue.addOperations([waiting, later], waitUntilFinished: false)
        elsewhereRelease.signal()
        #expect(waitUntilFinished([elsewhere]))
        usleep(50_000)

        // When it is cancelled, and the runner finishes
        waiting.cancel()
        runnerRelease.signal()

        // Then it finished once, without running, and the later one ran
        #expect(waitUntilFinished([waiting, later]), "\(queue.debugDescription)")
        #expect(finishCount(of: "waiting", in: finishes) == 1)
        #expect(log.all == ["runner", "later"])
        #expect(waitUntil { !listsAGate(waiting) }, "dependencies: \(waiting.dependencies.map { $0.name ?? "?" })")
    }

    // `cancelAllOperations()`: every operation finishes without executing; gated ones included,
    // whether they wait for dependencies or for their turn; each once.
    @Test
    func cancelAllOperations_withGatedOnesWaitingForDependenciesAndForTheirTurn_finishesEachOnceWithoutRunning() {
        // Given a serial queue running an operation; behind it a plain one whose dependency
        // finished, one still waiting for another queue, one waiting for a later AsyncOperation,
        // that AsyncOperation, and a free one
        let queue = serialAsyncQueue()
        let log = Recorder<String>(), finishes = Recorder<String>()
        let runnerRelease = Signal(), firstRelease = Signal(), secondRelease = Signal()
        queue.addOperation(gatedOperation("runner", started: log, release: runnerRelease))
        #expect(waitUntil { log.count == 1 })
        let first = runningElsewhere("first", release: firstRelease)
        let second = runningElsewhere("second", release: secondRelease)
        let inTurn = counted("inTurn", log: log, finishes: finishes)
        inTurn.addDependency(first)
        let forDependency = counted("forDependency", log: log, finishes: finishes)
        forDependency.addDependency(second)
        let forLater = counted("forLater", log: log, finishes: finishes)
        let laterAsync = AsyncBlockOperation { log.append("laterAsync") }
        forLater.addDependency(laterAsync)
        let free = counted("free", log: log, finishes: finishes)
        let rest: [Operation] = [inTurn, forDependency, forLater, laterAsync, free]
        queue.addOperations(rest, waitUntilFinished: false)
        firstRelease.signal()
        #expect(waitUntilFinished([first]))
        usleep(50_000)

        // When every operation is cancelled, and the runner returns
        queue.cancelAllOperations()
        runnerRelease.signal()

        // Then every one finishes once, none having run, while the other queue's still runs
        #expect(waitUntilFinished(rest), "\(queue.debugDescription)")
        #expect(log.all == ["runner"])
        for label in ["inTurn", "forDependency", "forLater", "free"] {
            #expect(finishCount(of: label, in: finishes) == 1, "\(label)")
        }
        secondRelease.signal()
        #expect(waitUntilFinished([second]))
        usleep(50_000)
        #expect(log.all == ["runner"])
    }

    // API.md 5: a gated operation cancelled just as its dependency finishes (both orders, many
    // times) finishes once, never runs, and the queue goes on.
    @Test
    func gatedCancelledRacingItsDependencysFinish_finishesOnce_andTheQueueGoesOn() {
        for round in 0..<40 {
            // Given a gated plain operation whose dependency is about to finish
            let queue = serialAsyncQueue()
            let log = Recorder<String>(), finishes = Recorder<String>()
            let release = Signal()
            let elsewhere = runningElsewhere("elsewhere", release: release)
            let waiting = counted("waiting", log: log, finishes: finishes)
            waiting.addDependency(elsewhere)
            queue.addOperation(waiting)
            usleep(5_000)

            // When it is cancelled as its dependency finishes
            let start = DispatchTime.now()
            let canceller = runOnOwnThread {
                sleep(until: start, plusMicroseconds: UInt32(round % 8) * 25)
                waiting.cancel()
            }
            release.signal()
            #expect(canceller.wait(timeout: generousTimeout))
            let next = counted("next", log: log, finishes: finishes)
            queue.addOperation(next)

            // Then it finishes, and the next one runs
            #expect(waitUntilFinished([waiting, next, elsewhere]), "round \(round): \(queue.debugDescription)")
            #expect(log.all.last == "next", "round \(round): \(log.all)")
            #expect(finishes.all.filter { $0 == "waiting" }.count <= 1, "round \(round)")
        }
    }

    // MARK: - Suspension and width

    // API.md 10 and Foundation's serial queue: a gated operation whose dependency finishes while
    // the queue is suspended starts nothing until the resume, then goes first.
    @Test
    func suspendedWhileGated_dependencyFinishing_startsNothingUntilTheResume_asFoundationsSerialQueueDoes() {
        let orders = onBothQueues("suspendedGate") { queue, ops in
            // Given a serial queue running an operation; behind it a gated plain one and a later
            let runnerRelease = Signal(), elsewhereRelease = Signal()
            queue.addOperation(ops.gated("runner", runnerRelease))
            _ = waitUntil { ops.log.count == 1 }
            let elsewhere = runningElsewhere("elsewhere", release: elsewhereRelease)
            let waiting = ops.plain("waiting")
            waiting.addDependency(elsewhere)
            let all: [Operation] = [waiting, ops.asynchronous("later")]
            queue.addOperations(all, waitUntilFinished: false)

            // When the queue is suspended, the dependency and the runner finish, and a moment
            // later the queue resumes
            queue.isSuspended = true
            elsewhereRelease.signal()
            runnerRelease.signal()
            _ = waitUntil { elsewhere.isFinished && queue.operations.count <= 2 }
            usleep(100_000)
            ops.log.append("resume")
            queue.isSuspended = false
            _ = waitUntilFinished(all)
            return ops.log.all
        }
        #expect(orders.foundation == ["runner", "resume", "waiting", "later"])
        #expect(orders.package == orders.foundation, "AsyncOperationQueue: \(orders.package); Foundation: \(orders.foundation)")
    }

    // API.md 10 and 9: suspended while a gated operation waits for its turn, then resumed: it
    // goes first, and a cancel while suspended finishes it without running.
    @Test
    func suspendedWhileAGatedOneWaitsForItsTurn_resumed_itGoesFirst_andACancelledOneNeverRuns() {
        // Given a serial queue running an operation; behind it two gated plain ones whose
        // dependency finished, then a later one
        let queue = serialAsyncQueue()
        let log = Recorder<String>(), finishes = Recorder<String>()
        let runnerRelease = Signal(), elsewhereRelease = Signal()
        queue.addOperation(gatedOperation("runner", started: log, release: runnerRelease))
        #expect(waitUntil { log.count == 1 })
        let elsewhere = runningElsewhere("elsewhere", release: elsewhereRelease)
        let first = counted("first", log: log, finishes: finishes)
        let second = counted("second", log: log, finishes: finishes)
        first.addDependency(elsewhere)
        second.addDependency(elsewhere)
        let later = counted("later", log: log, finishes: finishes)
        queue.addOperations([first, second, later], waitUntilFinished: false)
        elsewhereRelease.signal()
        #expect(waitUntilFinished([elsewhere]))
        usleep(50_000)

        // When the queue is suspended, the runner finishes, the first is cancelled, and the
        // queue resumes a moment later
        queue.isSuspended = true
        runnerRelease.signal()
        first.cancel()
        usleep(100_000)
        let duringSuspension = log.all
        queue.isSuspended = false

        // Then nothing started while suspended; then second and later, in order
        #expect(duringSuspension == ["runner"])
        #expect(waitUntilFinished([first, second, later]), "\(queue.debugDescription)")
        #expect(log.all == ["runner", "second", "later"])
        #expect(finishCount(of: "first", in: finishes) == 1)
    }

    // Foundation's queue as the reference: a serial queue widened while a gated operation waits
    // for its turn behind a running one starts it alongside.
    @Test
    func widenedWhileAGatedOneWaitsForItsTurn_startsItAlongsideTheRunningOne_asFoundationsQueueDoes() {
        let orders = onBothQueues("widenedGate") { queue, ops in
            // Given a serial queue running an operation; behind it a gated plain one whose
            // dependency finished
            let runnerRelease = Signal(), elsewhereRelease = Signal()
            queue.addOperation(ops.gated("runner", runnerRelease))
            _ = waitUntil { ops.log.count == 1 }
            let elsewhere = runningElsewhere("elsewhere", release: elsewhereRelease)
            let waiting = ops.plain("waiting")
            waiting.addDependency(elsewhere)
            queue.addOperation(waiting)
            elsewhereRelease.signal()
            _ = waitUntilFinished([elsewhere])
            usleep(50_000)

            // When the queue is widened
            queue.maxConcurrentOperationCount = 2
            _ = waitUntil { ops.log.count == 2 }
            ops.log.append("release")
            runnerRelease.signal()
            _ = waitUntilFinished([waiting])
            return ops.log.all
        }
        #expect(orders.foundation == ["runner", "waiting", "release"])
        #expect(orders.package == orders.foundation, "AsyncOperationQueue: \(orders.package); Foundation: \(orders.foundation)")
    }

    // Foundation's queue as the reference: widened and made serial again while a plain operation
    // is gated, the queue is serial when its dependency finishes: it waits for the running one.
    @Test
    func widenedAndMadeSerialAgainWhileGated_itWaitsForTheRunningOne_asFoundationsSerialQueueDoes() {
        let orders = onBothQueues("serialAgain") { queue, ops in
            // Given a gated plain operation on a serial queue
            let runnerRelease = Signal(), elsewhereRelease = Signal()
            let elsewhere = runningElsewhere("elsewhere", release: elsewhereRelease)
            let waiting = ops.plain("waiting")
            waiting.addDependency(elsewhere)
            queue.addOperation(waiting)
            usleep(20_000)

            // When the queue is widened, made serial again, given a long runner, and the
            // dependency finishes
            queue.maxConcurrentOperationCount = 3
            queue.maxConcurrentOperationCount = 1
            queue.addOperation(ops.gated("runner", runnerRelease))
            _ = waitUntil { ops.log.count == 1 }
            elsewhereRelease.signal()
            _ = waitUntilFinished([elsewhere])
            usleep(100_000)
            ops.log.append("release")
            runnerRelease.signal()
            _ = waitUntilFinished([waiting])
            return ops.log.all
        }
        #expect(orders.foundation == ["runner", "release", "waiting"])
        #expect(orders.package == orders.foundation, "AsyncOperationQueue: \(orders.package); Foundation: \(orders.foundation)")
    }

    // Foundation's queue as the reference: widened while a plain operation is gated, its
    // dependency finishing then starts it at once, beside a running one.
    @Test
    func widenedWhileGated_dependencyFinishing_startsItAtOnce_asFoundationsQueueDoes() {
        let orders = onBothQueues("widenedThenReleased") { queue, ops in
            // Given a serial queue running an operation, and behind it a gated plain operation
            let runnerRelease = Signal(), elsewhereRelease = Signal()
            queue.addOperation(ops.gated("runner", runnerRelease))
            _ = waitUntil { ops.log.count == 1 }
            let elsewhere = runningElsewhere("elsewhere", release: elsewhereRelease)
            let waiting = ops.plain("waiting")
            waiting.addDependency(elsewhere)
            queue.addOperation(waiting)
            usleep(20_000)

            // When the queue is widened, and the dependency finishes
            queue.maxConcurrentOperationCount = 2
            elsewhereRelease.signal()
            _ = waitUntil { ops.log.count == 2 }
            ops.log.append("release")
            runnerRelease.signal()
            _ = waitUntilFinished([waiting])
            return ops.log.all
        }
        #expect(orders.foundation == ["runner", "waiting", "release"])
        #expect(orders.package == orders.foundation, "AsyncOperationQueue: \(orders.package); Foundation: \(orders.foundation)")
    }

    // MARK: - Waits, lists, barriers

    // `waitUntilAllOperationsAreFinished()`: "Blocks until every operation on the queue ... has
    // finished", gated ones included.
    @Test
    func waitUntilAllOperationsAreFinished_withAGatedOne_returnsOnlyOnceItRan() {
        // Given a gated plain operation and a later one
        let queue = serialAsyncQueue()
        let log = Recorder<String>()
        let release = Signal()
        let elsewhere = runningElsewhere("elsewhere", release: release)
        let waiting = BlockOperation { log.append("waiting") }
        waiting.addDependency(elsewhere)
        queue.addOperations([waiting, BlockOperation { log.append("later") }], waitUntilFinished: false)

        // When a thread waits for the queue, and the dependency finishes a moment later
        let sawFinished = Recorder<Bool>()
        let waited = runOnOwnThread {
            queue.waitUntilAllOperationsAreFinished()
            sawFinished.append(waiting.isFinished)
        }
        usleep(100_000)
        let returnedEarly = !sawFinished.all.isEmpty
        release.signal()

        // Then it returns only after the gated one ran
        #expect(waited.wait(timeout: generousTimeout), "\(queue.debugDescription)")
        #expect(!returnedEarly)
        #expect(sawFinished.all == [true])
        #expect(log.all == ["later", "waiting"])
    }

    // `addOperations(_:waitUntilFinished:)`: returns once all of them finished, a gated one among
    // them.
    @Test
    func addOperationsWaitingUntilFinished_withAGatedOne_returnsOnceItRan() {
        // Given a plain operation waiting for another queue
        let queue = serialAsyncQueue()
        let ops = RecordingOperations("addAndWait")
        let release = Signal()
        let elsewhere = runningElsewhere("elsewhere", release: release)
        let waiting = ops.makePlain("waiting")
        waiting.addDependency(elsewhere)
        let async = ops.make("async")

        // When it is added with an AsyncOperation, waiting until finished, and the dependency
        // finishes a moment later
        let added = runOnOwnThread { queue.addOperations([waiting, async], waitUntilFinished: true) }
        usleep(100_000)
        let returnedEarly = added.wait(timeout: 0)
        release.signal()

        // Then the add returns once both ran
        #expect(added.wait(timeout: generousTimeout), "\(queue.debugDescription)")
        #expect(!returnedEarly)
        #expect(waiting.isFinished && async.isFinished)
        #expect(ops.executed.all == ["async", "waiting"])
    }

    // README: the gate is internal; `operations`, `operationCount`, `allOperations` and
    // `allOperationCount` list what was added, never the gate.
    @Test
    func listsOfTheQueue_whileGatedAndWaitingForTheTurn_neverShowTheGate() {
        // Given a serial queue running an operation; behind it one gated plain operation waiting
        // for its dependency, one waiting for its turn, and a later AsyncOperation
        let queue = serialAsyncQueue()
        let log = Recorder<String>()
        let runnerRelease = Signal(), firstRelease = Signal(), secondRelease = Signal()
        let runner = gatedOperation("runner", started: log, release: runnerRelease)
        queue.addOperation(runner)
        #expect(waitUntil { log.count == 1 })
        let first = runningElsewhere("first", release: firstRelease)
        let second = runningElsewhere("second", release: secondRelease)
        let inTurn = BlockOperation {}
        inTurn.addDependency(first)
        let forDependency = BlockOperation {}
        forDependency.addDependency(second)
        let later = AsyncBlockOperation {}
        queue.addOperations([inTurn, forDependency, later], waitUntilFinished: false)
        firstRelease.signal()
        #expect(waitUntilFinished([first]))
        usleep(50_000)

        // When the lists are read
        let operations = queue.operations
        let all = queue.allOperations

        // Then no gate is listed, and every added operation is, in add order
        #expect(!operations.contains { $0.name == plainGateName })
        #expect(!all.contains { $0.name == plainGateName })
        let added: [Operation] = [runner, inTurn, forDependency, later]
        #expect(all.map { ObjectIdentifier($0) } == added.map { ObjectIdentifier($0) })
        #expect(queue.allOperationCount == 4)
        #expect(queue.operationCount == operations.count)
        runnerRelease.signal()
        secondRelease.signal()
        #expect(waitUntilFinished([runner, inTurn, forDependency, later, second]), "\(queue.debugDescription)")
    }

    // Foundation's serial queue as the reference: a barrier placed while a plain operation is
    // gated runs after it, and before a later one.
    @Test
    func barrierPlacedWhileGated_runsAfterIt_beforeALaterOne_asFoundationsSerialQueueDoes() {
        let orders = onBothQueues("gateBarrier") { queue, ops in
            // Given a gated plain operation
            let release = Signal()
            let elsewhere = runningElsewhere("elsewhere", release: release)
            let waiting = ops.plain("waiting")
            waiting.addDependency(elsewhere)
            queue.addOperation(waiting)
            usleep(20_000)

            // When a barrier is placed, a later operation added, and the dependency finishes
            let log = ops.log
            queue.addBarrierBlock { log.append("barrier") }
            let later = ops.asynchronous("later")
            queue.addOperation(later)
            usleep(50_000)
            release.signal()
            _ = waitUntilFinished([waiting, later])
            return ops.log.all
        }
        #expect(orders.foundation == ["waiting", "barrier", "later"])
        #expect(orders.package == orders.foundation, "AsyncOperationQueue: \(orders.package); Foundation: \(orders.foundation)")
    }

    // Foundation's serial queue as the reference: a barrier placed while a gated operation waits
    // for its turn behind a running one runs after both.
    @Test
    func barrierPlacedWhileAGatedOneWaitsForItsTurn_runsAfterIt_asFoundationsSerialQueueDoes() {
        let orders = onBothQueues("turnBarrier") { queue, ops in
            // Given a serial queue running an operation; behind it a gated plain one whose
            // dependency finished
            let runnerRelease = Signal(), elsewhereRelease = Signal()
            queue.addOperation(ops.gated("runner", runnerRelease))
            _ = waitUntil { ops.log.count == 1 }
            let elsewhere = runningElsewhere("elsewhere", release: elsewhereRelease)
            let waiting = ops.plain("waiting")
            waiting.addDependency(elsewhere)
            queue.addOperation(waiting)
            elsewhereRelease.signal()
            _ = waitUntilFinished([elsewhere])
            usleep(50_000)

            // When a barrier is placed and a later operation added, and the runner finishes
            let log = ops.log
            queue.addBarrierBlock { log.append("barrier") }
            let later = ops.plain("later")
            queue.addOperation(later)
            runnerRelease.signal()
            _ = waitUntilFinished([waiting, later])
            return ops.log.all
        }
        #expect(orders.foundation == ["runner", "waiting", "barrier", "later"])
        #expect(orders.package == orders.foundation, "AsyncOperationQueue: \(orders.package); Foundation: \(orders.foundation)")
    }

    // MARK: - Descriptions and dependencies

    // README: the gate is "listed among its dependencies until it has finished"; once the
    // operation has finished normally, its dependencies are the ones it was given.
    @Test
    func gatedOneThatRan_listsOnlyItsOwnDependencies() {
        // Given a plain operation waiting for an AsyncOperation added after it, and one of
        // another queue
        let queue = serialAsyncQueue()
        let release = Signal()
        let elsewhere = runningElsewhere("elsewhere", release: release)
        let waiting = BlockOperation {}
        let dependency = AsyncBlockOperation {}
        waiting.addDependency(dependency)
        waiting.addDependency(elsewhere)
        queue.addOperations([waiting, dependency], waitUntilFinished: false)

        // When it was gated, then ran
        #expect(waitUntil { listsAGate(waiting) }, "never gated")
        release.signal()
        #expect(waitUntilFinished([waiting, dependency]), "\(queue.debugDescription)")

        // Then its dependencies are its own, in the order given
        #expect(waitUntil { !listsAGate(waiting) })
        let given: [Operation] = [dependency, elsewhere]
        #expect(waiting.dependencies.map { ObjectIdentifier($0) } == given.map { ObjectIdentifier($0) })
    }

    // API.md "Seeing inside": `debugDescription` lists every unfinished operation with what it
    // waits for; the gate is internal, and is not named.
    @Test
    func debugDescriptionAndSnapshot_whileGated_nameTheDependency_neverTheGate() {
        // Given a gated plain operation waiting for a named operation of another queue, and a
        // later AsyncOperation behind it
        let queue = serialAsyncQueue()
        let release = Signal()
        let elsewhere = runningElsewhere("namedDependency", release: release)
        let waiting = BlockOperation {}
        waiting.name = uniqueName("gatedOne")
        waiting.addDependency(elsewhere)
        queue.addOperation(waiting)
        #expect(waitUntil { listsAGate(waiting) }, "never gated")

        // When the queue is described
        let description = queue.debugDescription
        let snapshot = "\(queue.snapshot())"

        // Then the dependency is named, the gate never
        #expect(description.contains(waiting.name!), "\(description)")
        #expect(description.contains(elsewhere.name!), "\(description)")
        #expect(!description.contains(plainGateName), "\(description)")
        #expect(!snapshot.contains(plainGateName), "\(snapshot)")
        release.signal()
        #expect(waitUntilFinished([waiting, elsewhere]))
    }

    // MARK: - Shutting down

    // API.md 12: nothing new runs after shutDown begins; every operation finishes exactly once;
    // the call returns when the queue is empty; other queues are unaffected. A gated operation
    // waiting for another queue is not "running": shutDown does not wait for that queue.
    @Test
    func shutDown_withALongGracePeriod_whileGated_returnsWithoutRunningIt_andLeavesTheOtherQueueAlone() async {
        // Given a gated plain operation waiting for another queue, and one waiting for it
        let queue = serialAsyncQueue()
        let log = Recorder<String>(), finishes = Recorder<String>()
        let release = Signal()
        let elsewhere = runningElsewhere("elsewhere", release: release)
        let waiting = counted("waiting", log: log, finishes: finishes)
        waiting.addDependency(elsewhere)
        let dependent = counted("dependent", log: log, finishes: finishes)
        dependent.addDependency(waiting)
        queue.addOperations([waiting, dependent], waitUntilFinished: false)
        try? await Task.sleep(nanoseconds: 20_000_000)

        // When the queue is shut down with a long grace period
        let outcome = await boundedOutcome(of: Task { await queue.shutDown(gracePeriod: 60) })

        // Then it returns while the other queue's operation still runs, none having run, each
        // finished once
        #expect(outcome != nil, "shutDown did not return: \(queue.debugDescription)")
        #expect(!elsewhere.isFinished)
        release.signal()
        #expect(waitUntilFinished([elsewhere, waiting, dependent]))
        try? await Task.sleep(nanoseconds: 50_000_000)
        #expect(log.all.isEmpty)
        #expect(finishes.all.filter { $0 == "waiting" }.count == 1)
        #expect(finishes.all.filter { $0 == "dependent" }.count == 1)
    }

    // FOUND (fixed): after a shut-down, a gated operation it finished keeps the gate among its
    // `dependencies` while its dependency of another queue runs (README: listed "until it has
    // finished"); same cause as `gatedCancelledWhileItsDependencyRuns_noLongerListsTheGateOnceFinished`.
    @Test
    func shutDown_whileGated_theFinishedOneNoLongerListsTheGate() async {
        // Given a gated plain operation waiting for another queue
        let queue = serialAsyncQueue()
        let release = Signal()
        let elsewhere = runningElsewhere("elsewhere", release: release)
        let waiting = BlockOperation {}
        waiting.addDependency(elsewhere)
        queue.addOperation(waiting)
        #expect(await eventually { listsAGate(waiting) }, "never gated")

        // When the queue is shut down
        let outcome = await boundedOutcome(of: Task { await queue.shutDown(gracePeriod: 60) })
        #expect(outcome != nil, "shutDown did not return: \(queue.debugDescription)")

        // Then the finished operation lists only its own dependency
        #expect(waiting.isFinished)
        #expect(await eventually { !listsAGate(waiting) }, "dependencies: \(waiting.dependencies.map { $0.name ?? "?" })")
        release.signal()
        #expect(waitUntilFinished([elsewhere]))
    }

    // API.md 12: a gated operation waiting for its turn behind a running one, shut down with a
    // long grace period: the running one finishes, the gated one never runs, nor a later one.
    @Test
    func shutDown_withALongGracePeriod_whileAGatedOneWaitsForItsTurn_runsNothingBehindTheRunningOne() async {
        // Given a serial queue running an operation; behind it a gated plain one whose
        // dependency finished, and a later AsyncOperation
        let queue = serialAsyncQueue()
        let log = Recorder<String>(), finishes = Recorder<String>()
        let runnerRelease = Signal(), elsewhereRelease = Signal()
        let runner = gatedOperation("runner", started: log, release: runnerRelease)
        queue.addOperation(runner)
        #expect(await eventually { log.count == 1 })
        let elsewhere = runningElsewhere("elsewhere", release: elsewhereRelease)
        let waiting = counted("waiting", log: log, finishes: finishes)
        waiting.addDependency(elsewhere)
        let later = AsyncBlockOperation { log.append("later") }
        queue.addOperations([waiting, later], waitUntilFinished: false)
        elsewhereRelease.signal()
        #expect(waitUntilFinished([elsewhere]))
        try? await Task.sleep(nanoseconds: 50_000_000)

        // When the queue is shut down, and the runner finishes a moment later
        let shutdown = Task<Void, any Error> { await queue.shutDown(gracePeriod: 60) }
        #expect(await eventually { queue.isShutDown })
        try? await Task.sleep(nanoseconds: 50_000_000)
        runnerRelease.signal()

        // Then it returns, only the runner having run, each finished once
        let outcome = await boundedOutcome(of: shutdown)
        #expect(outcome != nil, "shutDown did not return: \(queue.debugDescription)")
        #expect(waitUntilFinished([runner, waiting, later]))
        #expect(log.all == ["runner"])
        #expect(finishes.all.filter { $0 == "waiting" }.count == 1)
    }

    // API.md 12: with a short grace period, the running one is cancelled (it ignores it and
    // returns a moment later); the gated one waiting for its turn never runs.
    @Test
    func shutDown_withAShortGracePeriod_whileAGatedOneWaitsForItsTurn_runsNothingBehindTheRunningOne() async {
        // Given a serial queue running an operation; behind it a gated plain one whose
        // dependency finished
        let queue = serialAsyncQueue()
        let log = Recorder<String>(), finishes = Recorder<String>()
        let runnerRelease = Signal(), elsewhereRelease = Signal()
        let runner = gatedOperation("runner", started: log, release: runnerRelease)
        queue.addOperation(runner)
        #expect(await eventually { log.count == 1 })
        let elsewhere = runningElsewhere("elsewhere", release: elsewhereRelease)
        let waiting = counted("waiting", log: log, finishes: finishes)
        waiting.addDependency(elsewhere)
        let later = BlockOperation { log.append("later") }
        queue.addOperations([waiting, later], waitUntilFinished: false)
        elsewhereRelease.signal()
        #expect(waitUntilFinished([elsewhere]))
        try? await Task.sleep(nanoseconds: 50_000_000)

        // When the queue is shut down with a short grace period, and the runner (which ignores
        // cancellation) returns once it was cancelled
        let shutdown = Task<Void, any Error> { await queue.shutDown(gracePeriod: 0.1) }
        #expect(await eventually { runner.isCancelled }, "the runner was never cancelled")
        runnerRelease.signal()

        // Then it returns, only the runner having run
        let outcome = await boundedOutcome(of: shutdown)
        #expect(outcome != nil, "shutDown did not return: \(queue.debugDescription)")
        #expect(waitUntilFinished([runner, waiting, later]))
        #expect(log.all == ["runner"])
        #expect(finishes.all.filter { $0 == "waiting" }.count == 1)
    }

    // API.md 12: a shut-down racing with the end of the turn that lets a gated operation go
    // (many times, with a zero and a long grace period): the call returns, every operation
    // finishes once, and the dependent never runs before what it waits for.
    @Test(arguments: [0.0, 30.0])
    func shutDown_racingTheTurnThatOpensAGate_returns_andEveryOneFinishesOnce(gracePeriod: Double) async {
        for round in 0..<30 {
            // Given [waiting (plain, waits for quick), quick (async), later (plain)] on a serial
            // queue: quick runs, and waiting's gate opens as its turn ends
            let queue = serialAsyncQueue()
            let log = Recorder<String>(), finishes = Recorder<String>()
            let waiting = counted("waiting", log: log, finishes: finishes)
            let quick = AsyncBlockOperation { log.append("quick"); usleep(UInt32(round % 5) * 200) }
            waiting.addDependency(quick)
            let later = counted("later", log: log, finishes: finishes)
            queue.addOperations([waiting, quick, later], waitUntilFinished: false)
            if round % 3 != 0 {
                _ = await eventually { !log.all.isEmpty }
            }

            // When the queue is shut down as quick finishes
            let outcome = await boundedOutcome(of: Task { await queue.shutDown(gracePeriod: gracePeriod) })

            // Then it returns, each finished once, and nothing ran out of order
            #expect(outcome != nil, "round \(round): shutDown did not return: \(queue.debugDescription)")
            #expect(waitUntilFinished([waiting, quick, later]), "round \(round)")
            try? await Task.sleep(nanoseconds: 20_000_000)
            for label in ["waiting", "later"] {
                #expect(finishes.all.filter { $0 == label }.count == 1, "round \(round): \(label) finished \(finishes.all)")
            }
            let ran = log.all
            let expectedPrefixes: [[String]] = [[], ["quick"], ["quick", "waiting"], ["quick", "waiting", "later"]]
            #expect(expectedPrefixes.contains(ran), "round \(round): \(ran)")
        }
    }

    // API.md 12: adds under way on other threads as the shut-down begins, gated plain operations
    // among them: the call returns, and every one of them finishes exactly once. (Whether one of
    // them runs is not asserted here: rarely, one on its way to Foundation as the sweep reads the
    // queue's lists runs after the shut-down began, once 1 round in 20 in one of our runs; the
    // deterministic FOUND `shutDown_whileAPlainOneIsOnItsWayToFoundation_neverRunsIt`, fixed
    // since (such an operation stays listed until Foundation has it), holds the deliverer there.)
    @Test
    func shutDown_withAddsOfGatedOnesInFlight_returns_andEachFinishesOnce() async {
        for round in 0..<20 {
            // Given a serial queue with a gated operation, and threads adding gated operations
            let queue = serialAsyncQueue()
            let finishes = Recorder<String>(), log = Recorder<String>()
            let release = Signal()
            let elsewhere = runningElsewhere("elsewhere", release: release)
            let first = counted("first", log: log, finishes: finishes)
            first.addDependency(elsewhere)
            queue.addOperation(first)
            let added = Recorder<Operation>()
            let adders = (0..<2).map { thread in
                runOnOwnThread {
                    for index in 0..<20 {
                        let operation = counted("t\(thread)-\(index)", log: log, finishes: finishes)
                        operation.addDependency(index % 2 == 0 ? elsewhere : first)
                        added.append(operation)
                        queue.addOperation(operation)
                    }
                }
            }

            // When the queue is shut down meanwhile, and the dependency then finishes
            usleep(UInt32(round % 4) * 100)
            let outcome = await boundedOutcome(of: Task { await queue.shutDown(gracePeriod: 30) })
            for adder in adders {
                #expect(adder.wait(timeout: generousTimeout))
            }
            release.signal()

            // Then it returned, and every operation finished once, none having run
            #expect(outcome != nil, "round \(round): shutDown did not return: \(queue.debugDescription)")
            #expect(waitUntilFinished([first, elsewhere] + added.all), "round \(round): \(queue.debugDescription)")
            try? await Task.sleep(nanoseconds: 20_000_000)
            let labels = ["first"] + (0..<2).flatMap { thread in (0..<20).map { "t\(thread)-\($0)" } }
            let counts = Dictionary(grouping: finishes.all, by: { $0 }).mapValues(\.count)
            #expect(labels.allSatisfy { counts[$0] == 1 }, "round \(round): \(counts.filter { $0.value != 1 })")
        }
    }

    // API.md 12: "A suspended queue is resumed, so that the operations it cancelled can finish
    // (none of them executes)": shut down while suspended with a gated operation whose dependency
    // finished and one still waiting for another queue, it returns, none of them having run.
    @Test
    func shutDown_ofASuspendedQueue_withGatedOnes_returnsWithoutRunningThem() async {
        // Given a suspended serial queue with a gated plain operation whose dependency finished,
        // one whose dependency still runs, and a later AsyncOperation
        let queue = serialAsyncQueue()
        let log = Recorder<String>(), finishes = Recorder<String>()
        let firstRelease = Signal(), secondRelease = Signal()
        let first = runningElsewhere("first", release: firstRelease)
        let second = runningElsewhere("second", release: secondRelease)
        let released = counted("released", log: log, finishes: finishes)
        released.addDependency(first)
        let waiting = counted("waiting", log: log, finishes: finishes)
        waiting.addDependency(second)
        queue.addOperations([released, waiting], waitUntilFinished: false)
        #expect(await eventually { listsAGate(released) && listsAGate(waiting) }, "never gated")
        queue.isSuspended = true
        let later = AsyncBlockOperation { log.append("later") }
        queue.addOperation(later)
        firstRelease.signal()
        #expect(waitUntilFinished([first]))
        try? await Task.sleep(nanoseconds: 50_000_000)

        // When the queue is shut down
        let outcome = await boundedOutcome(of: Task { await queue.shutDown(gracePeriod: 30) })

        // Then it returns while the other queue's operation runs, none having run, each once
        #expect(outcome != nil, "shutDown did not return: \(queue.debugDescription)")
        #expect(!second.isFinished)
        secondRelease.signal()
        #expect(waitUntilFinished([released, waiting, later, second]))
        try? await Task.sleep(nanoseconds: 50_000_000)
        #expect(log.all.isEmpty, "\(log.all)")
        #expect(finishes.all.filter { $0 == "released" }.count == 1)
        #expect(finishes.all.filter { $0 == "waiting" }.count == 1)
    }

    // `waitUntilAllOperationsAreFinished()`: a gated operation cancelled while its dependency
    // runs has finished; the wait does not wait for that dependency.
    @Test
    func waitUntilAllOperationsAreFinished_afterAGatedOneWasCancelled_returnsWhileItsDependencyRuns() {
        // Given a gated plain operation, cancelled, and a later one
        let queue = serialAsyncQueue()
        let release = Signal()
        let elsewhere = runningElsewhere("elsewhere", release: release)
        let waiting = BlockOperation {}
        waiting.addDependency(elsewhere)
        queue.addOperations([waiting, BlockOperation {}], waitUntilFinished: false)
        usleep(20_000)
        waiting.cancel()

        // When a thread waits for the queue
        let waited = runOnOwnThread { queue.waitUntilAllOperationsAreFinished() }

        // Then it returns while the dependency still runs
        #expect(waited.wait(timeout: generousTimeout), "\(queue.debugDescription)")
        #expect(!elsewhere.isFinished)
        release.signal()
        #expect(waitUntilFinished([elsewhere, waiting]))
    }

    // MARK: - Groups, memory

    // API.md 9 with a serial GroupOperation (Foundation's serial queue as the reference for the
    // same operations): a plain child waiting for another queue lets a later child go, then runs,
    // its dependent child right after it.
    @Test
    func serialGroup_gatedChildWaitingForAnotherQueue_runsInItsTurn_itsDependentRightAfter() {
        // Given a serial group of [waiting (plain, waits for another queue), dependent (async,
        // waits for waiting), free, last (plain, waits for free)]
        let ops = RecordingOperations("groupGate")
        let release = Signal()
        let elsewhere = runningElsewhere("elsewhere", release: release)
        let waiting = ops.makePlain("waiting")
        waiting.addDependency(elsewhere)
        let dependent = ops.make("dependent")
        dependent.addDependency(waiting)
        let free = ops.make("free")
        let last = ops.makePlain("last")
        let group = GroupOperation(operations: [waiting, dependent, free, last])
        group.maxConcurrentOperationCount = 1
        AsyncOperationQueue().addOperation(group)

        // When free and last have run, and the other queue's operation finishes
        #expect(waitUntil { ops.executed.count == 2 })
        usleep(20_000)
        release.signal()

        // Then waiting, then its dependent
        #expect(waitUntilFinished([group]), "\(group.debugDescription)")
        #expect(ops.executed.all == ["free", "last", "waiting", "dependent"])
    }

    // API.md 8's spirit and the queue's promise to run what it was given: a queue released by its
    // owner while a plain operation is gated still runs it once its dependency finishes, and is
    // then released.
    @Test
    func queueReleasedByItsOwnerWhileGated_stillRunsIt_andIsReleasedAfterwards() {
        // Given a gated plain operation on a serial queue nobody else holds
        let log = Recorder<String>()
        let release = Signal()
        let elsewhere = runningElsewhere("elsewhere", release: release)
        let waiting = BlockOperation { log.append("waiting") }
        waiting.addDependency(elsewhere)
        let probe: WeakProbe<AsyncOperationQueue> = {
            let queue = serialAsyncQueue()
            queue.addOperation(waiting)
            return WeakProbe(queue)
        }()
        usleep(20_000)

        // When the dependency finishes
        release.signal()

        // Then the operation runs, and the queue goes
        #expect(waitUntilFinished([waiting]))
        #expect(log.all == ["waiting"])
        #expect(probe.isReleased(), "the queue was never released")
    }

    // Races between the check that gates an operation and its dependency's finish: a dependency
    // of another queue (plain or AsyncOperation) finishing while the gated one is added, many
    // times; it always runs, once, and the queue goes on.
    @Test
    func dependencyFinishingWhileTheOperationIsAdded_neverLeavesItGatedForEver() {
        for round in 0..<100 {
            // Given a dependency of another queue about to finish
            let queue = serialAsyncQueue()
            let log = Recorder<String>(), finishes = Recorder<String>()
            let dependency: Operation = round % 2 == 0
                ? BlockOperation { usleep(UInt32(round % 7) * 30) }
                : AsyncBlockOperation { usleep(UInt32(round % 7) * 30) }
            let waiting = counted("waiting", log: log, finishes: finishes)
            waiting.addDependency(dependency)
            let next = counted("next", log: log, finishes: finishes)
            if round % 2 == 0 {
                OperationQueue().addOperation(dependency)
            } else {
                AsyncOperationQueue().addOperation(dependency)
            }

            // When the operation is added meanwhile, then another
            queue.addOperations([waiting, next], waitUntilFinished: false)

            // Then both run, once
            #expect(waitUntilFinished([waiting, next, dependency]), "round \(round): \(queue.debugDescription)")
            #expect(Set(log.all) == ["waiting", "next"], "round \(round): \(log.all)")
            #expect(finishes.all.filter { $0 == "waiting" }.count <= 1)
        }
    }

    // MARK: - More kinds and places

    // Foundation's serial queues as the reference, and API.md 9 on each queue: gated operations on
    // two serial queues waiting for each other's operations run in their turns on each.
    @Test
    func gatedOnesOnTwoSerialQueues_waitingForEachOther_runInTheirTurns_asFoundationsSerialQueuesDo() {
        let outcomes = [true, false].map { onFoundation -> (first: [String], second: [String]) in
            // Given queue 1 [w1 (waits for w2 of queue 2), l1] and queue 2 running r2, then
            // [w2 (waits for another queue), l2]
            let ops1 = ScenarioOperations("two-1", onFoundation: onFoundation)
            let ops2 = ScenarioOperations("two-2", onFoundation: onFoundation)
            let queue1 = ops1.queue(), queue2 = ops2.queue()
            let runnerRelease = Signal(), elsewhereRelease = Signal()
            queue2.addOperation(ops2.gated("r2", runnerRelease))
            _ = waitUntil { ops2.log.count == 1 }
            let elsewhere = runningElsewhere("elsewhere", release: elsewhereRelease)
            let w2 = ops2.plain("w2"), l2 = ops2.asynchronous("l2")
            w2.addDependency(elsewhere)
            let w1 = ops1.plain("w1"), l1 = ops1.plain("l1")
            w1.addDependency(w2)
            queue1.addOperations([w1, l1], waitUntilFinished: false)
            queue2.addOperations([w2, l2], waitUntilFinished: false)
            _ = waitUntil { ops1.log.count == 1 }

            // When the other queue's operation finishes, then the runner
            elsewhereRelease.signal()
            _ = waitUntilFinished([elsewhere])
            usleep(20_000)
            runnerRelease.signal()
            _ = waitUntilFinished([w1, l1, w2, l2])
            return (ops1.log.all, ops2.log.all)
        }
        #expect(outcomes[0].first == ["l1", "w1"] && outcomes[0].second == ["r2", "w2", "l2"], "Foundation: \(outcomes[0])")
        #expect(outcomes[1].first == outcomes[0].first && outcomes[1].second == outcomes[0].second, "AsyncOperationQueue: \(outcomes[1]); Foundation: \(outcomes[0])")
    }

    // Foundation's serial queue as the reference: a gated asynchronous plain subclass keeps the
    // turn from its start until it finishes; an operation added while it executes waits for it.
    @Test
    func gatedAsynchronousSubclass_keepsTheTurnUntilItFinishes_asFoundationsSerialQueueDoes() {
        let outcomes = [true, false].map { onFoundation -> [String] in
            // Given [manual (asynchronous subclass, waits for another queue), free]
            let queue = onFoundation ? serialFoundationQueue() : serialAsyncQueue()
            let ops = ScenarioOperations("manualGate", onFoundation: onFoundation)
            let release = Signal()
            let elsewhere = runningElsewhere("elsewhere", release: release)
            let log = ops.log
            let started = Recorder<ManuallyFinishedOperation>()
            let manual = ManuallyFinishedOperation(name: "manual") { operation in
                log.append("manual")
                started.append(operation)
            }
            manual.addDependency(elsewhere)
            queue.addOperations([manual, ops.plain("free")], waitUntilFinished: false)
            _ = waitUntil { log.count == 1 }

            // When its dependency finishes, and while it executes a later one is added
            release.signal()
            _ = waitUntil { started.count == 1 }
            let later = ops.asynchronous("later")
            queue.addOperation(later)
            usleep(100_000)
            log.append("finish")
            started.all.first?.finish()
            _ = waitUntilFinished([manual, later])
            return log.all
        }
        #expect(outcomes[0] == ["free", "manual", "finish", "later"], "Foundation: \(outcomes[0])")
        #expect(outcomes[1] == outcomes[0], "AsyncOperationQueue: \(outcomes[1]); Foundation: \(outcomes[0])")
    }

    // API.md "Seeing inside": a gated operation whose dependencies finished, waiting behind a
    // running one, is described as waiting for its turn, the gate never named.
    @Test
    func debugDescription_whileAGatedOneWaitsForItsTurn_saysItWaitsForItsTurn() {
        // Given a serial queue running an operation; behind it a gated plain one whose dependency
        // finished
        let queue = serialAsyncQueue()
        let log = Recorder<String>()
        let runnerRelease = Signal(), elsewhereRelease = Signal()
        let runner = gatedOperation("runner", started: log, release: runnerRelease)
        queue.addOperation(runner)
        #expect(waitUntil { log.count == 1 })
        let elsewhere = runningElsewhere("elsewhere", release: elsewhereRelease)
        let waiting = BlockOperation {}
        waiting.name = uniqueName("inTurn")
        waiting.addDependency(elsewhere)
        queue.addOperation(waiting)
        elsewhereRelease.signal()
        #expect(waitUntilFinished([elsewhere]))

        // When the queue is described
        #expect(waitUntil { queue.debugDescription.contains("its turn on serial queue") }, "\(queue.debugDescription)")
        let description = queue.debugDescription

        // Then its line says it waits for its turn, and no gate is named
        let line = description.split(separator: "\n").first { $0.contains(waiting.name!) }
        #expect(line?.contains("its turn on serial queue") == true, "\(description)")
        #expect(!description.contains(plainGateName), "\(description)")
        runnerRelease.signal()
        #expect(waitUntilFinished([runner, waiting]), "\(queue.debugDescription)")
    }

    // API.md 7 and 5: a serial group cancelled while a plain child is gated on another queue
    // finishes, the child having finished without running, while that queue's operation runs.
    @Test
    func serialGroupCancelledWhileAChildIsGated_finishes_withoutWaitingForTheOtherQueue() {
        // Given a running serial group with a plain child gated on another queue, and a free one
        let log = Recorder<String>()
        let release = Signal()
        let elsewhere = runningElsewhere("elsewhere", release: release)
        let waiting = BlockOperation { log.append("waiting") }
        waiting.addDependency(elsewhere)
        let free = BlockOperation { log.append("free") }
        let group = GroupOperation(operations: [waiting, free])
        group.maxConcurrentOperationCount = 1
        AsyncOperationQueue().addOperation(group)
        #expect(waitUntil { log.all == ["free"] })
        usleep(20_000)

        // When the group is cancelled
        group.cancel()

        // Then it and its child finish while the other queue's operation still runs
        #expect(waitUntilFinished([group, waiting]), "\(group.debugDescription)")
        #expect(!elsewhere.isFinished)
        release.signal()
        #expect(waitUntilFinished([elsewhere]))
        usleep(50_000)
        #expect(log.all == ["free"])
    }

    // `maxConcurrentOperationCount`: width changed back and forth while gated operations are let
    // go by their dependency's finish: every one runs once, and the queue, serial again, runs a
    // later one after them.
    @Test
    func widthChangedBackAndForthWhileGatedOnesAreLetGo_everyOneRunsOnce_andTheQueueGoesOn() {
        for round in 0..<15 {
            // Given five plain operations gated on another queue
            let queue = serialAsyncQueue()
            let log = Recorder<String>(), finishes = Recorder<String>()
            let release = Signal()
            let elsewhere = runningElsewhere("elsewhere", release: release)
            let labels = (0..<5).map { "w\($0)" }
            let waiting = labels.map { label -> Operation in
                let operation = counted(label, log: log, finishes: finishes)
                operation.addDependency(elsewhere)
                return operation
            }
            queue.addOperations(waiting, waitUntilFinished: false)
            usleep(10_000)

            // When the width goes back and forth as their dependency finishes, then stays serial
            let toggler = runOnOwnThread {
                for step in 0..<20 {
                    queue.maxConcurrentOperationCount = step % 2 == 0 ? 3 : 1
                    usleep(UInt32(round % 3) * 50)
                }
                queue.maxConcurrentOperationCount = 1
            }
            release.signal()
            #expect(toggler.wait(timeout: generousTimeout))
            let later = counted("later", log: log, finishes: finishes)
            queue.addOperation(later)

            // Then every one ran once, the later one last
            #expect(waitUntilFinished(waiting + [later]), "round \(round): \(queue.debugDescription)")
            usleep(20_000)
            #expect(Set(log.all) == Set(labels + ["later"]) && log.count == 6, "round \(round): \(log.all)")
            // FOUND (session 49, open): intermittently (a TSan run of the suite; 2 debug runs of 3
            // at one point), a gated one runs after the later one. The dependency watcher tells the
            // gated operations of their dependency's finish one after another, on its own thread,
            // and asks each one's turn only then: an operation added meanwhile can take the turn
            // first, where Foundation's serial queue makes all of them ready at once.
            withKnownIssue("a later operation can go before a gated one the dependency watcher has not yet told", isIntermittent: true) {
                #expect(log.all.last == "later", "round \(round): \(log.all)")
            }
            #expect(finishes.count == 6, "round \(round): \(finishes.all)")
        }
    }

    // MARK: - A plain operation on its way from the scheduler to Foundation

    // FOUND (fixed): API.md 12, "After shutDown begins, nothing new runs on that queue". A plain
    // operation that another thread (the one that heard the previous turn end, in no add) is
    // handing to Foundation as the shut-down begins is in neither list the shut-down reads: it is
    // never cancelled, reaches Foundation behind its gate after the sweep, and runs once its
    // dependency finishes. `QueueScheduler.allWaiting` lists plain operations in line only, not
    // those in the outbox or taken by the deliverer (`takeOutbox`) and not yet given to
    // Foundation (AsyncOperationQueue.swift `deliverOutbox`: between `takeOutbox` and
    // `giveToFoundation`, where `keepsTurnUntilItLeft` and the gating (`arrival(of:)`)
    // run); AsyncOperations stay `held` until Foundation lists them, plain ones are only counted
    // (`keptPlain`). `awaitAdmissionsInFlight` does not wait for such a delivery either.
    @Test
    func shutDown_whileAPlainOneIsOnItsWayToFoundation_neverRunsIt() async {
        // Given the queue's deliverer held inside the hand-off of a plain operation waiting for
        // another queue
        let log = Recorder<String>()
        let stalling = StallingReadinessOperation("stalling", log: log)
        let (queue, elsewhere, elsewhereRelease) = holdTheDelivererWith(stalling, log: log)

        // When the queue is shut down, the deliverer then goes on, and the dependency finishes
        let shutdown = Task<Void, any Error> { await queue.shutDown(gracePeriod: 30) }
        #expect(await eventually { queue.isShutDown })
        try? await Task.sleep(nanoseconds: 200_000_000)
        stalling.proceed.signal()
        try? await Task.sleep(nanoseconds: 100_000_000)
        elsewhereRelease.signal()

        // Then the shut-down returns, and the operation never ran
        let outcome = await boundedOutcome(of: shutdown)
        #expect(outcome != nil, "shutDown did not return: \(queue.debugDescription)")
        #expect(waitUntilFinished([stalling, elsewhere]))
        #expect(log.all == ["runner"], "ran after shutDown began: \(log.all)")
        #expect(stalling.isCancelled)
    }

    // FOUND (fixed): `cancelAllOperations()`, "Cancels every operation on the queue, including those
    // still waiting". A plain operation that another thread is handing to Foundation is in
    // neither list it reads: never cancelled, it runs once its dependency finishes. Same cause as
    // `shutDown_whileAPlainOneIsOnItsWayToFoundation_neverRunsIt` (`QueueScheduler.allWaiting`
    // leaves out plain operations in the outbox or in the deliverer's hands).
    @Test
    func cancelAllOperations_whileAPlainOneIsOnItsWayToFoundation_cancelsIt() {
        // Given the queue's deliverer held inside the hand-off of a plain operation waiting for
        // another queue
        let log = Recorder<String>()
        let stalling = StallingReadinessOperation("stalling", log: log)
        let (queue, elsewhere, elsewhereRelease) = holdTheDelivererWith(stalling, log: log)

        // When every operation is cancelled, the deliverer then goes on, and the dependency
        // finishes
        queue.cancelAllOperations()
        stalling.proceed.signal()
        usleep(100_000)
        elsewhereRelease.signal()

        // Then it finishes without running
        #expect(waitUntilFinished([stalling, elsewhere]), "\(queue.debugDescription)")
        #expect(log.all == ["runner"], "ran though cancelled: \(log.all)")
        #expect(stalling.isCancelled)
    }

    // FOUND (fixed): `addBarrierBlock(_:)`, "Runs barrier once every operation added before it has
    // finished" (and Foundation's serial queue runs it after the plain operation). Placed while a
    // plain operation is on its way to Foundation, the barrier does not wait for it: it runs
    // before it. Same cause (`allOperations(includingBarriers:)` reads `allWaiting`, which leaves
    // out plain operations in the outbox or in the deliverer's hands).
    @Test
    func barrierPlacedWhileAPlainOneIsOnItsWayToFoundation_runsAfterIt() {
        // Given the queue's deliverer held inside the hand-off of a plain operation waiting for
        // another queue
        let log = Recorder<String>()
        let stalling = StallingReadinessOperation("stalling", log: log)
        let (queue, elsewhere, elsewhereRelease) = holdTheDelivererWith(stalling, log: log)

        // When a barrier is placed, the deliverer then goes on, and the dependency finishes
        queue.addBarrierBlock { log.append("barrier") }
        stalling.proceed.signal()
        usleep(100_000)
        elsewhereRelease.signal()

        // Then the barrier runs after it
        #expect(waitUntilFinished([stalling, elsewhere]), "\(queue.debugDescription)")
        #expect(waitUntil { log.count == 3 }, "\(log.all)")
        #expect(log.all == ["runner", "stalling", "barrier"])
    }

    // `allOperations`: "The operations on the queue that have not finished, in the order they
    // were added". A plain operation on its way to Foundation is among them.
    // FOUND (fixed): it is missing from `allOperations` (and `allOperationCount` does not count it) while
    // another thread hands it to Foundation; same cause (`QueueScheduler.allWaiting`).
    @Test
    func allOperations_whileAPlainOneIsOnItsWayToFoundation_listsIt() {
        // Given the queue's deliverer held inside the hand-off of a plain operation waiting for
        // another queue
        let log = Recorder<String>()
        let stalling = StallingReadinessOperation("stalling", log: log)
        let (queue, elsewhere, elsewhereRelease) = holdTheDelivererWith(stalling, log: log)

        // When the queue's operations are listed, once Foundation let go of the runner
        #expect(waitUntil { queue.operations.isEmpty }, "\(queue.operations.map { $0.name ?? "?" })")
        let listed = queue.allOperations
        let count = queue.allOperationCount

        // Then it is listed and counted
        #expect(listed.contains { $0 === stalling }, "\(listed.map { $0.name ?? "?" })")
        #expect(count == 1, "\(listed.map { $0.name ?? "?" })")
        stalling.proceed.signal()
        elsewhereRelease.signal()
        #expect(waitUntilFinished([stalling, elsewhere]), "\(queue.debugDescription)")
    }

    // MARK: - Thousands (in a child process: a hang or a stack overflow ends only the child)

    // API.md 9 at scale: thousands of plain operations gated on one operation of another queue run
    // in add order once it finishes; no stack overflow, no hang.
    @Test
    func thousandsGatedOnOneOperation_runInAddOrder_andFinish() {
        let outcome = runProbeScenarioInChildProcess(testName: "plainGateProbe_thousandsOnOne", scenario: "plainGateThousandsOnOne")
        #expect(outcome != nil, "the scenario did not end within its time")
        #expect(outcome?.passed == true, "\(outcome.map(String.init(describing:)) ?? "")")
    }

    // API.md 9 at scale: a long chain of plain operations added last link first (each gated on
    // the next) runs through in reverse, without overflowing the stack.
    @Test
    func longChainOfGatedOnesAddedLastLinkFirst_runsThrough() {
        let outcome = runProbeScenarioInChildProcess(testName: "plainGateProbe_longGatedChain", scenario: "plainGateLongChain")
        #expect(outcome != nil, "the scenario did not end within its time")
        #expect(outcome?.passed == true, "\(outcome.map(String.init(describing:)) ?? "")")
    }

    // API.md 5 at scale: thousands of gated operations cancelled at once finish, each without
    // running, while their dependency still runs.
    @Test
    func thousandsOfGatedOnesCancelledAtOnce_allFinishWithoutRunning() {
        let outcome = runProbeScenarioInChildProcess(testName: "plainGateProbe_thousandsCancelled", scenario: "plainGateThousandsCancelled")
        #expect(outcome != nil, "the scenario did not end within its time")
        #expect(outcome?.passed == true, "\(outcome.map(String.init(describing:)) ?? "")")
    }

    // FOUND (fixed, session 49): a gated operation cancelled while its dependency never finishes
    // kept its gate and its queue, through the listener the queue had on that dependency: nothing
    // stopped it once the operation finished. (The operation itself is kept while its dependency
    // lives unfinished, on purpose: swift-corelibs-foundation points from a dependency to its
    // dependents without retaining them; see `DependencyWatcher.keepAlive`.)
    @Test(arguments: [false, true])
    func gatedCancelledWhileItsDependencyNeverFinishes_letsGoOfTheGateAndOfTheQueue(dependencyIsAsync: Bool) {
        // Given a gated plain operation on a serial queue, whose dependency is never run
        let dependency: Operation = dependencyIsAsync ? AsyncBlockOperation {} : BlockOperation {}
        var queue: AsyncOperationQueue? = serialAsyncQueue()
        let waiting = BlockOperation {}
        waiting.addDependency(dependency)
        queue?.addOperation(waiting)
        #expect(waitUntil { listsAGate(waiting) }, "never gated: \(waiting.dependencies.map { $0.name ?? "?" })")
        guard let gate = waiting.dependencies.first(where: { $0.name == plainGateName }).map(WeakProbe.init) else { return }
        let released = (gate: gate, queue: WeakProbe(queue!))

        // When it is cancelled and has finished, and its owner lets go of the queue
        waiting.cancel()
        #expect(waitUntilFinished([waiting]), "\(queue!.debugDescription)")
        #expect(waitUntil { !listsAGate(waiting) }, "dependencies: \(waiting.dependencies.map { $0.name ?? "?" })")
        queue = nil

        // Then neither the gate nor the queue is kept, though the dependency lives on unfinished
        #expect(released.gate.isReleased(), "the gate is still kept")
        #expect(released.queue.isReleased(), "the queue is still kept")
        #expect(!dependency.isFinished)
    }

    // FOUND (fixed, session 49): a plain operation whose dependency finished between the queue's
    // first look (not ready) and its gating went without a gate, gave its turn up and ran without
    // one: the operation added after it had its conditions evaluated (and could be granted its
    // categories) before it had run. It now keeps its turn behind a gate opened at once.
    @Test
    func dependencyFinishingAsItIsGated_itKeepsItsTurn_andTheNextWaitsForIt() {
        // Given a serial queue running a plain operation on the turn, then one whose dependency
        // (on another queue) finishes just as the queue gates it, then an `AsyncOperation` with a
        // condition
        let queue = serialAsyncQueue()
        let log = Recorder<String>()
        let release = Signal()
        let elsewhere = runningElsewhere("elsewhere", release: release)
        let first = BlockOperation { log.append("first") }
        let gated = DependencyFinishingWhileGated("gated", log: log) {
            release.signal()
            _ = waitUntil { elsewhere.isFinished }
        }
        gated.addDependency(elsewhere)
        let next = AsyncBlockOperation { log.append("next") }
        next.addCondition(BlockCondition { log.append("next evaluated"); return true })

        // When they are added in that order
        queue.addOperations([first, gated, next], waitUntilFinished: false)

        // Then the next one's condition is evaluated only once the gated one has run (the
        // dependency finished in the window: after the queue's first look, before the gate)
        #expect(waitUntilFinished([first, gated, next, elsewhere]), "\(queue.debugDescription)")
        #expect(gated.finishedDependencyBeforeTheGate == true, "the probe no longer hits the window: its read count needs a look")
        #expect(log.all == ["first", "gated", "next evaluated", "next"], "\(log.all)")
    }
}

@Suite("Plain gate scenarios run in a child process, round 10")
struct PlainGateScenarioTests {
    @Test(.enabled(if: isProbeScenario("plainGateThousandsOnOne")))
    func plainGateProbe_thousandsOnOne() {
        let queue = serialAsyncQueue()
        let release = Signal()
        let elsewhere = runningElsewhere("elsewhere", release: release)
        let log = Recorder<Int>()
        let count = 3_000
        let operations = (0..<count).map { index -> Operation in
            let operation = BlockOperation { log.append(index) }
            operation.addDependency(elsewhere)
            return operation
        }
        queue.addOperations(operations, waitUntilFinished: false)
        release.signal()
        #expect(waitUntilFinished(operations, timeout: 240), "\(queue.allOperationCount) left")
        #expect(log.all == Array(0..<count))
    }

    @Test(.enabled(if: isProbeScenario("plainGateLongChain")))
    func plainGateProbe_longGatedChain() {
        let queue = serialAsyncQueue()
        let log = Recorder<Int>()
        let count = 3_000
        let operations = (0..<count).map { index in BlockOperation { log.append(index) } }
        for index in 0..<(count - 1) {
            operations[index].addDependency(operations[index + 1])
        }
        queue.addOperations(operations, waitUntilFinished: false)
        #expect(waitUntilFinished(operations, timeout: 240), "\(queue.allOperationCount) left")
        #expect(log.all == Array((0..<count).reversed()))
    }

    @Test(.enabled(if: isProbeScenario("plainGateThousandsCancelled")))
    func plainGateProbe_thousandsCancelled() {
        let queue = serialAsyncQueue()
        let release = Signal()
        let elsewhere = runningElsewhere("elsewhere", release: release)
        let log = Recorder<Int>()
        let count = 3_000
        let operations = (0..<count).map { index -> Operation in
            let operation = BlockOperation { log.append(index) }
            operation.addDependency(elsewhere)
            return operation
        }
        queue.addOperations(operations, waitUntilFinished: false)
        queue.cancelAllOperations()
        #expect(waitUntilFinished(operations, timeout: 240), "\(queue.allOperationCount) left")
        #expect(!elsewhere.isFinished)
        release.signal()
        #expect(waitUntilFinished([elsewhere]))
        usleep(100_000)
        #expect(log.all.isEmpty)
    }
}
