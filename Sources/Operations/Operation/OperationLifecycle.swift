import Foundation

/// The rules of an `AsyncOperation`'s life, without threads or side effects.
///
/// `AsyncOperation` keeps one of these under its lock. Each event method changes the state and
/// returns what must happen next (call observers, hand the operation to Foundation, finish it);
/// the operation performs that after unlocking, so user code never runs under the lock.
struct OperationLifecycle {
    /// A classification of `state` for readers (tests, inspection, the storage's checks).
    enum Phase: Equatable {
        /// Created, not yet on a queue.
        case initialized
        /// Being added to a queue: condition dependencies are being attached.
        case enqueuing
        /// On a queue, waiting for dependencies.
        case pending
        case evaluatingConditions
        /// Conditions passed (or skipped: cancelled before its queue let it through); waiting for
        /// mutually exclusive categories, for its turn or for a suspended queue.
        case waitingForCategories
        /// Cleared to run: handed to Foundation's queue, which will call `start()`.
        case ready
        case executing
        /// Errors are final; `operationDidFinish` observers are being told.
        case finishing
        case finished
    }

    // MARK: - State

    /// Where the operation was placed: its place in the order of adds, and whether a queue or
    /// its caller runs it. (The queue itself is kept beside the state: see `queue`.)
    struct Placement {
        // The words first, the flags after them: no padding between (the state carries this in
        // most of its cases, and every operation carries the state).

        /// Global order in which operations were added to queues (FIFO within a category).
        var ticket: UInt64 = 0
        /// The ticket of the outermost group this operation is a child of; 0 for a top-level one.
        var lineRoot: UInt64 = 0
        /// `start()` was called by a plain queue or by hand rather than after a hand-off.
        var startedByCaller = false
        /// Given to Foundation's queue, which then owns its finishing.
        var wasHandedOff = false

        /// Where this operation stands in its categories' lines.
        var linePlace: LinePlace {
            LinePlace(root: lineRoot == 0 ? ticket : lineRoot, ticket: ticket)
        }
    }

    /// Where the operation stands with its mutually exclusive categories (`categories`).
    struct Standing {
        var holds = false
        /// In line (or about to be) for its categories at the exclusivity controller.
        var inLine = false
    }

    /// A finish under way: the errors are final, observers are being (or about to be) told.
    struct Finishing {
        var placement: Placement?
        var standing: Standing
        var execution: Execution
        /// It finished while in line for its categories: it leaves the line.
        var withdrawsFromCategories: Bool
        /// Notifications are in flight; the last one delivers the finish.
        var waitsForNotifications = false
    }

    /// Whether a finishing operation executed, and where a subclass's hold on its finish stands:
    /// an operation that never executed is offered, once, to hold its finish back; one that
    /// executed is offered only if it asked (`offersHoldAfterExecution`, a group).
    struct Execution: Equatable {
        /// `execute()` was called (or about to be).
        var began: Bool
        var hold = FinishHold.notOffered
    }

    /// Where a subclass's hold on a finish stands.
    enum FinishHold: Equatable {
        case notOffered
        /// A subclass holds the finish back until it is ready (a group draining its children).
        case held
        /// The hold was offered and is over (declined, or the finish was taken).
        case over
    }

    /// Where the operation is in its life; each case carries what is valid in it.
    enum State {
        /// Created, not yet on a queue.
        case initialized
        /// Being added to a queue (or started by hand): condition dependencies are being attached.
        case enqueuing(Placement)
        /// Waiting for dependencies, and for the dependencies of `attaching` conditions added
        /// meanwhile, whose dependencies are being attached (`conditionDependencyAttached()`).
        case pending(Placement, attaching: Int32)
        /// Its conditions are being evaluated; `dispatched` once they were handed out (not while
        /// parked by a suspended queue).
        case evaluatingConditions(Placement, Standing, ConditionEvaluation, dispatched: Bool)
        /// Conditions passed (or skipped: cancelled before its queue let it through); waiting for
        /// its categories (or for its turn, or a resume).
        case waitingForCategories(Placement, Standing)
        /// Cleared to run: handed to Foundation's queue, which will call `start()`.
        /// `finishRequested`: `finish(with:)` came before that start; it finishes there.
        case ready(Placement, Standing, finishRequested: Bool)
        case executing(Placement, Standing)
        case finishing(Finishing)
        /// Keeps its placement (if it had one), so that it still sorts in add order.
        case finished(Placement?)
    }

    // The cases carry plain data only, so that reading the state copies no references. What
    // holds references lives beside it, each with the span of the life in which it is set:

    // Swift lays out stored properties in the order they are declared, so the small ones sit in
    // the padding after a field that does not fill its last word (the state, a `SmallArray`):
    // every operation carries this struct, a chain of a million of them included.

    private(set) var state = State.initialized
    private(set) var isCancelled = false
    /// Whether `operationDidStart` is being announced, and whether a cancel came meanwhile (next
    /// to `isCancelled`: a byte that fits where the layout has room).
    private(set) var startAnnouncement = StartAnnouncement.none
    /// A subclass (a group) is offered to hold back any finish, also after executing, not only
    /// that of an operation that never executed (set once, as it is made).
    private(set) var offersHoldAfterExecution = false
    /// The queue managing the operation, from its add to an `AsyncOperationQueue` until its
    /// finish is complete. Held strongly, as Foundation's queues are kept alive by their work.
    private(set) var queue: AsyncOperationQueue?
    /// The queue that called `start()`, when the operation runs on a plain `OperationQueue`.
    private(set) weak var foreignQueue: OperationQueue?
    /// What messages call the queue it is on, or last ran on (kept once it finished, for a late
    /// call): held strongly, as it keeps no queue alive (see `QueueMention`).
    private(set) var lastQueueMention: QueueMention?
    /// The mutually exclusive categories its conditions name, recorded when they are evaluated.
    private(set) var categories: [String] = []
    /// The leases of those categories that a `CategoryLock` extends beyond the process, if any
    /// condition names a lock (recorded when they are evaluated, kept until it finishes).
    private(set) var categoryLockGate: CategoryLockGate?
    /// What a condition evaluation collects beyond plain data: the failures so far...
    private(set) var conditionFailures: [any Error] = []
    /// ...and which conditions are still awaited.
    private var awaited = ConditionIndexSet()

    // Data of every phase:

    private(set) var errors: [any Error] = []
    /// The logger of the queue the operation was added to, if that queue has one.
    private(set) var logger: LoggingObserver?
    /// The value a `ResultOperation` produced, stored in the step that accepts its finish.
    var output: (any Sendable)? { producedOutput?.value }
    /// Behind one reference: only a `ResultOperation` sets it, and an existential takes four words.
    private var producedOutput: ProducedOutput?

    private(set) var conditions: [any OperationCondition] = []
    /// Which conditions are satisfied by construction, decided once as each is added.
    private var satisfiedByConstruction = ConditionIndexSet()
    private(set) var observers: [any OperationObserver] = []

    /// Dependencies as the user gave them (what `dependencies` returns).
    private(set) var dependencies = SmallArray<Operation>()
    /// Observer notifications being delivered right now; `operationDidFinish` waits for them.
    private(set) var notificationsInFlight: Int32 = 0
    /// Dependencies that have not finished yet.
    private(set) var unfinishedDependencies = SmallArray<ObjectIdentifier>()

    /// Watchers that report when a plain Foundation dependency finishes.
    private(set) var dependencyWatchers: [ObjectIdentifier: DependencyWatcher.Subscription] = [:]
    /// Operations waiting for this one to finish.
    private(set) var dependents = SmallArray<WeakFinishWatcher>()
    /// The dependency that closes a cycle, those its conditions brought and the plain operations
    /// it reaches (`nil` until one is recorded, as for most operations): each dependency a
    /// condition brings is attached once, however many conditions bring it, until the operation
    /// finishes (or, finished while one was being attached, until that attachment ends).
    private var dependencyRecords: DependencyRecords?
    /// The dependency that closes a dependency cycle, if one was detected.
    var cycleDependencyName: String? { dependencyRecords?.cycleDependencyName }
    /// The plain operations it reaches through its dependencies (`nil` for none, as for most
    /// operations): where a cycle closing through it would have to run.
    var plainReach: PlainReach? { dependencyRecords?.plainReach }
    /// Whether it holds dependencies its conditions brought (none once finished, when no
    /// attachment runs).
    var holdsConditionDependencies: Bool { dependencyRecords?.conditionDependencies.isEmpty == false }
    /// An `AsyncBlockOperation`'s block through its one call, from its creation until its finish
    /// (see "The block" below); `nil` for other operations.
    private(set) var block: BlockInvocation?

    /// A lifecycle in the initialized state; `block`: an `AsyncBlockOperation`'s block.
    init(block body: BlockInvocation.Body? = nil) {
        block = body.map(BlockInvocation.init)
    }

    // MARK: - Reading the state

    var phase: Phase {
        switch state {
        case .initialized: .initialized
        case .enqueuing: .enqueuing
        case .pending: .pending
        case .evaluatingConditions: .evaluatingConditions
        case .waitingForCategories: .waitingForCategories
        case .ready: .ready
        case .executing: .executing
        case .finishing: .finishing
        case .finished: .finished
        }
    }

