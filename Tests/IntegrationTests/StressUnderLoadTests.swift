import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// Proof under load: randomized runs of a few thousand operations that mix everything at once:
// dependencies on earlier operations, conditions that pass and fail (answered at once or later),
// overlapping mutually exclusive categories, recording observers, timeouts (some operations never
// call their continuation and can only finish through theirs, or through an enclosing group's),
// cancellation from other threads at random moments, and groups (nested, serial, cancelled, with
// categories of their own that their children never share).
//
// Each run is drawn from a seed, printed in every failure; replay one with
// OPERATIONS_LOAD_SEED=<seed> swift test --filter IntegrationTests. The runs are checked against
// invariants only, never against time: every operation finishes exactly once, observers hear each
// event once and `operationDidFinish` last, nothing executes after a failed condition or before its
// dependencies, a group finishes after its children (a group that executed: see
// FoundUnderLoadTests.swift for one that did not), no category is ever held twice, timeouts
// surface as `AsyncOperationError.timedOut`, the queues drain and nothing outlives the run.
//
// Categories come in one pool per nesting depth (top level, children, grandchildren). A group holds
// its categories while its children run: a child needing one of them fails at once, by design,
// which would muddle the checks below; pools per depth keep that out, while categories still
// overlap among the operations of each depth, across queues and across groups. (The deadlock of a
// child lining up behind an operation waiting for its group's category is covered, fixed, in
// FoundUnderLoadTests.swift.)

@Suite("Stress under load")
struct StressUnderLoadTests {
    /// Fixed seeds, plus one fresh seed per test run (or only the one given in the environment).
    static let seeds = stressSeeds(
        fixed: [0x10AD_0001, 0x6B0B_5EED, 0xD15C_0A11],
        replayVariable: LoadPlan.replayVariable
    )

    @Test(arguments: seeds)
    func mixedWorkload_keepsEveryInvariant(seed: UInt64) {
        // Given a random workload of dependencies, conditions, categories, observers, timeouts,
        // groups and cancellations at random moments; when it runs to the end
        let plan = LoadPlan(seed: seed, topLevelCount: 480, cancelsEverythingOnce: false)
        let report = LoadRun.perform(plan)

        // Then
        report.check(seed: seed)
    }

    @Test(arguments: seeds.prefix(2))
    func mixedWorkload_cancelledWholesaleAtARandomMoment_keepsEveryInvariant(seed: UInt64) {
        // Given a random workload; when both queues also cancel everything at a random moment
        let plan = LoadPlan(seed: seed ^ 0xCA9C_E11A, topLevelCount: 320, cancelsEverythingOnce: true)
        let report = LoadRun.perform(plan)

        // Then
        report.check(seed: seed)
    }
}

// MARK: - The plan, drawn from a seed

private struct LoadPlan {
    static let replayVariable = "OPERATIONS_LOAD_SEED"

    enum Body: Equatable {
        case returns(workMicroseconds: UInt32)
        case throwsError(workMicroseconds: UInt32)
        /// Calls the continuation later, from another thread, with an error or not.
        case continuation(delayMicroseconds: UInt32, fails: Bool)
        /// Drops the continuation: only a timeout or a cancellation finishes the operation.
        case neverContinues

        /// Whether the operation fails by itself once its block has run.
        var fails: Bool {
            switch self {
            case .returns, .neverContinues: return false
            case .throwsError: return true
            case let .continuation(_, fails): return fails
            }
        }
    }

    enum ConditionSpec {
        /// A `BlockCondition`: answers at once, on the evaluating thread.
        case checked(passes: Bool)
        /// Answers later, from another thread.
        case answeredLater(passes: Bool, delayMicroseconds: UInt32)
        /// An `ExclusiveCategory` from the pool of the operation's depth.
        case exclusive(category: Int)

        var fails: Bool {
            switch self {
            case let .checked(passes), let .answeredLater(passes, _): return !passes
            case .exclusive: return false
            }
        }
    }

    enum Kind {
        case leaf(Body)
        /// Children in the order added; the first `addedAtCreation` are handed to the initializer,
        /// the rest added afterwards (still before the group is queued).
        case group(children: [Int], addedAtCreation: Int, maxConcurrent: Int)
    }

    struct Node {
        var parent: Int?
        var depth: Int
        /// Earlier siblings (top-level operations, or children of the same group).
        var dependencies: [Int]
        var conditions: [ConditionSpec]
        /// Index into `LoadPlan.timeouts`: the operation carries that `TimeoutObserver`.
        var timeout: Int?
        /// Whether a `BlockObserver` from the Observers module counts its events too.
        var hasBlockObserver: Bool
        var kind: Kind

