import Foundation
@testable import Operations
import Testing
import TestSupport

// Every interleaving, in small scopes: one operation's lifecycle driven by a model of everything
// around it.
//
// `AsyncOperation` performs the lifecycle's actions after unlocking, so between an event and the
// follow-up it asks for, anything else may happen. The world below plays the storage's part:
// each thread of control it has started is a stack of steps (one step is one lock taken: an event
// on the lifecycle, on the queue's scheduler or on the exclusivity controller), and the user, the
// queue, Foundation, the dependency, the conditions and another holder of the category cause
// external events at any moment. A breadth-first search runs every enabled step or event in every
// order, merging states with the same canonical description, so every reachable state is checked
// once, and the first counterexample found is a shortest one. (Breadth-first rather than
// depth-first for that reason; the states reached are the same.) Every state must also still be
// able to reach a rest where the operation finished: a loop that never finishes is a failure too.
//
// What the model leaves out: timeouts and dropped condition handlers, most of the dependencies
// that conditions bring (only one condition added while the operation waits, which brings again
// the dependency an earlier condition brought, is in: `conditionWhileWaiting`), cycles other than a dependency that closes one while the operation
// is added or waits (`cycle`), serial queues, groups' children (a held finish is delivered by one
// owed event), and several categories (one category "A", which another operation may hold at
// first).
//
// The continuation-block scopes model an `AsyncBlockOperation`'s block as steps of their own
// (begun, handed its continuation, returned, reached by a cancel) and its continuation as an event
// at any moment after it was handed out: a continuation called after a cancel of the called block
// must never finish the operation nor add its error. (Without the lifecycle's `isCancelled` check
// in `finishFromContinuation`, they fail within 8 and 11 steps.)
//
// Two engine bugs it found (now fixed) are pinned down by the `regression_` tests at the end, with
// the shortest sequences that broke them; every scope checks their rules too. A third, an
// operation that never finished when its last dependency finished while a dependency closing a
// cycle was being added, is pinned down by the `cycle` scope.

// MARK: - Scopes

struct LifecycleScope: Sendable, CustomTestStringConvertible {
    enum ConditionKind: Sendable, Equatable {
        case answered, byConstruction
        /// Answers on the spot, as `AnswersAtOnce` conditions do: taken when handing out ends.
        case atOnce(satisfied: Bool)
    }

    var name: String
    /// Added to an `AsyncOperationQueue`; otherwise started by hand (on no queue).
    var onQueue = true
    var conditions: [ConditionKind] = []
    /// The mutually exclusive categories the conditions carry.
    var categories: [String] = []
    var dependency = false
    /// A dependency comes while the operation is being added (a condition's, or `addDependency`
    /// from elsewhere), perhaps after its queue gave it its turn as it held it.
    var lateDependency = false
    /// A condition is added while it waits for its dependencies; it brings the dependency, which
    /// an earlier condition brought (`addConditionDependency(_:)`), and its attachment ends some
    /// time later (`conditionDependencyAttached()`).
    var conditionWhileWaiting = false
    /// A dependency that closes a cycle is added while it is being added or waits:
    /// `addDependency`, then, in a step of its own, `recordCycle(through:name:wasCounted:)`.
    var cycle = false
    /// The operation is made to depend on itself (`addSelfDependency`) at any moment: a cycle
    /// while it takes dependencies, too late once it no longer does.
    var selfDependency = false
    /// Another operation holds the category at first (and lets go of it some time).
    var contended = false
    /// A subclass that holds back a finish without execution (as a group does) and delivers it later.
    var holdsFinish = false
    /// ...and any finish, also after executing (as a group finished by hand while its children
    /// run does: `offerHoldAfterExecution()`).
    var holdsFinishAfterExecution = false
    /// A condition may call its completion handler a second time (a misbehaving condition).
    var answersTwice = false
    /// An `AsyncBlockOperation` whose block takes a continuation: executing begins the block,
    /// which is handed its continuation and returns, each a step of its own; a cancel reaches the
    /// block after `operationDidCancel`; the continuation is called (with an error) at any moment
    /// after it was handed out, once (its gate stops a second call before the lifecycle).
    var continuationBlock = false
    var cancels = 1
    /// Calls to `finish(with:)` from outside at any moment (a second one is a duplicate).
    var finishes = 1
    var handStarts = 0
    var suspensions = 0
    var produces = 0
    /// Tolerates what only a documented misuse causes (`start()` called by hand on an operation of
    /// an `AsyncOperationQueue`): the queue may later give the finished operation to Foundation.
    var isMisuse = false
    /// Fewer distinct states than this means the model lost its way (the test must not pass vacuously).
    var minimumStates: Int
    var minimumTerminals: Int

    var testDescription: String { name }

    static let all: [LifecycleScope] = [
        LifecycleScope(name: "plain", cancels: 2, finishes: 2, suspensions: 1, produces: 1,
                       minimumStates: 20_000, minimumTerminals: 200),
        LifecycleScope(name: "dependency and a condition answering twice", conditions: [.answered], dependency: true,
                       answersTwice: true, suspensions: 1, minimumStates: 20_000, minimumTerminals: 50),
        LifecycleScope(name: "exclusive condition, contended", conditions: [.answered], categories: ["A"],
                       contended: true, suspensions: 1, minimumStates: 20_000, minimumTerminals: 40),
        LifecycleScope(name: "two answered conditions, exclusive", conditions: [.answered, .answered],
                       categories: ["A"], suspensions: 1, minimumStates: 20_000, minimumTerminals: 60),
        LifecycleScope(name: "exclusive by construction, suspended twice", conditions: [.byConstruction],
                       categories: ["A"], contended: true, suspensions: 2, minimumStates: 10_000, minimumTerminals: 40),
        LifecycleScope(name: "started by hand, exclusive", onQueue: false, conditions: [.answered],
                       categories: ["A"], contended: true, finishes: 2, handStarts: 2,
                       minimumStates: 5_000, minimumTerminals: 30),
        LifecycleScope(name: "started by hand with a dependency", onQueue: false, dependency: true,
                       cancels: 2, finishes: 2, handStarts: 2, minimumStates: 10_000, minimumTerminals: 100),
        LifecycleScope(name: "an answered and an at-once condition, exclusive", conditions: [.answered, .atOnce(satisfied: true)],
                       categories: ["A"], suspensions: 1, minimumStates: 15_000, minimumTerminals: 60),
        LifecycleScope(name: "an at-once condition before an answered one, exclusive", conditions: [.atOnce(satisfied: true), .answered],
                       categories: ["A"], suspensions: 1, minimumStates: 15_000, minimumTerminals: 60),
        LifecycleScope(name: "an at-once condition fails before an answered one", conditions: [.atOnce(satisfied: false), .answered],
                       dependency: true, finishes: 2, suspensions: 1, minimumStates: 30_000, minimumTerminals: 75),
        LifecycleScope(name: "an at-once condition fails, with a dependency", conditions: [.atOnce(satisfied: false)],
                       dependency: true, finishes: 2, suspensions: 1, minimumStates: 15_000, minimumTerminals: 35),
        LifecycleScope(name: "holds its finish (a group)", conditions: [.answered], dependency: true,
                       holdsFinish: true, finishes: 2, suspensions: 1, minimumStates: 20_000, minimumTerminals: 50),
        LifecycleScope(name: "holds any finish, also after executing (a group finished by hand)", conditions: [.answered],
                       holdsFinish: true, holdsFinishAfterExecution: true, cancels: 2, finishes: 2, suspensions: 1,
                       minimumStates: 20_000, minimumTerminals: 50),
        LifecycleScope(name: "started by hand while on a queue (a misuse)", handStarts: 1, suspensions: 1,
                       isMisuse: true, minimumStates: 3_000, minimumTerminals: 50),
        LifecycleScope(name: "conditions without categories or dependencies: the turn taken as it is held",
                       conditions: [.atOnce(satisfied: true), .answered], cancels: 2, finishes: 2, suspensions: 1,
                       minimumStates: 40_000, minimumTerminals: 120),
        LifecycleScope(name: "the turn taken as it is held, then a dependency while it is being added",
                       conditions: [.atOnce(satisfied: true)], lateDependency: true, suspensions: 1,
                       minimumStates: 15_000, minimumTerminals: 100),
        LifecycleScope(name: "a condition added while it waits for its dependency", conditions: [.answered],
                       dependency: true, conditionWhileWaiting: true, finishes: 2, suspensions: 1,
                       minimumStates: 100_000, minimumTerminals: 230),
        LifecycleScope(name: "a dependency closing a cycle, added while it waits", conditions: [.answered],
                       dependency: true, cycle: true, finishes: 1, suspensions: 1,
                       minimumStates: 40_000, minimumTerminals: 90),
        LifecycleScope(name: "made to depend on itself at any moment", conditions: [.answered],
                       dependency: true, selfDependency: true, finishes: 1, suspensions: 1,
                       minimumStates: 50_000, minimumTerminals: 150),
        LifecycleScope(name: "a continuation block, cancelled and finished at any moment", continuationBlock: true,
                       cancels: 2, finishes: 2, suspensions: 1, minimumStates: 20_000, minimumTerminals: 250),
        LifecycleScope(name: "a continuation block started by hand, cancelled and finished at any moment",
                       onQueue: false, continuationBlock: true, cancels: 2, finishes: 2, handStarts: 2,
                       minimumStates: 13_000, minimumTerminals: 240),
    ]
}