    /// Still taking dependencies and conditions: not yet past waiting for its dependencies.
    var acceptsConfiguration: Bool {
        switch state {
        case .initialized, .enqueuing, .pending: true
        default: false
        }
    }

    /// Its finish has begun (or is complete): errors are final.
    var hasBegunFinishing: Bool {
        switch state {
        case .finishing, .finished: true
        default: false
        }
    }

    /// Not executing yet, nor finishing.
    var isBeforeExecution: Bool {
        switch state {
        case .initialized, .enqueuing, .pending, .evaluatingConditions, .waitingForCategories, .ready: true
        default: false
        }
    }

    var placement: Placement? {
        switch state {
        case .initialized: nil
        case let .finished(placement): placement
        case let .enqueuing(placement), let .pending(placement, _),
             let .evaluatingConditions(placement, _, _, _), let .waitingForCategories(placement, _),
             let .ready(placement, _, _), let .executing(placement, _): placement
        case let .finishing(finishing): finishing.placement
        }
    }

    var standing: Standing? {
        switch state {
        case .initialized, .enqueuing, .pending, .finished: nil
        case let .evaluatingConditions(_, standing, _, _), let .waitingForCategories(_, standing),
             let .ready(_, standing, _), let .executing(_, standing): standing
        case let .finishing(finishing): finishing.standing
        }
    }

    var startedByCaller: Bool { placement?.startedByCaller ?? false }
    var wasHandedOff: Bool { placement?.wasHandedOff ?? false }
    var ticket: UInt64 { placement?.ticket ?? 0 }
    var linePlace: LinePlace { placement?.linePlace ?? LinePlace(root: 0, ticket: 0) }
    var holdsCategories: Bool { standing?.holds ?? false }
    /// It stands in its categories' lines (or its request to is on its way).
    var isInLine: Bool { standing?.inLine ?? false }

    /// `execute()` was (or is about to be) called.
    var executionBegan: Bool {
        switch state {
        case .executing: true
        case let .finishing(finishing): finishing.execution.began
        default: false
        }
    }

    var conditionsDispatched: Bool {
        if case let .evaluatingConditions(_, _, _, dispatched) = state { return dispatched }
        return false
    }

    var finishRequestedBeforeStart: Bool {
        if case let .ready(_, _, finishRequested) = state { return finishRequested }
        return false
    }

    var finishHoldOffered: Bool {
        if case let .finishing(finishing) = state { return finishing.execution.hold != .notOffered }
        return false
    }

    var holdsFinish: Bool {
        if case let .finishing(finishing) = state { return finishing.execution.hold == .held }
        return false
    }

    var finishWaitsForNotifications: Bool {
        if case let .finishing(finishing) = state { return finishing.waitsForNotifications }
        return false
    }

    var withdrawsFromCategories: Bool {
        if case let .finishing(finishing) = state { return finishing.withdrawsFromCategories }
        return false
    }

    /// Changes the standing, in whatever state carries one.
    private mutating func updateStanding(_ change: (inout Standing) -> Void) {
        switch state {
        case .initialized, .enqueuing, .pending, .finished:
            break
        case .evaluatingConditions(let placement, var standing, let evaluation, let dispatched):
            change(&standing)
            state = .evaluatingConditions(placement, standing, evaluation, dispatched: dispatched)
        case .waitingForCategories(let placement, var standing):
            change(&standing)
            state = .waitingForCategories(placement, standing)
        case .ready(let placement, var standing, let finishRequested):
            change(&standing)
            state = .ready(placement, standing, finishRequested: finishRequested)
        case .executing(let placement, var standing):
            change(&standing)
            state = .executing(placement, standing)
        case var .finishing(finishing):
            change(&finishing.standing)
            state = .finishing(finishing)
        }
    }

    /// Changes a finish under way.
    private mutating func updateFinishing(_ change: (inout Finishing) -> Void) {
        guard case var .finishing(finishing) = state else { return }
        change(&finishing)
        state = .finishing(finishing)
    }

    /// Book-keeping for one round of condition evaluation, as plain data: how many conditions
    /// it covers and how many still owe an answer (which ones is kept beside the state, in
    /// `awaited`).
    struct ConditionEvaluation {
        // 32 bits each: the state carries this, and an operation has a handful of conditions.
        private var conditions: Int32 = 0
        private var pending: Int32 = 0

        var conditionCount: Int { Int(conditions) }
        var pendingCount: Int { Int(pending) }

        init() {}

        /// Awaits the answers of `count` conditions.
        init(awaiting count: Int) {
            conditions = Int32(count)
            pending = conditions
        }

        /// One of the awaited conditions answered.
        fileprivate mutating func countAnswer() {
            pending -= 1
        }
    }

    /// Whether `evaluation` awaits the answer of the condition at `index`.
    private func isAwaiting(_ index: Int, in evaluation: ConditionEvaluation) -> Bool {
        index < evaluation.conditionCount && awaited.contains(index)
    }

    /// Takes the answer of the condition at `index`; `false` if it was not awaited.
    private mutating func markAnswered(_ index: Int, in evaluation: inout ConditionEvaluation) -> Bool {
        guard isAwaiting(index, in: evaluation) else { return false }
        awaited.set(index, to: false)
        evaluation.countAnswer()
        return true
    }

    // MARK: - Inspection

    /// What an inspector needs, read in one step under the lock.
    struct Inspection {
        let phase: Phase
        let isCancelled: Bool
        let unfinishedDependencies: [Operation]
        /// Conditions that were handed out and have not answered.
        let unansweredConditions: [any OperationCondition]
        let categories: [String]
        let holdsCategories: Bool
        let linePlace: LinePlace
        let queue: AsyncOperationQueue?
        let categoryLockGate: CategoryLockGate?
    }

    var inspection: Inspection {
        Inspection(
            // A finish held until the children have finished (a group finished by hand while
            // they ran) is not final yet: their errors go before its own, and nobody has heard
            // of it. Seen from outside, the operation still runs.
            phase: holdsFinish && executionBegan ? .executing : phase,
            isCancelled: isCancelled,
            unfinishedDependencies: dependencies.filter { unfinishedDependencies.contains(ObjectIdentifier($0)) },
            unansweredConditions: conditionsDispatched ? unansweredConditions.map(\.condition) : [],
            categories: categories,
            holdsCategories: holdsCategories,
            linePlace: linePlace,
            queue: queue,
            categoryLockGate: categoryLockGate
        )
    }

    // MARK: - Foundation-facing flags

    var isReadyForFoundation: Bool {
        switch phase {
        case .initialized: return unfinishedDependencies.isEmpty || isCancelled
        case .enqueuing, .pending, .evaluatingConditions, .waitingForCategories: return false
        case .ready, .executing, .finishing, .finished: return true
        }
    }

    var isExecutingForFoundation: Bool {
        switch phase {
        case .executing: return true
        case .finishing: return executionBegan || startedByCaller
        case .enqueuing, .pending, .evaluatingConditions, .waitingForCategories, .ready: return startedByCaller
        case .initialized, .finished: return false
        }
    }

    // MARK: - Adding to a queue

    enum EnqueueAction {
        case reject(OperationDiagnostic.Kind, String)
        /// Nothing to wait for: mark ready and hand to Foundation right away.
        case handOffNow
        /// Attach condition dependencies, then wait for dependencies and evaluate conditions,
        /// asking the queue for the turn as `turn` says.
        case runPipeline([any OperationCondition], turn: TurnRequest)
    }

    /// When an operation on its way to its conditions asks its queue for its turn.
    enum TurnRequest {
        /// As the queue holds it: it waits for nothing known and is not finishing, so it may
        /// begin evaluating as its add ends (`finishEnqueuing(holdingTurnWith:)`).
        case asHeld
        /// Once its dependencies finished (`AdvanceAction.evaluateConditions`).
        case onceReady
    }

    /// Whether a queue may take the operation, and if not, what its refusal reports.
    enum AddAcceptance {
        /// It was never added nor started: a queue may take it.
        case acceptable
        /// It is on a queue, or was started by hand, or finished: refuse it with this report.
        case refused(OperationDiagnostic.Kind, String)
    }

    /// Whether a queue may take the operation now (`enqueue` refuses it otherwise).
    var addAcceptance: AddAcceptance {
        switch phase {
        case .initialized:
            .acceptable
        case .finishing, .finished:
            .refused(.addedAfterFinishing, "the operation has already finished; it was not added again")
        case .executing where startedByCaller, .evaluatingConditions where startedByCaller:
            .refused(.addedAfterFinishing, "the operation was already started by hand; it was not added to the queue")
        default:
            .refused(.addedTwice, "the operation is already on a queue; the second add was ignored")
        }
    }

    mutating func enqueue(on queue: AsyncOperationQueue, ticket: UInt64, lineRoot: UInt64 = 0) -> EnqueueAction {
        if case let .refused(kind, message) = addAcceptance {
            return .reject(kind, message)
        }
        self.queue = queue
        lastQueueMention = queue.mention
        var placement = Placement(ticket: ticket, lineRoot: lineRoot)
        let waitsForNothing = waitsForNothingKnown
        if waitsForNothing && conditions.isEmpty {
            placement.wasHandedOff = true
            state = .ready(placement, Standing(), finishRequested: false)
            return .handOffNow
        }
        state = .enqueuing(placement)
        return .runPipeline(conditions, turn: waitsForNothing ? .asHeld : .onceReady)
    }

