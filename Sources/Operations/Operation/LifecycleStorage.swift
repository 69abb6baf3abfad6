import Foundation

/// An operation's lifecycle behind its lock: the one place that takes that lock.
///
/// Each method is one event or one question. It takes the lock once, hands the event to the pure
/// `OperationLifecycle`, and returns the machine's answer: an action that carries everything the
/// operation needs to perform it after the lock is released, or the facts asked for, read in one
/// look. Nothing here calls user code or releases what a user gave: the lock is held only for
/// the machine's own step.
struct LifecycleStorage {
    private let locked: Locked<OperationLifecycle>

    /// `block`: an `AsyncBlockOperation`'s block, kept under the same lock.
    init(block: BlockInvocation.Body? = nil) {
        locked = Locked.make { OperationLifecycle(block: block) }
    }

    // MARK: - Questions

    var phase: OperationLifecycle.Phase { locked.withLock { $0.phase } }
    var queue: AsyncOperationQueue? { locked.withLock { $0.queue } }
    var ticket: UInt64 { locked.withLock { $0.ticket } }
    var isCancelled: Bool { locked.withLock { $0.isCancelled } }
    var errors: [any Error] { locked.withLock { $0.errors } }
    var hasErrors: Bool { locked.withLock { !$0.errors.isEmpty } }
    var outcome: OperationLifecycle.Outcome { locked.withLock { $0.outcome } }
    var output: (any Sendable)? { locked.withLock { $0.output } }
    var dependencies: [Operation] { locked.withLock { $0.dependencies }.array }
    /// Who waits for the operation, weakly: check liveness after unlocking.
    var dependents: SmallArray<WeakFinishWatcher> { locked.withLock { $0.dependents } }
    var logger: LoggingObserver? { locked.withLock { $0.logger } }
    var categoryLockGate: CategoryLockGate? { locked.withLock { $0.categoryLockGate } }
    var heldCategories: [String] { locked.withLock { $0.heldCategories } }
    var readiness: OperationLifecycle.Readiness { locked.withLock { $0.readiness } }
    var isExecutingForFoundation: Bool { locked.withLock { $0.isExecutingForFoundation } }
    var inspection: OperationLifecycle.Inspection { locked.withLock { $0.inspection } }
    var waitStart: OperationLifecycle.WaitStart { locked.withLock { $0.waitStart } }
    var lastKnownQueue: QueueMention? { locked.withLock { $0.lastKnownQueue } }
    var placeOnQueue: OperationLifecycle.PlaceOnQueue { locked.withLock { $0.placeOnQueue } }
    var addAcceptance: OperationLifecycle.AddAcceptance { locked.withLock { $0.addAcceptance } }
    var standingInLine: OperationLifecycle.StandingInLine? { locked.withLock { $0.standingInLine } }
    var unansweredConditions: [(index: Int, condition: any OperationCondition)] { locked.withLock { $0.unansweredConditions } }

    func afterWaitTimedOut(_ timedOut: AsyncOperationError) -> OperationLifecycle.TimedOutWait { locked.withLock { $0.afterWaitTimedOut(timedOut) } }
    func isLinked(toUpstream upstream: ObjectIdentifier) -> Bool { locked.withLock { $0.isLinked(toUpstream: upstream) } }
    func awaitedCondition(at index: Int) -> (any OperationCondition)? { locked.withLock { $0.awaitedCondition(at: index) } }

    // MARK: - Configuration

    func addDependency(_ operation: Operation) -> OperationLifecycle.DependencyAddition { locked.withLock { $0.addDependency(operation) } }
    func removeDependency(_ operation: Operation) -> OperationLifecycle.Removal { locked.withLock { $0.removeDependency(operation) } }
    func recordCycle(through dependency: ObjectIdentifier, name: String, wasCounted: Bool) -> OperationLifecycle.CycleRecording { locked.withLock { $0.recordCycle(through: dependency, name: name, wasCounted: wasCounted) } }
    func addSelfDependency(_ id: ObjectIdentifier, name: String) -> OperationLifecycle.SelfDependency { locked.withLock { $0.addSelfDependency(id, name: name) } }
    func addConditionDependency(_ operation: Operation) -> OperationLifecycle.ConditionDependencyAddition { locked.withLock { $0.addConditionDependency(operation) } }
    func watch(_ id: ObjectIdentifier, with watcher: DependencyWatcher.Subscription) -> OperationLifecycle.WatcherKeeping { locked.withLock { $0.watch(id, with: watcher) } }