// MARK: - Doubles

/// Answered by the world, whenever it likes.
private struct AnsweredCondition: OperationCondition {
    let mutuallyExclusiveCategories: Set<String>
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {}
}

/// Answers on the spot: the world takes its answer when the handing out ends.
private struct AtOnceCondition: OperationCondition {
    let mutuallyExclusiveCategories: Set<String>
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {}
}

/// Answered without being evaluated, as `MutuallyExclusive` is.
private struct ConstructedCondition: OperationCondition, SatisfiedByConstruction {
    let mutuallyExclusiveCategories: Set<String>
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(.satisfied)
    }
}

/// Never called: the world records what observers would hear, and checks they are in each list.
private struct Listener: OperationObserver {}

private func labels(_ errors: [any Error]) -> [String] {
    errors.map { ($0 as? StubError)?.label ?? "?" }
}

// MARK: - The world

/// The lifecycle's actions, with what the storage needs of them (nothing that holds references).
private enum Finish: Hashable, CustomStringConvertible {
    case none, duplicate, releaseEarly
    case deliver(observers: Int, errors: [String], mayBeHeld: Bool)

    init(_ action: OperationLifecycle.FinishAction) {
        switch action {
        case .none: self = .none
        case .reportDuplicate: self = .duplicate
        case .releaseCategoriesEarly: self = .releaseEarly
        case let .deliver(observers, errors, mayBeHeld):
            self = .deliver(observers: observers.count, errors: labels(errors), mayBeHeld: mayBeHeld)
        }
    }

    var description: String {
        switch self {
        case .none: ".none"
        case .duplicate: ".reportDuplicate"
        case .releaseEarly: ".releaseCategoriesEarly"
        case let .deliver(observers, errors, mayBeHeld): ".deliver(observers: \(observers), errors: \(errors), mayBeHeld: \(mayBeHeld))"
        }
    }
}

private enum Advance: Hashable, CustomStringConvertible {
    case none, closeCycle
    case evaluate(onQueue: Bool)
    case proceed(onQueue: Bool)
    case finish(errors: [String])

    init(_ action: OperationLifecycle.AdvanceAction) {
        switch action {
        case .none: self = .none
        case .finishClosingCycle: self = .closeCycle
        case let .evaluateConditions(_, queue, _): self = .evaluate(onQueue: queue != nil)
        case let .proceedWithoutConditions(queue, _): self = .proceed(onQueue: queue != nil)
        case let .finish(errors): self = .finish(errors: labels(errors))
        }
    }

    var description: String {
        switch self {
        case .none: ".none"
        case .closeCycle: ".finishClosingCycle"
        case let .evaluate(onQueue): ".evaluateConditions(onQueue: \(onQueue))"
        case let .proceed(onQueue): ".proceedWithoutConditions(onQueue: \(onQueue))"
        case let .finish(errors): ".finish(\(errors))"
        }
    }
}

private enum Grant: Hashable, CustomStringConvertible {
    case none, releaseAtOnce
    case handOff(holdsCategories: Bool)
    case startExecuting(observers: Int)
    case finish(Finish)

    init(_ action: OperationLifecycle.GrantAction) {
        switch action {
        case .none: self = .none
        case .releaseAtOnce: self = .releaseAtOnce
        case let .finish(action): self = .finish(Finish(action))
        case let .handOff(_, _, holds): self = .handOff(holdsCategories: holds)
        case let .startExecuting(observers, _, _): self = .startExecuting(observers: observers.count)
        }
    }

    var description: String {
        switch self {
        case .none: ".none"
        case .releaseAtOnce: ".releaseAtOnce"
        case let .handOff(holds): ".handOff(holdsCategories: \(holds))"
        case let .startExecuting(observers): ".startExecuting(observers: \(observers))"
        case let .finish(finish): ".finish(\(finish))"
        }
    }
}

/// One lock taken by a thread of `AsyncOperation` (or of its queue), in the order the code takes them.
private enum Step: Hashable {
    // Adding to the queue and waiting.
    /// The queue holds the operation (`admitHeld`), giving it its turn if it asks and may.
    case admitHeld(askingTurn: Bool)
    case finishEnqueuing
    /// The queue gave it its turn as it held it (it waited for nothing known, and its conditions
    /// name no category): finishing the add begins the evaluation.
    case finishEnqueuingHoldingTurn
    case advance(Advance)
    /// The dependency just added closes a cycle: it is not waited for, and the operation finishes.
    case recordCycle
    /// `finishClosingCycle(operationName:)`, as `.finishClosingCycle` asks.
    case finishClosingCycle
    /// The evaluation begins; `takingTurn`: in one step with taking the turn its queue gave it.
    case evaluate(takingTurn: Bool)
    /// Answers given at once before a condition evaluated the usual way was handed out.
    case conditionsAnsweredAtOnce([Int])
    /// The conditions were handed out (`evaluate(for:)` called on each); those at `atOnce`
    /// answered at once, and their answers are taken with it.
    case conditionsHandedOut(atOnce: [Int])
    /// No conditions: its queue gave it its turn, which it takes and is cleared to run in one step.
    case turnToProceed
    // Categories (`acquire(_:suspensionJustChecked:)` and the suspension paths).
    case acquire(hasCategories: Bool, suspensionJustChecked: Bool)
    case acquireLeaveLine
    case withdraw
    case parkOrEnterLine
    case enterLine
    case exclusivityAcquire
    case categoriesWereGranted
    case grant(Grant)
    case queueHandOff(holdsCategories: Bool)
    case giveBackCategories
    case releaseReturnedCategories
    case parkAfterGivingBack
    case continueTowardsExecution
    case suspendedLeaveLine
    case suspendedWithdraw
    case suspendedForgetLine
    case suspendedPark
    // Starting.
    case foundationStart
    case deliverDidStart(observers: Int)
    case afterDidStart
    /// A cancel made while the start was being announced reaches the observers after it.
    case deliverDidCancelAfterStart(observers: Int, interruptsExecution: Bool)
    case afterDidCancelAfterStart
    case finishAfterExecuting
    // A continuation block (`AsyncBlockOperation.execute()`).
    /// `execute()` begins the block (`beginBlock()`).
    case beginBlock
    /// The block is called and handed its continuation (`awaitContinuation(through:)`).
    case handContinuation
    /// The block's call returned (`blockReturned()`).
    case blockReturned
    /// A cancel during execution reaches the block (`cancellationDuringExecution()`).
    case blockCancelled
    // Cancelling and producing.
    /// `interruptsExecution`: the cancel came during execution, and reaches the block next.
    case deliverDidCancel(observers: Int, releasesCategories: Bool, interruptsExecution: Bool)
    case afterDidCancel(releasesCategories: Bool, interruptsExecution: Bool)
    case releaseCategoriesOnCancel
    case deliverDidProduce(observers: Int)
    case afterDidProduce
    // Finishing.
    case finish(errors: [String])
    case perform(Finish)
    case offerToHold(Finish)
    case takeBackOffer(Finish)
    case deliverDidFinish(observers: Int, errors: [String])
    case completeFinish
    case remains(release: Bool, withdraw: Bool, wasHandedOff: Bool)
}

private struct World {
    var life = OperationLifecycle()
    /// Threads of control the storage started, each a stack of steps still to take.
    var threads: [[Step]] = []