    /// No unfinished dependency, no cancel, no cycle: nothing known keeps it from its conditions.
    private var waitsForNothingKnown: Bool {
        unfinishedDependencies.isEmpty && !isCancelled && cycleDependencyName == nil
    }

    enum AdvanceAction {
        case none
        /// Evaluate the conditions, when `queue` (if any) gives the operation its turn.
        case evaluateConditions([any OperationCondition], queue: AsyncOperationQueue?, ticket: UInt64)
        /// No conditions (or cancelled: they are skipped): go on to hand-off (or, cancelled, to
        /// the finish), when `queue` (if any) gives the operation its turn.
        case proceedWithoutConditions(queue: AsyncOperationQueue?, ticket: UInt64)
        case finish([any Error])
        /// Finish with `AsyncOperationError.dependencyCycle`: `finishClosingCycle(operationName:)`.
        case finishClosingCycle
    }

    /// What the end of an add comes to.
    enum EnqueueEnd {
        /// Go on as `action` says.
        case advance(AdvanceAction)
        /// It finished while it was being added (`finish(with:)` from elsewhere). If its queue
        /// heard of the finish before it held the operation, and gave it a turn
        /// (`turnToForget`), the queue lets go of it and of that turn (again, if it heard after).
        /// `released`: what its conditions brought, kept through the add, to let go of now.
        case finishedWhileAdded(turnToForget: UInt64?, released: SmallArray<Operation>)
        /// Conditions were added while it was being added, after the add read them (from another
        /// condition's `dependency(for:)`, say): attach their dependencies as part of the add,
        /// then end it again, `attached` conditions attached by then.
        case attachConditions([any OperationCondition], attached: Int)
    }

    /// Called once the dependencies of the first `attached` conditions are attached: start
    /// waiting, unless conditions were added since.
    mutating func finishEnqueuing(attached: Int) -> EnqueueEnd {
        guard case let .enqueuing(placement) = state else {
            return .finishedWhileAdded(turnToForget: turnGivenAfterFinish, released: endAttachmentPastTheFinish())
        }
        if conditions.count > attached {
            return .attachConditions(Array(conditions[attached...]), attached: conditions.count)
        }
        state = .pending(placement, attaching: 0)
        return .advance(advanceIfDependenciesFinished())
    }

    /// What an operation that its queue gave its turn as it held it does once its condition
    /// dependencies are attached.
    enum EnqueuedHoldingTurn {
        /// Nothing stands in the way: evaluate the conditions as `start` says. Finishing the add,
        /// taking the turn and beginning the evaluation were one step.
        case evaluate(EvaluationStart)
        /// Something does: a dependency (a condition's, or one added meanwhile), a cancel or a
        /// finish, or a condition added since the queue read their categories. It is still being
        /// added, so no dependency's finish can let it on meanwhile: it gives the turn back first,
        /// then ends the add as usual (`finishEnqueuing(attached:)`).
        case giveBackTurn(ticket: UInt64)
    }

    /// Called once condition dependencies are attached, instead of
    /// `finishEnqueuing(attached:)`, by an operation its queue gave its turn as it held it: it
    /// asked for the turn for `conditionCount` conditions, none of which names a category.
    mutating func finishEnqueuing(holdingTurnWith conditionCount: Int) -> EnqueuedHoldingTurn {
        guard case let .enqueuing(placement) = state, waitsForNothingKnown, conditions.count == conditionCount else {
            return .giveBackTurn(ticket: ticket)
        }
        beginWaitingForAnswers(placement)
        return .evaluate(beginEvaluating(categories: []))
    }

    /// Moves a pending operation on when nothing is left to wait for.
    mutating func advanceIfDependenciesFinished() -> AdvanceAction {
        guard case let .pending(placement, attaching) = state else { return .none }
        if isCancelled {
            // Cancelled before its queue let it through, with nothing to wait for: it waits for
            // its turn (a suspended queue's resume, a serial queue's line), skips its conditions,
            // and finishes when its queue gets to it, as on Foundation's own queue.
            guard let queue, attaching == 0, cycleDependencyName == nil, unfinishedDependencies.isEmpty else { return .finish([]) }
            state = .waitingForCategories(placement, Standing())
            return .proceedWithoutConditions(queue: queue, ticket: placement.ticket)
        }
        // A cycle waits for the attachments too: they may still bring dependencies, and one
        // that ends after the finish began would keep what the conditions brought until it ends.
        guard attaching == 0 else { return .none }
        if cycleDependencyName != nil {
            return .finishClosingCycle
        }
        guard unfinishedDependencies.isEmpty else { return .none }
        if conditions.isEmpty {
            state = .waitingForCategories(placement, Standing())
            return .proceedWithoutConditions(queue: queue, ticket: placement.ticket)
        }
        beginWaitingForAnswers(placement)
        return .evaluateConditions(conditions, queue: queue, ticket: placement.ticket)
    }

    /// Nothing stands between the operation and its conditions any more: it awaits every answer.
    private mutating func beginWaitingForAnswers(_ placement: Placement) {
        awaited = ConditionIndexSet(below: conditions.count)
        state = .evaluatingConditions(placement, Standing(), ConditionEvaluation(awaiting: conditions.count), dispatched: false)
    }

    enum DependencyAction {
        case none
        case advance(AdvanceAction)
        /// A plain queue waits for `isReady`; tell it.
        case announceReady
    }

    mutating func dependencyFinished(_ id: ObjectIdentifier) -> DependencyAction {
        guard unfinishedDependencies.removeFirstOccurrence(of: id) else { return .none }
        dependencyWatchers[id] = nil
        guard unfinishedDependencies.isEmpty else { return .none }
        if phase == .initialized { return .announceReady }
        return .advance(advanceIfDependenciesFinished())
    }

    // MARK: - Configuration before the operation starts waiting

    /// What adding a configuration item (an observer) came to.
    enum Configuration: Equatable {
        /// Added.
        case added
        /// Too late (the operation is finishing): ignored.
        case tooLate
    }

    /// What adding a dependency comes to.
    enum DependencyAddition {
        /// Added. `dependents`, read in the same step: the operations (and listeners) that wait
        /// for this one. If one is still alive, the new dependency might lead back to it (a
        /// cycle). Whether one is, the caller asks after unlocking: a weak load can hold the
        /// last reference to one, whose `deinit` must not run under the lock.
        case added(dependents: SmallArray<WeakFinishWatcher>)
        /// It already had it: nothing changed.
        case alreadyThere
        /// Too late (the operation is past waiting for it, or finishing): ignored.
        case tooLate
    }

    /// Adds a dependency the user gave. Counted as unfinished at once, so no advance can slip
    /// past it.
    mutating func addDependency(_ operation: Operation) -> DependencyAddition {
        guard acceptsConfiguration else { return .tooLate }
        guard !dependencies.contains(where: { $0 === operation }) else { return .alreadyThere }
        dependencies.append(operation)
        unfinishedDependencies.append(ObjectIdentifier(operation))
        return .added(dependents: dependents)
    }

    /// What a dependency that a condition brought comes to.
    enum ConditionDependencyAddition {
        /// Added, as `addDependency(_:)` adds it: wait for it (unless it closes a cycle; see
        /// `DependencyAddition.added`), and add it to a queue unless it is on one.
        case added(dependents: SmallArray<WeakFinishWatcher>)
        /// The user added it: it is waited for already; add it to a queue unless it is on one.
        case alreadyThere
        /// Another condition of the operation brought it, and it was attached then: leave it. A
        /// second add could make a plain queue trap, which holds it and has not started it: that
        /// cannot be told apart from an unused operation.
        case broughtBefore
        /// Too late to wait for it (the operation is finishing): add it to a queue unless it is
        /// on one, as any operation is added.
        case tooLate
    }

    /// A condition brought `operation` (from `dependency(for:)`): recorded, so that the next
    /// condition to bring it, added with this one or later, leaves it as it is, and added as a
    /// dependency, in the same step. Recorded even once the operation began finishing: an
    /// attachment that began before may still be bringing dependencies, and the records are
    /// kept until it ends (`keepDependencyRecordsWhileAttaching()`).
    mutating func addConditionDependency(_ operation: Operation) -> ConditionDependencyAddition {
        if let records = dependencyRecords, records.broughtByCondition(operation) { return .broughtBefore }
        if hasBegunFinishing && dependencyRecords?.areKeptPastTheFinish != true {
            return .tooLate // no attachment runs any more: no condition can bring it again
        }
        dependencyRecords = dependencyRecords?.bringing(operation) ?? DependencyRecords(conditionDependencies: [operation])
        switch addDependency(operation) {
        case let .added(dependents): return .added(dependents: dependents)
        case .alreadyThere: return .alreadyThere
        case .tooLate: return .tooLate
        }
    }

