import Foundation
import Operations
import Testing
import TestSupport

// Randomized runs that mix dependencies, passing and failing conditions (answered at once or
// later), overlapping mutually exclusive categories, observers, throwing and continuation
// blocks, and cancellation from other threads at random moments. Each run is drawn from a seed
// (printed in every failure; replay one with OPERATIONS_STRESS_SEED=<seed>) and checked against
// invariants, never against time.

@Suite("Randomized stress")
struct StressTests {
    /// Fixed seeds, plus one fresh seed per test run (or only the one given in the environment).
    static let seeds: [UInt64] = {
        if let text = ProcessInfo.processInfo.environment["OPERATIONS_STRESS_SEED"], let seed = UInt64(text) {
            return [seed]
        }
        return [0x5EED_0001, 0xC0FF_EE42, 0x0DDB_A115, UInt64.random(in: .min ... .max)]
    }()

    @Test(arguments: seeds)
    func randomWorkload_keepsEveryInvariant(seed: UInt64) {
        // Given a random workload; when it runs to the end
        let plan = StressPlan(seed: seed, operationCount: 700, cancelsEverythingOnce: false)
        let report = StressRun.perform(plan)

        // Then
        report.check(seed: seed)
    }

    @Test(arguments: seeds.prefix(2))
    func randomWorkload_cancelledWholesaleAtARandomMoment_keepsEveryInvariant(seed: UInt64) {
        // Given a random workload; when both queues cancel all operations at a random moment
        let plan = StressPlan(seed: seed ^ 0xCA9C_E11A, operationCount: 500, cancelsEverythingOnce: true)
        let report = StressRun.perform(plan)

        // Then
        report.check(seed: seed)
    }
}

// MARK: - The plan, drawn from a seed

private struct StressPlan {
    enum Body {
        case returns(workMicroseconds: UInt32)
        case throwsError(workMicroseconds: UInt32)
        /// Calls the continuation later, from another thread, with an error or not.
        case continuation(delayMicroseconds: UInt32, fails: Bool)
    }

    struct ConditionSpec {
        var passes: Bool
        /// `nil`: answers at once, on the evaluating thread.
        var answerDelayMicroseconds: UInt32?
        var categories: [Int]
    }

    struct Cancellation {
        var index: Int
        var afterMicroseconds: UInt32
        var withError: Bool
        var thread: Int
    }

    struct Step {
        var dependencies: [Int]
        var conditions: [ConditionSpec]
        var body: Body
        var queue: Int

        var failingConditionCount: Int { conditions.filter { !$0.passes }.count }
        var categories: Set<Int> {
            conditions.allSatisfy(\.passes) ? Set(conditions.flatMap(\.categories)) : []
        }
    }

    static let cancellationThreads = 2

    var steps: [Step] = []
    var categoryCount: Int
    var queueLimits: [Int]
    /// Ranges of `steps`, added in order, each with one `addOperations` call.
    var batches: [Range<Int>] = []
    var pausesBetweenBatches: [UInt32] = []
    var cancellations: [Cancellation] = []
    var cancelAllAfterMicroseconds: UInt32?