    // External events used so far.
    var enqueued = false
    var handStarts = 0
    var cancels = 0
    var finishes = 0
    var suspensions = 0
    var produces = 0
    var dependencyFinished = false
    var lateDependencyAdded = false
    var lateDependencyFinished = false
    var lateConditionAdded = false
    var lateConditionBrought = false
    var lateConditionAttached = false
    var cycleAdded = false
    var selfDependencyAdded = false
    /// The self-dependency came while it took dependencies: a cycle, so it must never execute.
    var selfCycleRecorded = false
    var answersOwed: [Int] = []
    var satisfiedConditions: Set<Int> = []
    var answeredOnce: Set<Int> = []
    var answeredTwice: Set<Int> = []
    var heldFinishOwed = false
    // The continuation block's continuation.
    var continuationHandedOut = false
    var continuationCalled = false
    /// The continuation's gate let go of the operation (told of a cancel, or at the finish): a
    /// call finds nothing to finish.
    var gateClosed = false
    var continuationCalledAfterCancel = false

    // The queue's scheduler and Foundation's queue.
    var suspended = false
    var parkedToProceed = 0
    var parkedForHandOff = false
    var heldByQueue = false
    /// The queue gave it its turn as it held it, and has not had it back (the operation gave it
    /// back, went to Foundation, or finished).
    var holdsTurnFromAdd = false
    var onFoundation = false

    // The exclusivity controller, for category "A".
    var otherHolds = false
    var weHold = false
    var inLine = false
    var eligible = false

    // What was observed.
    var cancelCalled = false
    /// The lifecycle decided to execute, and `startDelivered()` has not been told yet.
    var announcingStart = false
    var didStart = 0
    var didCancel = 0
    var didProduce = 0
    var didFinish = 0
    var executed = 0
    var completed = 0
    var deliveredErrors: [String]?
    var violations: [String] = []

    /// Starts a thread of control that takes `steps` (none: nothing to do).
    mutating func spawn(_ steps: [Step]) {
        if !steps.isEmpty { threads.append(steps) }
    }

    mutating func violate(_ message: String) {
        violations.append(message)
    }

    /// The canonical description of the state: the lifecycle's readable fields and the world's.
    var key: Key {
        let l = life
        return Key(
            life: LifeKey(
                phase: "\(l.phase)", isCancelled: l.isCancelled, errors: labels(l.errors),
                conditions: l.conditions.count, observers: l.observers.count,
                dependencies: l.dependencies.count, unfinishedDependencies: l.unfinishedDependencies.count,
                hasQueue: l.queue != nil, wasHandedOff: l.wasHandedOff, startedByCaller: l.startedByCaller,
                executionBegan: l.executionBegan, hasTicket: l.ticket != 0, categories: l.categories,
                holdsCategories: l.holdsCategories, isInLine: l.isInLine,
                awaited: l.unansweredConditions.map(\.index), failures: labels(l.conditionFailures),
                conditionsDispatched: l.conditionsDispatched, notificationsInFlight: Int(l.notificationsInFlight),
                finishWaitsForNotifications: l.finishWaitsForNotifications,
                finishRequestedBeforeStart: l.finishRequestedBeforeStart,
                withdrawsFromCategories: l.withdrawsFromCategories, finishHoldOffered: l.finishHoldOffered,
                holdsFinish: l.holdsFinish, startAnnouncement: "\(l.startAnnouncement)", block: l.block.map { "\($0)" }
            ),
            threads: threads.count < 2 ? threads : threads.sorted { $0.hashValue < $1.hashValue },
            used: [handStarts, cancels, finishes, suspensions, produces, parkedToProceed,
                   didStart, didCancel, didProduce, didFinish, executed, completed],
            flags: [enqueued, dependencyFinished, lateDependencyAdded, lateDependencyFinished, lateConditionAdded, lateConditionBrought, lateConditionAttached, cycleAdded, selfDependencyAdded, selfCycleRecorded, heldFinishOwed, suspended, parkedForHandOff, heldByQueue,
                    onFoundation, otherHolds, weHold, inLine, eligible, cancelCalled, holdsTurnFromAdd,
                    continuationHandedOut, continuationCalled, gateClosed, continuationCalledAfterCancel, announcingStart],
            answersOwed: answersOwed, satisfiedConditions: satisfiedConditions, answeredOnce: answeredOnce,
            answeredTwice: answeredTwice, deliveredErrors: deliveredErrors
        )
    }

    struct LifeKey: Hashable {
        var phase: String
        var isCancelled: Bool
        var errors: [String]
        var conditions, observers, dependencies, unfinishedDependencies: Int
        var hasQueue, wasHandedOff, startedByCaller, executionBegan, hasTicket: Bool
        var categories: [String]
        var holdsCategories, isInLine: Bool
        var awaited: [Int]
        var failures: [String]
        var conditionsDispatched: Bool
        var notificationsInFlight: Int
        var finishWaitsForNotifications, finishRequestedBeforeStart, withdrawsFromCategories, finishHoldOffered: Bool
        var holdsFinish: Bool
        var startAnnouncement: String
        /// The block's stage and whether it holds a continuation, as the value describes itself.
        var block: String?
    }

    struct Key: Hashable {
        var life: LifeKey
        var threads: [[Step]]
        var used: [Int]
        var flags: [Bool]
        var answersOwed: [Int]
        var satisfiedConditions: Set<Int>
        var answeredOnce: Set<Int>
        var answeredTwice: Set<Int>
        var deliveredErrors: [String]?
    }
}

// MARK: - The exploration

/// Engine bugs the exploration found (both fixed); their rules are checked in every scope, and
/// the `regression_` tests pin the shortest sequences that broke them.
private enum KnownBug: CaseIterable {
    /// `execute()` runs although a finish was accepted while two notifications were in flight.
    case executesAfterFinishAccepted
    /// A suspension's step out of line races the operation's own request for its category: it is
    /// granted the category and asks for it again, so it is granted it a second time later.
    case asksAgainWhileHolding
    /// The consequence of the above: a grant lands on an operation that waits for Foundation to
    /// start it only to finish (cancelled, or finished before it started), which then keeps the
    /// category until Foundation gets round to it.
    case keepsCategoryItWillNotUse

    static let all = Set(allCases)
}

private struct Explorer {
    let scope: LifecycleScope
    let checkedBugs: Set<KnownBug>
    let queue: AsyncOperationQueue
    let dependency = BlockOperation {}
    let lateDependency = BlockOperation {}
    let cycleDependency = BlockOperation {}
    /// Stands for the operation itself, as its own dependency.
    let itself = BlockOperation {}
    /// The continuation block's gate (what the lifecycle makes of it is all that is modelled).
    let gate = ContinuationGate(operation: AsyncBlockOperation { _ in }, createdAt: nil)

    init(_ scope: LifecycleScope, checking checkedBugs: Set<KnownBug>) {
        self.scope = scope
        self.checkedBugs = checkedBugs
        queue = AsyncOperationQueue()
    }

    func initialWorld() -> World {
        var world = World()
        if scope.continuationBlock {
            world.life = OperationLifecycle(block: .continuation { _ in })
        }
        if scope.holdsFinishAfterExecution {
            world.life.offerHoldAfterExecution()
        }
        _ = world.life.addObserver(Listener())
        for kind in scope.conditions {
            let categories = Set(scope.categories)
            switch kind {
            case .answered: _ = world.life.addCondition(AnsweredCondition(mutuallyExclusiveCategories: categories), satisfiedByConstruction: false)
            case .byConstruction: _ = world.life.addCondition(ConstructedCondition(mutuallyExclusiveCategories: categories), satisfiedByConstruction: true)
            case .atOnce: _ = world.life.addCondition(AtOnceCondition(mutuallyExclusiveCategories: categories), satisfiedByConstruction: false)
            }
        }
        if scope.dependency && scope.conditionWhileWaiting {
            _ = world.life.addConditionDependency(dependency) // the first condition's, as the add attaches it
        } else if scope.dependency {
            _ = world.life.addDependency(dependency)
        }
        world.otherHolds = scope.contended && !scope.categories.isEmpty
        return world
    }

    // MARK: Events