    /// What removing a dependency asks of the operation.
    enum Removal {
        /// Stop the watcher that listened to it (a plain dependency's), if any, then do `then`:
        /// the operation no longer waits for it.
        case removed(stopWatching: DependencyWatcher.Subscription?, then: DependencyAction)
    }

    /// Removes a dependency: the operation no longer waits for it.
    mutating func removeDependency(_ operation: Operation) -> Removal {
        let id = ObjectIdentifier(operation)
        dependencies.removeAll { $0 === operation }
        // Brought again, it is attached again; and a cycle it closed is no more.
        if let records = dependencyRecords, records.involves(operation) {
            dependencyRecords = records.removing(operation)
        }
        // Taken out here, not by `dependencyFinished`: one that closed a cycle is not counted.
        let watcher = dependencyWatchers.removeValue(forKey: id)
        return .removed(stopWatching: watcher, then: dependencyFinished(id))
    }

    /// What keeping the watcher of a plain dependency came to.
    enum WatcherKeeping {
        /// Kept until the dependency finishes or is removed.
        case kept
        /// The operation no longer waits for it (removed, finished, or the operation finished
        /// since the dependency was added): stop the watcher, after unlocking.
        case stop(DependencyWatcher.Subscription)
    }

    /// Waits for the finish of an operation that is not an `AsyncOperation`, told by `watcher`,
    /// unless it stopped waiting for it meanwhile.
    mutating func watch(_ id: ObjectIdentifier, with watcher: DependencyWatcher.Subscription) -> WatcherKeeping {
        guard unfinishedDependencies.lastIndex(of: id) != nil else { return .stop(watcher) } // from the end: it was added last
        dependencyWatchers[id] = watcher
        return .kept
    }

    /// What registering a finish watcher came to.
    enum Watching {
        /// It is told when the operation finishes. `reaching`: the plain operations this one
        /// reaches (`plainReach`), read in the same step, so a dependent either reads a plain
        /// operation here or is among those told when it is reached.
        case willTell(reaching: PlainReach?)
        /// The operation has finished already: tell it now.
        case alreadyFinished
    }

    /// Registers `dependent` to be told when this operation finishes.
    mutating func addDependent(_ dependent: any FinishWatcher) -> Watching {
        guard phase != .finished else { return .alreadyFinished }
        dependents.append(WeakFinishWatcher(dependent))
        return .willTell(reaching: plainReach)
    }

    /// What widening the plain operations an operation reaches came to.
    enum ReachWidening {
        /// Widened: tell `dependents` that they reach as much.
        case widened(tell: SmallArray<WeakFinishWatcher>)
        /// Its reach changed since `expected` was read: widen the new one.
        case changedMeanwhile
        /// It is finishing: nothing searches through it any more.
        case finishing
    }

    /// The operation waits for one that reaches the plain operations of `widened` (or is one),
    /// which the caller built from `expected`, the reach it read, outside the lock: building it
    /// loads weak references, and a load can hold the last reference to an operation.
    mutating func widenReach(to widened: PlainReach, from expected: PlainReach?) -> ReachWidening {
        guard !hasBegunFinishing else { return .finishing }
        guard plainReach === expected else { return .changedMeanwhile }
        dependencyRecords = dependencyRecords?.reaching(widened) ?? DependencyRecords(plainReach: widened)
        return .widened(tell: dependents)
    }

    /// Records that the dependency `id`, named `name`, closes a dependency cycle: it is not
    /// waited for (`wasCounted`: it was counted as unfinished), and the operation finishes with
    /// `AsyncOperationError.dependencyCycle` through it, unless it is removed first.
    mutating func markCycle(closedBy id: ObjectIdentifier, name: String, wasCounted: Bool) {
        if wasCounted {
            unfinishedDependencies.removeAll { $0 == id }
        }
        let cycle = DependencyRecords.ClosedCycle(dependency: id, name: name)
        dependencyRecords = dependencyRecords?.closingCycle(through: id, name: name) ?? DependencyRecords(closedCycles: [cycle])
    }

    /// What making the operation depend on itself (`addDependency(self)`) came to.
    enum SelfDependency {
        /// The cycle it closes is recorded: go on as `action` says.
        case cycleRecorded(AdvanceAction)
        /// It depends on itself already: nothing changes, as for any dependency added twice.
        case alreadyThere
        /// Too late: the operation stopped taking dependencies, and nothing is recorded.
        case tooLate
    }

    /// The operation, identified by `id` and named `name`, is made to depend on itself: a cycle,
    /// as any other while it still takes dependencies, and ignored once it no longer does.
    mutating func addSelfDependency(_ id: ObjectIdentifier, name: String) -> SelfDependency {
        guard acceptsConfiguration else { return .tooLate }
        if let records = dependencyRecords, records.closesCycle(through: id) { return .alreadyThere }
        markCycle(closedBy: id, name: name, wasCounted: false)
        return .cycleRecorded(advanceIfDependenciesFinished())
    }

    /// Takes the dependencies out, those its conditions brought included, for an operation being
    /// deallocated to release iteratively.
    mutating func takeDependencies() -> SmallArray<Operation> {
        var taken = Self.take(&dependencies, leaving: SmallArray())
        takeConditionDependencies(into: &taken)
        return taken
    }

    /// What adding a condition came to.
    enum ConditionAddition {
        /// Added; the add attaches its dependency (or the operation is not on a queue yet).
        case added
        /// Added while the operation waits for its dependencies (past its add): attach the
        /// condition's dependency now, as `attachment` says, then call
        /// `conditionDependencyAttached()`. The operation waits until then.
        case addedWhileWaiting(ConditionDependencyAttachment)
        /// Too late (the conditions were evaluated, or it is finishing): ignored.
        case tooLate
    }

    /// Where the dependency of a condition added while the operation waits goes, as the step
    /// that added the condition saw it.
    struct ConditionDependencyAttachment {
        /// The queue of ours the operation waits on, if any.
        let queue: AsyncOperationQueue?
        /// The queue that started it by hand, if one did.
        let startedBy: OperationQueue?
        /// The barriers the operation waits for: the dependency waits for them too.
        let barriers: [Operation]
    }

    /// Adds a condition, until the conditions are evaluated. `satisfiedByConstruction`: what
    /// `ConditionKinds` says of it, asked once by the caller outside the lock.
    @inline(__always) // on the way of every condition: inlined into its storage's critical region
    mutating func addCondition(_ condition: any OperationCondition, satisfiedByConstruction isSatisfied: Bool) -> ConditionAddition {
        guard acceptsConfiguration else { return .tooLate }
        if conditions.isEmpty {
            conditions.reserveCapacity(4) // a few is the rule: one allocation, not one per condition
        }
        satisfiedByConstruction.set(conditions.count, to: isSatisfied)
        conditions.append(condition)
        guard case .pending = state else {
            return .added // being added, the add attaches its dependency before it ends (`finishEnqueuing`)
        }
        return waitForDependencyOfConditionAdded()
    }

    /// A condition was added while the operation waits: its dependency is attached next,
    /// outside the lock, and until then the operation waits, even if its last dependency
    /// finishes meanwhile. (Out of line: it keeps `addCondition` small.)
    @inline(never)
    private mutating func waitForDependencyOfConditionAdded() -> ConditionAddition {
        guard case let .pending(placement, attaching) = state else { return .added }
        state = .pending(placement, attaching: attaching + 1)
        let barriers = dependencies.filter { $0 is QueueBarrier }
        return .addedWhileWaiting(ConditionDependencyAttachment(queue: queue, startedBy: foreignQueue, barriers: barriers))
    }

    /// What the end of the attachment of a condition's dependency comes to.
    enum AttachmentEnd {
        /// Go on as `action` says.
        case advance(AdvanceAction)
        /// The operation finished meanwhile, and this was the last attachment that kept what
        /// its conditions brought: let go of it, after unlocking.
        case release(SmallArray<Operation>)
    }

    /// The dependency of a condition added while the operation waited is attached (or it had
    /// none): the operation goes on if nothing else keeps it. Finished meanwhile, the last such
    /// attachment hands out what the conditions brought, to let go of (`.release`).
    mutating func conditionDependencyAttached() -> AttachmentEnd {
        guard case let .pending(placement, attaching) = state else { // it began finishing meanwhile
            let released = endAttachmentPastTheFinish()
            return released.isEmpty ? .advance(.none) : .release(released)
        }
        state = .pending(placement, attaching: attaching - 1)
        return .advance(advanceIfDependenciesFinished())
    }

    /// What attaching a queue's logger came to.
    enum LoggerAttachment {
        /// Attached: it hears the operation's events from now on.
        case attached
        /// Attached to an operation cancelled before: its observers heard `operationDidCancel`
        /// without the logger, so the caller logs `.cancelled`, with these errors (those it had
        /// then), after `.added`.
        case attachedAfterCancel(errors: [any Error])
        /// Not attached: the operation has a logger already, or is past the point where one may
        /// join.
        case notAttached

        var isAttached: Bool {
            if case .notAttached = self { return false }
            return true
        }

        /// The errors of the cancellation the logger missed, if it missed one.
        var missedCancel: [any Error]? {
            if case let .attachedAfterCancel(errors) = self { return errors }
            return nil
        }
    }

