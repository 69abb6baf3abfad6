import Conditions
import Foundation
import Observers
import Operations
import TestSupport

/// The errors a round hands out, each naming the operation it came from.
extension StubError {
    static func soakBodyFailed(_ id: Int) -> StubError { StubError("bodyFailed(i\(id))") }
    static func soakConditionFailed(_ id: Int) -> StubError { StubError("conditionFailed(i\(id))") }
    static func soakCancelled(_ id: Int) -> StubError { StubError("cancelled(i\(id))") }

    var isSoakConditionFailure: Bool { label.hasPrefix("conditionFailed(") }
}

/// Categories 6 and 7 of every round are named by type, through `MutuallyExclusive`.
enum SoakCategorySix {}
enum SoakCategorySeven {}

/// Makes the operations of a round from its plan, registering each in the ledger. Called from
/// the adding thread, from composites' factories, retries' attempt makers, producing operations
/// and chaos threads.
struct SoakBuilder: Sendable {
    let plan: SoakPlan
    let ledger: SoakLedger
    /// A tag unique to the round: names of operations and categories start with it.
    let tag: String
    let categoryNames: [String]
    let timeoutObservers: [TimeoutObserver]

    init(plan: SoakPlan, ledger: SoakLedger, tag: String) {
        self.plan = plan
        self.ledger = ledger
        self.tag = tag
        categoryNames = (0..<SoakPlan.categoryCount).map { category in
            switch category {
            case 6: return String(reflecting: SoakCategorySix.self)
            case 7: return String(reflecting: SoakCategorySeven.self)
            default: return "\(tag)-category\(category)"
            }
        }
        timeoutObservers = SoakPlan.timeouts.map { TimeoutObserver(timeout: $0) }
    }

    func name(_ id: Int) -> String { "\(tag)-i\(id)" }

    /// Makes an operation of `node` (a container with its whole subtree), configured and with
    /// its dependencies on `siblings` (earlier operations of the same parent, by node).
    func make(_ node: Int, parent: Int?, origin: SoakOrigin, siblings: [Int: (Operation, Int)] = [:]) -> (operation: Operation, id: Int) {
        let spec = plan.nodes[node]
        let (id, number) = ledger.register(
            node: node, parent: parent, kind: kind(of: spec), origin: origin,
            categories: spec.categories.map { categoryNames[$0] }
        )
        let operation: Operation
        switch spec.kind {
        case let .leaf(body):
            operation = makeLeaf(body, id: id, number: number, parent: parent)
        case let .group(children, addedAtCreation, maxConcurrent):
            operation = makeGroup(children, addedAtCreation: addedAtCreation, maxConcurrent: maxConcurrent, id: id)
        case let .cascade(composite):
            operation = makeComposite(composite, serial: true, id: id)
        case let .transaction(composite):
            operation = makeComposite(composite, serial: false, id: id)
        case let .retry(attempt, maxAttempts, backoff):
            operation = makeRetry(attempt: attempt, maxAttempts: maxAttempts, backoffMicroseconds: backoff, id: id)
        }
        operation.name = name(id)
        var dependencies: [Int] = []
        for dependency in spec.dependencies {
            guard let (other, otherID) = siblings[dependency] else { continue }
            operation.addDependency(other)
            dependencies.append(otherID)
        }
        if let asynchronous = operation as? AsyncOperation {
            configure(asynchronous, spec, id: id)
        }
        ledger.attach(operation, to: id, dependencies: dependencies)
        return (operation, id)
    }

    private func kind(of spec: SoakPlan.Node) -> SoakKind {
        switch spec.kind {
        case let .leaf(body): return .leaf(body)
        case let .group(_, _, maxConcurrent): return .group(maxConcurrent: maxConcurrent)
        case .cascade, .transaction: return .composite
        case let .retry(_, maxAttempts, _): return .retry(maxAttempts: maxAttempts)
        }
    }

    // MARK: - Leaves

