import Foundation
import IntegrationsTestSupport
import Logging
import Operations
import OperationsServiceLifecycle
import ServiceLifecycle
import Testing

@Suite struct OperationQueueServiceTests {
    private let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    private func isShutDownError(_ errors: [any Error]) -> Bool {
        errors.count == 1 && (errors.first as? AsyncOperationError) == .queueShutDown
    }

    @Test func aGracefulShutdown_drainsEveryQueue_lettingRunningOperationsFinish() async throws {
        let jobs = AsyncOperationQueue()
        let mail = AsyncOperationQueue()
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        let waiting = AsyncBlockOperation {}
        waiting.addDependency(running)
        jobs.addOperations([running, waiting], waitUntilFinished: false)
        #expect(await eventually { held.hasStarted(running.name!) })

        let group = ServiceGroup(services: [OperationQueueService(jobs, mail)], logger: logger)
        let run = Task { try await group.run() }
        try await Task.sleep(nanoseconds: 10_000_000)
        await group.triggerGracefulShutdown()
        #expect(await eventually { jobs.isShutDown && mail.isShutDown })
        #expect(await eventually { waiting.isFinished })
        #expect(waiting.isCancelled && isShutDownError(waiting.errors))
        #expect(!running.isFinished)

        held.finish(running.name!)
        try await run.value
        #expect(running.errors.isEmpty && jobs.allOperationCount == 0)
    }

    @Test func pastItsGracePeriod_runningOperationsAreCancelled() async throws {
        let jobs = AsyncOperationQueue()
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        jobs.addOperation(running)
        #expect(await eventually { held.hasStarted(running.name!) })

        let group = ServiceGroup(services: [OperationQueueService(jobs, gracePeriod: .milliseconds(20))], logger: logger)
        let run = Task { try await group.run() }
        try await Task.sleep(nanoseconds: 10_000_000)
        await group.triggerGracefulShutdown()
        try await run.value
        #expect(running.isCancelled && isShutDownError(running.errors))
    }

    @Test func theGroupsOwnGracePeriod_bindsTheQueues() async throws {
        let jobs = AsyncOperationQueue()
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        jobs.addOperation(running)
        #expect(await eventually { held.hasStarted(running.name!) })

        var configuration = ServiceGroupConfiguration(services: [OperationQueueService(jobs)], logger: logger)
        configuration.maximumGracefulShutdownDuration = .milliseconds(50)
        let group = ServiceGroup(configuration: configuration)
        let run = Task { try await group.run() }
        try await Task.sleep(nanoseconds: 10_000_000)
        await group.triggerGracefulShutdown()
        _ = try? await run.value // the group reports that its grace period ran out
        #expect(running.isFinished && running.isCancelled && isShutDownError(running.errors))
    }
}