    /// Attaches the logger of the queue the operation is being added to: it hears the observer
    /// events through `observer`, the others from the operation. Only before it is on a queue.
    mutating func attachLogger(_ logger: LoggingObserver, observer: any OperationObserver) -> LoggerAttachment {
        guard phase == .initialized, self.logger == nil else { return .notAttached }
        return attach(logger, observer: observer)
    }

    /// Attaches the logger that the queue it waits on gained after it was added (its group
    /// joined a logging queue); not once it has one, or has begun executing.
    mutating func adoptLogger(_ logger: LoggingObserver, observer: any OperationObserver) -> LoggerAttachment {
        guard self.logger == nil, phase != .initialized, isBeforeExecution else { return .notAttached }
        return attach(logger, observer: observer)
    }

    private mutating func attach(_ logger: LoggingObserver, observer: any OperationObserver) -> LoggerAttachment {
        self.logger = logger
        observers.append(observer)
        // A cancellation announces itself to the observers it has when it happens.
        return isCancelled ? .attachedAfterCancel(errors: errors) : .attached
    }

    /// Adds an observer, until the operation is finishing.
    mutating func addObserver(_ observer: any OperationObserver) -> Configuration {
        guard !hasBegunFinishing else { return .tooLate }
        if observers.isEmpty {
            observers.reserveCapacity(4) // as for conditions: one allocation for the usual few
        }
        observers.append(observer)
        return .added
    }

    /// What announcing a produced operation asks of the operation.
    enum ProduceAction {
        /// Add the produced operation to `queue` (or, with none, the shared fallback queue),
        /// then tell `observers` and call `notificationDelivered()`: the finish waits for it.
        case tell(observers: [any OperationObserver], queue: OperationQueue?)
        /// The operation is finishing: add it to `queue` (or the fallback queue), tell nobody.
        case addOnly(queue: OperationQueue?)
    }

    /// A produced operation is being announced.
    mutating func announceProduced() -> ProduceAction {
        let queue: OperationQueue? = self.queue ?? foreignQueue
        guard !hasBegunFinishing else { return .addOnly(queue: queue) }
        notificationsInFlight += 1
        return .tell(observers: observers, queue: queue)
    }

    /// Started by a plain queue (or by hand): remembers that queue, for produced operations, and
    /// takes its place in the order of adds (`ticket`, taken by the caller outside the lock).
    mutating func startedOn(_ queue: OperationQueue?, mention: QueueMention?, ticket: UInt64) {
        foreignQueue = queue
        lastQueueMention = mention
        if case .enqueuing(var placement) = state, placement.ticket == 0 {
            placement.ticket = ticket
            state = .enqueuing(placement)
        }
    }

    /// Conditions are about to be evaluated: records their categories, answers those satisfied by
    /// construction, and marks them handed out (once). When some are left to evaluate
    /// (`.handOut`), handing them out counts as a notification in flight: a finish meanwhile (a
    /// cancel) waits for `notificationDelivered()`, so that no condition is evaluated after its
    /// operation finished.
    mutating func beginEvaluating(categories newCategories: [String], categoryLockGate gate: CategoryLockGate? = nil) -> EvaluationStart {
        guard dispatchConditions() else { return .alreadyHandedOut }
        if !newCategories.isEmpty {
            categories = newCategories
            categoryLockGate = gate
        }
        let action = answerConditionsSatisfiedByConstruction()
        guard case .none = action, conditionEvaluation != nil else { return .settled(action) }
        notificationsInFlight += 1
        return .handOut(awaited: awaited)
    }

    // MARK: - Conditions

    enum ConditionAction {
        /// Nothing settled yet: some conditions still owe an answer.
        case none
        /// Some condition failed (or the operation was cancelled meanwhile): finish with `errors`.
        case failed([any Error])
        /// Every condition passed: acquire `categories` (never empty), logging through `logger`
        /// (its queue's, if that has one).
        case passed(categories: [String], logger: LoggingObserver?)
        /// Every condition passed and no category is needed: the operation is cleared to run
        /// already. Log through `logger`, then perform `then`.
        case cleared(logger: LoggingObserver?, then: GrantAction)
    }

    mutating func conditionAnswered(index: Int, result: ConditionResult) -> ConditionAction {
        var answer = AnsweredConditions()
        answer.add(result, of: index)
        return conditionsAnswered(answer)
    }

    /// The condition evaluation under way, if any.
    var conditionEvaluation: ConditionEvaluation? {
        if case let .evaluatingConditions(_, _, evaluation, _) = state { return evaluation }
        return nil
    }

    /// Answers the conditions that are satisfied by construction without evaluating them;
    /// `.passed` (or `.cleared`) if that settles all of them.
    mutating func answerConditionsSatisfiedByConstruction() -> ConditionAction {
        guard case .evaluatingConditions(let placement, let standing, var evaluation, let dispatched) = state else {
            return .none
        }
        let satisfied = satisfiedByConstruction // a copy: answering changes `self`
        satisfied.forEach { _ = markAnswered($0, in: &evaluation) }
        state = .evaluatingConditions(placement, standing, evaluation, dispatched: dispatched)
        return conditionsSettledAction()
    }

    /// What a condition that released its completion handler unanswered comes to.
    enum DroppedAnswer {
        /// It had answered after all (or a timeout answered for it): nothing to report.
        case alreadyAnswered
        /// It fails with the error given; report it, then handle `then`.
        case fails(then: ConditionAction)
    }

    /// The condition at `index` released its completion handler: unless it answered, it fails
    /// with `error`.
    mutating func conditionNeverAnswered(index: Int, error: any Error) -> DroppedAnswer {
        guard isAwaitingAnswer(from: index) else { return .alreadyAnswered }
        return .fails(then: conditionAnswered(index: index, result: .failed(error)))
    }

    /// The condition at `index`, if it has yet to answer.
    func awaitedCondition(at index: Int) -> (any OperationCondition)? {
        guard isAwaitingAnswer(from: index), index < conditions.count else { return nil }
        return conditions[index]
    }

    /// Whether the condition at `index` has yet to answer.
    func isAwaitingAnswer(from index: Int) -> Bool {
        guard let conditionEvaluation else { return false }
        return isAwaiting(index, in: conditionEvaluation)
    }

    /// The conditions that have not answered yet (to name them in timeout errors).
    var unansweredConditions: [(index: Int, condition: any OperationCondition)] {
        guard let conditionEvaluation else { return [] }
        return (0..<conditionEvaluation.conditionCount)
            .filter { isAwaiting($0, in: conditionEvaluation) && $0 < conditions.count }
            .map { ($0, conditions[$0]) }
    }

    /// Fails the conditions that did not answer in time, each with its error; nothing if none
    /// of them was still awaited (they answered meanwhile).
    mutating func conditionsTimedOut(_ failures: [(index: Int, error: any Error)]) -> ConditionAction {
        conditionsAnswered(AnsweredConditions(failing: failures))
    }

    /// Takes the answers of several conditions at once, those still awaited; nothing if none of
    /// them was.
    mutating func conditionsAnswered(_ answers: AnsweredConditions) -> ConditionAction {
        guard case .evaluatingConditions(let placement, let standing, var evaluation, let dispatched) = state else {
            return .none
        }
        var taken = ConditionIndexSet()
        var tookAny = false
        answers.indices.forEach { index in
            guard markAnswered(index, in: &evaluation) else { return }
            taken.set(index, to: true)
            tookAny = true
        }
        guard tookAny else { return .none }
        for failure in answers.failures where taken.contains(failure.index) {
            conditionFailures.append(failure.error)
        }
        state = .evaluatingConditions(placement, standing, evaluation, dispatched: dispatched)
        return conditionsSettledAction()
    }

    var unansweredConditionCount: Int {
        conditionEvaluation?.pendingCount ?? 0
    }

    private mutating func conditionsSettledAction() -> ConditionAction {
        guard case let .evaluatingConditions(placement, standing, evaluation, dispatched) = state,
              evaluation.pendingCount == 0 else { return .none }
        if !conditionFailures.isEmpty || isCancelled {
            state = .evaluatingConditions(placement, standing, ConditionEvaluation(), dispatched: dispatched)
            defer { conditionFailures = [] }
            return .failed(conditionFailures)
        }
        state = .waitingForCategories(placement, standing)
        guard !categories.isEmpty else { return .cleared(logger: logger, then: clearedToRun()) }
        return .passed(categories: categories, logger: logger)
    }

    // MARK: - Mutual exclusion

    enum GrantAction {
        /// Give it to the queue, which hands it to Foundation (or, suspended or out of slots, has
        /// it give its categories back first).
        case handOff(queue: AsyncOperationQueue?, ticket: UInt64, holdsCategories: Bool)
        /// Started by its caller (or by Foundation after it gave its categories back): execute
        /// now, telling `queue` (its own, if Foundation started it there) that the operation
        /// added with `ticket` started.
        case startExecuting(observers: [any OperationObserver], queue: AsyncOperationQueue?, ticket: UInt64)
        /// The operation already finished; give these categories straight back.
        case releaseAtOnce([String])
        /// Cancelled while it waited for its turn: its queue got to it, and it finishes now as
        /// `FinishAction` says, without going to Foundation.
        case finish(FinishAction)
        case none
    }