    private func makeLeaf(_ body: SoakPlan.Body, id: Int, number: Int, parent: Int?) -> Operation {
        let ledger = self.ledger
        let fails = number <= body.failures
        switch body {
        case let .returns(work, _):
            return SoakBlockOperation(id: id, ledger: ledger) {
                ledger.record(.bodyBegan, for: id)
                if work > 0 { usleep(work) }
                ledger.record(.bodyEnded, for: id)
                if fails { throw StubError.soakBodyFailed(id) }
            }
        case let .continuation(delay, _):
            return SoakBlockOperation(id: id, ledger: ledger, continuation: { finish in
                ledger.record(.bodyBegan, for: id)
                let error: StubError? = fails ? .soakBodyFailed(id) : nil
                if let delay {
                    DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(Int(delay))) { finish(error) }
                } else {
                    finish(error)
                }
            })
        case .neverContinues:
            return SoakBlockOperation(id: id, ledger: ledger, continuation: { _ in
                ledger.record(.bodyBegan, for: id)
            })
        case let .result(work, _):
            return SoakResultOperation(id: id, ledger: ledger) {
                ledger.record(.bodyBegan, for: id)
                if work > 0 { usleep(work) }
                ledger.record(.bodyEnded, for: id)
                if fails { throw StubError.soakBodyFailed(id) }
                return id
            }
        case let .subclass(delay, _, produces):
            let produce = produces.map { template in
                { @Sendable () -> Operation in make(template, parent: parent, origin: .produced).operation }
            }
            return SoakSubclassOperation(id: id, ledger: ledger, delayMicroseconds: delay, error: fails ? StubError.soakBodyFailed(id) : nil, produce: produce)
        case let .plain(work):
            return BlockOperation {
                ledger.record(.bodyBegan, for: id)
                if work > 0 { usleep(work) }
                ledger.record(.bodyEnded, for: id)
            }
        }
    }

    // MARK: - Containers

    private func makeGroup(_ children: [Int], addedAtCreation: Int, maxConcurrent: Int, id: Int) -> Operation {
        var made: [Int: (Operation, Int)] = [:]
        var operations: [Operation] = []
        for (position, child) in children.enumerated() {
            let (operation, childID) = make(child, parent: id, origin: .child(position: position), siblings: made)
            made[child] = (operation, childID)
            operations.append(operation)
        }
        let group = SoakGroup(id: id, ledger: ledger, operations: Array(operations[..<addedAtCreation]))
        let rest = Array(operations[addedAtCreation...])
        if rest.count > 1, id % 2 == 0 {
            group.addChildren(rest)
        } else {
            rest.forEach(group.addChild)
        }
        group.maxConcurrentOperationCount = maxConcurrent
        return group
    }

    private func makeComposite(_ spec: SoakPlan.CompositeSpec, serial: Bool, id: Int) -> Operation {
        let ledger = self.ledger
        let declare: (inout CompositeChildren) -> Void = { children in
            for template in spec.children {
                children.add { make(template, parent: id, origin: .factory).operation }
            }
        }
        let completion: @Sendable () -> Void = { ledger.record(.completion, for: id) }
        var cancellation: (@Sendable (CompositeFailure) -> CompositeResolution)?
        if let answers = spec.answers {
            let maxAttempts = spec.maxAttempts
            cancellation = { @Sendable (failure: CompositeFailure) -> CompositeResolution in
                let call = ledger.handlerBegan(id)
                var answer = answers[call % answers.count]
                if failure.attempt >= maxAttempts, answer != .cancel {
                    answer = .carryOn
                }
                ledger.handlerEnded(id, answeredCancel: answer == .cancel)
                return Self.resolution(answer)
            }
        }
        let composite: CompositeOperation = serial
            ? CascadeOperation(declare, completion: completion, cancellation: cancellation)
            : TransactionOperation(declare, completion: completion, cancellation: cancellation)
        if !serial { composite.maxConcurrentOperationCount = spec.maxConcurrent }
        return composite
    }

    private static func resolution(_ answer: SoakPlan.Resolution) -> CompositeResolution {
        switch answer {
        case .cancel: return .cancel
        case .rerun: return .rerun
        case let .rerunAfter(microseconds): return .rerun(after: TimeInterval(microseconds) / 1_000_000)
        case .carryOn: return .carryOn
        }
    }

    private func makeRetry(attempt template: Int, maxAttempts: Int, backoffMicroseconds: UInt32, id: Int) -> Operation {
        let backoff: BackoffPolicy = backoffMicroseconds == 0 ? .none : .fixed(TimeInterval(backoffMicroseconds) / 1_000_000)
        return RetryOperation<AsyncOperation>(maxAttempts: maxAttempts, backoff: backoff) { _ in
            // The plan makes every attempt template an `AsyncOperation`.
            make(template, parent: id, origin: .factory).operation as! AsyncOperation
        }
    }

    // MARK: - Conditions and observers

    private func configure(_ operation: AsyncOperation, _ spec: SoakPlan.Node, id: Int) {
        let ledger = self.ledger
        for condition in spec.conditions {
            switch condition {
            case let .block(answer):
                operation.addCondition(BlockCondition {
                    ledger.record(.conditionEvaluated, for: id)
                    switch answer {
                    case .passes: return true
                    case .returnsFalse: return false
                    case .throwsError: throw StubError.soakConditionFailed(id)
                    }
                })
            case let .answeredLater(passes, delay):
                operation.addCondition(SoakLaterCondition(id: id, ledger: ledger, passes: passes, delayMicroseconds: delay))
            case let .negated(innerPasses):
                operation.addCondition(NegatedCondition(BlockCondition {
                    ledger.record(.conditionEvaluated, for: id)
                    return innerPasses
                }))
            case let .silent(passes, delay):
                operation.addCondition(SilentCondition(SoakLaterCondition(id: id, ledger: ledger, passes: passes, delayMicroseconds: delay)))
            case .noFailedDependencies:
                operation.addCondition(NoFailedDependencies())
            case .noCancelledDependencies:
                operation.addCondition(NoCancelledDependencies())
            case let .category(category, silent):
                switch (category, silent) {
                case (6, false): operation.addCondition(MutuallyExclusive<SoakCategorySix>())
                case (6, true): operation.addCondition(SilentCondition(MutuallyExclusive<SoakCategorySix>()))
                case (7, false): operation.addCondition(MutuallyExclusive<SoakCategorySeven>())
                case (7, true): operation.addCondition(SilentCondition(MutuallyExclusive<SoakCategorySeven>()))
                case (_, false): operation.addCondition(ExclusiveCategory(categoryNames[category]))
                case (_, true): operation.addCondition(SilentCondition(ExclusiveCategory(categoryNames[category])))
                }
            }
        }
        operation.addObserver(SoakRecordingObserver(id: id, ledger: ledger))
        if let timeout = spec.timeout {
            operation.addObserver(timeoutObservers[timeout]) // one observer shared by many operations
        }
        if spec.hasCountingObservers {
            operation.addObserver(BlockObserver(
                didStart: { _ in ledger.counted(0, for: id, blockObserverEvent: .didStart) },
                didCancel: { _ in ledger.counted(1, for: id, blockObserverEvent: .didCancel) },
                didProduce: { _, _ in ledger.counted(2, for: id, blockObserverEvent: .didProduce) },
                didFinish: { _, _ in ledger.counted(3, for: id, blockObserverEvent: .didFinish) }
            ))
            operation.addObserver(StartedObserver { _ in ledger.counted(4, for: id) })
            operation.addObserver(CancelledObserver { _ in ledger.counted(5, for: id) })
            operation.addObserver(ProducedObserver { _, _ in ledger.counted(6, for: id) })
            operation.addObserver(FinishedObserver { _, _ in ledger.counted(7, for: id) })
        }
    }
}

