import Conditions
import CoreMetrics
import Foundation
import IntegrationsTestSupport
import Operations
import OperationsMetrics
import Prometheus
import Testing

@Suite struct MetricsOperationLoggerTests: PrometheusScraping {
    @Test func countersGaugesAndTimers_perQueue_exportedThroughPrometheus() async {
        let registry = PrometheusCollectorRegistry()
        let (queue, name) = meteredQueue(uniqueName("jobs"), reportingTo: registry)
        let category = uniqueName("account")
        let held = HeldOperations()
        let holder = held.make(uniqueName("holder"))
        holder.addCondition(ExclusiveCategory(category))
        let waiter = AsyncBlockOperation {}
        waiter.addCondition(ExclusiveCategory(category))
        let failing = AsyncBlockOperation { throw TestFailure("no") }
        queue.addOperations([holder, waiter], waitUntilFinished: false)
        #expect(await eventually { held.hasStarted(holder.name!) })
        let labels = "queue=\"\(name)\""
        #expect(await eventually { sample(scrape(registry), "operations_running", labels) == 1 })
        #expect(sample(scrape(registry), "operations_waiting", labels) == 1)
        #expect(sample(scrape(registry), "operations_added_total", labels) == 2)

        try? await Task.sleep(nanoseconds: 20_000_000)
        held.finish(holder.name!)
        queue.addOperations([failing], waitUntilFinished: false)
        let cancelled = AsyncBlockOperation {}
        cancelled.addDependency(held.make(uniqueName("never added"))) // it waits until cancelled
        queue.addOperation(cancelled)
        cancelled.cancel()
        #expect(await eventually { [holder, waiter, failing, cancelled].allSatisfy(\.isFinished) })
        #expect(await eventually { sample(scrape(registry), "operations_finished_total", labels) == 4 })

        let text = scrape(registry)
        #expect(sample(text, "operations_added_total", labels) == 4)
        #expect(sample(text, "operations_started_total", labels) == 3)
        #expect(sample(text, "operations_failed_total", labels) == 1)
        #expect(sample(text, "operations_cancelled_total", labels) == 1)
        #expect(sample(text, "operations_waiting", labels) == 0)
        #expect(sample(text, "operations_running", labels) == 0)
        #expect(sample(text, "operations_wait_duration_seconds_count", labels) == 3)
        #expect(sample(text, "operations_run_duration_seconds_count", labels) == 3)
        let categoryWait = sample(text, "operations_wait_reason_duration_seconds_sum", "\(labels),reason=\"category\"")
        #expect((categoryWait ?? 0) >= 0.02, "the waiter waited at least 20 ms for its category:\n\(text)")
        #expect(text.split(separator: "\n").filter { $0.contains("queue=\"\(name)\"") }.allSatisfy { $0.hasPrefix("operations_") })
    }

    /// Foundation names every queue after its address: those never given a name share the label
    /// `unnamed`, instead of one label each.
    @Test func queuesNeverGivenAName_shareTheLabelUnnamed() async {
        let registry = PrometheusCollectorRegistry()
        let factory = PrometheusMetricsFactory(registry: registry)
        for _ in 0..<2 {
            let queue = AsyncOperationQueue()
            #expect(queue.name != nil) // Foundation's default name
            queue.logger = MetricsOperationLogger(factory: factory)
            queue.addOperations([AsyncBlockOperation {}], waitUntilFinished: true)
        }
        let labels = "queue=\"unnamed\""
        #expect(await eventually { sample(scrape(registry), "operations_finished_total", labels) == 2 }, "\(scrape(registry))")
        #expect(!scrape(registry).contains("NSOperationQueue"))
    }

    @Test func withNothingBootstrapped_itAsksForNoEvent_soTheQueueAttachesNothing() {
        let logger = MetricsOperationLogger(factory: NOOPMetricsHandler.instance)
        #expect(logger.minimumLevel == .error)
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let operation = AsyncBlockOperation {}
        queue.addOperations([operation], waitUntilFinished: true)
        #expect(operation.errors.isEmpty)
    }

    @Test func aGroupsChildren_areLeftOut_unlessAskedFor() async {
        let registry = PrometheusCollectorRegistry()
        let name = uniqueName("groups")
        for includes in [false, true] {
            let queue = AsyncOperationQueue()
            queue.name = "\(name)-\(includes)"
            queue.logger = MetricsOperationLogger(factory: PrometheusMetricsFactory(registry: registry), includesGroupChildren: includes)
            let group = GroupOperation(operations: [AsyncBlockOperation {}, AsyncBlockOperation {}])
            queue.addOperations([group], waitUntilFinished: true)
        }
        #expect(await eventually { sample(scrape(registry), "operations_finished_total", "queue=\"\(name)-false\"") == 1 })
        #expect(await eventually { sample(scrape(registry), "operations_finished_total", "queue=\"GroupOperation children\"") == 2 })
        #expect(sample(scrape(registry), "operations_finished_total", "queue=\"\(name)-true\"") == 1)
    }

    /// Under contention the core may report a `waiting` noticed after the operation moved on:
    /// the book-keeping stays consistent, and nothing is left counted as waiting or running.
    @Test func underLoad_theGaugesReturnToZero_andEveryOperationIsCountedOnce() async {
        let registry = PrometheusCollectorRegistry()
        let (queue, name) = meteredQueue(uniqueName("load"), reportingTo: registry)
        let categories = (0..<4).map { _ in uniqueName("category") }
        let operations = (0..<2_000).map { index -> AsyncBlockOperation in
            let operation = AsyncBlockOperation {}
            operation.addCondition(ExclusiveCategory(categories[index % 4]))
            return operation
        }
        queue.addOperations(operations, waitUntilFinished: true)
        let labels = "queue=\"\(name)\""
        #expect(await eventually { sample(scrape(registry), "operations_finished_total", labels) == 2_000 })
        let text = scrape(registry)
        #expect(sample(text, "operations_added_total", labels) == 2_000)
        #expect(sample(text, "operations_started_total", labels) == 2_000)
        #expect(sample(text, "operations_waiting", labels) == 0)
        #expect(sample(text, "operations_running", labels) == 0)
        #expect(sample(text, "operations_wait_duration_seconds_count", labels) == 2_000)
    }
}
