import Foundation
import IntegrationsTestSupport
import Logging
import Operations
import OperationsServiceLifecycle
import ServiceLifecycle
import Testing

/// Probes of documented behaviour of `OperationQueueService` that `OperationQueueServiceTests`
/// does not check yet. Each probe cites the sentence it checks.
@Suite struct OperationQueueServiceProbeTests {
    private let logger = Logger(label: "probe", factory: { _ in SwiftLogNoOpLogHandler() })

    private func isShutDownError(_ errors: [any Error]) -> Bool {
        errors.count == 1 && (errors.first as? AsyncOperationError) == .queueShutDown
    }

    // OperationQueueService: "If the group is cancelled without a graceful shutdown, the queues shut down at once the same way."
    @Test func cancellingTheGroup_shutsTheQueuesDownAtOnce_cancellingWhatRunsAndWhatWaits() async throws {
        let jobs = AsyncOperationQueue()
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        let waiting = AsyncBlockOperation {}
        waiting.addDependency(running)
        let events = EventCounts()
        running.addObserver(events)
        waiting.addObserver(events)
        jobs.addOperations([running, waiting], waitUntilFinished: false)
        #expect(await eventually { held.hasStarted(running.name!) })

        let group = ServiceGroup(services: [OperationQueueService(jobs)], logger: logger)
        let run = Task { try await group.run() }
        try await Task.sleep(nanoseconds: 50_000_000)
        run.cancel()
        _ = try? await run.value
        #expect(jobs.isShutDown)
        #expect(running.isFinished && running.isCancelled && isShutDownError(running.errors))
        #expect(waiting.isFinished && waiting.isCancelled && isShutDownError(waiting.errors))
        #expect(events.starts(of: waiting) == 0)
        #expect(events.finishes(of: running) == 1 && events.finishes(of: waiting) == 1)
        #expect(jobs.allOperationCount == 0)
    }

    // OperationQueueService: "list the HTTP server before this service, so that it still answers (refusing new work, reporting progress) while the queues drain." / "the server stops after the queue has drained"
    @Test func aServiceListedBeforeTheQueues_isShutDownOnlyOnceTheQueuesHaveDrained() async throws {
        let jobs = AsyncOperationQueue()
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        jobs.addOperation(running)
        #expect(await eventually { held.hasStarted(running.name!) })

        let server = FakeServer(watching: jobs)
        let group = ServiceGroup(services: [server, OperationQueueService(jobs)], logger: logger)
        let run = Task { try await group.run() }
        try await Task.sleep(nanoseconds: 50_000_000)
        await group.triggerGracefulShutdown()
        #expect(await eventually { jobs.isShutDown })
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(server.stoppedWith == nil, "the server was told to stop while the queue still had a running operation")

        held.finish(running.name!)
        try await run.value
        #expect(running.errors.isEmpty)
        #expect(server.stoppedWith == 0, "the server stopped with \(String(describing: server.stoppedWith)) operations still on the queue")
    }

    // API.md 12: "every operation that was on the queue finishes exactly once"; OperationQueueService: "it takes no new operation (one added later finishes with `AsyncOperationError.queueShutDown`), cancels those that wait"
    @Test func aGracefulShutdown_finishesEveryOperationExactlyOnce_andNothingWaitingOrAddedLaterRuns() async throws {
        let jobs = AsyncOperationQueue()
        let paused = AsyncOperationQueue()
        paused.isSuspended = true
        let held = HeldOperations()
        let events = EventCounts()
        let runners = (0..<2).map { held.make(uniqueName("runner-\($0)")) }
        let waiters = (0..<20).map { index -> AsyncBlockOperation in
            let operation = AsyncBlockOperation {}
            operation.addDependency(runners[index % 2])
            return operation
        }
        let pausedOperations = (0..<5).map { _ in AsyncBlockOperation {} }
        for operation in runners + waiters + pausedOperations { operation.addObserver(events) }
        jobs.addOperations(runners + waiters, waitUntilFinished: false)
        paused.addOperations(pausedOperations, waitUntilFinished: false)
        #expect(await eventually { runners.allSatisfy { held.hasStarted($0.name!) } })

        let group = ServiceGroup(services: [OperationQueueService(jobs, paused, gracePeriod: .seconds(600))], logger: logger)
        let run = Task { try await group.run() }
        try await Task.sleep(nanoseconds: 50_000_000)
        await group.triggerGracefulShutdown()
        #expect(await eventually { jobs.isShutDown && paused.isShutDown })
        let drained = await eventually { (waiters + pausedOperations).allSatisfy(\.isFinished) }
        #expect(drained, "unfinished: \(waiters.filter { !$0.isFinished }.count) waiters, \(pausedOperations.filter { !$0.isFinished }.count) on the suspended queue; \(jobs.debugDescription)")

        let late = AsyncBlockOperation {}
        late.addObserver(events)
        jobs.addOperation(late)
        #expect(await eventually { late.isFinished })
        #expect(isShutDownError(late.errors))

        runners.forEach { held.finish($0.name!) }
        try await run.value // returns once the queues are empty, long before the grace period is over
        let everything = runners + waiters + pausedOperations + [late]
        #expect(everything.allSatisfy { events.finishes(of: $0) == 1 })
        #expect((waiters + pausedOperations + [late]).allSatisfy { events.starts(of: $0) == 0 })
        #expect((waiters + pausedOperations).allSatisfy { $0.isCancelled && isShutDownError($0.errors) })
        #expect(runners.allSatisfy { $0.errors.isEmpty && !$0.isCancelled })
        #expect(jobs.allOperationCount == 0 && paused.allOperationCount == 0)
    }

