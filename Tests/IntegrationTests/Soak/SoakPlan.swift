import Foundation
import TestSupport

/// One round of the soak, drawn from a seed: what operations exist (a tree of nodes), how they
/// are added to four queues, and what a chaos thread does meanwhile. Nodes are templates: a
/// node inside a composite's factory or a retry's attempt maker becomes a new operation each
/// time the factory runs; every other node becomes exactly one.
struct SoakPlan {
    static let categoryCount = 8
    static let queueCount = 4
    /// Queue 0 is serial and keeps its width: the one whose start order is checked.
    static let serialQueue = 0
    /// The widths the other queues start with and switch between under load.
    static let widths = [1, 2, 4, OperationQueue.defaultMaxConcurrentOperationCount]
    /// The timeouts operations carry, each through one `TimeoutObserver` shared by all of them.
    static let timeouts: [TimeInterval] = [0.01, 0.02, 0.04, 0.08]
    /// Containers (groups, composites, retries) sit at depths 0 to 2, so leaves reach depth 3:
    /// groups nest three deep.
    static let deepestContainerDepth = 2
    /// OPERATIONS_SOAK_CONTAINERS_HOLD_NO_CATEGORY=1 gives no category to groups, composites and
    /// retries (their children still get some), to look past a deadlock of categories held by
    /// containers (see SoakFindingsTests) while it is open.
    static let containersHoldNoCategory = ProcessInfo.processInfo.environment["OPERATIONS_SOAK_CONTAINERS_HOLD_NO_CATEGORY"] != nil
    /// How many chaos threads run beside the thread adding operations.
    static let chaosThreads = 2

    /// How many of a node's first operations fail (`Int.max`: all of them). Nodes made once fail
    /// or not; nodes made again by a composite or retry may fail only the first times.
    typealias Failures = Int

    enum Body: Equatable {
        /// An `AsyncBlockOperation` with a throwing block.
        case returns(workMicroseconds: UInt32, failures: Failures)
        /// An `AsyncBlockOperation` calling its continuation at once (`delay` nil) or later from
        /// another thread.
        case continuation(delayMicroseconds: UInt32?, failures: Failures)
        /// An `AsyncBlockOperation` that never calls its continuation: only a timeout (its own
        /// or an enclosing operation's) or a cancellation finishes it.
        case neverContinues
        /// A `ResultBlockOperation<Int>`.
        case result(workMicroseconds: UInt32, failures: Failures)
        /// A subclass of `AsyncOperation` finishing from another thread after a delay (early when
        /// cancelled), producing an operation (made from node `produces`) first.
        case subclass(delayMicroseconds: UInt32, failures: Failures, produces: Int?)
        /// A plain Foundation `BlockOperation`.
        case plain(workMicroseconds: UInt32)

        var failures: Failures {
            switch self {
            case let .returns(_, failures), let .continuation(_, failures), let .result(_, failures),
                 let .subclass(_, failures, _):
                return failures
            case .neverContinues, .plain:
                return 0
            }
        }

        var isPlain: Bool { if case .plain = self { return true }; return false }
    }

    enum ConditionSpec: Equatable {
        /// A `BlockCondition` that returns true, returns false or throws.
        case block(BlockAnswer)
        /// Answers from another thread after a delay.
        case answeredLater(passes: Bool, delayMicroseconds: UInt32)
        /// `NegatedCondition` of a `BlockCondition` answering `innerPasses`.
        case negated(innerPasses: Bool)
        /// `SilentCondition` of a condition answered later.
        case silent(passes: Bool, delayMicroseconds: UInt32)
        case noFailedDependencies
        case noCancelledDependencies
        /// Category number `category` (0 to 7), through `ExclusiveCategory`, `SilentCondition`
        /// of one, or `MutuallyExclusive` (categories 6 and 7).
        case category(Int, silent: Bool)

        enum BlockAnswer: Equatable { case passes, returnsFalse, throwsError }

        /// Whether the condition fails whatever happens at run time.
        var failsByItself: Bool {
            switch self {
            case let .block(answer): return answer != .passes
            case let .answeredLater(passes, _), let .silent(passes, _): return !passes
            case let .negated(innerPasses): return innerPasses
            case .noFailedDependencies, .noCancelledDependencies, .category: return false
            }
        }

        var category: Int? { if case let .category(category, _) = self { return category }; return nil }
    }

    enum Resolution: Equatable {
        case cancel, rerun, rerunAfter(microseconds: UInt32), carryOn
    }