        var failingConditionCount: Int { conditions.filter(\.fails).count }
        var categories: Set<Int> {
            Set(conditions.compactMap { if case let .exclusive(category) = $0 { return category }; return nil })
        }
        var isGroup: Bool { if case .group = kind { return true }; return false }
        var body: Body? { if case let .leaf(body) = kind { return body }; return nil }
        var children: [Int] { if case let .group(children, _, _) = kind { return children }; return [] }
    }

    struct Cancellation {
        var index: Int
        var afterMicroseconds: UInt32
        var withError: Bool
        var thread: Int
    }

    /// The timeouts operations carry, each through one `TimeoutObserver` shared by all of them.
    static let timeouts: [TimeInterval] = [0.02, 0.04, 0.07, 0.1]
    static let cancellationThreads = 2
    /// Groups nest this deep: top level is depth 0, so grandchildren are the deepest.
    static let deepestDepth = 2

    var nodes: [Node] = []
    var topLevel: [Int] = []
    /// How many categories each depth's pool has.
    var categoryCounts: [Int]
    var queueLimits: [Int]
    /// Ranges of `topLevel`, added in order, each with one `addOperations` call to `batchQueues`.
    var batches: [Range<Int>] = []
    var batchQueues: [Int] = []
    var pausesBetweenBatches: [UInt32] = []
    var cancellations: [Cancellation] = []
    var cancelAllAfterMicroseconds: UInt32?

    init(seed: UInt64, topLevelCount: Int, cancelsEverythingOnce: Bool) {
        var random = SplitMix64(seed: seed)
        categoryCounts = [Int.random(in: 3...5, using: &random), Int.random(in: 2...3, using: &random), 2]
        let limits = [1, 2, 3, OperationQueue.defaultMaxConcurrentOperationCount]
        queueLimits = (0..<2).map { _ in limits.randomElement(using: &random)! }

        for _ in 0..<topLevelCount {
            topLevel.append(addNode(parent: nil, depth: 0, siblings: topLevel, timeoutAbove: false, using: &random))
        }

        var start = 0
        while start < topLevel.count {
            let end = min(topLevel.count, start + Int.random(in: 1...30, using: &random))
            batches.append(start..<end)
            batchQueues.append(Int.random(in: 0..<2, using: &random))
            pausesBetweenBatches.append(Bool.random(using: &random) ? 0 : UInt32.random(in: 0...2_000, using: &random))
            start = end
        }
        for index in nodes.indices where Int.random(in: 0..<100, using: &random) < (nodes[index].isGroup ? 20 : 7) {
            cancellations.append(Cancellation(
                index: index,
                afterMicroseconds: UInt32.random(in: 0...300_000, using: &random),
                withError: Bool.random(using: &random),
                thread: Int.random(in: 0..<Self.cancellationThreads, using: &random)
            ))
        }
        cancellations.sort { $0.afterMicroseconds < $1.afterMicroseconds }
        if cancelsEverythingOnce {
            cancelAllAfterMicroseconds = UInt32.random(in: 0...80_000, using: &random)
        }
    }