    /// Every state one step or event away, with what happened.
    func successors(of world: World) -> [(move: Move, world: World)] {
        var next: [(Move, World)] = []
        var ranThreads: [[Step]] = []
        for (index, thread) in world.threads.enumerated() {
            guard let step = thread.first, !ranThreads.contains(thread) else { continue }
            if step == .foundationStart && world.suspended { continue } // a suspended queue starts nothing
            ranThreads.append(thread)
            var copy = world
            copy.threads[index].removeFirst()
            let continuation = run(step, in: &copy)
            copy.threads[index].insert(contentsOf: continuation, at: 0)
            if copy.threads[index].isEmpty { copy.threads.remove(at: index) }
            next.append((.step(step), copy))
        }
        func event(_ label: @autoclosure () -> String, _ body: (inout World) -> Void) {
            var copy = world
            body(&copy)
            next.append((.event(label()), copy))
        }
        if scope.onQueue && !world.enqueued {
            event("queue.addOperation", enqueue)
        }
        if world.handStarts < scope.handStarts {
            event("start() by hand") { world in
                world.handStarts += 1
                world.spawn(handle(world.life.start(), in: &world, by: "start() by hand"))
            }
        }
        if world.cancels < scope.cancels {
            event("cancel(with: cancel\(world.cancels + 1))", cancel)
        }
        if world.finishes < scope.finishes {
            event("finish(with: finish\(world.finishes + 1))") { world in
                world.finishes += 1
                let heldForFoundation = world.life.phase == .ready && world.life.holdsCategories
                let action = world.life.finish(errors: [StubError("finish\(world.finishes)")])
                if heldForFoundation && (world.life.holdsCategories || Finish(action) != .releaseEarly) {
                    world.violate("finished while waiting for Foundation to start it, yet kept category A")
                }
                world.spawn([.perform(Finish(action))])
            }
        }
        if world.produces < scope.produces {
            event("produce(_:)") { world in
                world.produces += 1
                if case let .tell(observers, _) = world.life.announceProduced() {
                    world.spawn([.deliverDidProduce(observers: observers.count)])
                }
            }
        }
        if scope.lateDependency && !world.lateDependencyAdded && world.life.phase == .enqueuing {
            event("a dependency is added while it is being added") { world in
                world.lateDependencyAdded = true
                _ = world.life.addDependency(lateDependency)
            }
        }
        if scope.conditionWhileWaiting && !world.lateConditionAdded && world.life.phase == .pending {
            event("a condition is added while it waits") { world in
                world.lateConditionAdded = true
                let added = world.life.addCondition(ConstructedCondition(mutuallyExclusiveCategories: []), satisfiedByConstruction: true)
                guard case .addedWhileWaiting = added else {
                    world.violate("a condition added while it waits was answered \(added), not .addedWhileWaiting")
                    return
                }
            }
        }
        if scope.cycle && !world.cycleAdded && [.enqueuing, .pending].contains(world.life.phase) {
            event("a dependency closing a cycle is added") { world in
                world.cycleAdded = true
                if case .added = world.life.addDependency(cycleDependency) {
                    world.spawn([.recordCycle])
                }
            }
        }
        if scope.selfDependency && !world.selfDependencyAdded {
            event("it is made to depend on itself") { world in
                world.selfDependencyAdded = true
                let takesDependencies = [.initialized, .enqueuing, .pending].contains(world.life.phase)
                switch world.life.addSelfDependency(ObjectIdentifier(itself), name: "op") {
                case let .cycleRecorded(action):
                    if !takesDependencies { world.violate("a self-dependency recorded a cycle in phase \(world.life.phase)") }
                    world.selfCycleRecorded = true
                    world.spawn([.advance(Advance(action))])
                case .tooLate:
                    if takesDependencies { world.violate("a self-dependency was too late in phase \(world.life.phase)") }
                case .alreadyThere:
                    world.violate("a first self-dependency was taken for a second")
                }
            }
        }
        if world.lateConditionAdded && !world.lateConditionBrought {
            event("the late condition brings the dependency an earlier one brought") { world in
                world.lateConditionBrought = true
                let answer = world.life.addConditionDependency(dependency)
                if answer.kind != .broughtBefore {
                    world.violate("a condition bringing again what an earlier one brought was answered \(answer), not .broughtBefore: a plain queue holding it unstarted would be handed it twice")
                }
            }
        }
        if world.lateConditionBrought && !world.lateConditionAttached {
            event("the late condition's dependency is attached") { world in
                world.lateConditionAttached = true
                switch world.life.conditionDependencyAttached() {
                case .advance(.none):
                    return
                case let .advance(action):
                    world.spawn([.advance(Advance(action))])
                case .release:
                    if world.life.phase != .finished { world.violate("let go of what the conditions brought before it finished") }
                }
            }
        }
        if world.lateDependencyAdded && !world.lateDependencyFinished {
            event("the late dependency finishes") { world in
                world.lateDependencyFinished = true
                if case let .advance(action) = world.life.dependencyFinished(ObjectIdentifier(lateDependency)) {
                    world.spawn([.advance(Advance(action))])
                }
            }
        }
        if scope.dependency && !world.dependencyFinished {
            event("the dependency finishes") { world in
                world.dependencyFinished = true
                if case let .advance(action) = world.life.dependencyFinished(ObjectIdentifier(dependency)) {
                    world.spawn([.advance(Advance(action))])
                }
            }
        }
        for index in world.answersOwed {
            event("condition \(index) is satisfied") { answer(index, satisfied: true, in: &$0) }
            event("condition \(index) fails") { answer(index, satisfied: false, in: &$0) }
        }
        if scope.answersTwice {
            for index in world.answeredOnce.subtracting(world.answeredTwice).sorted() {
                event("condition \(index) answers again: satisfied") { answer(index, satisfied: true, in: &$0) }
                event("condition \(index) answers again: fails") { answer(index, satisfied: false, in: &$0) }
            }
        }
        if world.otherHolds {
            event("the other holder releases A") { world in
                world.otherHolds = false
                if world.inLine && world.eligible && !world.weHold {
                    grantFromLine(in: &world)
                    world.spawn([.categoriesWereGranted])
                }
            }
        }
        if scope.onQueue && world.suspensions < scope.suspensions && !world.suspended {
            event("queue suspended") { world in
                world.suspensions += 1
                world.suspended = true
                if world.heldByQueue { world.spawn([.suspendedLeaveLine]) }
            }
        }
        if world.suspended {
            event("queue resumed") { world in
                world.suspended = false
                var letThrough: [Step] = []
                if world.parkedForHandOff {
                    world.parkedForHandOff = false
                    giveToFoundation(in: &world, by: "a resume")
                }
                letThrough += Array(repeating: .continueTowardsExecution, count: world.parkedToProceed)
                world.parkedToProceed = 0
                if !letThrough.isEmpty { world.spawn(letThrough) }
            }
        }
        if world.continuationHandedOut && !world.continuationCalled {
            event("the continuation is called with an error") { world in
                world.continuationCalled = true
                guard !world.gateClosed else { return } // the gate let go of the operation
                let cancelled = world.life.isCancelled
                world.continuationCalledAfterCancel = cancelled
                let action = Finish(world.life.finishFromContinuation(errors: [StubError("continuation")]))
                if cancelled && action != .none {
                    world.violate("a continuation called after a cancel of the called block finished the operation")
                }
                world.spawn([.perform(action)])
            }
        }
        if world.heldFinishOwed {
            event("the group delivers its held finish") { world in
                world.heldFinishOwed = false
                let held = world.life.takeHeldFinish()
                if case .deliver = held {
                    world.spawn([.perform(Finish(held))])
                }
            }
        }
        return next
    }

    /// Events that must still come (a live system makes them happen eventually).
    func owesEvents(_ world: World) -> Bool {
        (scope.onQueue && !world.enqueued) || (!scope.onQueue && world.handStarts == 0)
            || (scope.dependency && !world.dependencyFinished) || !world.answersOwed.isEmpty
            || (world.lateDependencyAdded && !world.lateDependencyFinished)
            || (world.lateConditionAdded && !world.lateConditionAttached)
            || world.otherHolds || world.suspended || world.heldFinishOwed
            || (world.continuationHandedOut && !world.continuationCalled && !world.gateClosed)
    }

    private func enqueue(_ world: inout World) {
        world.enqueued = true
        switch world.life.enqueue(on: queue, ticket: 1) {
        case .reject:
            break
        case .handOffNow:
            if world.suspended {
                world.heldByQueue = true
                world.parkedForHandOff = true
            } else {
                giveToFoundation(in: &world, by: "an add")
            }
        case let .runPipeline(_, turn):
            // As `AsyncOperationQueue.admit`: it asks for its turn as it is held if it waits for
            // nothing known and its conditions name no category. Being held is a step of its own:
            // a finish from elsewhere may come first.
            let asksTurn = turn == .asHeld && scope.categories.isEmpty
            world.spawn([.admitHeld(askingTurn: asksTurn)])
        }
    }