    init(seed: UInt64, operationCount: Int, cancelsEverythingOnce: Bool) {
        var random = SplitMix64(seed: seed)
        categoryCount = Int.random(in: 2...5, using: &random)
        let limits = [1, 2, 3, 4, OperationQueue.defaultMaxConcurrentOperationCount]
        queueLimits = (0..<2).map { _ in limits.randomElement(using: &random)! }

        for index in 0..<operationCount {
            var dependencies: [Int] = []
            if index > 0 {
                let roll = Int.random(in: 0..<10, using: &random)
                let count = roll < 6 ? 0 : (roll < 9 ? 1 : 2)
                for _ in 0..<count {
                    let dependency = Int.random(in: max(0, index - 40)..<index, using: &random)
                    if !dependencies.contains(dependency) { dependencies.append(dependency) }
                }
            }
            let conditionRoll = Int.random(in: 0..<20, using: &random)
            let conditionCount = conditionRoll < 9 ? 0 : (conditionRoll < 16 ? 1 : 2)
            let conditions = (0..<conditionCount).map { _ in
                let categoryCount = Bool.random(using: &random) ? Int.random(in: 1...2, using: &random) : 0
                return ConditionSpec(
                    passes: Int.random(in: 0..<100, using: &random) < 85,
                    answerDelayMicroseconds: Bool.random(using: &random) ? nil : UInt32.random(in: 0...2_000, using: &random),
                    categories: (0..<categoryCount).map { _ in Int.random(in: 0..<self.categoryCount, using: &random) }
                )
            }
            let bodyRoll = Int.random(in: 0..<20, using: &random)
            let work = UInt32.random(in: 0...200, using: &random)
            let body: Body
            switch bodyRoll {
            case 0..<9: body = .returns(workMicroseconds: work)
            case 9..<12: body = .throwsError(workMicroseconds: work)
            default: body = .continuation(delayMicroseconds: work * 5, fails: Int.random(in: 0..<100, using: &random) < 15)
            }
            steps.append(Step(dependencies: dependencies, conditions: conditions, body: body, queue: Int.random(in: 0..<2, using: &random)))

            if Int.random(in: 0..<100, using: &random) < 12 {
                cancellations.append(Cancellation(
                    index: index,
                    afterMicroseconds: UInt32.random(in: 0...150_000, using: &random),
                    withError: Bool.random(using: &random),
                    thread: Int.random(in: 0..<Self.cancellationThreads, using: &random)
                ))
            }
        }

        var start = 0
        while start < operationCount {
            let end = min(operationCount, start + Int.random(in: 1...40, using: &random))
            batches.append(start..<end)
            pausesBetweenBatches.append(Bool.random(using: &random) ? 0 : UInt32.random(in: 0...2_000, using: &random))
            start = end
        }
        cancellations.sort { $0.afterMicroseconds < $1.afterMicroseconds }
        if cancelsEverythingOnce {
            cancelAllAfterMicroseconds = UInt32.random(in: 0...60_000, using: &random)
        }
    }
}

// MARK: - Running a plan

/// The errors a run hands out, each naming the operation it came from.
private extension StubError {
    static func conditionFailed(_ index: Int) -> StubError { StubError("conditionFailed(op\(index))") }
    static func bodyFailed(_ index: Int) -> StubError { StubError("bodyFailed(op\(index))") }
    static func cancelled(_ index: Int) -> StubError { StubError("cancelled(op\(index))") }
}

private enum StressEvent: Equatable {
    case didStart
    case didCancel
    case didFinish(errorCount: Int)
    /// The block began; whether every dependency had finished by then.
    case bodyBegan(dependenciesFinished: Bool)
}

/// Everything the run records, under one lock. Holds no operation.
private final class Ledger: @unchecked Sendable {
    // @unchecked Sendable: `events`, `finished` and `insideProbe` are only touched under `lock`.
    private let lock = NSLock()
    private var events: [[StressEvent]]
    private var finished: [Bool]
    private var insideProbe: [Bool]
    let probe = ConcurrencyProbe()
    let categoriesOf: [[String]]
    let dependenciesOf: [[Int]]

    init(categoriesOf: [[String]], dependenciesOf: [[Int]]) {
        self.categoriesOf = categoriesOf
        self.dependenciesOf = dependenciesOf
        events = Array(repeating: [], count: categoriesOf.count)
        finished = Array(repeating: false, count: categoriesOf.count)
        insideProbe = Array(repeating: false, count: categoriesOf.count)
    }

    func record(_ event: StressEvent, for index: Int) {
        lock.lock()
        defer { lock.unlock() }
        events[index].append(event)
    }