    // OperationQueueService: "it takes no new operation ..., cancels those that wait, lets the running ones finish"; shutDown(gracePeriod:): "every operation still waiting (for dependencies, conditions, categories, a slot, or a suspended queue) is cancelled with `AsyncOperationError.queueShutDown` and finishes without executing"
    // (shutDown(gracePeriod:): "An operation that waits for nothing but a slot ... is cancelled at once but finishes, without executing, when the queue gets to it")
    @Test func operationsWaitingForASlot_areCancelledAtOnce_andFinishWithoutExecuting_onceTheSlotFrees() async throws {
        let jobs = AsyncOperationQueue()
        jobs.maxConcurrentOperationCount = 1
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        let events = EventCounts()
        let waiting = (0..<3).map { _ in AsyncBlockOperation {} }
        waiting.forEach { $0.addObserver(events) }
        jobs.addOperations([running] + waiting, waitUntilFinished: false)
        #expect(await eventually { held.hasStarted(running.name!) })

        let group = ServiceGroup(services: [OperationQueueService(jobs)], logger: logger)
        let run = Task { try await group.run() }
        try await Task.sleep(nanoseconds: 50_000_000)
        await group.triggerGracefulShutdown()
        #expect(await eventually { waiting.allSatisfy(\.isCancelled) })
        #expect(waiting.allSatisfy { events.starts(of: $0) == 0 })
        #expect(!running.isFinished)

        held.finish(running.name!)
        try await run.value
        #expect(waiting.allSatisfy { events.starts(of: $0) == 0 && events.finishes(of: $0) == 1 && isShutDownError($0.errors) })
        #expect(running.errors.isEmpty)
    }

    // API.md 12: "Other queues are unaffected."
    @Test func aQueueOutsideTheService_keepsRunningNewOperations_afterTheServiceShutsItsQueuesDown() async throws {
        let jobs = AsyncOperationQueue()
        let mail = AsyncOperationQueue()
        let group = ServiceGroup(services: [OperationQueueService(jobs)], logger: logger)
        let run = Task { try await group.run() }
        try await Task.sleep(nanoseconds: 50_000_000)
        await group.triggerGracefulShutdown()
        try await run.value
        #expect(jobs.isShutDown)
        #expect(!mail.isShutDown)

        let sent = AsyncBlockOperation {}
        mail.addOperation(sent)
        #expect(await eventually { sent.isFinished })
        #expect(sent.errors.isEmpty && !sent.isCancelled)
    }
}

/// Counts each operation's `operationDidStart` and `operationDidFinish`.
private final class EventCounts: OperationObserver, Sendable {
    private let counts = LockedValue<[ObjectIdentifier: (starts: Int, finishes: Int)]>([:])

    func operationDidStart(_ operation: AsyncOperation) {
        counts.withLock { $0[ObjectIdentifier(operation), default: (0, 0)].starts += 1 }
    }

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        counts.withLock { $0[ObjectIdentifier(operation), default: (0, 0)].finishes += 1 }
    }

    func starts(of operation: AsyncOperation) -> Int {
        counts.withLock { $0[ObjectIdentifier(operation)]?.starts ?? 0 }
    }

    func finishes(of operation: AsyncOperation) -> Int {
        counts.withLock { $0[ObjectIdentifier(operation)]?.finishes ?? 0 }
    }
}

/// A service standing for an HTTP server: it runs until its graceful shutdown, and notes how many
/// operations its queue still had then.
private final class FakeServer: Service, Sendable {
    private let queue: AsyncOperationQueue
    private let stopped = LockedValue<Int?>(nil)

    init(watching queue: AsyncOperationQueue) {
        self.queue = queue
    }

    /// How many operations the queue had when the server was told to stop, once it was.
    var stoppedWith: Int? { stopped.withLock { $0 } }

    func run() async throws {
        try? await gracefulShutdown()
        let remaining = queue.allOperationCount
        stopped.withLock { $0 = remaining }
    }
}