    /// Draws one operation (a group with its whole subtree) and returns its index.
    private mutating func addNode(
        parent: Int?,
        depth: Int,
        siblings: [Int],
        timeoutAbove: Bool,
        using random: inout SplitMix64
    ) -> Int {
        let index = nodes.count
        let groupChance = depth == 0 ? 10 : (depth < Self.deepestDepth ? 20 : 0)
        let isGroup = Int.random(in: 0..<100, using: &random) < groupChance

        var dependencies: [Int] = []
        if !siblings.isEmpty {
            let roll = Int.random(in: 0..<100, using: &random)
            for _ in 0..<(roll < 55 ? 0 : (roll < 88 ? 1 : 2)) {
                let dependency = siblings[Int.random(in: max(0, siblings.count - 30)..<siblings.count, using: &random)]
                if !dependencies.contains(dependency) { dependencies.append(dependency) }
            }
        }

        let conditionRoll = Int.random(in: 0..<20, using: &random)
        let conditionCount = conditionRoll < 8 ? 0 : (conditionRoll < 15 ? 1 : (conditionRoll < 19 ? 2 : 3))
        let conditions = (0..<conditionCount).map { _ -> ConditionSpec in
            let roll = Int.random(in: 0..<100, using: &random)
            switch roll {
            case 0..<28: return .checked(passes: true)
            case 28..<34: return .checked(passes: false)
            case 34..<56: return .answeredLater(passes: true, delayMicroseconds: UInt32.random(in: 0...2_000, using: &random))
            case 56..<62: return .answeredLater(passes: false, delayMicroseconds: UInt32.random(in: 0...2_000, using: &random))
            default: return .exclusive(category: Int.random(in: 0..<categoryCounts[depth], using: &random))
            }
        }
        let hasBlockObserver = Int.random(in: 0..<100, using: &random) < 30

        nodes.append(Node(
            parent: parent, depth: depth, dependencies: dependencies, conditions: conditions,
            timeout: nil, hasBlockObserver: hasBlockObserver, kind: .leaf(.returns(workMicroseconds: 0))
        ))

        if isGroup {
            let timeout = Int.random(in: 0..<100, using: &random) < 25 ? Int.random(in: 2...3, using: &random) : nil
            let childCount = depth == 0 ? Int.random(in: 2...10, using: &random) : Int.random(in: 1...5, using: &random)
            var children: [Int] = []
            for _ in 0..<childCount {
                children.append(addNode(
                    parent: index, depth: depth + 1, siblings: children,
                    timeoutAbove: timeoutAbove || timeout != nil, using: &random
                ))
            }
            let limitRoll = Int.random(in: 0..<100, using: &random)
            let maxConcurrent = limitRoll < 40 ? 1 : (limitRoll < 60 ? 2 : OperationQueue.defaultMaxConcurrentOperationCount)
            nodes[index].timeout = timeout
            nodes[index].kind = .group(
                children: children,
                addedAtCreation: Int.random(in: 0...childCount, using: &random),
                maxConcurrent: maxConcurrent
            )
            return index
        }

        let work = Bool.random(using: &random) ? 0 : UInt32.random(in: 0...100, using: &random)
        let body: Body
        var timeout: Int?
        switch Int.random(in: 0..<100, using: &random) {
        case 0..<38:
            body = .returns(workMicroseconds: work)
        case 38..<52:
            body = .throwsError(workMicroseconds: work)
        case 52..<88:
            body = .continuation(delayMicroseconds: UInt32.random(in: 0...1_000, using: &random), fails: Int.random(in: 0..<100, using: &random) < 15)
        case 88..<92:
            // Slow enough to race its timeout.
            body = .continuation(delayMicroseconds: UInt32.random(in: 10_000...150_000, using: &random), fails: Int.random(in: 0..<100, using: &random) < 15)
            timeout = Int.random(in: 0..<Self.timeouts.count, using: &random)
        default:
            body = .neverContinues
            // Something must time it out: its own timeout, or (mostly, when there is one) only an
            // enclosing group's.
            if !timeoutAbove || Int.random(in: 0..<100, using: &random) < 30 {
                timeout = Int.random(in: 0..<Self.timeouts.count, using: &random)
            }
        }
        if timeout == nil, Int.random(in: 0..<100, using: &random) < 8 {
            timeout = Int.random(in: 0..<Self.timeouts.count, using: &random)
        }
        nodes[index].timeout = timeout
        nodes[index].kind = .leaf(body)
        return index
    }

    /// The indices of `index`'s enclosing groups, innermost first.
    func ancestors(of index: Int) -> [Int] {
        var result: [Int] = []
        var current = nodes[index].parent
        while let group = current {
            result.append(group)
            current = nodes[group].parent
        }
        return result
    }
}

// MARK: - Recording a run

/// The errors a run hands out, each naming the operation it came from.
private extension StubError {
    static func conditionFailed(_ index: Int) -> StubError { StubError("conditionFailed(op\(index))") }
    static func bodyFailed(_ index: Int) -> StubError { StubError("bodyFailed(op\(index))") }
    static func cancelled(_ index: Int) -> StubError { StubError("cancelled(op\(index))") }
}

private enum LoadEvent: Equatable, CustomStringConvertible {
    /// Observer events, from the recording observer.
    case didStart, didCancel, didFinish
    /// `execute()` was called.
    case execute
    /// The block began running.
    case bodyBegan

    var description: String {
        switch self {
        case .didStart: return "didStart"
        case .didCancel: return "didCancel"
        case .didFinish: return "didFinish"
        case .execute: return "execute"
        case .bodyBegan: return "bodyBegan"
        }
    }
}

/// Everything a run records, under one lock, stamped with one sequence so that events of
/// different operations can be ordered. Holds no operation.
private final class LoadLedger: @unchecked Sendable {
    // @unchecked Sendable: every `var` is only touched while holding `lock`; the `let`s are immutable
    // (`probe` is thread-safe).
    struct Stamped {
        var event: LoadEvent
        var sequence: Int
    }