    private func cancel(_ world: inout World) {
        world.cancels += 1
        world.cancelCalled = true
        let heldForFoundation = world.life.phase == .ready && world.life.holdsCategories
        guard case let .cancel(observers, followUp) = world.life.cancel(error: StubError("cancel\(world.cancels)")) else { return }
        var releases = false
        if case .releaseCategories = followUp { releases = true }
        var interrupts = false
        if case .interruptExecution = followUp { interrupts = true }
        if heldForFoundation && (world.life.holdsCategories || !releases) {
            world.violate("cancelled while waiting for Foundation to start it, yet kept category A")
        }
        world.spawn([.deliverDidCancel(observers: observers.count, releasesCategories: releases, interruptsExecution: interrupts)])
    }

    private func answer(_ index: Int, satisfied: Bool, in world: inout World) {
        if world.answeredOnce.insert(index).inserted {
            world.answersOwed.removeAll { $0 == index }
            if satisfied { world.satisfiedConditions.insert(index) }
        } else {
            world.answeredTwice.insert(index) // the lifecycle must ignore it
        }
        let result: ConditionResult = satisfied ? .satisfied : .failed(StubError("condition\(index)"))
        if let steps = handle(world.life.conditionAnswered(index: index, result: result), in: &world) {
            world.spawn(steps)
        }
    }

    /// The answers of the conditions at `indices`, which answer at once.
    private func atOnceAnswers(_ indices: [Int], in world: inout World) -> AnsweredConditions {
        var answers = AnsweredConditions()
        for index in indices {
            guard case let .atOnce(satisfied) = scope.conditions[index] else { continue }
            answers.add(satisfied ? .satisfied : .failed(StubError("condition\(index)")), of: index)
            if satisfied { world.satisfiedConditions.insert(index) }
        }
        return answers
    }

    private func handle(_ action: OperationLifecycle.ConditionAction, in world: inout World, suspensionJustChecked: Bool = false) -> [Step]? {
        switch action {
        case .none: return nil
        case let .failed(errors): return [.finish(errors: labels(errors))]
        case let .passed(categories, _):
            if categories.isEmpty { world.violate("conditions passed with no categories, yet did not clear the operation") }
            return [.acquire(hasCategories: true, suspensionJustChecked: suspensionJustChecked)]
        case let .cleared(_, then):
            if !scope.categories.isEmpty { world.violate("conditions cleared the operation, though it needs categories") }
            return [grant(then, in: &world)]
        }
    }

    /// What `start()` does with the lifecycle's answer.
    private func handle(_ action: OperationLifecycle.StartAction, in world: inout World, by caller: String) -> [Step] {
        switch action {
        case .none, .reportOutOfTurn:
            return []
        case let .execute(observers, queue, ticket):
            checkExecutionDecided(in: &world, by: caller)
            checkQueueTold(queue, ticket, in: &world, by: caller)
            world.announcingStart = true // from the lifecycle's answer on
            return [.deliverDidStart(observers: observers.count)]
        case let .finish(action):
            return [.perform(Finish(action))]
        case .finishNotReady:
            return [.finish(errors: ["notReady"])]
        case .runPipelineInline:
            return [.finishEnqueuing]
        case .acquireCategories:
            return [.acquire(hasCategories: true, suspensionJustChecked: true)] // started by Foundation: asks without parking
        }
    }

    // MARK: Steps

