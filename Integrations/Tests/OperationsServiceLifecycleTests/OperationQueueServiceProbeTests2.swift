import Foundation
#if canImport(Glibc)
import Glibc
#endif
import IntegrationsTestSupport
import Logging
import Operations
import OperationsServiceLifecycle
import ServiceLifecycle
import Testing

/// A second round of probes of documented behaviour of `OperationQueueService` (and API.md 12)
/// that neither `OperationQueueServiceTests` nor `OperationQueueServiceProbeTests` checks. Each
/// probe cites the sentence it checks. Every group it runs is shut down or cancelled before the
/// probe ends.
@Suite struct OperationQueueServiceProbeTests2 {
    private let logger = Logger(label: "probe2", factory: { _ in SwiftLogNoOpLogHandler() })

    private func isShutDownError(_ errors: [any Error]) -> Bool {
        errors.count == 1 && (errors.first as? AsyncOperationError) == .queueShutDown
    }

    // API.md 12: "running operations may finish within the grace period, then are cancelled; ... the call returns when the queue is empty" (an operation that takes its time to honour the cancellation)
    @Test func pastTheGracePeriod_theServiceReturnsOnlyOnceACancelledOperationHasActuallyFinished() async throws {
        let jobs = AsyncOperationQueue()
        let slow = SlowToStopOperation()
        jobs.addOperation(slow)
        #expect(await eventually { slow.hasStarted })

        let group = ServiceGroup(services: [OperationQueueService(jobs, gracePeriod: .milliseconds(20))], logger: logger)
        let returned = LockedValue(false)
        let run = Task {
            defer { returned.withLock { $0 = true } }
            try await group.run()
        }
        try await Task.sleep(nanoseconds: 50_000_000)
        await group.triggerGracefulShutdown()
        #expect(await eventually { slow.isCancelled })
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(!returned.withLock { $0 }, "the service returned while a cancelled operation still ran")
        #expect(!slow.isFinished)

        slow.letFinish()
        try await run.value
        #expect(slow.isFinished && slow.finishCount == 1)
        #expect(isShutDownError(slow.errors))
        #expect(jobs.allOperationCount == 0)
    }

    // OperationQueueService: "when the group shuts down gracefully (..., say), the queues shut down gracefully too" (the group shutting down because another service failed, with swift-service-lifecycle's `.gracefullyShutdownGroup`)
    @Test func aSiblingThatFailsWithGracefullyShutdownGroup_drainsTheQueuesGracefully() async throws {
        let jobs = AsyncOperationQueue()
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        let waiting = AsyncBlockOperation {}
        waiting.addDependency(running)
        jobs.addOperations([running, waiting], waitUntilFinished: false)
        #expect(await eventually { held.hasStarted(running.name!) })

        let configuration = ServiceGroupConfiguration(services: [
            .init(service: OperationQueueService(jobs)),
            .init(service: CrashingService(), failureTerminationBehavior: .gracefullyShutdownGroup),
        ], logger: logger)
        let group = ServiceGroup(configuration: configuration)
        let run = Task { try await group.run() }
        defer { run.cancel() }
        #expect(await eventually { jobs.isShutDown })
        #expect(await eventually { waiting.isFinished })
        #expect(waiting.isCancelled && isShutDownError(waiting.errors))
        try await Task.sleep(nanoseconds: 200_000_000)
        #expect(!running.isCancelled, "a graceful shutdown cancelled a running operation before its grace period was over")

        held.finish(running.name!)
        _ = try? await run.value // the group reports the sibling's failure
        #expect(running.isFinished && running.errors.isEmpty)
        #expect(jobs.allOperationCount == 0)
    }

}

/// An operation that runs until it is cancelled, and then until the test lets it finish (at most
/// 30 s): cooperative cancellation that takes its time.
private final class SlowToStopOperation: AsyncOperation, @unchecked Sendable { // @unchecked: its state is behind its own locks
    private let started = LockedValue(false)
    private let allowed = LockedValue(false)
    private let finishes = LockedValue(0)

    var hasStarted: Bool { started.withLock { $0 } }
    var finishCount: Int { finishes.withLock { $0 } }
    func letFinish() { allowed.withLock { $0 = true } }

    override func execute() {
        started.withLock { $0 = true }
        DispatchQueue.global().async {
            let deadline = Date().addingTimeInterval(generousTimeout)
            while !(self.isCancelled && self.allowed.withLock { $0 }) && Date() < deadline { usleep(1_000) }
            self.finishes.withLock { $0 += 1 }
            self.finish()
        }
    }
}

/// A service that fails shortly after it starts.
private struct CrashingService: Service {
    func run() async throws {
        try await Task.sleep(nanoseconds: 50_000_000)
        throw TestFailure("crashed")
    }
}