    /// The block of operation `index` began: it executes, and holds its categories, until it finishes.
    func bodyBegan(_ index: Int) {
        lock.lock()
        let dependenciesFinished = dependenciesOf[index].allSatisfy { finished[$0] }
        events[index].append(.bodyBegan(dependenciesFinished: dependenciesFinished))
        insideProbe[index] = true
        lock.unlock()
        categoriesOf[index].forEach(probe.enter)
    }

    /// Operation `index` told its observers it finished (its categories are still held).
    func didFinish(_ index: Int, errorCount: Int) {
        lock.lock()
        events[index].append(.didFinish(errorCount: errorCount))
        finished[index] = true
        let wasInside = insideProbe[index]
        insideProbe[index] = false
        lock.unlock()
        if wasInside { categoriesOf[index].forEach(probe.leave) }
    }

    var allEvents: [[StressEvent]] {
        lock.lock()
        defer { lock.unlock() }
        return events
    }
}

private struct StressObserver: OperationObserver {
    let index: Int
    let ledger: Ledger

    func operationDidStart(_ operation: AsyncOperation) {
        ledger.record(.didStart, for: index)
    }

    func operationDidCancel(_ operation: AsyncOperation) {
        ledger.record(.didCancel, for: index)
    }

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        ledger.didFinish(index, errorCount: errors.count)
    }
}

private struct StressCondition: OperationCondition {
    let spec: StressPlan.ConditionSpec
    let categories: Set<String>
    let failure: StubError

    var mutuallyExclusiveCategories: Set<String> { categories }

    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        let result: ConditionResult = spec.passes ? .satisfied : .failed(failure)
        if let delay = spec.answerDelayMicroseconds {
            DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(Int(delay))) { completion(result) }
        } else {
            completion(result)
        }
    }
}

/// What a finished run leaves behind: no operation, only what the checks need.
private struct StressReport {
    struct Outcome {
        var isFinished: Bool
        var isCancelled: Bool
        var errors: [StubError?]
    }

    var plan: StressPlan
    var outcomes: [Outcome]
    var events: [[StressEvent]]
    var unfinished: [Int]
    var categoryNames: [String]
    var probe: ConcurrencyProbe
    var diagnostics: [OperationDiagnostic]
    var queuesDrained: Bool
    /// Whether a fresh operation could take each category once the run was over.
    var categoriesStillFree = false
    var survivors: Int
}

private enum StressRun {
    static func perform(_ plan: StressPlan) -> StressReport {
        _ = DiagnosticsLog.shared // capture diagnostics from here on
        let tag = uniqueName("stress")
        let categoryNames = (0..<plan.categoryCount).map { "\(tag)-category\($0)" }
        let ledger = Ledger(
            categoriesOf: plan.steps.map { $0.categories.sorted().map { categoryNames[$0] } },
            dependenciesOf: plan.steps.map(\.dependencies)
        )
        let names = plan.steps.indices.map { "\(tag)-op\($0)" }
        var report = StressReport(
            plan: plan, outcomes: [], events: [], unfinished: [], categoryNames: categoryNames,
            probe: ledger.probe, diagnostics: [], queuesDrained: false, survivors: 0
        )
        let probes = runAndRelease(plan, names: names, categoryNames: categoryNames, ledger: ledger, into: &report)
        _ = waitUntil { probes.allSatisfy { $0.object == nil } }
        report.survivors = probes.filter { $0.object != nil }.count
        report.events = ledger.allEvents
        report.diagnostics = names.flatMap { DiagnosticsLog.shared.diagnostics(about: $0) }
        return report
    }