    /// What the thread does once the evaluation began as `start` says.
    private func steps(after start: OperationLifecycle.EvaluationStart, in world: inout World) -> [Step] {
        switch start {
        case .alreadyHandedOut:
            return []
        case let .handOut(awaited):
            if (scope.dependency && !world.dependencyFinished) || (world.lateDependencyAdded && !world.lateDependencyFinished) {
                world.violate("hands its conditions out before every dependency finished")
            }
            if world.lateConditionAdded && !world.lateConditionAttached {
                world.violate("hands its conditions out before the dependency of one added while it waited is attached")
            }
            let handedOut = scope.conditions.indices.filter { awaited.contains($0) }
            #expect(handedOut == scope.conditions.indices.filter { scope.conditions[$0] != .byConstruction },
                    "only the conditions that are not satisfied by construction are handed out")
            world.answersOwed = handedOut.filter { scope.conditions[$0] == .answered }
            // As `handOut` does: answers given at once before a condition evaluated the usual
            // way are taken before it is handed out, the others with the end of the handing out.
            var steps: [Step] = []
            var answeredAtOnce: [Int] = []
            for index in handedOut {
                if scope.conditions[index] != .answered {
                    answeredAtOnce.append(index)
                } else if !answeredAtOnce.isEmpty {
                    steps.append(.conditionsAnsweredAtOnce(answeredAtOnce))
                    answeredAtOnce = []
                }
            }
            return steps + [.conditionsHandedOut(atOnce: answeredAtOnce)]
        case let .settled(action):
            return handle(action, in: &world, suspensionJustChecked: true) ?? []
        }
    }

    /// Takes one step; returns the steps the same thread takes next.
    private func run(_ step: Step, in world: inout World) -> [Step] {
        switch step {
        case let .admitHeld(askingTurn):
            world.heldByQueue = true
            guard askingTurn && !world.suspended else { return [.finishEnqueuing] } // a suspended queue gives no turn
            world.holdsTurnFromAdd = true
            return [.finishEnqueuingHoldingTurn]

        case .finishEnqueuing:
            switch world.life.finishEnqueuing(attached: scope.conditions.count) {
            case let .advance(action):
                return [.advance(Advance(action))]
            case .attachConditions:
                world.violate("asked to attach conditions, though none was added during the add")
                return []
            case let .finishedWhileAdded(turnToForget, released):
                if ![.finishing, .finished].contains(world.life.phase) { world.violate("ended its add as a finished operation's before it began finishing") }
                if !released.isEmpty && world.life.phase != .finished { world.violate("let go of what the conditions brought before it finished") }
                guard turnToForget != nil else { return [] }
                if world.life.phase != .finished { world.violate("let its queue go of it before it finished") }
                queueHearsFinishBeforeHandOff(in: &world) // again
                return []
            }

        case .finishEnqueuingHoldingTurn:
            switch world.life.finishEnqueuing(holdingTurnWith: scope.conditions.count) {
            case let .evaluate(start):
                return steps(after: start, in: &world)
            case .giveBackTurn:
                if ![.enqueuing, .finishing, .finished].contains(world.life.phase) {
                    world.violate("gave back the turn it took as it was held, no longer being added")
                }
                world.holdsTurnFromAdd = false // `endTurn`, then the add ends as usual
                return [.finishEnqueuing]
            }

        case let .advance(action):
            switch action {
            case .none:
                return []
            case .closeCycle:
                return [.finishClosingCycle]
            case let .finish(errors):
                return [.finish(errors: errors)]
            case let .evaluate(onQueue), let .proceed(onQueue):
                if onQueue && world.suspended { // requestTurn: a suspended queue parks it
                    world.parkedToProceed = 1 // the scheduler holds an operation in line once
                    return []
                }
                if case .evaluate = action { return [.evaluate(takingTurn: onQueue)] }
                if onQueue { return [.turnToProceed] }
                return [.acquire(hasCategories: false, suspensionJustChecked: false)]
            }

        case let .evaluate(takingTurn):
            let start: OperationLifecycle.EvaluationStart
            if takingTurn {
                switch world.life.turnTakenToEvaluate(categories: scope.categories) {
                case let .evaluate(evaluationStart):
                    start = evaluationStart
                case .giveBack:
                    if world.life.phase != .finished { world.violate("gave its turn back without having finished") }
                    return [] // it finished first: the turn goes to the next one
                }
            } else {
                start = world.life.beginEvaluating(categories: scope.categories)
            }
            return steps(after: start, in: &world)

        case .turnToProceed:
            switch world.life.turnTakenToProceed() {
            case let .proceed(then):
                return [grant(then, in: &world)]
            case .giveBack:
                if world.life.phase != .finished { world.violate("gave its turn back without having finished") }
                return [] // it finished first: the turn goes to the next one
            }

        case let .conditionsAnsweredAtOnce(indices):
            return handle(world.life.conditionsAnswered(atOnceAnswers(indices, in: &world)), in: &world) ?? []

        case let .conditionsHandedOut(indices):
            // Every condition's evaluate(for:) was called, and those that answer at once answered;
            // a finish meanwhile waited for this.
            let handedOut = world.life.conditionsHandedOut(answeredAtOnce: atOnceAnswers(indices, in: &world))
            return (handle(handedOut.settled, in: &world, suspensionJustChecked: false) ?? []) + [.perform(Finish(handedOut.then))]

        case let .acquire(hasCategories, suspensionJustChecked):
            guard hasCategories else { return [grant(world.life.proceedWithoutCategories(), in: &world)] }
            if !suspensionJustChecked, world.life.queue != nil, world.suspended {
                return [.acquireLeaveLine, .parkOrEnterLine]
            }
            return [.enterLine]

        case .acquireLeaveLine:
            guard case .withdraw = world.life.leaveLine() else { return [] }
            return [.withdraw]

        case .withdraw:
            _ = withdraw(in: &world)
            return []

        case .parkOrEnterLine:
            if world.suspended {
                world.parkedToProceed = 1 // the scheduler holds an operation in line once
                return []
            }
            return [.enterLine]

        case .enterLine:
            guard case .ask = world.life.enterLine() else { return [] }
            return [.exclusivityAcquire]

        case .exclusivityAcquire:
            return acquire(in: &world) ? [.categoriesWereGranted] : []

        case .categoriesWereGranted:
            return [grant(world.life.categoriesGranted(), in: &world)]

        case let .grant(action):
            switch action {
            case .none:
                return []
            case let .handOff(holds):
                return world.life.queue == nil ? [] : [.queueHandOff(holdsCategories: holds)]
            case let .startExecuting(observers):
                return [.deliverDidStart(observers: observers)]
            case let .finish(finish):
                return [.perform(finish)]
            case .releaseAtOnce:
                let categories = world.life.categories // what the operation gives back
                if categories.sorted() != scope.categories.sorted() {
                    world.violate("a grant after the finish gives back \(categories), not the categories granted")
                }
                return release(in: &world, by: "categoriesGranted() after the finish")
            }

        case let .queueHandOff(holds):
            if world.suspended && holds { return [.giveBackCategories] }
            giveToFoundation(in: &world, by: "a hand-off")
            return []

        case .giveBackCategories:
            guard case .release = world.life.returnCategoriesWhileSuspended() else {
                return world.life.queue == nil ? [] : [.queueHandOff(holdsCategories: false)]
            }
            return [.releaseReturnedCategories, .parkAfterGivingBack]

        case .releaseReturnedCategories:
            return release(in: &world, by: "returnCategoriesWhileSuspended()")

        case .parkAfterGivingBack:
            if world.suspended {
                world.parkedToProceed = 1 // the scheduler holds an operation in line once
                return []
            }
            return [.continueTowardsExecution]

        case .continueTowardsExecution:
            switch world.life.resumeAfterSuspension() {
            case .none: return []
            case .evaluateConditions: return [.evaluate(takingTurn: false)]
            case let .acquireCategories(categories):
                return [.acquire(hasCategories: !categories.isEmpty, suspensionJustChecked: false)]
            case .giveBackTurn: // the queue's turn goes on: only for one finished and never handed off
                if world.life.phase != .finished {
                    world.violate("a turn given back by an operation in phase \(world.life.phase)")
                }
                return []
            }

        case .suspendedLeaveLine: // reads where it stands, under the lifecycle's lock
            let life = world.life
            guard life.phase == .waitingForCategories, life.isInLine, !life.holdsCategories,
                  !life.categories.isEmpty, life.queue != nil else { return [] }
            return [.suspendedWithdraw]

        case .suspendedWithdraw: // ExclusivityState.withdraw
            guard world.inLine && world.eligible else { return [] }
            return withdraw(in: &world) ? [.suspendedForgetLine] : []

        case .suspendedForgetLine:
            _ = world.life.leaveLine()
            return [.suspendedPark]

        case .suspendedPark:
            guard world.life.queue != nil else { return [] }
            if world.suspended {
                world.parkedToProceed = 1 // the scheduler holds an operation in line once
                return []
            }
            return [.continueTowardsExecution]

        case .foundationStart:
            return handle(world.life.start(), in: &world, by: "Foundation's start()")

        case let .deliverDidStart(observers):
            deliver("operationDidStart", to: observers, in: &world)
            world.didStart += 1
            if world.didStart > 1 { world.violate("operationDidStart delivered twice") }
            return [.afterDidStart]

        case .afterDidStart:
            world.announcingStart = false
            return afterStart(world.life.startDelivered(), in: &world)

        case let .deliverDidCancelAfterStart(observers, interrupts):
            deliver("operationDidCancel", to: observers, in: &world)
            world.didCancel += 1
            if world.didCancel > 1 { world.violate("operationDidCancel delivered twice") }
            if world.didStart == 0 { world.violate("a cancel held back for the start was delivered without operationDidStart") }
            if interrupts && scope.continuationBlock { return [.blockCancelled, .afterDidCancelAfterStart] }
            return [.afterDidCancelAfterStart]

        case .afterDidCancelAfterStart:
            return afterStart(world.life.cancelDeliveredAfterStart(), in: &world)

        case .beginBlock:
            guard case .call = world.life.beginBlock() else {
                return [.finishAfterExecuting] // a cancel came first: it finishes without calling the block
            }
            if world.life.isCancelled { world.violate("the block was called although its operation was cancelled") }
            return [.handContinuation]

        case .handContinuation:
            world.life.awaitContinuation(through: gate)
            world.continuationHandedOut = true
            return [.blockReturned]

        case .blockReturned:
            return world.life.blockReturned() == .finishNow ? [.finishAfterExecuting] : []

        case .blockCancelled:
            switch world.life.blockCancelled() {
            case .nothing:
                return []
            case .finishNow:
                return [.finishAfterExecuting]
            case .ignoreContinuation:
                world.gateClosed = true
                return []
            }

        case .recordCycle:
            switch world.life.recordCycle(through: ObjectIdentifier(cycleDependency), name: "cycle", wasCounted: true) {
            case let .recorded(action):
                return [.advance(Advance(action))]
            case .dependencyRemoved:
                world.violate("the cycle's dependency, never removed, was taken for removed")
                return []
            }

        case .finishClosingCycle:
            return [.perform(Finish(world.life.finishClosingCycle(operationName: "op")))]

        case .finishAfterExecuting:
            return [.perform(Finish(world.life.finish(errors: [])))]

        case let .deliverDidCancel(observers, releases, interrupts):
            deliver("operationDidCancel", to: observers, in: &world)
            if world.announcingStart { world.violate("operationDidCancel delivered while operationDidStart was being announced") }
            world.didCancel += 1
            if world.didCancel > 1 { world.violate("operationDidCancel delivered twice") }
            return [.afterDidCancel(releasesCategories: releases, interruptsExecution: interrupts)]

        case let .afterDidCancel(releases, interrupts):
            let heldBack = Finish(world.life.notificationDelivered())
            if releases { return [.releaseCategoriesOnCancel, .perform(heldBack)] }
            if interrupts && scope.continuationBlock { return [.blockCancelled, .perform(heldBack)] }
            return [.perform(heldBack)]

        case .releaseCategoriesOnCancel:
            return release(in: &world, by: "a cancel after the hand-off")

        case let .deliverDidProduce(observers):
            deliver("operation(_:didProduce:)", to: observers, in: &world)
            world.didProduce += 1
            return [.afterDidProduce]

        case .afterDidProduce:
            return [.perform(Finish(world.life.notificationDelivered()))]

        case let .finish(errors):
            return [.perform(Finish(world.life.finish(errors: errors.map { StubError($0) })))]

        case let .perform(action):
            switch action {
            case .none, .duplicate:
                return []
            case .releaseEarly:
                return release(in: &world, by: "a finish after the hand-off")
            case let .deliver(observers, errors, mayBeHeld):
                return mayBeHeld ? [.offerToHold(action)] : [.deliverDidFinish(observers: observers, errors: errors)]
            }

        case let .offerToHold(action):
            guard case let .deliver(observers, errors, _) = action else { return [] }
            guard world.life.offerToHoldFinish() == .offer else { return [.deliverDidFinish(observers: observers, errors: errors)] }
            if scope.holdsFinish {
                world.heldFinishOwed = true
                return []
            }
            return [.takeBackOffer(action)]

        case .takeBackOffer:
            // What is delivered is read as the hold ends (a group's children may have added errors).
            guard case let .deliver(observers, errors, _) = Finish(world.life.takeHeldFinish()) else { return [] }
            return [.deliverDidFinish(observers: observers, errors: errors)]

        case let .deliverDidFinish(observers, errors):
            deliver("operationDidFinish", to: observers, in: &world)
            world.didFinish += 1
            if world.didFinish > 1 { world.violate("operationDidFinish delivered twice") }
            world.deliveredErrors = errors
            return [.completeFinish]

        case .completeFinish:
            if world.didFinish == 0 { world.violate("completeFinish() before operationDidFinish was delivered") }
            let remains = world.life.completeFinish()
            world.gateClosed = true // releaseResources(): the gate lets go of the operation
            world.completed += 1
            if world.completed > 1 { world.violate("completeFinish() called twice") }
            if let delivered = world.deliveredErrors, labels(remains.errors) != delivered {
                world.violate("isFinished with errors \(labels(remains.errors)), observers heard \(delivered)")
            }
            return [.remains(release: !remains.categoriesToRelease.isEmpty,
                             withdraw: !remains.categoriesToWithdraw.isEmpty,
                             wasHandedOff: remains.wasHandedOff)]

        case let .remains(release, withdraw, wasHandedOff):
            var next: [Step] = []
            if withdraw { _ = self.withdraw(in: &world) }
            if release { next = self.release(in: &world, by: "completeFinish()") }
            if !wasHandedOff {
                queueHearsFinishBeforeHandOff(in: &world)
            }
            return next
        }
    }

    /// The queue's `finishedBeforeHandOff`: it holds the operation no more, in no line, with no turn.
    private func queueHearsFinishBeforeHandOff(in world: inout World) {
        world.heldByQueue = false
        world.holdsTurnFromAdd = false
        world.parkedToProceed = 0
        world.parkedForHandOff = false
    }

    /// The lifecycle's answer to a grant; its decision to execute is checked when it is made.
    private func grant(_ action: OperationLifecycle.GrantAction, in world: inout World) -> Step {
        if case let .startExecuting(_, queue, ticket) = action {
            checkExecutionDecided(in: &world, by: "a grant to an operation started by hand")
            checkQueueTold(queue, ticket, in: &world, by: "a grant to an operation started by Foundation")
            world.announcingStart = true // from the lifecycle's answer on
        }
        return .grant(Grant(action))
    }

    // MARK: The storage's collaborators

    /// What the operation does once its start (and a cancel held back for it) was announced.
    private func afterStart(_ action: OperationLifecycle.AfterStartAction, in world: inout World) -> [Step] {
        switch action {
        case let .finish(heldBack):
            return [.perform(Finish(heldBack))]
        case .skipExecution:
            return []
        case let .deliverCancel(observers, followUp):
            var interrupts = false
            if case .interruptExecution = followUp { interrupts = true }
            return [.deliverDidCancelAfterStart(observers: observers.count, interruptsExecution: interrupts)]
        case .execute:
            break
        }
        world.executed += 1
        if world.executed > 1 { world.violate("execute() called twice") }
        if world.didFinish > 0 { world.violate("execute() called after operationDidFinish") }
        if world.life.phase == .finishing {
            if checkedBugs.contains(.executesAfterFinishAccepted) {
                world.violate("execute() called after the operation's finish was accepted (phase finishing)")
            }
        } else if world.life.phase != .executing {
            world.violate("execute() called in phase \(world.life.phase)")
        }
        if !scope.categories.isEmpty && !world.weHold { world.violate("execute() called without holding its category") }
        return scope.continuationBlock ? [.beginBlock] : [.finishAfterExecuting] // the work is done some time: the subclass finishes
    }

    private func deliver(_ notification: String, to observers: Int, in world: inout World) {
        if observers != 1 { world.violate("\(notification) delivered to \(observers) observers instead of 1") }
        if world.didFinish > 0 { world.violate("\(notification) delivered after operationDidFinish") }
    }

    /// The lifecycle decided to execute: nothing may stand in the way any more.
    private func checkExecutionDecided(in world: inout World, by caller: String) {
        if world.cancelCalled { world.violate("\(caller) decided to execute although it was cancelled before") }
        if world.executed > 0 || world.didStart > 0 { world.violate("\(caller) decided to execute a second time") }
        if scope.dependency && !world.dependencyFinished { world.violate("\(caller) decided to execute before its dependency finished") }
        if world.lateDependencyAdded && !world.lateDependencyFinished {
            world.violate("\(caller) decided to execute before the dependency added while it was being added finished")
        }
        let answered = scope.conditions.indices.filter { scope.conditions[$0] != .byConstruction }
        if !answered.allSatisfy(world.satisfiedConditions.contains) {
            world.violate("\(caller) decided to execute before its conditions were satisfied")
        }
        if !scope.categories.isEmpty && !world.weHold { world.violate("\(caller) decided to execute without its category") }
    }

    /// An operation its queue gave to Foundation tells that queue when it starts (a serial queue's
    /// turn lasts until then): the action names the queue, and the ticket it was added with.
    private func checkQueueTold(_ queue: AsyncOperationQueue?, _ ticket: UInt64, in world: inout World, by caller: String) {
        guard world.onFoundation, world.life.queue != nil, !scope.isMisuse else { return }
        if queue == nil { world.violate("\(caller) executes an operation its queue gave to Foundation without telling the queue") }
        if ticket != world.life.ticket { world.violate("\(caller) names ticket \(ticket), not the one it was added with") }
    }

    private func giveToFoundation(in world: inout World, by cause: String) {
        if world.onFoundation { world.violate("\(cause) gave the operation to Foundation's queue a second time") }
        if world.life.phase == .finished && !scope.isMisuse {
            world.violate("\(cause) gave a finished operation to Foundation's queue")
        }
        world.onFoundation = true
        world.heldByQueue = false
        world.holdsTurnFromAdd = false
        world.spawn([.foundationStart])
    }

    private func grantFromLine(in world: inout World) {
        world.inLine = false
        world.eligible = false
        world.weHold = true
    }

    /// `ExclusivityState.acquire` for one category: `true` if granted now.
    private func acquire(in world: inout World) -> Bool {
        if world.weHold && !world.inLine && checkedBugs.contains(.asksAgainWhileHolding) {
            world.violate("asks for category A again while it holds it (it will be granted A twice)")
        }
        if world.inLine {
            world.eligible = true
            guard !world.otherHolds, !world.weHold else { return false }
            grantFromLine(in: &world)
            return true
        }
        if !world.otherHolds && !world.weHold {
            world.weHold = true
            return true
        }
        world.inLine = true
        world.eligible = true
        return false
    }

    /// `ExclusivityState.release`: the next eligible waiter (this operation itself, if it asked
    /// again) is granted on the releasing thread.
    private func release(in world: inout World, by cause: String) -> [Step] {
        guard world.weHold else {
            world.violate("\(cause) gave back category A, which the operation does not hold (given back twice?)")
            return []
        }
        world.weHold = false
        if world.inLine && world.eligible {
            grantFromLine(in: &world)
            return [.categoriesWereGranted]
        }
        return []
    }

    /// `ExclusivityState.withdraw`: whether it stood in line.
    private func withdraw(in world: inout World) -> Bool {
        guard world.inLine else { return false }
        world.inLine = false
        world.eligible = false
        return true
    }

    // MARK: Invariants

    /// What must hold in every reachable state.
    func checkState(_ world: inout World) {
        let life = world.life
        if let delivered = world.deliveredErrors, labels(life.errors) != delivered {
            world.violate("errors changed after operationDidFinish: observers heard \(delivered), now \(labels(life.errors))")
        }
        if life.phase == .finished && world.completed == 0 { world.violate("isFinished before completeFinish()") }
        if life.phase == .finished && life.isExecutingForFoundation { world.violate("isExecuting after isFinished") }
        if world.onFoundation && !life.isReadyForFoundation {
            world.violate("on Foundation's queue but not isReady (phase \(life.phase))")
        }
        if world.executed > 0 && world.didStart == 0 { world.violate("execute() without operationDidStart") }
        if world.executed > 0 && world.selfCycleRecorded { world.violate("executed though it depends on itself") }
        if world.continuationCalledAfterCancel && labels(life.errors).contains("continuation") {
            world.violate("the error of a continuation called after a cancel is among the operation's errors")
        }
        if life.phase == .ready && (life.isCancelled || life.finishRequestedBeforeStart) && life.holdsCategories
            && checkedBugs.contains(.keepsCategoryItWillNotUse) {
            world.violate("waits for Foundation to start it, will not execute, yet keeps category A")
        }
    }

    /// What must hold once nothing is left to happen.
    func checkTerminal(_ world: inout World) {
        let life = world.life
        if world.didFinish != 1 {
            world.violate("stuck: nothing left to happen, operationDidFinish delivered \(world.didFinish) times (phase \(life.phase))")
        }
        if life.phase != .finished { world.violate("stuck: nothing left to happen, but phase is \(life.phase)") }
        if world.weHold || life.holdsCategories { world.violate("category A still held after the finish") }
        if world.inLine { world.violate("still standing in category A's line after the finish") }
        if world.heldByQueue || world.parkedToProceed > 0 || world.parkedForHandOff {
            world.violate("the queue still holds the finished operation")
        }
        if world.holdsTurnFromAdd { world.violate("the finished operation still holds the turn its queue gave it") }
        if life.holdsConditionDependencies {
            world.violate("the finished operation keeps what its conditions brought: a dependency that waits for it would keep both alive for ever")
        }
    }
}