    private let lock = NSLock()
    private var sequence = 0
    private var events: [[Stamped]]
    private var errorsAtFinish: [[String]?]
    private var blockObserverEvents: [[LoadEvent]]
    private var cancelRequested: [Bool]
    private var insideProbe: [Bool]
    let probe = ConcurrencyProbe()
    let categoriesOf: [[String]]

    init(categoriesOf: [[String]]) {
        self.categoriesOf = categoriesOf
        let count = categoriesOf.count
        events = Array(repeating: [], count: count)
        errorsAtFinish = Array(repeating: nil, count: count)
        blockObserverEvents = Array(repeating: [], count: count)
        cancelRequested = Array(repeating: false, count: count)
        insideProbe = Array(repeating: false, count: count)
    }

    func record(_ event: LoadEvent, for index: Int) {
        lock.lock()
        defer { lock.unlock() }
        sequence += 1
        events[index].append(Stamped(event: event, sequence: sequence))
    }

    /// `execute()` of operation `index` was called: it executes, holding its categories, until it
    /// finishes.
    func executeBegan(_ index: Int) {
        lock.lock()
        sequence += 1
        events[index].append(Stamped(event: .execute, sequence: sequence))
        insideProbe[index] = true
        lock.unlock()
        categoriesOf[index].forEach(probe.enter)
    }

    /// Operation `index` told its observers it finished (its categories are still held).
    func didFinish(_ index: Int, errors: [any Error]) {
        lock.lock()
        sequence += 1
        events[index].append(Stamped(event: .didFinish, sequence: sequence))
        if errorsAtFinish[index] == nil { errorsAtFinish[index] = errors.map(describe) }
        let wasInside = insideProbe[index]
        insideProbe[index] = false
        lock.unlock()
        if wasInside { categoriesOf[index].forEach(probe.leave) }
    }

    func blockObserverHeard(_ event: LoadEvent, for index: Int) {
        lock.lock()
        defer { lock.unlock() }
        blockObserverEvents[index].append(event)
    }

    /// A canceller is about to cancel operation `index`.
    func cancelling(_ index: Int) {
        lock.lock()
        defer { lock.unlock() }
        cancelRequested[index] = true
    }

    struct Snapshot {
        var events: [[Stamped]]
        var errorsAtFinish: [[String]?]
        var blockObserverEvents: [[LoadEvent]]
        var cancelRequested: [Bool]
    }

    var snapshot: Snapshot {
        lock.lock()
        defer { lock.unlock() }
        return Snapshot(
            events: events, errorsAtFinish: errorsAtFinish,
            blockObserverEvents: blockObserverEvents, cancelRequested: cancelRequested
        )
    }
}

/// How errors are compared across operations (a group's errors against its children's).
private func describe(_ error: any Error) -> String {
    "\(type(of: error)): \(error)"
}

private struct RecordingObserver: OperationObserver {
    let index: Int
    let ledger: LoadLedger

    func operationDidStart(_ operation: AsyncOperation) {
        ledger.record(.didStart, for: index)
    }

    func operationDidCancel(_ operation: AsyncOperation) {
        ledger.record(.didCancel, for: index)
    }

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        ledger.didFinish(index, errors: errors)
    }
}

/// A condition that answers later, from another thread.
private struct AnsweredLater: OperationCondition {
    let passes: Bool
    let delayMicroseconds: UInt32
    let failure: StubError

    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        let result: ConditionResult = passes ? .satisfied : .failed(failure)
        DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(Int(delayMicroseconds))) {
            completion(result)
        }
    }
}

/// A block operation that records when `execute()` is called.
private final class LoadBlockOperation: AsyncBlockOperation, @unchecked Sendable {
    // @unchecked Sendable: `index` and `ledger` are immutable; the rest is AsyncBlockOperation's.
    private let index: Int
    private let ledger: LoadLedger

    init(index: Int, ledger: LoadLedger, _ block: @escaping @Sendable () throws -> Void) {
        self.index = index
        self.ledger = ledger
        super.init(block)
    }

    init(index: Int, ledger: LoadLedger, continuation block: @escaping @Sendable (_ finish: @escaping Continuation) -> Void) {
        self.index = index
        self.ledger = ledger
        super.init(block)
    }

    override func execute() {
        ledger.executeBegan(index)
        super.execute()
    }
}

/// A group that records when `execute()` is called.
private final class LoadGroup: GroupOperation, @unchecked Sendable {
    // @unchecked Sendable: `index` and `ledger` are immutable; the rest is GroupOperation's.
    private let index: Int
    private let ledger: LoadLedger

