import Conditions
import Foundation
import Operations
import TestSupport

/// What a finished round leaves behind for the checks: no operation, only what was recorded.
struct SoakReport {
    var plan: SoakPlan
    var categoryNames: [String] = []
    var instances: [SoakInstance] = []
    var cancelAlls = 0
    var probe = ConcurrencyProbe()
    var diagnostics: [OperationDiagnostic] = []
    /// Operations that never finished, and what every queue said about itself then.
    var unfinished: [Int] = []
    var stuckDescriptions: [String] = []
    /// Whether a stuck round finished once everything was cancelled (then the next round can
    /// run: no category stayed held).
    var recovered = true
    var queuesDrained = false
    var categoriesStillFree = false
    var chaosDone = false
    var survivors: [Int] = []
    var survivorDescriptions: [String] = []
    var survivingQueues = 0
    var widthChanged = [Bool](repeating: false, count: SoakPlan.queueCount)
    /// Late children their group did not wait for (see `lateChildrenNotWaitedFor()`).
    var childrenTooLate = Set<Int>()
    var duration: TimeInterval = 0
}

/// Runs one round: makes its operations, adds them in batches to four queues while chaos
/// threads cancel, suspend, resume, resize and add late children, waits (bounded) for
/// everything to finish, then drops every reference and waits for everything to be released.
enum SoakRound {
    /// How long a round may take to drain before it counts as stuck.
    /// OPERATIONS_SOAK_DRAIN_SECONDS overrides it (shorter, to hunt for more than one finding).
    static let drainTimeout: TimeInterval = ProcessInfo.processInfo.environment["OPERATIONS_SOAK_DRAIN_SECONDS"]
        .flatMap { TimeInterval($0) } ?? (StressScale.current == .small ? 180 : 60)

    static func run(_ plan: SoakPlan) -> SoakReport {
        _ = DiagnosticsLog.shared // capture diagnostics from here on
        let started = Date()
        let tag = uniqueName("soak")
        let ledger = SoakLedger(probe: ConcurrencyProbe())
        var report = SoakReport(plan: plan)
        let builder = SoakBuilder(plan: plan, ledger: ledger, tag: tag)
        report.categoryNames = builder.categoryNames
        report.probe = ledger.probe

        let queueProbes = runAndRelease(plan, builder: builder, into: &report)
        let released = waitUntil(timeout: StressScale.current == .small ? 120 : 60) {
            ledger.survivors().isEmpty && queueProbes.allSatisfy { $0.object == nil }
        }
        if !released {
            report.survivors = ledger.survivors()
            report.survivorDescriptions = report.survivors.prefix(10).map { id in
                ledger.operation(id).map { "i\(id): \($0.debugDescription)" } ?? "i\(id): released meanwhile"
            }
        }
        report.survivingQueues = queueProbes.filter { $0.object != nil }.count
        (report.instances, report.cancelAlls) = ledger.snapshot
        report.diagnostics = DiagnosticsLog.shared.diagnostics(aboutNamesWithPrefix: tag)
        report.childrenTooLate = report.lateChildrenNotWaitedFor()
        report.duration = Date().timeIntervalSince(started)
        return report
    }