    struct CompositeSpec {
        /// Template nodes, one per declared child.
        var children: [Int]
        /// The cancellation handler's answers, by the number of its call; `nil`: no handler.
        var answers: [Resolution]?
        /// A child that failed this many times is carried on (or cancels) instead of rerun.
        var maxAttempts: Int
        var maxConcurrent: Int
    }

    enum Kind {
        case leaf(Body)
        /// Children in the order added; the first `addedAtCreation` are handed to the initializer.
        case group(children: [Int], addedAtCreation: Int, maxConcurrent: Int)
        case cascade(CompositeSpec)
        case transaction(CompositeSpec)
        /// A `RetryOperation` making attempts from template node `attempt`.
        case retry(attempt: Int, maxAttempts: Int, backoffMicroseconds: UInt32)
    }

    struct Node {
        var parent: Int?
        var depth: Int
        /// Earlier siblings (top-level operations, or children of the same group).
        var dependencies: [Int] = []
        var conditions: [ConditionSpec] = []
        /// Index into `SoakPlan.timeouts`.
        var timeout: Int?
        /// Whether ready-made observers (`BlockObserver` and the one-event ones) count its events.
        var hasCountingObservers = false
        var kind: Kind = .leaf(.returns(workMicroseconds: 0, failures: 0))

        var categories: [Int] { conditions.compactMap(\.category) }
        var body: Body? { if case let .leaf(body) = kind { return body }; return nil }
        var isPlain: Bool { body?.isPlain ?? false }
        var isPlainGroup: Bool { if case .group = kind { return true }; return false }
        var isContainer: Bool { body == nil }
        /// Children whose operations exist from the start (a group's), not made by a factory.
        var staticChildren: [Int] { if case let .group(children, _, _) = kind { return children }; return [] }
    }

    enum ChaosAction {
        case cancel(node: Int, withError: Bool)
        case suspend(queue: Int)
        case resume(queue: Int)
        case cancelAll(queue: Int)
        case setWidth(queue: Int, width: Int)
        /// Adds an operation made from `template` to a live operation of group node `group`.
        case addLateChild(group: Int, template: Int)
    }

    struct ChaosStep {
        var pauseMicroseconds: UInt32
        var action: ChaosAction
    }

    struct Batch {
        var topLevel: Range<Int>
        var queue: Int
        var pauseMicroseconds: UInt32
    }

    let seed: UInt64
    private(set) var nodes: [Node] = []
    /// Top-level nodes in the order they are added.
    private(set) var topLevel: [Int] = []
    private(set) var batches: [Batch] = []
    private(set) var initialWidths: [Int] = []
    private(set) var chaos: [[ChaosStep]] = []
    /// A rough count of the operations the round makes (factories may make more).
    private(set) var estimatedOperations = 0

    init(seed: UInt64, operations target: Int) {
        self.seed = seed
        var random = SplitMix64(seed: seed)
        initialWidths = (0..<Self.queueCount).map { queue in
            queue == Self.serialQueue ? 1 : Self.widths.randomElement(using: &random)!
        }
        while estimatedOperations < target {
            if Int.random(in: 0..<100, using: &random) < 2 {
                addChain(length: Int.random(in: 20...300, using: &random), using: &random)
            } else {
                topLevel.append(addNode(parent: nil, depth: 0, siblings: topLevel, held: [], timeoutAbove: false, made: .once, using: &random))
            }
        }
        drawBatches(using: &random)
        drawChaos(using: &random)
    }

    // MARK: - Drawing nodes

    /// How a node comes to exist: once, or from a factory (composite child, retry attempt,
    /// produced or late operation), which may make it several times.
    private enum Made { case once, byFactory }

    /// A chain: each link depends on the one before it.
    private mutating func addChain(length: Int, using random: inout SplitMix64) {
        var previous = topLevel.last
        for _ in 0..<length {
            let index = nodes.count
            var node = Node(parent: nil, depth: 0)
            node.dependencies = previous.map { [$0] } ?? []
            node.kind = .leaf(Bool.random(using: &random)
                ? .returns(workMicroseconds: 0, failures: 0)
                : .continuation(delayMicroseconds: Bool.random(using: &random) ? nil : UInt32.random(in: 0...200, using: &random), failures: 0))
            if Int.random(in: 0..<100, using: &random) < 10 {
                node.conditions = [Bool.random(using: &random) ? .noCancelledDependencies : .noFailedDependencies]
            }
            nodes.append(node)
            topLevel.append(index)
            previous = index
            estimatedOperations += 1
        }
    }