/// Records every event of the operation it observes.
private struct SoakRecordingObserver: OperationObserver {
    let id: Int
    let ledger: SoakLedger

    func operationDidStart(_ operation: AsyncOperation) {
        ledger.record(.didStart, for: id)
        // Composites and retries execute with a final `execute()`: their start stands for it.
        if operation is CompositeOperation || operation is RetryOperation<AsyncOperation> {
            ledger.executeBegan(id)
        }
    }

    func operationDidCancel(_ operation: AsyncOperation) {
        ledger.record(.didCancel, for: id)
    }

    func operation(_ operation: AsyncOperation, didProduce newOperation: Operation) {
        ledger.record(.didProduce, for: id)
    }

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        ledger.didFinish(id, errors: errors, isCancelled: operation.isCancelled, output: (operation as? ResultOperation<Int>)?.output)
    }
}

/// A condition answered later, from another thread.
private struct SoakLaterCondition: OperationCondition {
    let id: Int
    let ledger: SoakLedger
    let passes: Bool
    let delayMicroseconds: UInt32

    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        ledger.record(.conditionEvaluated, for: id)
        let result: ConditionResult = passes ? .satisfied : .failed(StubError.soakConditionFailed(id))
        DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(Int(delayMicroseconds))) {
            completion(result)
        }
    }
}