    /// Runs the plan; every operation and queue it makes is dropped when it returns.
    private static func runAndRelease(
        _ plan: StressPlan,
        names: [String],
        categoryNames: [String],
        ledger: Ledger,
        into report: inout StressReport
    ) -> [WeakProbe<AsyncOperation>] {
        let queues = plan.queueLimits.map { limit in
            let queue = AsyncOperationQueue()
            queue.maxConcurrentOperationCount = limit
            return queue
        }
        let operations = makeOperations(plan, names: names, categoryNames: categoryNames, ledger: ledger)

        let cancellers = DispatchGroup()
        for thread in 0..<StressPlan.cancellationThreads {
            let mine = plan.cancellations.filter { $0.thread == thread }
            DispatchQueue.global().async(group: cancellers) {
                let start = DispatchTime.now()
                for cancellation in mine {
                    sleep(until: start, plus: cancellation.afterMicroseconds)
                    let operation = operations[cancellation.index]
                    if cancellation.withError {
                        operation.cancel(with: StubError.cancelled(cancellation.index))
                    } else {
                        operation.cancel()
                    }
                }
            }
        }
        if let delay = plan.cancelAllAfterMicroseconds {
            DispatchQueue.global().async(group: cancellers) {
                sleep(until: .now(), plus: delay)
                queues.forEach { $0.cancelAllOperations() }
            }
        }

        for (batch, pause) in zip(plan.batches, plan.pausesBetweenBatches) {
            queues[plan.steps[batch.lowerBound].queue].addOperations(Array(operations[batch]), waitUntilFinished: false)
            if pause > 0 { usleep(pause) }
        }

        _ = waitUntilFinished(operations, timeout: 120)
        _ = cancellers.wait(timeout: .now() + generousTimeout)
        report.unfinished = operations.indices.filter { !operations[$0].isFinished }
        report.queuesDrained = waitUntil { queues.allSatisfy { $0.allOperationCount == 0 } }
        report.categoriesStillFree = categoriesAreFree(categoryNames, on: queues[0])
        report.outcomes = operations.map { operation in
            StressReport.Outcome(
                isFinished: operation.isFinished,
                isCancelled: operation.isCancelled,
                errors: operation.errors.asStubErrors
            )
        }
        return operations.map { WeakProbe<AsyncOperation>($0) }
    }

    private static func makeOperations(
        _ plan: StressPlan,
        names: [String],
        categoryNames: [String],
        ledger: Ledger
    ) -> [AsyncBlockOperation] {
        var operations: [AsyncBlockOperation] = []
        operations.reserveCapacity(plan.steps.count)
        for (index, step) in plan.steps.enumerated() {
            let operation: AsyncBlockOperation
            switch step.body {
            case let .returns(work):
                operation = AsyncBlockOperation {
                    ledger.bodyBegan(index)
                    if work > 0 { usleep(work) }
                }
            case let .throwsError(work):
                operation = AsyncBlockOperation {
                    ledger.bodyBegan(index)
                    if work > 0 { usleep(work) }
                    throw StubError.bodyFailed(index)
                }
            case let .continuation(delay, fails):
                operation = AsyncBlockOperation { finish in
                    ledger.bodyBegan(index)
                    DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(Int(delay))) {
                        finish(fails ? StubError.bodyFailed(index) : nil)
                    }
                }
            }
            operation.name = names[index]
            for dependency in step.dependencies {
                operation.addDependency(operations[dependency])
            }
            for spec in step.conditions {
                operation.addCondition(StressCondition(
                    spec: spec,
                    categories: Set(spec.categories.map { categoryNames[$0] }),
                    failure: .conditionFailed(index)
                ))
            }
            operation.addObserver(StressObserver(index: index, ledger: ledger))
            operations.append(operation)
        }
        return operations
    }

    /// Whether one new operation per category runs: no category was left held by the run.
    private static func categoriesAreFree(_ categoryNames: [String], on queue: AsyncOperationQueue) -> Bool {
        let probes = categoryNames.map { name in
            let operation = AsyncBlockOperation {}
            operation.addCondition(StressCondition(
                spec: .init(passes: true, answerDelayMicroseconds: nil, categories: []),
                categories: [name],
                failure: .conditionFailed(-1)
            ))
            return operation
        }
        queue.addOperations(probes, waitUntilFinished: false)
        return waitUntilFinished(probes)
    }

    private static func sleep(until start: DispatchTime, plus microseconds: UInt32) {
        let deadline = start.uptimeNanoseconds + UInt64(microseconds) * 1_000
        let now = DispatchTime.now().uptimeNanoseconds
        if deadline > now { usleep(UInt32(min((deadline - now) / 1_000, UInt64(UInt32.max)))) }
    }
}