    /// Draws one node (with its whole subtree) and returns its index. `held`: the categories of
    /// its enclosing operations, which it must never need (that fails by design).
    private mutating func addNode(
        parent: Int?,
        depth: Int,
        siblings: [Int],
        held: Set<Int>,
        timeoutAbove: Bool,
        made: Made,
        using random: inout SplitMix64
    ) -> Int {
        let index = nodes.count
        nodes.append(Node(parent: parent, depth: depth))
        estimatedOperations += 1
        var node = Node(parent: parent, depth: depth)

        if !siblings.isEmpty {
            let roll = Int.random(in: 0..<100, using: &random)
            for _ in 0..<(roll < 50 ? 0 : (roll < 85 ? 1 : 2)) {
                let dependency = siblings[Int.random(in: max(0, siblings.count - 30)..<siblings.count, using: &random)]
                if !node.dependencies.contains(dependency) { node.dependencies.append(dependency) }
            }
        }
        let containerChance = depth > Self.deepestContainerDepth ? 0 : (depth == 0 ? 12 : 22)
        let isContainer = Int.random(in: 0..<100, using: &random) < containerChance
        node.conditions = drawConditions(for: node, held: held, isContainer: isContainer, using: &random)
        node.hasCountingObservers = Int.random(in: 0..<100, using: &random) < 25

        if isContainer {
            if Int.random(in: 0..<100, using: &random) < 25 {
                node.timeout = Int.random(in: 1..<Self.timeouts.count, using: &random)
            }
            nodes[index] = node
            let inner = held.union(node.categories)
            let below = timeoutAbove || node.timeout != nil
            node.kind = drawContainer(index, depth: depth, held: inner, timeoutAbove: below, using: &random)
            nodes[index] = node
            return index
        }

        let plainChance = node.conditions.isEmpty ? 8 : 0 // a plain operation takes no condition
        node.kind = .leaf(drawBody(made: made, plainChance: plainChance, timeoutAbove: timeoutAbove, timeout: &node.timeout, using: &random))
        if node.isPlain {
            node.hasCountingObservers = false
            node.timeout = nil
        }
        nodes[index] = node
        return index
    }

    private mutating func drawContainer(
        _ index: Int,
        depth: Int,
        held: Set<Int>,
        timeoutAbove: Bool,
        using random: inout SplitMix64
    ) -> Kind {
        let roll = Int.random(in: 0..<100, using: &random)
        let widthRoll = Int.random(in: 0..<100, using: &random)
        let maxConcurrent = widthRoll < 40 ? 1 : (widthRoll < 60 ? 2 : OperationQueue.defaultMaxConcurrentOperationCount)
        func template() -> Int {
            addNode(parent: index, depth: depth + 1, siblings: [], held: held, timeoutAbove: timeoutAbove, made: .byFactory, using: &random)
        }
        switch roll {
        case 0..<55:
            let count = depth == 0 ? Int.random(in: 2...10, using: &random) : Int.random(in: 1...5, using: &random)
            var children: [Int] = []
            for _ in 0..<count {
                children.append(addNode(parent: index, depth: depth + 1, siblings: children, held: held, timeoutAbove: timeoutAbove, made: .once, using: &random))
            }
            return .group(children: children, addedAtCreation: Int.random(in: 0...count, using: &random), maxConcurrent: maxConcurrent)
        case 55..<85:
            let children = (0..<Int.random(in: 1...4, using: &random)).map { _ in template() }
            let answers: [Resolution]? = Int.random(in: 0..<100, using: &random) < 15 ? nil : (0..<4).map { _ in
                switch Int.random(in: 0..<100, using: &random) {
                case 0..<20: return .cancel
                case 20..<45: return .rerun
                case 45..<60: return .rerunAfter(microseconds: UInt32.random(in: 0...3_000, using: &random))
                default: return .carryOn
                }
            }
            let spec = CompositeSpec(children: children, answers: answers, maxAttempts: Int.random(in: 1...3, using: &random), maxConcurrent: maxConcurrent)
            return roll < 70 ? .cascade(spec) : .transaction(spec)
        default:
            let attempt = template()
            if nodes[attempt].isPlain { // a retry's attempts are `AsyncOperation`s
                nodes[attempt].kind = .leaf(.returns(workMicroseconds: 0, failures: 1))
            }
            let backoff: UInt32 = Bool.random(using: &random) ? 0 : UInt32.random(in: 100...2_000, using: &random)
            return .retry(attempt: attempt, maxAttempts: Int.random(in: 1...4, using: &random), backoffMicroseconds: backoff)
        }
    }