    init(index: Int, ledger: LoadLedger, operations: [Operation]) {
        self.index = index
        self.ledger = ledger
        super.init(operations: operations)
    }

    override func execute() {
        ledger.executeBegan(index)
        super.execute()
    }
}

// MARK: - Running a plan

/// What a finished run leaves behind: no operation, only what the checks need.
private struct LoadReport {
    struct Outcome {
        var isFinished: Bool
        var isCancelled: Bool
        var errors: [String]
        var loadErrors: [StubError?]
        /// The `after` of every `AsyncOperationError.timedOut` among the errors.
        var timeouts: [TimeInterval]
    }

    var plan: LoadPlan
    var outcomes: [Outcome] = []
    var ledger = LoadLedger.Snapshot(events: [], errorsAtFinish: [], blockObserverEvents: [], cancelRequested: [])
    var unfinished: [Int] = []
    var categoryNames: [String] = []
    var probe = ConcurrencyProbe()
    var diagnostics: [OperationDiagnostic] = []
    var queuesDrained = false
    /// Whether a fresh operation could take each category once the run was over.
    var categoriesStillFree = false
    var cancellersDone = false
    var survivingOperations: [Int] = []
    var survivingQueues = 0
}

private enum LoadRun {
    static func perform(_ plan: LoadPlan) -> LoadReport {
        _ = DiagnosticsLog.shared // capture diagnostics from here on
        let tag = uniqueName("load")
        let pools = plan.categoryCounts.indices.map { depth in
            (0..<plan.categoryCounts[depth]).map { "\(tag)-depth\(depth)-category\($0)" }
        }
        let ledger = LoadLedger(categoriesOf: plan.nodes.map { node in
            node.categories.sorted().map { pools[node.depth][$0] }
        })
        let names = plan.nodes.indices.map { "\(tag)-op\($0)" }
        var report = LoadReport(plan: plan)
        report.categoryNames = pools.flatMap { $0 }
        report.probe = ledger.probe

        let (operationProbes, queueProbes) = runAndRelease(plan, names: names, pools: pools, ledger: ledger, into: &report)
        _ = waitUntil { operationProbes.allSatisfy { $0.object == nil } && queueProbes.allSatisfy { $0.object == nil } }
        report.survivingOperations = operationProbes.indices.filter { operationProbes[$0].object != nil }
        report.survivingQueues = queueProbes.filter { $0.object != nil }.count
        report.ledger = ledger.snapshot
        report.diagnostics = names.flatMap { DiagnosticsLog.shared.diagnostics(about: $0) }
        return report
    }

    /// Runs the plan; every operation and queue it makes is dropped when it returns.
    private static func runAndRelease(
        _ plan: LoadPlan,
        names: [String],
        pools: [[String]],
        ledger: LoadLedger,
        into report: inout LoadReport
    ) -> ([WeakProbe<AsyncOperation>], [WeakProbe<AsyncOperationQueue>]) {
        let queues = plan.queueLimits.map { limit in
            let queue = AsyncOperationQueue()
            queue.maxConcurrentOperationCount = limit
            return queue
        }
        let operations = makeOperations(plan, names: names, pools: pools, ledger: ledger)

        let start = DispatchTime.now()
        var cancellers: [Signal] = []
        for thread in 0..<LoadPlan.cancellationThreads {
            let mine = plan.cancellations.filter { $0.thread == thread }
            cancellers.append(runOnOwnThread {
                for cancellation in mine {
                    sleep(until: start, plusMicroseconds: cancellation.afterMicroseconds)
                    let operation = operations[cancellation.index]
                    ledger.cancelling(cancellation.index)
                    operation.cancel(with: cancellation.withError ? StubError.cancelled(cancellation.index) : nil)
                }
            })
        }
        if let delay = plan.cancelAllAfterMicroseconds {
            cancellers.append(runOnOwnThread {
                sleep(until: start, plusMicroseconds: delay)
                queues.forEach { $0.cancelAllOperations() }
            })
        }

        for (position, batch) in plan.batches.enumerated() {
            let queue = queues[plan.batchQueues[position]]
            queue.addOperations(batch.map { operations[plan.topLevel[$0]] }, waitUntilFinished: false)
            let pause = plan.pausesBetweenBatches[position]
            if pause > 0 { usleep(pause) }
        }

        _ = waitUntilFinished(operations, timeout: 60)
        report.cancellersDone = cancellers.allSatisfy { $0.wait(timeout: generousTimeout) }
        report.unfinished = operations.indices.filter { !operations[$0].isFinished }
        report.queuesDrained = waitUntil { queues.allSatisfy { $0.allOperationCount == 0 } }
        report.categoriesStillFree = categoriesAreFree(report.categoryNames, on: queues[0])
        report.outcomes = operations.map { operation in
            let errors = operation.errors
            return LoadReport.Outcome(
                isFinished: operation.isFinished,
                isCancelled: operation.isCancelled,
                errors: errors.map(describe),
                loadErrors: errors.asStubErrors,
                timeouts: errors.compactMap { error in
                    if case let .timedOut(after)? = error as? AsyncOperationError { return after }
                    return nil
                }
            )
        }
        return (operations.map { WeakProbe($0) }, queues.map { WeakProbe($0) })
    }

