import Conditions
import CoreMetrics
import Foundation
import IntegrationsTestSupport
import MetricsTestKit
import Operations
import OperationsMetrics
import Testing

/// A third round of probes of documented behaviour of `MetricsOperationLogger` that the earlier
/// suites do not check, read through swift-metrics' own `TestMetrics` factory. Each probe cites
/// the sentence it checks.
@Suite struct MetricsOperationLoggerProbeTests3 {
    private func queue(reportingTo metrics: TestMetrics) -> (AsyncOperationQueue, [(String, String)]) {
        let queue = AsyncOperationQueue()
        queue.name = uniqueName("jobs")
        queue.logger = MetricsOperationLogger(factory: metrics)
        return (queue, [("queue", queue.name!)])
    }

    private func counter(_ metrics: TestMetrics, _ label: String, _ labels: [(String, String)]) -> Int64 {
        (try? metrics.expectCounter(label, labels).totalValue) ?? 0
    }

    // MetricsOperationLogger: "The `reason` of a wait is `dependencies`, `conditions`, `category`,
    // `suspended_queue`, `serial_turn`, ... as the queue's `OperationSnapshot` explains it at each
    // moment." (OperationSnapshot.Reason.turnOnSerialQueue: "Its queue (by name) is serial and lets
    // an operation added earlier go first.")
    @Test func aWaitForItsTurnOnASerialQueue_isTimedUnderSerialTurn() async throws {
        // Given a category held on another queue, and a serial metered queue whose first operation waits for it
        let metrics = TestMetrics()
        let (queue, labels) = queue(reportingTo: metrics)
        queue.maxConcurrentOperationCount = 1
        let category = uniqueName("account")
        let elsewhere = AsyncOperationQueue()
        let held = HeldOperations()
        let holder = held.make(uniqueName("holder"))
        holder.addCondition(ExclusiveCategory(category))
        elsewhere.addOperation(holder)
        #expect(await eventually { held.hasStarted(holder.name!) })
        let first = AsyncBlockOperation {}
        first.name = uniqueName("first")
        first.addCondition(ExclusiveCategory(category))
        let second = AsyncBlockOperation {}
        second.name = uniqueName("second")

        // When a second operation, needing nothing, waits its turn behind the first for a while
        queue.addOperations([first, second], waitUntilFinished: false)
        #expect(await eventually { second.snapshot().waitsFor.contains { "\($0)".contains("its turn on serial queue") } }, "\(second.snapshot())")
        try await Task.sleep(nanoseconds: 50_000_000)
        held.finish(holder.name!)
        #expect(await eventually { first.isFinished && second.isFinished })
        #expect(await eventually { counter(metrics, "operations_finished_total", labels) == 2 })

        // Then that wait is timed under `serial_turn`
        var byReason: [String: Int64] = [:]
        for timer in metrics.timers(label: "operations_wait_reason_duration_seconds") where timer.dimensions.contains(where: { $0 == ("queue", queue.name!) }) {
            byReason[timer.dimensions.first { $0.0 == "reason" }?.1 ?? "?", default: 0] += timer.values.reduce(0, +)
        }
        #expect((byReason["serial_turn"] ?? 0) >= 50_000_000, "the wait by reason: \(byReason)")
    }

    // MetricsOperationLogger: "`operations_finished_total` | operations that finished, however
    // they did"; "`operations_failed_total` | operations that finished with errors without being
    // cancelled"; "`operations_cancelled_total` | operations that were cancelled";
    // "`operations_wait_duration_seconds` | timer | for each operation that started"; API.md 1: "If
    // any condition fails, `execute()` is never called; the operation finishes with one error per
    // failed condition"
    @Test func anOperationWhoseConditionFails_isFinishedAndFailedOrCancelledOnce_neverStarted_andNotTimed() async throws {
        // Given a metered queue
        let metrics = TestMetrics()
        let (queue, labels) = queue(reportingTo: metrics)

        // When an operation whose condition fails is added
        let refused = AsyncBlockOperation {}
        refused.addCondition(BlockCondition { false })
        queue.addOperation(refused)
        #expect(await eventually { refused.isFinished })
        #expect(await eventually { counter(metrics, "operations_finished_total", labels) == 1 })

        // Then it counts as finished, as failed or cancelled as its state says, never started, never timed
        #expect(!refused.errors.isEmpty)
        #expect(counter(metrics, "operations_started_total", labels) == 0)
        #expect(counter(metrics, "operations_failed_total", labels) == (refused.isCancelled ? 0 : 1), "cancelled: \(refused.isCancelled)")
        #expect(counter(metrics, "operations_cancelled_total", labels) == (refused.isCancelled ? 1 : 0), "cancelled: \(refused.isCancelled)")
        #expect(try metrics.expectMeter("operations_waiting", labels).lastValue == 0)
        let waits = metrics.timers(label: "operations_wait_duration_seconds").filter { $0.dimensions.contains { $0 == ("queue", queue.name!) } }
        #expect(waits.allSatisfy { $0.values.isEmpty }, "\(waits.map(\.values))")
        let runs = metrics.timers(label: "operations_run_duration_seconds").filter { $0.dimensions.contains { $0 == ("queue", queue.name!) } }
        #expect(runs.allSatisfy { $0.values.isEmpty }, "\(runs.map(\.values))")
    }
}