    /// Widens the plain operations the operation reaches by `reached`; the reach it has now and
    /// the dependents to tell, or `nil` if that added nothing (or it is finishing). The union is
    /// built between two critical regions, not in one: it loads weak references, and a load may
    /// be left holding the last reference to an operation, whose `deinit` must not run under the
    /// lock. A reach changed meanwhile is widened again.
    func widenReach(by reached: PlainReach) -> PlainReachWidening? {
        while true {
            let current = locked.withLock { $0.plainReach }
            let widened: PlainReach
            if let current {
                guard let added = current.adding(reached) else { return nil }
                widened = added
            } else {
                widened = reached
            }
            switch locked.withLock({ $0.widenReach(to: widened, from: current) }) {
            case let .widened(dependents):
                return PlainReachWidening(reach: widened, dependents: dependents)
            case .changedMeanwhile:
                continue
            case .finishing:
                return nil
            }
        }
    }
    func addDependent(_ dependent: any FinishWatcher) -> OperationLifecycle.Watching { locked.withLock { $0.addDependent(dependent) } }
    func addCondition(_ condition: any OperationCondition, satisfiedByConstruction: Bool) -> OperationLifecycle.ConditionAddition { locked.withLock { $0.addCondition(condition, satisfiedByConstruction: satisfiedByConstruction) } }
    func addObserver(_ observer: any OperationObserver) -> OperationLifecycle.Configuration { locked.withLock { $0.addObserver(observer) } }
    func attachLogger(_ logger: LoggingObserver, observer: any OperationObserver) -> OperationLifecycle.LoggerAttachment { locked.withLock { $0.attachLogger(logger, observer: observer) } }
    func adoptLogger(_ logger: LoggingObserver, observer: any OperationObserver) -> OperationLifecycle.LoggerAttachment { locked.withLock { $0.adoptLogger(logger, observer: observer) } }
    /// For `deinit`: the dependencies, to be released one after another rather than recursively.
    func takeDependencies() -> SmallArray<Operation> { locked.withLock { $0.takeDependencies() } }
    func offerHoldAfterExecution() { locked.withLock { $0.offerHoldAfterExecution() } }

    // MARK: - The block of an `AsyncBlockOperation`

    func beginBlock() -> BlockInvocation.Start { locked.withLock { $0.beginBlock() } }
    func awaitContinuation(through gate: ContinuationGate) { locked.withLock { $0.awaitContinuation(through: gate) } }
    func blockReturned() -> BlockInvocation.AfterCall { locked.withLock { $0.blockReturned() } }
    func blockCancelled() -> BlockInvocation.CancelReaction { locked.withLock { $0.blockCancelled() } }
    func releaseBlock() -> BlockInvocation.Leftovers? { locked.withLock { $0.releaseBlock() } }

    // MARK: - The way to execution

