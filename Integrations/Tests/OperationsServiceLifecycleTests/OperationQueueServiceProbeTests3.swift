import Foundation
import IntegrationsTestSupport
import Logging
import Operations
import OperationsServiceLifecycle
import ServiceLifecycle
import Testing

/// A third round of probes of documented behaviour of `OperationQueueService` (and API.md 12,
/// "Running operations in a service") that the earlier suites do not check. Each probe cites the
/// sentence it checks; every group it runs has returned, or been cancelled and awaited, before
/// the probe ends.
@Suite struct OperationQueueServiceProbeTests3 {
    private let logger = Logger(label: "probe3", factory: { _ in SwiftLogNoOpLogHandler() })

    private func isShutDownError(_ errors: [any Error]) -> Bool {
        errors.count == 1 && (errors.first as? AsyncOperationError) == .queueShutDown
    }

    // OperationQueueService.description: "`OperationQueueService` and the queues' names."
    @Test func itsDescription_namesEachQueue_inOrder() {
        // Given two named queues
        let jobs = AsyncOperationQueue()
        jobs.name = "jobs"
        let mail = AsyncOperationQueue()
        mail.name = "mail"

        // When a service is made of both
        let service = OperationQueueService(jobs, mail)

        // Then its description names both, in order
        #expect(service.description == "OperationQueueService(jobs, mail)")
    }

    // Running operations in a service: "Cancelling the task that awaits it ends the grace period
    // at once: what still runs is cancelled, and the call still returns only once it has
    // finished."; OperationQueueService: "By default (`gracePeriod` nil) the running operations
    // may take as long as the group allows"
    @Test func cancellingTheGroupDuringAnUnboundedDrain_cancelsWhatRuns_andTheServiceReturns() async throws {
        // Given a queue running an operation, drained by a service without a grace period of its own
        let jobs = AsyncOperationQueue()
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        jobs.addOperation(running)
        #expect(await eventually { held.hasStarted(running.name!) })
        let group = ServiceGroup(services: [OperationQueueService(jobs)], logger: logger)
        let run = Task { try await group.run() }
        try await Task.sleep(nanoseconds: 10_000_000)
        await group.triggerGracefulShutdown()
        #expect(await eventually { jobs.isShutDown })
        try await Task.sleep(nanoseconds: 50_000_000)
        #expect(!running.isFinished, "without a grace period, a running operation may go on")

        // When the task running the group is cancelled mid-drain
        run.cancel()

        // Then the running operation is cancelled with queueShutDown, and the group returns
        #expect(await eventually { running.isFinished })
        #expect(running.isCancelled && isShutDownError(running.errors), "\(running.errors)")
        _ = try? await run.value
        #expect(jobs.allOperationCount == 0)
    }

    // Running operations in a service: "Operations that wait (for dependencies, conditions, a
    // category, a slot, a suspended queue) are cancelled with the same error; operations that
    // execute may finish."
    @Test func aSuspendedQueue_isDrained_itsOperationsCancelledWithoutEverExecuting() async throws {
        // Given a suspended queue holding two operations
        let jobs = AsyncOperationQueue()
        jobs.isSuspended = true
        let executed = LockedValue(0)
        let first = AsyncBlockOperation { executed.withLock { $0 += 1 } }
        let second = AsyncBlockOperation { executed.withLock { $0 += 1 } }
        jobs.addOperations([first, second], waitUntilFinished: false)
        let group = ServiceGroup(services: [OperationQueueService(jobs)], logger: logger)
        let run = Task { try await group.run() }
        try await Task.sleep(nanoseconds: 10_000_000)

        // When the group shuts down gracefully, nobody resuming the queue
        await group.triggerGracefulShutdown()

        // Then the service returns, both operations cancelled with queueShutDown, neither having executed
        let returned = await eventually { first.isFinished && second.isFinished }
        #expect(returned, "operations on a suspended queue were not cancelled by the shutdown")
        if !returned { run.cancel() }
        _ = try? await run.value
        #expect(first.isCancelled && isShutDownError(first.errors), "\(first.errors)")
        #expect(second.isCancelled && isShutDownError(second.errors), "\(second.errors)")
        #expect(executed.withLock { $0 } == 0)
    }