    private mutating func drawConditions(for node: Node, held: Set<Int>, isContainer: Bool, using random: inout SplitMix64) -> [ConditionSpec] {
        var conditions: [ConditionSpec] = []
        let roll = Int.random(in: 0..<100, using: &random)
        let count = roll < 55 ? 0 : (roll < 85 ? 1 : (roll < 96 ? 2 : 3))
        for _ in 0..<count {
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<25:
                let answer = Int.random(in: 0..<100, using: &random)
                conditions.append(.block(answer < 80 ? .passes : (answer < 90 ? .returnsFalse : .throwsError)))
            case 25..<45:
                conditions.append(.answeredLater(passes: Int.random(in: 0..<100, using: &random) < 85, delayMicroseconds: UInt32.random(in: 0...1_500, using: &random)))
            case 45..<53:
                conditions.append(.negated(innerPasses: Int.random(in: 0..<100, using: &random) < 15))
            case 53..<60:
                conditions.append(.silent(passes: Int.random(in: 0..<100, using: &random) < 85, delayMicroseconds: UInt32.random(in: 0...800, using: &random)))
            case 60..<70 where !node.dependencies.isEmpty:
                conditions.append(.noFailedDependencies)
            case 70..<80 where !node.dependencies.isEmpty:
                conditions.append(.noCancelledDependencies)
            default:
                break
            }
        }
        // Categories: 1 to 3 of 8, never one an enclosing operation holds.
        if Int.random(in: 0..<100, using: &random) < 22, !(isContainer && Self.containersHoldNoCategory) {
            let free = Self.categories(below: held).shuffled(using: &random)
            let wanted = [1, 1, 1, 2, 2, 3].randomElement(using: &random)!
            for category in free.prefix(wanted) {
                conditions.append(.category(category, silent: Int.random(in: 0..<100, using: &random) < 20))
            }
        }
        return conditions.shuffled(using: &random)
    }

    private mutating func drawBody(
        made: Made,
        plainChance: Int,
        timeoutAbove: Bool,
        timeout: inout Int?,
        using random: inout SplitMix64
    ) -> Body {
        func failures() -> Failures {
            let roll = Int.random(in: 0..<100, using: &random)
            if made == .once { return roll < 15 ? .max : 0 }
            return roll < 55 ? 0 : (roll < 70 ? 1 : (roll < 80 ? 2 : .max))
        }
        let work = Bool.random(using: &random) ? 0 : UInt32.random(in: 0...150, using: &random)
        let roll = Int.random(in: 0..<100, using: &random)
        if roll < plainChance {
            return .plain(workMicroseconds: work)
        }
        var body: Body
        switch roll {
        case 0..<30:
            body = .returns(workMicroseconds: work, failures: failures())
        case 30..<58:
            let atOnce = Int.random(in: 0..<100, using: &random) < 25
            body = .continuation(delayMicroseconds: atOnce ? nil : UInt32.random(in: 0...1_000, using: &random), failures: failures())
        case 58..<62:
            // Slow enough to race its timeout.
            body = .continuation(delayMicroseconds: UInt32.random(in: 5_000...60_000, using: &random), failures: failures())
            timeout = Int.random(in: 0..<Self.timeouts.count, using: &random)
        case 62..<76:
            body = .result(workMicroseconds: work, failures: failures())
        case 76..<93:
            let produces = Int.random(in: 0..<100, using: &random) < 20 ? addProducedTemplate(using: &random) : nil
            body = .subclass(delayMicroseconds: Bool.random(using: &random) ? 0 : UInt32.random(in: 0...1_500, using: &random), failures: failures(), produces: produces)
        default:
            body = .neverContinues
            if !timeoutAbove || Int.random(in: 0..<100, using: &random) < 30 {
                timeout = Int.random(in: 0..<Self.timeouts.count, using: &random)
            }
        }
        if timeout == nil, Int.random(in: 0..<100, using: &random) < 6 {
            timeout = Int.random(in: 0..<Self.timeouts.count, using: &random)
        }
        return body
    }

    /// An operation a subclass produces: quick, never failing, without category. Its place is
    /// wherever its producer runs, so it has no parent of its own in the plan.
    private mutating func addProducedTemplate(using random: inout SplitMix64) -> Int {
        var node = Node(parent: nil, depth: 0)
        node.kind = .leaf(Bool.random(using: &random)
            ? .returns(workMicroseconds: 0, failures: 0)
            : .continuation(delayMicroseconds: UInt32.random(in: 0...300, using: &random), failures: 0))
        if Int.random(in: 0..<100, using: &random) < 30 {
            node.conditions = [.answeredLater(passes: true, delayMicroseconds: UInt32.random(in: 0...500, using: &random))]
        }
        node.hasCountingObservers = Bool.random(using: &random)
        nodes.append(node)
        estimatedOperations += 1
        return nodes.count - 1
    }

    // MARK: - Adding and chaos

    private mutating func drawBatches(using random: inout SplitMix64) {
        var start = 0
        while start < topLevel.count {
            let end = min(topLevel.count, start + Int.random(in: 1...40, using: &random))
            let pause: UInt32 = Bool.random(using: &random) ? 0 : UInt32.random(in: 0...2_000, using: &random)
            batches.append(Batch(topLevel: start..<end, queue: Int.random(in: 0..<Self.queueCount, using: &random), pauseMicroseconds: pause))
            start = end
        }
    }

    private mutating func drawChaos(using random: inout SplitMix64) {
        let plainGroups = nodes.indices.filter { nodes[$0].isPlainGroup }
        let topLevelNodes = Set(topLevel)
        let cancellable = nodes.indices.filter { index in
            // Produced templates have no place of their own to find them by.
            nodes[index].parent != nil || topLevelNodes.contains(index)
        }
        chaos = (0..<Self.chaosThreads).map { _ in [] }
        let steps = max(8, estimatedOperations / 12)
        var suspended = Set<Int>()
        for _ in 0..<steps {
            let thread = Int.random(in: 0..<Self.chaosThreads, using: &random)
            let pause = UInt32.random(in: 0...1_500, using: &random)
            let action: ChaosAction
            switch Int.random(in: 0..<1_000, using: &random) {
            case 0..<600:
                action = .cancel(node: cancellable.randomElement(using: &random)!, withError: Bool.random(using: &random))
            case 600..<700:
                let queue = Int.random(in: 0..<Self.queueCount, using: &random)
                action = suspended.contains(queue) ? .resume(queue: queue) : .suspend(queue: queue)
                if suspended.contains(queue) { suspended.remove(queue) } else { suspended.insert(queue) }
            case 700..<800:
                action = .setWidth(queue: Int.random(in: 1..<Self.queueCount, using: &random), width: Self.widths.randomElement(using: &random)!)
            case 800..<806:
                action = .cancelAll(queue: Int.random(in: 0..<Self.queueCount, using: &random))
            default:
                guard let group = plainGroups.randomElement(using: &random) else { continue }
                action = .addLateChild(group: group, template: addLateTemplate(for: group, using: &random))
            }
            chaos[thread].append(ChaosStep(pauseMicroseconds: pause, action: action))
        }
    }

    /// The categories an operation inside containers holding `held` may need: only those after
    /// every held one. A container holds its categories until its children finish, so two
    /// containers whose children each need the other's category would deadlock by design (as two
    /// locks taken in opposite orders do); categories taken in one order never do. Excluding
    /// only the held ones (what the library requires) is not enough for that.
    static func categories(below held: Set<Int>) -> [Int] {
        let highest = held.max() ?? -1
        return Array((highest + 1)..<categoryCount)
    }

    /// A child added to a running group: a quick leaf, maybe in categories its group's chain does
    /// not hold.
    private mutating func addLateTemplate(for group: Int, using random: inout SplitMix64) -> Int {
        var held = Set<Int>()
        var current: Int? = group
        while let enclosing = current {
            held.formUnion(nodes[enclosing].categories)
            current = nodes[enclosing].parent
        }
        var node = Node(parent: group, depth: nodes[group].depth + 1)
        node.kind = .leaf(Bool.random(using: &random)
            ? .returns(workMicroseconds: UInt32.random(in: 0...100, using: &random), failures: Int.random(in: 0..<100, using: &random) < 15 ? .max : 0)
            : .continuation(delayMicroseconds: UInt32.random(in: 0...500, using: &random), failures: 0))
        if Int.random(in: 0..<100, using: &random) < 25, let category = Self.categories(below: held).randomElement(using: &random) {
            node.conditions = [.category(category, silent: false)]
        }
        node.hasCountingObservers = Bool.random(using: &random)
        nodes.append(node)
        estimatedOperations += 1
        return nodes.count - 1
    }

    // MARK: - Reading

    /// The enclosing nodes of `index`, innermost first.
    func ancestors(of index: Int) -> [Int] {
        var result: [Int] = []
        var current = nodes[index].parent
        while let node = current {
            result.append(node)
            current = nodes[node].parent
        }
        return result
    }
}