    private static func makeOperations(
        _ plan: LoadPlan,
        names: [String],
        pools: [[String]],
        ledger: LoadLedger
    ) -> [AsyncOperation] {
        let timeoutObservers = LoadPlan.timeouts.map { TimeoutObserver(timeout: $0) }
        var operations: [AsyncOperation?] = Array(repeating: nil, count: plan.nodes.count)

        /// Makes operation `index` (a group with its whole subtree) and configures it. Siblings are
        /// made in order, so dependencies (on earlier siblings) exist; a child is fully configured
        /// before its group adopts it, as a group admits its children at once.
        func make(_ index: Int) -> AsyncOperation {
            let node = plan.nodes[index]
            let operation: AsyncOperation
            switch node.kind {
            case let .leaf(body):
                operation = makeBlockOperation(index, body, ledger: ledger)
            case let .group(children, addedAtCreation, maxConcurrent):
                let childOperations = children.map(make)
                let group = LoadGroup(index: index, ledger: ledger, operations: Array(childOperations[..<addedAtCreation]))
                let rest = Array(childOperations[addedAtCreation...])
                if rest.count > 1, index % 2 == 0 {
                    group.addChildren(rest)
                } else {
                    rest.forEach(group.addChild)
                }
                group.maxConcurrentOperationCount = maxConcurrent
                operation = group
            }
            operation.name = names[index]
            for dependency in node.dependencies {
                operation.addDependency(operations[dependency]!)
            }
            for spec in node.conditions {
                switch spec {
                case let .checked(passes):
                    operation.addCondition(BlockCondition {
                        if !passes { throw StubError.conditionFailed(index) }
                        return true
                    })
                case let .answeredLater(passes, delay):
                    operation.addCondition(AnsweredLater(passes: passes, delayMicroseconds: delay, failure: .conditionFailed(index)))
                case let .exclusive(category):
                    operation.addCondition(ExclusiveCategory(pools[node.depth][category]))
                }
            }
            operation.addObserver(RecordingObserver(index: index, ledger: ledger))
            if let timeout = node.timeout {
                operation.addObserver(timeoutObservers[timeout]) // one observer shared by many operations
            }
            if node.hasBlockObserver {
                operation.addObserver(BlockObserver(
                    didStart: { _ in ledger.blockObserverHeard(.didStart, for: index) },
                    didCancel: { _ in ledger.blockObserverHeard(.didCancel, for: index) },
                    didFinish: { _, _ in ledger.blockObserverHeard(.didFinish, for: index) }
                ))
            }
            operations[index] = operation
            return operation
        }

        for index in plan.topLevel {
            _ = make(index)
        }
        return operations.map { $0! }
    }

    private static func makeBlockOperation(_ index: Int, _ body: LoadPlan.Body, ledger: LoadLedger) -> AsyncOperation {
        switch body {
        case let .returns(work):
            return LoadBlockOperation(index: index, ledger: ledger) {
                ledger.record(.bodyBegan, for: index)
                if work > 0 { usleep(work) }
            }
        case let .throwsError(work):
            return LoadBlockOperation(index: index, ledger: ledger) {
                ledger.record(.bodyBegan, for: index)
                if work > 0 { usleep(work) }
                throw StubError.bodyFailed(index)
            }
        case let .continuation(delay, fails):
            return LoadBlockOperation(index: index, ledger: ledger, continuation: { finish in
                ledger.record(.bodyBegan, for: index)
                DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(Int(delay))) {
                    finish(fails ? StubError.bodyFailed(index) : nil)
                }
            })
        case .neverContinues:
            return LoadBlockOperation(index: index, ledger: ledger, continuation: { _ in
                ledger.record(.bodyBegan, for: index)
            })
        }
    }

    /// Whether one new operation per category runs: no category was left held by the run.
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