    mutating func categoriesGranted() -> GrantAction {
        if case .finished = state { return .releaseAtOnce(categories) }
        updateStanding { standing in
            standing.inLine = false
            standing.holds = true
        }
        return clearedToRun() // .none unless it was waiting for them
    }

    /// No conditions, and so no categories to acquire (conditions that pass without categories
    /// clear the operation themselves: `ConditionAction.cleared`).
    mutating func proceedWithoutCategories() -> GrantAction {
        guard phase == .waitingForCategories else { return .none }
        return clearedToRun()
    }

    /// Conditions passed and categories (if any) are held.
    private mutating func clearedToRun() -> GrantAction {
        guard case .waitingForCategories(var placement, let standing) = state else { return .none }
        if isCancelled && !placement.startedByCaller && !standing.holds {
            return .finish(beginFinishing(adding: []))
        }
        if placement.startedByCaller {
            state = .executing(placement, standing)
            notificationsInFlight += 1
            startAnnouncement = .inFlight
            return .startExecuting(observers: observers, queue: placement.wasHandedOff ? queue : nil, ticket: placement.ticket)
        }
        placement.wasHandedOff = true
        state = .ready(placement, standing, finishRequested: false)
        return .handOff(queue: queue, ticket: placement.ticket, holdsCategories: standing.holds && !categories.isEmpty)
    }

    /// Categories an operation gives back, with what extends them beyond the process: its
    /// leases go first (`AsyncOperation.releaseCategories(_:to:)`).
    struct CategoriesToRelease {
        let names: [String]
        let lockGate: CategoryLockGate?
    }

    private var categoriesGivenBack: CategoriesToRelease {
        CategoriesToRelease(names: categories, lockGate: categoryLockGate)
    }

    /// What giving categories back (a suspended queue, no free slot) comes to.
    enum GiveBack {
        /// Release these, park, and ask for them again when the queue lets it.
        case release(CategoriesToRelease, queue: AsyncOperationQueue?, ticket: UInt64)
        /// It will not execute anyway (cancelled, or finished before it started): keep them, and
        /// let the queue hand it to Foundation, which starts and so finishes it.
        case handOffAnyway(queue: AsyncOperationQueue?, ticket: UInt64)
    }

    /// Cleared to run, but its queue is suspended or out of slots: it gives its categories back
    /// and waits for them again.
    mutating func returnCategoriesWhileSuspended() -> GiveBack {
        guard case .ready(var placement, var standing, false) = state, standing.holds, !isCancelled else {
            return .handOffAnyway(queue: queue, ticket: ticket)
        }
        standing.holds = false
        placement.wasHandedOff = false
        state = .waitingForCategories(placement, standing)
        return .release(categoriesGivenBack, queue: queue, ticket: placement.ticket)
    }

    /// What an operation waiting with Foundation for a slot does when its queue narrows.
    enum Yield {
        case none
        /// Give these categories back (to `queue`'s engine); it asks for them again once
        /// Foundation starts it.
        case release(CategoriesToRelease, queue: AsyncOperationQueue?)
    }

    /// Its queue narrowed while it waited with Foundation for a slot, holding its categories. It
    /// gives them back, so that nothing waits for them behind a slot that may not free up (a
    /// group holding the queue's last slot, whose child needs one of them, say), and asks for
    /// them again once Foundation starts it (see `start()`).
    mutating func yieldCategoriesUntilStarted() -> Yield {
        guard case .ready(let placement, var standing, false) = state, standing.holds, placement.wasHandedOff,
              !isCancelled, !categories.isEmpty else { return .none }
        standing.holds = false
        state = .ready(placement, standing, finishRequested: false)
        return .release(categoriesGivenBack, queue: queue)
    }

    // MARK: - Standing in category lines

    /// What stepping into or out of the categories' lines asks of the operation.
    enum LineMove {
        /// Ask the exclusivity controller for `categories` at `place` (and log through `logger`
        /// if it has to wait).
        case ask(place: LinePlace, logger: LoggingObserver?)
        /// Withdraw from `categories`' lines at `place`.
        case withdraw(place: LinePlace, categories: [String])
        /// Nothing: it no longer waits for them (or stands in no line).
        case none
    }

    /// About to ask for its categories: from now on a finish takes it out of line. `lineRoot`,
    /// if not 0: where its queue's operations stand (a group's children stand where their
    /// outermost group stands, known once the group executes).
    mutating func enterLine(lineRoot: UInt64 = 0) -> LineMove {
        guard case .waitingForCategories(var placement, var standing) = state, !standing.holds else { return .none }
        if lineRoot != 0 {
            placement.lineRoot = lineRoot
        }
        standing.inLine = true
        state = .waitingForCategories(placement, standing)
        return .ask(place: placement.linePlace, logger: logger)
    }

    /// Leaves its categories' lines (its queue is suspended, or has no free slot).
    mutating func leaveLine() -> LineMove {
        guard isInLine, !holdsCategories, !hasBegunFinishing, !categories.isEmpty else { return .none }
        updateStanding { $0.inLine = false }
        return .withdraw(place: linePlace, categories: categories)
    }

    enum ResumeAction {
        case none
        case evaluateConditions([any OperationCondition])
        case acquireCategories([String])
        /// It finished (cancelled) before its queue let it through, and its queue already heard
        /// of that finish: the turn it was given goes to the next one.
        case giveBackTurn(ticket: UInt64)
    }

    /// What a parked operation (its queue was suspended) still has to do.
    mutating func resumeAfterSuspension() -> ResumeAction {
        switch phase {
        case .evaluatingConditions where !conditionsDispatched:
            return .evaluateConditions(conditions) // evaluate() marks them dispatched, once
        case .waitingForCategories where !holdsCategories:
            return .acquireCategories(categories)
        case .finished:
            return turnGivenAfterFinish.map(ResumeAction.giveBackTurn) ?? .none
        default:
            return .none
        }
    }

    /// What an operation does with the turn its queue just gave it.
    enum TurnTaken {
        /// Go on towards execution.
        case goOn
        /// It finished before it asked, and its queue heard of that finish first (so it did not
        /// take the turn back then): the turn goes to the next one.
        case giveBack(ticket: UInt64)
    }

    /// Its queue gave it the turn it asked for on its way to execution.
    func turnTaken() -> TurnTaken {
        turnGivenAfterFinish.map(TurnTaken.giveBack) ?? .goOn
    }

    /// What an operation without conditions does with the turn its queue just gave it.
    enum TurnToProceed {
        /// Perform `then`: nothing stands between it and execution any more.
        case proceed(then: GrantAction)
        /// As `TurnTaken.giveBack`: it finished before it asked; the turn goes to the next one.
        case giveBack(ticket: UInt64)
    }

    /// Its queue gave it the turn it asked for, and it has no conditions (so no categories):
    /// taking the turn and clearing it to run are one step.
    mutating func turnTakenToProceed() -> TurnToProceed {
        if let ticket = turnGivenAfterFinish { return .giveBack(ticket: ticket) }
        return .proceed(then: proceedWithoutCategories())
    }

    /// What an operation with conditions does with the turn its queue just gave it.
    enum TurnToEvaluate {
        /// Go on as `beginEvaluating(categories:categoryLockGate:)` says.
        case evaluate(EvaluationStart)
        /// As `TurnTaken.giveBack`: it finished before it asked; the turn goes to the next one.
        case giveBack(ticket: UInt64)
    }

    /// Its queue gave it the turn it asked for, and it has conditions: taking the turn and
    /// beginning their evaluation are one step.
    mutating func turnTakenToEvaluate(categories: [String], categoryLockGate gate: CategoryLockGate? = nil) -> TurnToEvaluate {
        if let ticket = turnGivenAfterFinish { return .giveBack(ticket: ticket) }
        return .evaluate(beginEvaluating(categories: categories, categoryLockGate: gate))
    }

    /// The ticket of a finished operation that its queue may have let through after hearing of
    /// the finish: it never went to Foundation, so any turn it was given is unused.
    private var turnGivenAfterFinish: UInt64? {
        guard case let .finished(placement?) = state, !placement.wasHandedOff else { return nil }
        return placement.ticket
    }

    /// Marks the conditions as handed out for evaluation; `false` if they already were.
    private mutating func dispatchConditions() -> Bool {
        guard case let .evaluatingConditions(placement, standing, evaluation, false) = state else { return false }
        state = .evaluatingConditions(placement, standing, evaluation, dispatched: true)
        return true
    }

    // MARK: - Starting

    enum StartAction {
        case none
        /// Tell `observers`, and `queue` (its own, if Foundation started it there) that the
        /// operation added with `ticket` started, then execute.
        case execute(observers: [any OperationObserver], queue: AsyncOperationQueue?, ticket: UInt64)
        case finish(FinishAction)
        case finishNotReady
        case runPipelineInline([any OperationCondition])
        /// Started by Foundation after it gave its categories back (its queue narrowed): it asks
        /// for them again, standing where it stood, and executes once granted.
        case acquireCategories([String], lineRoot: UInt64)
        case reportOutOfTurn(String)
    }