/// A block operation that records when `execute()` is entered.
private final class SoakBlockOperation: AsyncBlockOperation, @unchecked Sendable {
    // @unchecked Sendable: `id` and `ledger` are immutable; the rest is AsyncBlockOperation's.
    private let id: Int
    private let ledger: SoakLedger

    init(id: Int, ledger: SoakLedger, _ block: @escaping @Sendable () throws -> Void) {
        self.id = id
        self.ledger = ledger
        super.init(block)
    }

    init(id: Int, ledger: SoakLedger, continuation block: @escaping @Sendable (_ finish: @escaping Continuation) -> Void) {
        self.id = id
        self.ledger = ledger
        super.init(block)
    }

    override func execute() {
        ledger.executeBegan(id)
        super.execute()
    }
}

/// A result operation that records when `execute()` is entered.
private final class SoakResultOperation: ResultBlockOperation<Int>, @unchecked Sendable {
    // @unchecked Sendable: `id` and `ledger` are immutable; the rest is ResultBlockOperation's.
    private let id: Int
    private let ledger: SoakLedger

    init(id: Int, ledger: SoakLedger, _ block: @escaping @Sendable () throws -> Int) {
        self.id = id
        self.ledger = ledger
        super.init(block)
    }

    override func execute() {
        ledger.executeBegan(id)
        super.execute()
    }
}

/// A subclass of `AsyncOperation` that may produce an operation, then finishes from another
/// thread after a delay (cancellation is cooperative: it does not hurry).
private final class SoakSubclassOperation: AsyncOperation, @unchecked Sendable {
    // @unchecked Sendable: every property is immutable.
    private let id: Int
    private let ledger: SoakLedger
    private let delayMicroseconds: UInt32
    private let error: StubError?
    private let makeProduced: (@Sendable () -> Operation)?

    init(id: Int, ledger: SoakLedger, delayMicroseconds: UInt32, error: StubError?, produce: (@Sendable () -> Operation)?) {
        self.id = id
        self.ledger = ledger
        self.delayMicroseconds = delayMicroseconds
        self.error = error
        makeProduced = produce
        super.init()
    }

    override func execute() {
        ledger.executeBegan(id)
        ledger.record(.bodyBegan, for: id)
        if let makeProduced {
            produce(makeProduced())
        }
        guard delayMicroseconds > 0 else {
            finish(with: isCancelled ? nil : error)
            return
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(Int(delayMicroseconds))) {
            self.finish(with: self.isCancelled ? nil : self.error)
        }
    }
}

/// A group that records when `execute()` is entered.
final class SoakGroup: GroupOperation, @unchecked Sendable {
    // @unchecked Sendable: `id` and `ledger` are immutable; the rest is GroupOperation's.
    private let id: Int
    private let ledger: SoakLedger

    init(id: Int, ledger: SoakLedger, operations: [Operation]) {
        self.id = id
        self.ledger = ledger
        super.init(operations: operations)
    }

    override func execute() {
        ledger.executeBegan(id)
        super.execute()
    }
}