// MARK: - Invariants

private extension LoadReport {
    func check(seed: UInt64) {
        let run = "seed \(seed) (replay: \(LoadPlan.replayVariable)=\(seed))"
        #expect(unfinished.isEmpty, "\(run): \(unfinished.count) operations never finished: \(unfinished.prefix(20).map { describeNode($0) })")
        #expect(cancellersDone, "\(run): the cancelling threads did not finish")
        #expect(queuesDrained, "\(run): a queue still counts operations after all finished")
        #expect(categoriesStillFree, "\(run): a category stayed held after the run")
        for category in categoryNames {
            #expect(probe.maximum(category) <= 1, "\(run): two operations of \(category) executed at once")
        }
        #expect(diagnostics.isEmpty, "\(run): unexpected diagnostics: \(diagnostics.prefix(5))")
        #expect(survivingOperations.isEmpty, "\(run): \(survivingOperations.count) operations still alive after the run and after dropping every reference: \(survivingOperations.prefix(10).map { describeNode($0) })")
        #expect(survivingQueues == 0, "\(run): \(survivingQueues) queues still alive after the run")

        var violations: [String] = []
        for index in plan.nodes.indices {
            violations += check(index)
        }
        #expect(violations.isEmpty, "\(run): \(violations.count) violations, first: \(violations.prefix(12))")
    }

    private func describeNode(_ index: Int) -> String {
        let node = plan.nodes[index]
        let kind = node.isGroup ? "group of \(node.children.count)" : "\(node.body!)"
        let cancelled = ledger.cancelRequested.indices.contains(index) && ledger.cancelRequested[index] ? ", cancelled by a canceller" : ""
        let timeout = node.timeout.map { ", timeout \(LoadPlan.timeouts[$0]) s" } ?? ""
        return "op\(index) (\(kind), depth \(node.depth), parent \(node.parent.map { "op\($0)" } ?? "none")\(timeout)\(cancelled), events \(ledger.events[index].map(\.event)))"
    }

    private func sequence(of event: LoadEvent, _ index: Int) -> Int? {
        ledger.events[index].first { $0.event == event }?.sequence
    }