    mutating func start() -> StartAction {
        switch state {
        case .ready(var placement, let standing, let finishRequested):
            if isCancelled || finishRequested { return .finish(beginFinishing(adding: [])) }
            if !standing.holds && !categories.isEmpty {
                placement.startedByCaller = true // Foundation started it: it waits as executing
                state = .waitingForCategories(placement, standing)
                return .acquireCategories(categories, lineRoot: placement.lineRoot)
            }
            state = .executing(placement, standing)
            notificationsInFlight += 1
            startAnnouncement = .inFlight
            return .execute(observers: observers, queue: queue, ticket: placement.ticket)
        case .initialized:
            if isCancelled { return .finish(beginFinishing(adding: [])) }
            guard unfinishedDependencies.isEmpty else { return .finishNotReady }
            state = .enqueuing(Placement(startedByCaller: true))
            return .runPipelineInline(conditions)
        case .finishing, .finished:
            return .none
        case .executing:
            return .reportOutOfTurn("start() was called on an operation that is already executing; the call was ignored")
        case .enqueuing, .pending, .evaluatingConditions, .waitingForCategories:
            return .reportOutOfTurn("start() was called on an operation its queue is still preparing; the queue starts it, so the call was ignored")
        }
    }


    // MARK: - Cancelling

    enum CancelFollowUp {
        /// Nothing more: not yet on a queue, already handed to Foundation, finishing already
        /// begun (it is delivered once `operationDidCancel` has been), or a subclass that decides.
        case none
        /// Executing: let the operation react (an `AsyncBlockOperation` finishes at once).
        case interruptExecution
        /// Handed to Foundation but not started: it will not execute, so its categories are
        /// given back now rather than when a busy queue gets round to starting it.
        case releaseCategories(CategoriesToRelease)
        /// On a plain queue, waiting for dependencies: a cancelled operation is ready.
        case announceReady
    }

    enum CancelAction {
        case none
        case cancel(observers: [any OperationObserver], followUp: CancelFollowUp)
    }

    /// `onlyBeforeExecution`: an operation that executes already is left alone (a queue
    /// shutting down cancels only what still waits, in one step with reading its phase).
    mutating func cancel(error: (any Error)?, onlyBeforeExecution: Bool = false) -> CancelAction {
        guard !hasBegunFinishing, !finishRequestedBeforeStart, !onlyBeforeExecution || isBeforeExecution else { return .none }
        if let error { errors.append(error) }
        guard !isCancelled else { return .none }
        isCancelled = true
        notificationsInFlight += 1
        let followUp: CancelFollowUp
        switch phase {
        case .initialized:
            followUp = unfinishedDependencies.isEmpty ? .none : .announceReady
        case .enqueuing:
            followUp = .none // finishEnqueuing(attached:) sees the cancellation
        case .pending, .evaluatingConditions, .waitingForCategories:
            _ = beginFinishing(adding: []) // held back until operationDidCancel is delivered
            followUp = .none
        case .ready:
            // Foundation starts it, and start() finishes it without executing.
            followUp = releaseCategoriesEarly().map(CancelFollowUp.releaseCategories) ?? .none
        case .executing where startAnnouncement == .inFlight:
            // Every observer hears the start first: the cancel is delivered once the start is
            // (`startDelivered()`), and counts as in flight until then, so a finish waits for it.
            startAnnouncement = .cancelledMeanwhile
            return .none
        case .executing:
            followUp = .interruptExecution
        case .finishing, .finished:
            followUp = .none
        }
        return .cancel(observers: observers, followUp: followUp)
    }

    // MARK: - Finishing

    enum FinishAction {
        case none
        case reportDuplicate
        /// `mayBeHeld`: the operation never executed (or asked to be offered anyway) and has not
        /// yet been offered to hold its finish back (`AsyncOperation.holdsFinish()`).
        case deliver(observers: [any OperationObserver], errors: [any Error], mayBeHeld: Bool)
        /// Handed to Foundation but not started: it finishes when started; its categories go back now.
        case releaseCategoriesEarly(CategoriesToRelease)
    }

    /// Finishes an operation that a dependency cycle keeps from running, with
    /// `AsyncOperationError.dependencyCycle` (its name, `operationName`, is read outside the
    /// lock). Only the first call finishes it: two steps that advance it at once (a dependency's
    /// finish and the end of its add, say) both ask, and the second is no duplicate finish.
    mutating func finishClosingCycle(operationName: String) -> FinishAction {
        guard case .pending = state, let cycleDependencyName else { return .none }
        return finish(errors: [AsyncOperationError.dependencyCycle(operation: operationName, dependency: cycleDependencyName)])
    }

    mutating func finish(errors newErrors: [any Error]) -> FinishAction {
        if hasBegunFinishing {
            return isCancelled ? .none : .reportDuplicate
        }
        if case let .ready(placement, standing, finishRequested) = state {
            // Foundation holds the operation and will call start(); it finishes there. The first
            // request wins, as a finish already begun would.
            if finishRequested { return isCancelled ? .none : .reportDuplicate }
            record(newErrors)
            state = .ready(placement, standing, finishRequested: true)
            return releaseCategoriesEarly().map(FinishAction.releaseCategoriesEarly) ?? .none
        }
        return beginFinishing(adding: newErrors)
    }

    /// A group's children have all finished, with `childErrors`: it finishes, their errors
    /// before its own (those of a cancel while they ran, say), as a held finish has them
    /// (`takeHeldFinish(prepending:)`). This is the group's own finish: it is not offered to be
    /// held back. A finish by hand that began meanwhile and has not been offered yet (it is
    /// about to be, and will be declined: the children are done) takes their errors first.
    mutating func finish(afterChildren childErrors: [any Error]) -> FinishAction {
        if case let .finishing(finishing) = state, finishing.execution.hold == .notOffered {
            errors = childErrors + errors
            return .none
        }
        let action: FinishAction
        if !hasBegunFinishing, !errors.isEmpty, !childErrors.isEmpty {
            errors = childErrors + errors
            action = finish(errors: [])
        } else {
            action = finish(errors: childErrors)
        }
        updateFinishing { $0.execution.hold = .over }
        guard case let .deliver(observers, errors, _) = action else { return action }
        return .deliver(observers: observers, errors: errors, mayBeHeld: false)
    }

    /// Finishes with a value (a `ResultOperation`): the value is kept only if this finish is
    /// accepted, so a concurrent `finish(with: error)` either wins outright or loses outright.
    mutating func finish(producing output: ProducedOutput) -> FinishAction {
        if !hasBegunFinishing && !finishRequestedBeforeStart {
            producedOutput = output
        }
        return finish(errors: [])
    }

    /// Freezes the errors and moves to `.finishing`; the finish is delivered now or, while other
    /// notifications are being delivered, by the last of them.
    private mutating func beginFinishing(adding newErrors: [any Error]) -> FinishAction {
        let standing = self.standing ?? Standing()
        let finishing = Finishing(
            placement: placement,
            standing: standing,
            execution: Execution(began: executionBegan),
            withdrawsFromCategories: standing.inLine && !standing.holds && !categories.isEmpty,
            waitsForNotifications: notificationsInFlight > 0
        )
        record(newErrors)
        keepDependencyRecordsWhileAttaching()
        state = .finishing(finishing)
        if finishing.waitsForNotifications { return .none }
        return .deliver(observers: observers, errors: errors, mayBeHeld: mayHoldFinish(finishing.execution))
    }

    /// Adds the errors of a finish. Most finishes bring none, and most operations had none
    /// before: neither case copies or allocates an array.
    private mutating func record(_ newErrors: [any Error]) {
        if errors.isEmpty {
            errors = newErrors
        } else if !newErrors.isEmpty {
            errors.append(contentsOf: newErrors)
        }
    }

    /// Gives up the categories of an operation that will not execute after all.
    private mutating func releaseCategoriesEarly() -> CategoriesToRelease? {
        guard holdsCategories, !categories.isEmpty else { return nil }
        updateStanding { $0.holds = false }
        return categoriesGivenBack
    }

    /// What follows the delivery of `operationDidStart`.
    enum AfterStartAction {
        /// Still executing: call `execute()`.
        case execute
        /// Finished while its start was being announced: deliver that finish.
        case finish(FinishAction)
        /// Its finish was accepted meanwhile and is delivered by another notification still in
        /// flight: `execute()` must not run.
        case skipExecution
        /// Cancelled while its start was being announced: tell `observers` now, react as to a
        /// cancel (`followUp`), then report `cancelDeliveredAfterStart()`.
        case deliverCancel(observers: [any OperationObserver], followUp: CancelFollowUp)
    }

    /// Whether `operationDidStart` is being announced.
    enum StartAnnouncement {
        case none
        case inFlight
        /// And the operation was cancelled meanwhile: its observers hear that next.
        case cancelledMeanwhile
    }

    /// `operationDidStart` reached every observer.
    mutating func startDelivered() -> AfterStartAction {
        let cancelledMeanwhile = startAnnouncement == .cancelledMeanwhile
        startAnnouncement = .none
        let heldBack = notificationDelivered()
        if cancelledMeanwhile {
            // The cancel is still in flight, so no finish was let through (`heldBack` is none).
            return .deliverCancel(observers: observers, followUp: phase == .executing ? .interruptExecution : .none)
        }
        return executionAfterAnnouncing(heldBack)
    }

