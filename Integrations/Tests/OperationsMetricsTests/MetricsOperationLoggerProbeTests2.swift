import Conditions
import CoreMetrics
import Foundation
import IntegrationsTestSupport
import MetricsTestKit
import Operations
import OperationsMetrics
import Testing

/// A second round of probes of documented behaviour of `MetricsOperationLogger` that neither
/// `MetricsOperationLoggerTests` nor `MetricsOperationLoggerProbeTests` checks, read through
/// swift-metrics' own `TestMetrics` factory (exact nanoseconds, no global bootstrap). Each probe
/// cites the sentence it checks.
@Suite struct MetricsOperationLoggerProbeTests2 {
    private func queue(reportingTo metrics: TestMetrics) -> (AsyncOperationQueue, [(String, String)]) {
        let queue = AsyncOperationQueue()
        queue.name = uniqueName("jobs")
        queue.logger = MetricsOperationLogger(factory: metrics)
        return (queue, [("queue", queue.name!)])
    }

    private func reasonTimers(_ metrics: TestMetrics, queue: String) -> [String: [Int64]] {
        var byReason: [String: [Int64]] = [:]
        for timer in metrics.timers(label: "operations_wait_reason_duration_seconds") where timer.dimensions.contains(where: { $0 == ("queue", queue) }) {
            let reason = timer.dimensions.first { $0.0 == "reason" }?.1 ?? "?"
            byReason[reason, default: []] += timer.values
        }
        return byReason
    }

    // MetricsOperationLogger: "`operations_wait_reason_duration_seconds` | the same time, split by what the operation waited for (label `reason`)"
    @Test func theWaitSplitByReason_addsUpToTheWholeWait() async throws {
        let metrics = TestMetrics()
        let (queue, labels) = queue(reportingTo: metrics)
        let category = uniqueName("account")
        let held = HeldOperations()
        let first = held.make(uniqueName("first"))
        first.addCondition(ExclusiveCategory(category))
        let follower = AsyncBlockOperation {}
        follower.addDependency(first)
        follower.addCondition(ExclusiveCategory(category))
        let sibling = AsyncBlockOperation {}
        sibling.addCondition(ExclusiveCategory(category))
        queue.addOperations([first, follower, sibling], waitUntilFinished: false)
        #expect(await eventually { held.hasStarted(first.name!) })
        try await Task.sleep(nanoseconds: 30_000_000)
        held.finish(first.name!)
        #expect(await eventually { follower.isFinished && sibling.isFinished })
        #expect(await eventually { ((try? metrics.expectCounter("operations_finished_total", labels).totalValue) ?? 0) == 3 })

        let wait = try metrics.expectTimer("operations_wait_duration_seconds", labels).values
        let byReason = reasonTimers(metrics, queue: queue.name!)
        #expect(wait.count == 3)
        let whole = wait.reduce(0, +)
        let split = byReason.values.flatMap { $0 }.reduce(0, +)
        #expect(split == whole, "whole wait \(whole) ns, split \(byReason)")
        #expect((byReason["dependencies"] ?? []).reduce(0, +) >= 30_000_000, "\(byReason)")
    }

    // MetricsOperationLogger: "The `reason` of a wait is `dependencies`, `conditions`, ... as the queue's `OperationSnapshot` explains it at each moment." (a condition slow to answer)
    @Test func aWaitForAConditionSlowToAnswer_isTimedUnderConditions() async throws {
        let metrics = TestMetrics()
        let (queue, labels) = queue(reportingTo: metrics)
        let condition = GatedCondition()
        let guarded = AsyncBlockOperation {}
        guarded.addCondition(condition)
        queue.addOperation(guarded)
        #expect(await eventually { condition.isAsked })
        try await Task.sleep(nanoseconds: 50_000_000)
        condition.answer()
        #expect(await eventually { guarded.isFinished })
        #expect(await eventually { ((try? metrics.expectCounter("operations_finished_total", labels).totalValue) ?? 0) == 1 })

        let byReason = reasonTimers(metrics, queue: queue.name!)
        let conditions = (byReason["conditions"] ?? []).reduce(0, +)
        #expect(conditions >= 50_000_000, "the wait by reason: \(byReason)")
        #expect(guarded.errors.isEmpty)
    }
    // MetricsOperationLogger: "`operations_cancelled_total` | operations that were cancelled"; "`operations_failed_total` | operations that finished with errors without being cancelled" (an operation cancelled, with a reason, before it was added)
    @Test func anOperationCancelledBeforeItWasAdded_countsAsCancelled_notFailed() async throws {
        let metrics = TestMetrics()
        let (queue, labels) = queue(reportingTo: metrics)
        let superseded = AsyncBlockOperation {}
        superseded.cancel(with: TestFailure("superseded"))
        queue.addOperations([superseded], waitUntilFinished: true)
        #expect(superseded.isFinished && superseded.isCancelled)
        #expect(await eventually { ((try? metrics.expectCounter("operations_finished_total", labels).totalValue) ?? 0) == 1 })

        // The logger joins as the operation is added, after its cancellation: the queue logs the
        // `cancelled` it missed right after `added`.
        #expect(try metrics.expectCounter("operations_cancelled_total", labels).totalValue == 1)
        #expect(try metrics.expectCounter("operations_failed_total", labels).totalValue == 0)
        #expect(try metrics.expectCounter("operations_started_total", labels).totalValue == 0)
        #expect(try metrics.expectMeter("operations_waiting", labels).lastValue == 0)
    }
}

/// A condition that is satisfied once the test answers it, and tells when it was asked.
private final class GatedCondition: OperationCondition, @unchecked Sendable { // @unchecked: `completion` is behind its own lock
    private let completion = LockedValue<(@Sendable (ConditionResult) -> Void)?>(nil)
    private let asked = LockedValue(false)

    var isAsked: Bool { asked.withLock { $0 } }

    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        self.completion.withLock { $0 = completion }
        asked.withLock { $0 = true }
    }

    func answer() {
        completion.withLock { $0 }?(.satisfied)
    }
}