// MARK: - The search

/// What led from one state to the next.
private enum Move {
    case step(Step)
    case event(String)

    var description: String {
        switch self {
        case let .step(step): "  storage: \(step)"
        case let .event(event): "event: \(event)"
        }
    }
}

private struct ExplorationResult {
    var states = 0
    var terminals = 0
    var hitStateLimit = false
    /// The first violation found, with a shortest sequence of events leading to it.
    var counterexample: (violations: [String], path: [String])?
}

private func explore(_ scope: LifecycleScope, checking checkedBugs: Set<KnownBug> = KnownBug.all,
                     stateLimit: Int = 2_000_000) -> ExplorationResult {
    let explorer = Explorer(scope, checking: checkedBugs)
    var result = ExplorationResult()
    var visited: [World.Key: Int] = [:]
    var worlds: [World] = [explorer.initialWorld()]
    var parents: [Int] = [-1]
    var moves: [Move] = [.event("")]
    /// Who leads to each state, and the states where the operation may rest, finished.
    var predecessors: [[Int]] = [[]]
    var terminals: [Int] = []
    visited[worlds[0].key] = 0
    var head = 0
    func path(to index: Int) -> [String] {
        var path: [String] = []
        var index = index
        while index > 0 {
            path.append(moves[index].description)
            index = parents[index]
        }
        return path.reversed()
    }
    while head < worlds.count, worlds.count < stateLimit {
        let world = worlds[head]
        let index = head
        worlds[head] = World() // let go of explored states
        head += 1
        let successors = explorer.successors(of: world)
        if successors.isEmpty || (world.threads.isEmpty && !explorer.owesEvents(world)) {
            result.terminals += 1
            terminals.append(index)
            var checked = world
            explorer.checkTerminal(&checked)
            if !checked.violations.isEmpty {
                result.counterexample = (checked.violations, path(to: index))
                break
            }
        }
        for (move, successor) in successors {
            var next = successor
            explorer.checkState(&next)
            // Checked before merging: a violation belongs to the move, and the state it reaches
            // may have been reached harmlessly before.
            if !next.violations.isEmpty {
                result.counterexample = (next.violations, path(to: index) + [move.description])
                break
            }
            let key = next.key
            if let known = visited[key] {
                predecessors[known].append(index)
                continue
            }
            visited[key] = worlds.count
            worlds.append(next)
            parents.append(index)
            moves.append(move)
            predecessors.append([index])
        }
        if result.counterexample != nil { break }
    }
    result.states = worlds.count
    result.hitStateLimit = head < worlds.count && result.counterexample == nil
    guard result.counterexample == nil, !result.hitStateLimit else { return result }
    // Every state must still be able to reach a finished rest: none may loop forever unfinished.
    var canFinish = [Bool](repeating: false, count: worlds.count)
    var stack = terminals
    for index in terminals { canFinish[index] = true }
    while let index = stack.popLast() {
        for predecessor in predecessors[index] where !canFinish[predecessor] {
            canFinish[predecessor] = true
            stack.append(predecessor)
        }
    }
    if let stuck = canFinish.firstIndex(of: false) {
        result.counterexample = (["stuck: from here the operation can never finish (it only loops)"], path(to: stuck))
    }
    return result
}