    private func check(_ index: Int) -> [String] {
        var problems: [String] = []
        func problem(_ text: String) { problems.append("\(describeNode(index)): \(text)") }
        let node = plan.nodes[index]
        let events = ledger.events[index].map(\.event)
        let outcome = outcomes[index]
        let observed = events.filter { [.didStart, .didCancel, .didFinish].contains($0) }
        let finishes = events.filter { $0 == .didFinish }.count
        let starts = events.filter { $0 == .didStart }.count
        let cancels = events.filter { $0 == .didCancel }.count
        let executions = events.filter { $0 == .execute }.count
        let bodies = events.filter { $0 == .bodyBegan }.count
        let executed = executions > 0

        // Each event once, operationDidFinish last, with the final errors.
        if finishes != 1 { problem("operationDidFinish came \(finishes) times") }
        if observed.last != .didFinish { problem("operationDidFinish was not the last observer event") }
        if starts > 1 { problem("operationDidStart came \(starts) times") }
        if cancels > 1 { problem("operationDidCancel came \(cancels) times") }
        if executions > 1 { problem("execute() was called \(executions) times") }
        if bodies > 1 { problem("the block ran \(bodies) times") }
        if starts != executions { problem("operationDidStart came \(starts) times but execute() \(executions) times") }
        if let errors = ledger.errorsAtFinish[index], errors != outcome.errors {
            problem("operationDidFinish carried \(errors), the operation ended with \(outcome.errors)")
        }
        if outcome.isCancelled != (cancels == 1) { problem("isCancelled is \(outcome.isCancelled) after \(cancels) operationDidCancel") }
        if node.hasBlockObserver {
            // Another observer hears the same events once each, and operationDidFinish last. (A
            // cancellation racing the start announcement may reach an observer before its
            // operationDidStart does: the contract orders only operationDidFinish.)
            let heard = ledger.blockObserverEvents[index]
            let counts = [LoadEvent.didStart, .didCancel, .didFinish].map { event in heard.filter { $0 == event }.count }
            if counts != [starts, cancels, finishes] || heard.last != .didFinish {
                problem("the BlockObserver heard \(heard), the recording observer \(observed)")
            }
        }

        // Order: started, then executed, then finished; never before its dependencies or its group.
        if let execute = sequence(of: .execute, index) {
            if let start = sequence(of: .didStart, index), start > execute { problem("execute() came before operationDidStart") }
            if let finish = sequence(of: .didFinish, index), finish < execute { problem("execute() came after operationDidFinish") }
            for dependency in node.dependencies where sequence(of: .didFinish, dependency).map({ $0 < execute }) != true {
                problem("executed before its dependency op\(dependency) finished")
            }
            if let group = node.parent {
                if let groupExecute = sequence(of: .execute, group) {
                    if groupExecute > execute { problem("executed before its group op\(group) executed") }
                } else {
                    problem("executed although its group op\(group) never executed")
                }
            }
        }
        if let body = sequence(of: .bodyBegan, index), sequence(of: .execute, index).map({ $0 > body }) ?? true {
            problem("the block ran without execute() before it")
        }
        // A group finishes after its children, whether it executed or not.
        if let finish = sequence(of: .didFinish, index) {
            for child in node.children {
                if let childFinish = sequence(of: .didFinish, child), childFinish < finish { continue }
                problem("finished before its child op\(child) finished")
            }
        }

        // Conditions: a failed one means no execution, and one error per failed condition.
        let failingConditions = node.failingConditionCount
        if failingConditions > 0 {
            if starts > 0 || executed || bodies > 0 { problem("executed although a condition failed") }
            let conditionErrors = outcome.loadErrors.filter { $0 == .conditionFailed(index) }.count
            if !outcome.isCancelled, conditionErrors != failingConditions {
                problem("\(conditionErrors) condition errors for \(failingConditions) failed conditions: \(outcome.errors)")
            }
        }

        // Timeouts: only an operation that started and carries the observer times out, and one
        // that never continues, left alone by every other cancellation, ends with the timeout.
        let ownTimeout = node.timeout.map { LoadPlan.timeouts[$0] }
        if node.isGroup {
            let fromChildren = node.children.map { outcomes[$0].timeouts.count }.reduce(0, +)
            let own = (ownTimeout != nil && starts > 0) ? 1 : 0
            if outcome.timeouts.count > fromChildren + own {
                problem("\(outcome.timeouts.count) timeout errors, but its children had \(fromChildren) and it \(own) of its own")
            }
        } else {
            if !outcome.timeouts.isEmpty, outcome.timeouts.count != 1 || outcome.timeouts.first != ownTimeout || starts == 0 || !outcome.isCancelled {
                problem("timed out (\(outcome.timeouts)) with timeout \(ownTimeout.map { "\($0)" } ?? "none"), started \(starts) times, cancelled \(outcome.isCancelled)")
            }
            if node.body == .neverContinues, executed, let ownTimeout, !wasCancelledFromElsewhere(index),
               !outcome.timeouts.contains(ownTimeout) {
                problem("never continued and was left alone, but did not finish with .timedOut(after: \(ownTimeout)): \(outcome.errors)")
            }
            if node.body == .neverContinues, executed, !outcome.isCancelled {
                problem("never continued, yet finished without being cancelled")
            }
        }

        // Groups: their errors hold every child's errors, and nothing else unless cancelled.
        if node.isGroup, executed, failingConditions == 0 {
            var own = outcome.errors
            for child in node.children {
                for error in outcomes[child].errors {
                    if let position = own.firstIndex(of: error) {
                        own.remove(at: position)
                    } else {
                        problem("misses the error \(error) of its child op\(child)")
                    }
                }
            }
            if !outcome.isCancelled, !own.isEmpty { problem("has errors beyond its children's: \(own)") }
        }

        // Left alone, an operation runs exactly once and ends with its own outcome.
        if failingConditions == 0, !outcome.isCancelled {
            if starts != 1 || !executed { problem("not cancelled, no failed condition, but did not execute") }
            if let body = node.body {
                if bodies != 1 { problem("not cancelled, no failed condition, but its block did not run") }
                let expected = body.fails ? [describe(StubError.bodyFailed(index))] : []
                if outcome.errors != expected { problem("finished with \(outcome.errors), expected \(expected)") }
            }
        }
        if let parent = node.parent, sequence(of: .execute, parent) == nil, !outcome.isCancelled {
            problem("its group op\(parent) never executed, yet it was not cancelled")
        }
        return problems
    }

    /// Whether something other than its own timeout may have cancelled operation `index`: a
    /// canceller, a wholesale cancellation, or the cancellation of an enclosing group.
    private func wasCancelledFromElsewhere(_ index: Int) -> Bool {
        plan.cancelAllAfterMicroseconds != nil
            || ledger.cancelRequested[index]
            || plan.ancestors(of: index).contains { sequence(of: .didCancel, $0) != nil }
    }
}