    /// Runs the plan; every operation and queue it makes is dropped when it returns.
    private static func runAndRelease(_ plan: SoakPlan, builder: SoakBuilder, into report: inout SoakReport) -> [WeakProbe<AsyncOperationQueue>] {
        let ledger = builder.ledger
        let queues = plan.initialWidths.enumerated().map { index, width in
            let queue = AsyncOperationQueue()
            queue.name = "\(builder.tag)-queue\(index)"
            queue.maxConcurrentOperationCount = width
            return queue
        }

        // Made before anything runs, so that dependencies exist; dropped as soon as added.
        var topLevel: [Operation] = []
        var made: [Int: (Operation, Int)] = [:]
        var queueOfBatch: [Int: Int] = [:]
        for batch in plan.batches {
            for position in batch.topLevel { queueOfBatch[position] = batch.queue }
        }
        for (position, node) in plan.topLevel.enumerated() {
            let origin = SoakOrigin.topLevel(queue: queueOfBatch[position]!, position: position)
            let (operation, id) = builder.make(node, parent: nil, origin: origin, siblings: made)
            made[node] = (operation, id)
            topLevel.append(operation)
        }
        made = [:]

        let widthChanges = SoakShared([Bool](repeating: false, count: SoakPlan.queueCount))
        let chaos = plan.chaos.map { steps in
            runOnOwnThread { perform(steps, queues: queues, builder: builder, widthChanges: widthChanges) }
        }
        for batch in plan.batches {
            queues[batch.queue].addOperations(Array(topLevel[batch.topLevel]), waitUntilFinished: false)
            if batch.pauseMicroseconds > 0 { usleep(batch.pauseMicroseconds) }
        }
        topLevel = []

        report.chaosDone = chaos.allSatisfy { $0.wait(timeout: generousTimeout) }
        queues.forEach { $0.isSuspended = false }
        report.widthChanged = widthChanges.value
        let drained = waitUntil(timeout: drainTimeout) { ledger.unfinished().isEmpty }
        if !drained {
            report.unfinished = ledger.unfinished()
            report.stuckDescriptions = queues.map(\.debugDescription) + stuckOperations(report.unfinished, ledger: ledger, plan: plan)
            if ProcessInfo.processInfo.environment["OPERATIONS_SOAK_TRAP_WHEN_STUCK"] != nil {
                // The backtracer then prints every thread: what each one waits for, if anything.
                fatalError("soak round seed \(plan.seed) stuck:\n" + report.stuckDescriptions.joined(separator: "\n"))
            }
            // Let the rest of the suite go on: cancel whatever is left.
            queues.forEach { $0.cancelAllOperations() }
            for id in report.unfinished { ledger.operation(id)?.cancel() }
            report.recovered = waitUntil(timeout: 30) { ledger.unfinished().isEmpty }
        }
        report.queuesDrained = waitUntil(timeout: 10) { queues.allSatisfy { $0.allOperationCount == 0 } }
        if drained {
            report.categoriesStillFree = categoriesAreFree(builder.categoryNames, on: queues[0])
        }
        return queues.map { WeakProbe($0) }
    }

    /// What every unfinished operation not merely waiting for a dependency says about itself,
    /// with its place in the plan: groups' children included, which no queue lists.
    private static func stuckOperations(_ ids: [Int], ledger: SoakLedger, plan: SoakPlan) -> [String] {
        let instances = ledger.snapshot.instances
        return ids.compactMap { id in
            guard let operation = ledger.operation(id) else { return "i\(id): released" }
            let description = operation.debugDescription
            if description.contains("waiting for dependencies") { return nil }
            let instance = instances[id]
            let parent = instance.parent.map { "i\($0)" } ?? "none"
            return "i\(id) [\(instance.kind), parent \(parent), \(instance.origin), categories \(instance.categories), events \(instance.events.map(\.event))]: \(description)"
        }
    }

    private static func perform(_ steps: [SoakPlan.ChaosStep], queues: [AsyncOperationQueue], builder: SoakBuilder, widthChanges: SoakShared<[Bool]>) {
        let ledger = builder.ledger
        for step in steps {
            if step.pauseMicroseconds > 0 { usleep(step.pauseMicroseconds) }
            switch step.action {
            case let .cancel(node, withError):
                guard let (operation, id) = ledger.liveOperation(of: node) else { continue }
                ledger.cancelRequested(id)
                if let operation = operation as? AsyncOperation {
                    operation.cancel(with: withError ? StubError.soakCancelled(id) : nil)
                } else {
                    operation.cancel()
                }
            case let .suspend(queue):
                queues[queue].isSuspended = true
            case let .resume(queue):
                queues[queue].isSuspended = false
            case let .cancelAll(queue):
                ledger.cancelAllRequested()
                queues[queue].cancelAllOperations()
            case let .setWidth(queue, width):
                widthChanges.withValue { $0[queue] = true }
                queues[queue].maxConcurrentOperationCount = width
            case let .addLateChild(group, template):
                guard let (operation, id) = ledger.liveOperation(of: group), let group = operation as? GroupOperation else { continue }
                let (child, _) = builder.make(template, parent: id, origin: .late)
                group.addChild(child)
            }
        }
    }

    /// Whether one new operation per category runs: no category was left held by the round.
    private static func categoriesAreFree(_ categoryNames: [String], on queue: AsyncOperationQueue) -> Bool {
        let probes = categoryNames.map { name in
            let operation = AsyncBlockOperation {}
            operation.addCondition(ExclusiveCategory(name))
            return operation
        }
        queue.addOperations(probes, waitUntilFinished: false)
        return waitUntilFinished(probes)
    }
}

/// A value behind a lock, for the few flags a round shares between threads.
final class SoakShared<Value>: @unchecked Sendable {
    // @unchecked Sendable: `stored` is only touched while holding `lock`.
    private let lock = NSLock()
    private var stored: Value

    init(_ value: Value) {
        stored = value
    }

    var value: Value {
        lock.lock()
        defer { lock.unlock() }
        return stored
    }

    func withValue(_ change: (inout Value) -> Void) {
        lock.lock()
        defer { lock.unlock() }
        change(&stored)
    }
}