private func expectNoCounterexample(in scope: LifecycleScope, checking checkedBugs: Set<KnownBug> = KnownBug.all) async {
    let result = await offThePool { explore(scope, checking: checkedBugs) }
    #expect(result.terminals > 0, "OperationLifecycle exploration, \(scope.name): \(result.states) states, \(result.terminals) terminal")
    if let (violations, path) = result.counterexample {
        Issue.record("""
            \(scope.name): \(violations.joined(separator: "; "))
            after \(path.count) steps:
              \(path.joined(separator: "\n  "))
            """)
        return
    }
    #expect(!result.hitStateLimit, "\(scope.name): the state limit cut the exploration short")
    #expect(result.states >= scope.minimumStates, "\(scope.name): only \(result.states) states explored")
    #expect(result.terminals >= scope.minimumTerminals, "\(scope.name): only \(result.terminals) terminal states")
}

@Suite struct OperationLifecycleExplorationTests {
    @Test(arguments: LifecycleScope.all)
    func everyInterleaving_keepsTheLifecycleRules(scope: LifecycleScope) async {
        await expectNoCounterexample(in: scope)
    }

    /// Fixed engine bug: `execute()` ran on an operation whose finish was already accepted (now
    /// `startDelivered()` says to skip it).
    ///
    /// Shortest sequence (6 steps): the queue hands the operation to Foundation, which calls
    /// `start()` (`.execute`, `operationDidStart` in flight); observers hear `operationDidStart`;
    /// `cancel(with:)` puts `operationDidCancel` in flight too; `finish(with:)` is accepted (phase
    /// `.finishing`) and held back for the two notifications; then `notificationDelivered()` after
    /// `operationDidStart` returns `.none`, as `operationDidCancel` is still in flight, and
    /// `beginExecution` calls `execute()`. `operationDidFinish` and `isFinished` then come from the
    /// cancelling thread, possibly while `execute()` still runs. (An observer of
    /// `operationDidCancel` that finishes the operation is enough for the finish.)
    @Test func regression_executeRunsAfterItsFinishWasAccepted() async {
        await expectNoCounterexample(
            in: LifecycleScope(name: "plain, execute after finish", minimumStates: 1, minimumTerminals: 1),
            checking: [.executesAfterFinishAccepted]
        )
    }

    /// Fixed engine bug: an operation was granted its category twice when its queue was suspended
    /// and resumed while it asked for the category (now only an eligible waiter steps out of line).
    ///
    /// Shortest sequence (18 steps): the operation evaluates its condition, holding a reservation in
    /// A's line; the condition is satisfied and `acquire` calls `enterLine()`; before its request
    /// reaches the exclusivity controller, the queue is suspended: `leaveLine()` and `withdraw`
    /// take the reservation out of line; the request then finds A free and is granted it
    /// (`categoriesWereGranted()` still to come); the suspension parks the operation; the queue
    /// resumes: `resumeAfterSuspension()` still sees `.waitingForCategories` without categories, so
    /// the operation calls `enterLine()` and asks for A again, and waits in A's line behind itself.
    /// When it gives A back (finishing, a cancel or finish before Foundation starts it, a
    /// suspension), A is granted to it again: a cancelled operation waiting for a busy or
    /// suspended Foundation queue then keeps A, and every other operation of A, on every queue,
    /// waits (22 steps to that state: the above, then `categoriesWereGranted()` clears it to run
    /// (`.ready`), `finish(with:)` releases A early, and the stale request is granted A again).
    @Test func regression_grantedItsCategoryTwice() async {
        let scope = LifecycleScope(name: "exclusive, granted twice", conditions: [.answered], categories: ["A"],
                                   finishes: 1, suspensions: 1, minimumStates: 1, minimumTerminals: 1)
        await expectNoCounterexample(in: scope, checking: [.asksAgainWhileHolding])
        await expectNoCounterexample(in: scope, checking: [.keepsCategoryItWillNotUse])
    }
}