// MARK: - Invariants

extension StressReport {
    func check(seed: UInt64) {
        #expect(unfinished.isEmpty, "seed \(seed): operations never finished: \(unfinished.prefix(20))")
        #expect(queuesDrained, "seed \(seed): a queue still counts operations after all finished")
        #expect(categoriesStillFree, "seed \(seed): a category stayed held after the run")
        for category in categoryNames {
            #expect(probe.maximum(category) <= 1, "seed \(seed): two operations of \(category) executed at once")
        }
        #expect(diagnostics.isEmpty, "seed \(seed): unexpected diagnostics: \(diagnostics.prefix(5))")
        #expect(survivors == 0, "seed \(seed): \(survivors) operations still alive after the run and after dropping every reference")

        var violations: [String] = []
        for (index, step) in plan.steps.enumerated() {
            violations += check(index, step)
        }
        #expect(violations.isEmpty, "seed \(seed): \(violations.count) violations, first: \(violations.prefix(15))")
    }

    private func check(_ index: Int, _ step: StressPlan.Step) -> [String] {
        var problems: [String] = []
        func problem(_ text: String) { problems.append("op\(index): \(text) \(events[index])") }
        let events = self.events[index]
        let outcome = outcomes[index]
        let finishes = events.filter { if case .didFinish = $0 { return true }; return false }
        let starts = events.filter { $0 == .didStart }.count
        let cancels = events.filter { $0 == .didCancel }.count
        let bodies = events.filter { if case .bodyBegan = $0 { return true }; return false }

        if finishes.count != 1 { problem("operationDidFinish came \(finishes.count) times") }
        if let last = events.last, case .didFinish = last {} else { problem("operationDidFinish was not the last event") }
        if case let .didFinish(count)? = finishes.first, count != outcome.errors.count {
            problem("operationDidFinish had \(count) errors, the operation has \(outcome.errors.count)")
        }
        if starts > 1 { problem("operationDidStart came \(starts) times") }
        if cancels > 1 { problem("operationDidCancel came \(cancels) times") }
        if bodies.count > 1 { problem("the block ran \(bodies.count) times") }
        if outcome.isCancelled != (cancels == 1) { problem("isCancelled is \(outcome.isCancelled) after \(cancels) operationDidCancel") }
        if let body = events.firstIndex(where: { if case .bodyBegan = $0 { return true }; return false }) {
            if !events[..<body].contains(.didStart) { problem("the block ran before operationDidStart") }
            if bodies.first != .bodyBegan(dependenciesFinished: true) { problem("the block ran before its dependencies finished") }
        }

        let failingConditions = step.failingConditionCount
        if failingConditions > 0 {
            if starts > 0 || !bodies.isEmpty { problem("executed although a condition failed") }
            let conditionErrors = outcome.errors.filter { $0 == .conditionFailed(index) }.count
            if !outcome.isCancelled && conditionErrors != failingConditions {
                problem("\(conditionErrors) condition errors for \(failingConditions) failed conditions: \(outcome.errors)")
            }
        } else if !outcome.isCancelled {
            if starts != 1 || bodies.count != 1 { problem("not cancelled, no failed condition, but did not execute") }
            let expectsBodyError: Bool
            switch step.body {
            case .returns: expectsBodyError = false
            case .throwsError: expectsBodyError = true
            case let .continuation(_, fails): expectsBodyError = fails
            }
            if outcome.errors != (expectsBodyError ? [.bodyFailed(index)] : []) {
                problem("finished with \(outcome.errors), expected \(expectsBodyError ? "the block's error" : "no error")")
            }
        }
        return problems
    }
}