    // OperationQueueService: "A `ServiceGroup` shuts its services down in reverse order";
    // API.md 12: "Other queues are unaffected."
    @Test func twoServices_theEarlierQueueKeepsRunningNewWork_whileTheLaterOneDrains() async throws {
        // Given two services, each with its queue; the later one runs an operation held by the test
        let early = AsyncOperationQueue()
        let late = AsyncOperationQueue()
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        late.addOperation(running)
        #expect(await eventually { held.hasStarted(running.name!) })
        let group = ServiceGroup(services: [OperationQueueService(early), OperationQueueService(late)], logger: logger)
        let run = Task { try await group.run() }
        try await Task.sleep(nanoseconds: 10_000_000)

        // When the group shuts down gracefully, and work is added to the earlier queue while the later drains
        await group.triggerGracefulShutdown()
        #expect(await eventually { late.isShutDown })
        let added = AsyncBlockOperation {}
        early.addOperation(added)

        // Then that work runs and succeeds, the earlier queue not yet shut down
        #expect(await eventually { added.isFinished })
        #expect(added.errors.isEmpty && !added.isCancelled, "\(added.errors)")
        #expect(!early.isShutDown)

        // And once the later queue has drained, the earlier one shuts down too
        held.finish(running.name!)
        try await run.value
        #expect(early.isShutDown && running.errors.isEmpty)
    }

    // Running operations in a service: "From the moment it is called the queue refuses new
    // operations: one added later finishes at once without executing, cancelled with
    // ``AsyncOperationError/queueShutDown``, and its observers hear it" (an operation that a
    // running one adds while the service drains)
    @Test func anOperationARunningOneAddsDuringTheDrain_isRefused_andTheServiceStillReturns() async throws {
        // Given a queue running an operation that, once let go, adds a follow-up to its queue
        let jobs = AsyncOperationQueue()
        let followUp = AsyncBlockOperation {}
        let letGo = LockedValue(false)
        let adder = AsyncBlockOperation { [jobs] in
            let deadline = Date().addingTimeInterval(generousTimeout)
            while !letGo.withLock({ $0 }), Date() < deadline { usleep(1_000) }
            jobs.addOperation(followUp)
        }
        jobs.addOperation(adder)
        #expect(await eventually { adder.isExecuting })
        let group = ServiceGroup(services: [OperationQueueService(jobs, gracePeriod: .seconds(30))], logger: logger)
        let run = Task { try await group.run() }
        try await Task.sleep(nanoseconds: 10_000_000)

        // When the group shuts down gracefully, and the running operation then adds its follow-up
        await group.triggerGracefulShutdown()
        #expect(await eventually { jobs.isShutDown })
        letGo.withLock { $0 = true }

        // Then the follow-up is refused with queueShutDown, the adder succeeds, and the service returns
        try await run.value
        #expect(followUp.isFinished && followUp.isCancelled && isShutDownError(followUp.errors), "\(followUp.errors)")
        #expect(adder.errors.isEmpty && !adder.isCancelled, "\(adder.errors)")
    }

    // OperationQueueService: "Give `gracePeriod` to cancel them sooner ... If the group is
    // cancelled without a graceful shutdown, the queues shut down at once the same way."
    @Test func aGroupCancelledWithoutAGracefulShutdown_cancelsWhatRunsAtOnce_despiteALongGracePeriod() async throws {
        // Given a queue running an operation, in a service with a grace period of 10 minutes
        let jobs = AsyncOperationQueue()
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        jobs.addOperation(running)
        #expect(await eventually { held.hasStarted(running.name!) })
        let group = ServiceGroup(services: [OperationQueueService(jobs, gracePeriod: .seconds(600))], logger: logger)
        let run = Task { try await group.run() }
        try await Task.sleep(nanoseconds: 20_000_000)

        // When the group's task is cancelled, no graceful shutdown having begun
        run.cancel()

        // Then the queue shuts down and the running operation is cancelled within seconds, not minutes
        let cancelled = await eventually(timeout: 10) { running.isFinished }
        #expect(cancelled, "the running operation was not cancelled at once")
        if !cancelled { held.finish(running.name!) }
        _ = try? await run.value
        #expect(jobs.isShutDown)
        #expect(running.isCancelled && isShutDownError(running.errors), "\(running.errors)")
    }
}

