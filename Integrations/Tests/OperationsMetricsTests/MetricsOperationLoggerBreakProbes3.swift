import CoreMetrics
import Foundation
import IntegrationsTestSupport
import MetricsTestKit
import Operations
import OperationsMetrics
import Testing

/// Probes of round 3 that found breaks of `MetricsOperationLogger`'s documentation (quoted above
/// each test), fixed since: a group's child waiting for its group was never heard waiting (its
/// wait went under `slot`), and a queue named while operations of it were on their way split
/// their gauges over two names.
@Suite struct MetricsOperationLoggerBreakProbes3 {
    // MetricsOperationLogger: "The `reason` of a wait is ... `group_start`, ... as the queue's
    // `OperationSnapshot` explains it at each moment"; "The children of groups ... are left out
    // unless `includesGroupChildren` is true" (OperationSnapshot.Reason.groupToStart: "It is a
    // child of a group (by name) that has not started executing.")
    @Test func aGroupsChildWaitingForItsGroupToStart_isTimedUnderGroupStart_whenChildrenAreIncluded() async throws {
        // Given a queue counting group children, and a group that waits for a dependency held by the test
        let metrics = TestMetrics()
        let queue = AsyncOperationQueue()
        queue.logger = MetricsOperationLogger(factory: metrics, includesGroupChildren: true)
        let held = HeldOperations()
        let first = held.make(uniqueName("first"))
        let child = AsyncBlockOperation {}
        child.name = uniqueName("child")
        let group = GroupOperation(operations: [child])
        group.name = uniqueName("group")
        group.addDependency(first)

        // When the group waits a while before it starts
        queue.addOperations([first, group], waitUntilFinished: false)
        #expect(await eventually { held.hasStarted(first.name!) })
        #expect(await eventually { child.snapshot().waitsFor.contains { "\($0)".contains("its group") } }, "\(child.snapshot())")
        try await Task.sleep(nanoseconds: 50_000_000)
        held.finish(first.name!)
        #expect(await eventually { group.isFinished && child.isFinished })
        #expect(await eventually { metrics.timers(label: "operations_wait_duration_seconds").flatMap(\.values).count >= 3 })

        // Then the child's wait is timed under `group_start`
        var byReason: [String: Int64] = [:]
        for timer in metrics.timers(label: "operations_wait_reason_duration_seconds") {
            byReason[timer.dimensions.first { $0.0 == "reason" }?.1 ?? "?", default: 0] += timer.values.reduce(0, +)
        }
        #expect((byReason["group_start"] ?? 0) >= 50_000_000, "the wait by reason: \(byReason)")
    }

    // MetricsOperationLogger: "`operations_waiting` | meter (gauge) | operations added that have
    // not started (nor finished)"; "`operations_running` | meter (gauge) | operations executing
    // now"; "Every metric has the label `queue`: the name the queue was given" (a queue named
    // while an operation of it waits: no gauge may stay off zero, or go below it, once it is empty)
    @Test func aQueueNamedWhileAnOperationWaits_leavesNoGaugeOffZeroOnceItIsEmpty() async throws {
        // Given an unnamed metered queue with a running operation and one waiting behind it
        let metrics = TestMetrics()
        let queue = AsyncOperationQueue()
        queue.logger = MetricsOperationLogger(factory: metrics)
        queue.maxConcurrentOperationCount = 1
        let held = HeldOperations()
        let first = held.make(uniqueName("first"))
        let second = AsyncBlockOperation {}
        queue.addOperations([first, second], waitUntilFinished: false)
        #expect(await eventually { held.hasStarted(first.name!) })

        // When the queue is given a name, and then both operations finish
        let name = uniqueName("renamed")
        queue.name = name
        held.finish(first.name!)
        #expect(await eventually { first.isFinished && second.isFinished })
        #expect(await eventually { metrics.counters(label: "operations_finished_total").map(\.totalValue).reduce(0, +) == 2 })

        // Then every gauge of every label is back at zero
        var gauges: [String: Double] = [:]
        for label in ["operations_waiting", "operations_running"] {
            for queueName in ["unnamed", name] {
                if let meter = try? metrics.expectMeter(label, [("queue", queueName)]), let value = meter.lastValue {
                    gauges["\(label){\(queueName)}"] = value
                }
            }
        }
        #expect(gauges.values.allSatisfy { $0 == 0 }, "\(gauges)")
    }
}
