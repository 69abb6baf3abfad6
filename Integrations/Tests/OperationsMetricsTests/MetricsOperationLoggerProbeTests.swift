import Conditions
import CoreMetrics
import Foundation
import IntegrationsTestSupport
import Operations
import OperationsMetrics
import Prometheus
import Testing

/// Probes of documented behaviour of `MetricsOperationLogger` that `MetricsOperationLoggerTests`
/// does not check yet. Each probe cites the sentence it checks.
@Suite struct MetricsOperationLoggerProbeTests: PrometheusScraping {
    // MetricsOperationLogger: "Turns the lifecycle of the operations on a queue into swift-metrics metrics, per queue, labelled with the queue's name."
    @Test func oneLoggerOnTwoQueues_countsEachQueueUnderItsOwnLabel() async {
        let registry = PrometheusCollectorRegistry()
        let logger = MetricsOperationLogger(factory: PrometheusMetricsFactory(registry: registry))
        let jobs = AsyncOperationQueue()
        jobs.name = uniqueName("jobs")
        jobs.logger = logger
        let mail = AsyncOperationQueue()
        mail.name = uniqueName("mail")
        mail.logger = logger
        jobs.addOperations((0..<3).map { _ in AsyncBlockOperation {} }, waitUntilFinished: true)
        mail.addOperations([AsyncBlockOperation { throw TestFailure("bounced") }], waitUntilFinished: true)
        #expect(await eventually { sample(scrape(registry), "operations_finished_total", "queue=\"\(jobs.name!)\"") == 3 })
        #expect(await eventually { sample(scrape(registry), "operations_finished_total", "queue=\"\(mail.name!)\"") == 1 })
        let text = scrape(registry)
        #expect(sample(text, "operations_failed_total", "queue=\"\(jobs.name!)\"") == 0)
        #expect(sample(text, "operations_failed_total", "queue=\"\(mail.name!)\"") == 1)
        #expect(sample(text, "operations_started_total", "queue=\"\(jobs.name!)\"") == 3)
    }

    // MetricsOperationLogger: "`operations_failed_total` | operations that finished with errors without being cancelled"
    @Test func anOperationCancelledWithAnErrorWhileRunning_countsAsCancelled_notFailed() async {
        let registry = PrometheusCollectorRegistry()
        let (queue, name) = meteredQueue(uniqueName("jobs"), reportingTo: registry)
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        queue.addOperation(running)
        #expect(await eventually { held.hasStarted(running.name!) })
        running.cancel(with: TestFailure("superseded"))
        #expect(await eventually { running.isFinished })
        #expect(running.isFailed)
        let labels = "queue=\"\(name)\""
        #expect(await eventually { sample(scrape(registry), "operations_finished_total", labels) == 1 })
        let text = scrape(registry)
        #expect(sample(text, "operations_cancelled_total", labels) == 1)
        #expect(sample(text, "operations_failed_total", labels) == 0, "\(text)")
        #expect(sample(text, "operations_running", labels) == 0)
        #expect(sample(text, "operations_run_duration_seconds_count", labels) == 1)
    }

    // MetricsOperationLogger: "The `reason` of a wait is `dependencies`, `conditions`, `category`, `suspended_queue`, ..." and "Plain Foundation operations are left out too"
    @Test func waitsForADependencyAndASuspendedQueue_areTimedUnderTheirReasons_andPlainOperationsAreLeftOut() async throws {
        let registry = PrometheusCollectorRegistry()
        let (queue, name) = meteredQueue(uniqueName("jobs"), reportingTo: registry)
        let held = HeldOperations()
        let first = held.make(uniqueName("first"))
        let follower = AsyncBlockOperation {}
        follower.addDependency(first)
        queue.addOperations([first, follower], waitUntilFinished: false)
        #expect(await eventually { held.hasStarted(first.name!) })
        try await Task.sleep(nanoseconds: 50_000_000)
        held.finish(first.name!)
        #expect(await eventually { follower.isFinished })

        queue.isSuspended = true
        let paused = AsyncBlockOperation {}
        queue.addOperation(paused)
        try await Task.sleep(nanoseconds: 50_000_000)
        queue.isSuspended = false
        #expect(await eventually { paused.isFinished })

        let plain = BlockOperation {}
        queue.addOperations([plain], waitUntilFinished: true)

        let labels = "queue=\"\(name)\""
        #expect(await eventually { sample(scrape(registry), "operations_finished_total", labels) == 3 })
        let text = scrape(registry)
        #expect(sample(text, "operations_added_total", labels) == 3, "the plain operation is left out:\n\(text)")
        let dependencies = sample(text, "operations_wait_reason_duration_seconds_sum", "\(labels),reason=\"dependencies\"") ?? 0
        #expect(dependencies >= 0.05, "the follower waited at least 50 ms for its dependency:\n\(text)")
        let suspended = sample(text, "operations_wait_reason_duration_seconds_sum", "\(labels),reason=\"suspended_queue\"") ?? 0
        #expect(suspended >= 0.05, "the paused operation waited at least 50 ms for its suspended queue:\n\(text)")
    }
}