    func enqueue(on queue: AsyncOperationQueue, ticket: UInt64, lineRoot: UInt64) -> OperationLifecycle.EnqueueAction { locked.withLock { $0.enqueue(on: queue, ticket: ticket, lineRoot: lineRoot) } }
    func finishEnqueuing(attached: Int) -> OperationLifecycle.EnqueueEnd { locked.withLock { $0.finishEnqueuing(attached: attached) } }
    func finishEnqueuing(holdingTurnWith conditionCount: Int) -> OperationLifecycle.EnqueuedHoldingTurn { locked.withLock { $0.finishEnqueuing(holdingTurnWith: conditionCount) } }
    func dependencyFinished(_ id: ObjectIdentifier) -> OperationLifecycle.DependencyAction { locked.withLock { $0.dependencyFinished(id) } }
    func conditionDependencyAttached() -> OperationLifecycle.AttachmentEnd { locked.withLock { $0.conditionDependencyAttached() } }
    func beginEvaluating(categories: [String], categoryLockGate: CategoryLockGate?) -> OperationLifecycle.EvaluationStart { locked.withLock { $0.beginEvaluating(categories: categories, categoryLockGate: categoryLockGate) } }
    func conditionsHandedOut(answeredAtOnce: AnsweredConditions) -> OperationLifecycle.HandedOut { locked.withLock { $0.conditionsHandedOut(answeredAtOnce: answeredAtOnce) } }
    func conditionsAnswered(_ answers: AnsweredConditions) -> OperationLifecycle.ConditionAction { locked.withLock { $0.conditionsAnswered(answers) } }
    func conditionAnswered(index: Int, result: ConditionResult) -> OperationLifecycle.ConditionAction { locked.withLock { $0.conditionAnswered(index: index, result: result) } }
    func conditionNeverAnswered(index: Int, error: any Error) -> OperationLifecycle.DroppedAnswer { locked.withLock { $0.conditionNeverAnswered(index: index, error: error) } }
    func conditionsTimedOut(_ failures: [(index: Int, error: any Error)]) -> OperationLifecycle.ConditionAction { locked.withLock { $0.conditionsTimedOut(failures) } }
    func proceedWithoutCategories() -> OperationLifecycle.GrantAction { locked.withLock { $0.proceedWithoutCategories() } }
    func enterLine(lineRoot: UInt64) -> OperationLifecycle.LineMove { locked.withLock { $0.enterLine(lineRoot: lineRoot) } }
    func leaveLine() -> OperationLifecycle.LineMove { locked.withLock { $0.leaveLine() } }
    func leaveLineToPark() -> OperationLifecycle.Parking { locked.withLock { $0.leaveLineToPark() } }
    func categoriesGranted(leasesAcquired: Bool) -> OperationLifecycle.Grant { locked.withLock { $0.categoriesGranted(leasesAcquired: leasesAcquired) } }
    func returnCategoriesWhileSuspended() -> OperationLifecycle.GiveBack { locked.withLock { $0.returnCategoriesWhileSuspended() } }
    func yieldCategoriesUntilStarted() -> OperationLifecycle.Yield { locked.withLock { $0.yieldCategoriesUntilStarted() } }
    func resumeAfterSuspension() -> OperationLifecycle.ResumeAction { locked.withLock { $0.resumeAfterSuspension() } }
    func turnTaken() -> OperationLifecycle.TurnTaken { locked.withLock { $0.turnTaken() } }
    func turnTakenToProceed() -> OperationLifecycle.TurnToProceed { locked.withLock { $0.turnTakenToProceed() } }
    func turnTakenToEvaluate(categories: [String], categoryLockGate: CategoryLockGate?) -> OperationLifecycle.TurnToEvaluate { locked.withLock { $0.turnTakenToEvaluate(categories: categories, categoryLockGate: categoryLockGate) } }

    // MARK: - Running and finishing

    func start() -> OperationLifecycle.StartAction { locked.withLock { $0.start() } }
    func startedOn(_ queue: OperationQueue?, mention: QueueMention?, ticket: UInt64) { locked.withLock { $0.startedOn(queue, mention: mention, ticket: ticket) } }
    func startDelivered() -> OperationLifecycle.AfterStartAction { locked.withLock { $0.startDelivered() } }
    func cancelDeliveredAfterStart() -> OperationLifecycle.AfterStartAction { locked.withLock { $0.cancelDeliveredAfterStart() } }
    func announceProduced() -> OperationLifecycle.ProduceAction { locked.withLock { $0.announceProduced() } }
    func notificationDelivered() -> OperationLifecycle.FinishAction { locked.withLock { $0.notificationDelivered() } }
    func cancel(error: (any Error)?, onlyBeforeExecution: Bool) -> OperationLifecycle.CancelAction { locked.withLock { $0.cancel(error: error, onlyBeforeExecution: onlyBeforeExecution) } }
    func finish(errors: [any Error]) -> OperationLifecycle.FinishAction { locked.withLock { $0.finish(errors: errors) } }
    func finishFromContinuation(errors: [any Error]) -> OperationLifecycle.FinishAction { locked.withLock { $0.finishFromContinuation(errors: errors) } }
    func finish(afterChildren childErrors: [any Error]) -> OperationLifecycle.FinishAction { locked.withLock { $0.finish(afterChildren: childErrors) } }
    func finishClosingCycle(operationName: String) -> OperationLifecycle.FinishAction { locked.withLock { $0.finishClosingCycle(operationName: operationName) } }
    func finish(producing value: any Sendable) -> OperationLifecycle.FinishAction {
        let output = ProducedOutput(value) // allocated before locking; released after, if refused
        return locked.withLock { $0.finish(producing: output) }
    }
    func offerToHoldFinish() -> OperationLifecycle.HoldOffer { locked.withLock { $0.offerToHoldFinish() } }
    func takeHeldFinish(prepending childErrors: [any Error] = []) -> OperationLifecycle.FinishAction { locked.withLock { $0.takeHeldFinish(prepending: childErrors) } }
    func completeFinish() -> OperationLifecycle.Remains { locked.withLock { $0.completeFinish() } }
}

/// A reach widened (`LifecycleStorage.widenReach(by:)`): what the operation reaches now, and the
/// dependents to tell.
struct PlainReachWidening {
    let reach: PlainReach
    let dependents: SmallArray<WeakFinishWatcher>
}