    /// The cancel made while the start was being announced reached every observer after it.
    mutating func cancelDeliveredAfterStart() -> AfterStartAction {
        executionAfterAnnouncing(notificationDelivered())
    }

    /// Whether the operation executes once its announcements are delivered: the finish they held
    /// back, if one came meanwhile, or `execute()` if it still executes.
    private func executionAfterAnnouncing(_ heldBack: FinishAction) -> AfterStartAction {
        if case .deliver = heldBack { return .finish(heldBack) }
        return phase == .executing ? .execute : .skipExecution
    }

    /// An observer notification was delivered; returns the finish delivery it was holding back.
    mutating func notificationDelivered() -> FinishAction {
        notificationsInFlight -= 1
        guard notificationsInFlight == 0, case var .finishing(finishing) = state, finishing.waitsForNotifications else { return .none }
        finishing.waitsForNotifications = false
        state = .finishing(finishing)
        return .deliver(observers: observers, errors: errors, mayBeHeld: mayHoldFinish(finishing.execution))
    }

    /// Whether a subclass is offered to hold a finish back.
    enum HoldOffer: Equatable {
        /// Ask it (`holdsFinish()`); the finish is held until `takeHeldFinish()`.
        case offer
        /// Deliver the finish as usual: it executed, or the offer was made before.
        case deliver
    }

    /// The operation asks to be offered to hold any finish back (a group, which finishes only
    /// after its children: see `AsyncOperation.holdsFinish()`).
    mutating func offerHoldAfterExecution() {
        offersHoldAfterExecution = true
    }

    /// Whether a finish may still be held back: not offered yet, and the operation never
    /// executed or asked to be offered after executing too.
    private func mayHoldFinish(_ execution: Execution) -> Bool {
        execution.hold == .notOffered && (!execution.began || offersHoldAfterExecution)
    }

    /// Offers a subclass, once, to hold back the finish of an operation that never executed (or
    /// of any operation that asked: `offersHoldAfterExecution`).
    mutating func offerToHoldFinish() -> HoldOffer {
        guard case var .finishing(finishing) = state, mayHoldFinish(finishing.execution) else { return .deliver }
        finishing.execution.hold = .held
        state = .finishing(finishing)
        return .offer
    }

    /// Takes the finish held back, if any, to deliver it: `.none` if none is held (it was
    /// delivered already). Its errors and observers are final: none are taken once finishing
    /// began. `childErrors` (a group's children's, which drained meanwhile) come first in `errors`.
    mutating func takeHeldFinish(prepending childErrors: [any Error] = []) -> FinishAction {
        guard holdsFinish else { return .none }
        updateFinishing { $0.execution.hold = .over }
        if !childErrors.isEmpty {
            errors = childErrors + errors
        }
        return .deliver(observers: observers, errors: errors, mayBeHeld: false)
    }

    /// Everything a finished operation lets go of, to be released or told outside the lock.
    struct Remains {
        var wasHandedOff: Bool
        var categoriesToRelease: [String]
        var categoriesToWithdraw: [String]
        var linePlace: LinePlace
        var dependents: SmallArray<WeakFinishWatcher>
        var released: SmallArray<Operation>
        /// Released by the caller after unlocking: their `deinit` is user code.
        var observers: [any OperationObserver]
        var conditions: [any OperationCondition]
        var watchers: [DependencyWatcher.Subscription]
        var queue: AsyncOperationQueue?
        var categoryLockGate: CategoryLockGate?
        var errors: [any Error]
        /// Failures of an evaluation the finish cut short (it was cancelled meanwhile).
        var discardedFailures: [any Error]
    }

    mutating func completeFinish() -> Remains {
        let standing = self.standing ?? Standing()
        // What the remains take is moved out (`Self.take`), not copied and then cleared: no
        // reference is retained here only to be released a moment later.
        let remains = Remains(
            wasHandedOff: wasHandedOff,
            categoriesToRelease: standing.holds ? categories : [],
            categoriesToWithdraw: withdrawsFromCategories && !standing.holds ? categories : [],
            linePlace: linePlace,
            dependents: Self.take(&dependents, leaving: SmallArray()),
            released: takeDependenciesAtTheFinish(),
            observers: Self.take(&observers, leaving: []),
            conditions: Self.take(&conditions, leaving: []),
            watchers: dependencyWatchers.isEmpty ? [] : Array(dependencyWatchers.values),
            queue: Self.take(&queue, leaving: nil),
            categoryLockGate: Self.take(&categoryLockGate, leaving: nil),
            errors: errors,
            discardedFailures: Self.take(&conditionFailures, leaving: [])
        )
        state = .finished(placement)
        awaited = ConditionIndexSet()
        foreignQueue = nil
        unfinishedDependencies.removeAll()
        if !dependencyWatchers.isEmpty { dependencyWatchers = [:] }
        satisfiedByConstruction = ConditionIndexSet()
        return remains
    }

    /// A finish begins while conditions' dependencies may be being attached (by the add, or for
    /// conditions added while it waited): what the conditions brought is kept past the finish,
    /// until those attachments end. One of them may be bringing one of those dependencies
    /// again, and must find that another condition brought it, or a plain queue holding it would
    /// be handed it twice. (Kept no longer: a dependency that waits for the operation, which
    /// Foundation keeps for good, would keep the two alive for ever.)
    private mutating func keepDependencyRecordsWhileAttaching() {
        let attachments: Int32 = switch state {
        case .enqueuing: 1 // the add's own, which ends with `finishEnqueuing(attached:)`
        case let .pending(_, attaching): attaching
        default: 0
        }
        guard attachments > 0 else { return }
        dependencyRecords = (dependencyRecords ?? DependencyRecords()).kept(untilEndOf: attachments)
    }

    /// An attachment that began before the finish ended. If it was the last, and the finish is
    /// complete, what the conditions brought is taken out, to let go of.
    private mutating func endAttachmentPastTheFinish() -> SmallArray<Operation> {
        guard let records = dependencyRecords, records.areKeptPastTheFinish else {
            assertionFailure("an attachment ended past the finish that the finish did not count")
            return SmallArray()
        }
        dependencyRecords = records.endingAnAttachment()
        guard case .finished = state, dependencyRecords?.areKeptPastTheFinish == false else { return SmallArray() }
        var taken = SmallArray<Operation>()
        takeConditionDependencies(into: &taken)
        return taken
    }

    /// Takes out the dependencies a finishing operation lets go of: those the user gave, and those
    /// its conditions brought, unless an attachment keeps them (`keepDependencyRecordsWhileAttaching()`).
    private mutating func takeDependenciesAtTheFinish() -> SmallArray<Operation> {
        var taken = Self.take(&dependencies, leaving: SmallArray())
        if dependencyRecords?.areKeptPastTheFinish != true {
            takeConditionDependencies(into: &taken)
        }
        return taken
    }

    /// Moves the records, and so the dependencies its conditions brought, into `taken`.
    private mutating func takeConditionDependencies(into taken: inout SmallArray<Operation>) {
        guard let records = Self.take(&dependencyRecords, leaving: nil) else { return }
        for dependency in records.conditionDependencies {
            taken.append(dependency) // held by `taken` too: letting go of the records frees none
        }
    }

    /// Moves `value` out, leaving `empty` in its place: one move, where `swap` makes three (a
    /// dependent list holds weak references, whose every move is a call into the runtime).
    @inline(__always)
    private static func take<Value>(_ value: inout Value, leaving empty: Value) -> Value {
        let taken = consume value
        value = empty
        return taken
    }
}

// MARK: - The block

extension OperationLifecycle {
    /// An `AsyncBlockOperation` executes: its block, unless it was cancelled first.
    mutating func beginBlock() -> BlockInvocation.Start {
        block?.begin(isCancelled: isCancelled) ?? .finishWithoutCalling
    }

    /// A continuation block was handed its continuation.
    mutating func awaitContinuation(through gate: ContinuationGate) {
        block?.awaitContinuation(through: gate)
    }

    /// The block's call returned.
    mutating func blockReturned() -> BlockInvocation.AfterCall {
        block?.returned() ?? .nothing
    }

    /// A continuation block's continuation was called with `newErrors`: it finishes the
    /// operation unless a cancel came first. Once the block was called, a cancel always finishes
    /// the operation itself (at once, or as the block returns), so `isCancelled` alone decides,
    /// in the cancel's own step: even before the block hears of it, while `operationDidCancel` is
    /// still being delivered.
    mutating func finishFromContinuation(errors newErrors: [any Error]) -> FinishAction {
        if isCancelled { return .none }
        return finish(errors: newErrors)
    }

    /// Cancelled while executing: what that does to the block.
    mutating func blockCancelled() -> BlockInvocation.CancelReaction {
        block?.cancelled() ?? .nothing
    }

    /// The finish is final: the block and its pending continuation, to let go of after unlocking.
    mutating func releaseBlock() -> BlockInvocation.Leftovers? {
        block?.release()
    }
}
