import Foundation

/// An `OperationQueue` that evaluates conditions, enforces mutual exclusion and tells observers,
/// before it lets an `AsyncOperation` execute.
///
/// Add operations with any of Foundation's methods. An `AsyncOperation` is held in the queue's own
/// scheduler while it waits for dependencies, conditions and categories, and handed to
/// Foundation's queue only once it can run: waiting operations occupy no concurrency slot and do
/// not slow Foundation down. Plain Foundation operations pass through untouched.
///
/// Operations held back still count as on the queue: `allOperations`, `allOperationCount`,
/// `waitUntilAllOperationsAreFinished()`, `addOperations(_:waitUntilFinished:)`,
/// `cancelAllOperations()`, `isSuspended` and `maxConcurrentOperationCount` behave as Foundation
/// documents them. (`operations` and `operationCount` are Foundation's own, on every platform:
/// they list only what Foundation's queue has been given.) Operations waiting for a slot start
/// as on Foundation's queue: the highest `queuePriority` first, then in the order they were
/// added; a serial queue starts them in add order. One difference: an operation that needs
/// mutually exclusive categories waits for its slot in the queue's scheduler, asking for them
/// only once it could start, so an operation that needs none, added later, may take a slot that
/// frees up first.
///
/// ```swift
/// let queue = AsyncOperationQueue()
/// let save = AsyncBlockOperation { try database.save(record) }
/// save.addCondition(MutuallyExclusive<Database>())
/// save.addObserver(TimeoutObserver(timeout: 10))
/// queue.addOperation(save)
/// ```
// @unchecked Sendable: the queue's own state lives in `state`, reached only under its lock.
open class AsyncOperationQueue: OperationQueue, @unchecked Sendable {
    /// How long a condition may take to answer, unless a queue says otherwise: 60 seconds.
    public static let defaultConditionEvaluationTimeout: TimeInterval = 60

    /// What the queue is told, not what it decides.
    struct Settings {
        weak var delegate: (any AsyncOperationQueueDelegate)? {
            didSet { delegateWasSet = true }
        }
        var conditionEvaluationTimeout = AsyncOperationQueue.defaultConditionEvaluationTimeout
        /// The group whose children this queue runs, if it is a `GroupOperation`'s queue.
        weak var group: GroupOperation? {
            didSet { groupWasSet = true }
        }
        /// A group's queue: where its children stand in categories' lines (the ticket of the
        /// outermost group), known once the group executes; 0 until then, and on other queues.
        var lineRoot: UInt64 = 0
        var logger: (any OperationLogger)? {
            didSet { isLogging = logger != nil }
        }
        /// Whether the queue's `qualityOfService` was set: blocks added with `addOperation(_:)`
        /// take it then, as Foundation's do.
        var qualityOfServiceWasSet = false
        // What each add reads first: most queues have no delegate, group or logger, and reading
        // a weak reference or copying an optional existential costs far more than a flag.
        private(set) var delegateWasSet = false
        private(set) var groupWasSet = false
        private(set) var isLogging = false

        /// The delegate, read only if one was ever set.
        var delegateIfSet: (any AsyncOperationQueueDelegate)? { delegateWasSet ? delegate : nil }
        /// The group, read only if the queue runs a group's children.
        var groupIfSet: GroupOperation? { groupWasSet ? group : nil }
    }

    /// Everything the queue's lock protects: the scheduling rules and the settings.
    struct State {
        var scheduler = QueueScheduler()
        var settings = Settings()
        /// Set once `shutDown` began: adds are refused from then on (see `AsyncOperationQueue+Shutdown.swift`).
        var shutdown: QueueShutdown?

        /// What an add of generation `generation` reads as it begins, its operations waiting for
        /// `barrier`. (A method, so that the state is read in place: a copy would cost every add.)
        func addContext(barrier: Operation?, generation: UInt64, groupBeingCreated: Bool) -> AddContext {
            let mayWaitInLine = scheduler.isSerial || scheduler.isSuspended
            return AddContext(
                delegate: settings.delegateIfSet,
                barrier: barrier,
                group: settings.groupIfSet,
                logger: settings.isLogging ? settings.logger : nil,
                isLogging: settings.isLogging,
                mayWaitInLine: mayWaitInLine,
                countsGroupProgressOnce: !mayWaitInLine || groupBeingCreated,
                generation: generation,
                lineRoot: settings.lineRoot,
                cancellationsAtBegin: scheduler.cancellationsOfAll
            )
        }
    }

    private let state = Locked<State>.make(State())
    private let stallWatch = Locked<StallWatch?>.make(nil)

    /// The group whose children this queue runs, if any.
    var group: GroupOperation? {
        state.withLock { $0.settings.groupIfSet }
    }

    /// Makes this queue the one that runs `group`'s children.
    func attach(to group: GroupOperation) {
        state.withLock { $0.settings.group = group }
        mention.attach(to: group)
    }

    /// Logs to `logger` unless the queue has a logger already; whether it adopted it.
    func adoptLoggerUnlessLogging(_ logger: any OperationLogger) -> Bool {
        state.withLock { state in
            guard state.settings.logger == nil else { return false }
            state.settings.logger = logger
            return true
        }
    }

    /// Why the operation added with `ticket` waits in one of the scheduler's lines, if it does,
    /// and the group this queue runs the children of (whose start a suspended queue waits for).
    struct LineWait {
        let reason: QueueScheduler.LineReason?
        let group: GroupOperation?
    }

    /// Where the operation added with `ticket` waits in the scheduler's lines, read in one step.
    func lineWait(ticket: UInt64) -> LineWait {
        state.withLock { LineWait(reason: $0.scheduler.waitsInLine(ticket: ticket), group: $0.settings.groupIfSet) }
    }

    /// The shut-down under way, if `shutDown` was called.
    var shutDownUnderWay: QueueShutdown? {
        state.withLock { $0.shutdown }
    }

    /// The shut-down's sweep has cancelled what waited: it goes on, to finish without executing.
    func shutDownSwept() {
        perform(state.withLock { $0.scheduler.shutDownSwept() })
    }

    /// Whether adds that began before now are still admitting their operations.
    var hasAdmissionsInFlight: Bool {
        state.withLock { !$0.scheduler.admissions.isEmpty }
    }

    /// What calling `shutDown` came to.
    enum ShutdownStart {
        /// The first call: the shut-down is new, and begins.
        case began(QueueShutdown)
        /// A later call joins the shut-down under way.
        case joined(QueueShutdown)
    }

    /// Sets the queue's shut-down, or joins the one under way.
    func startOrJoinShutdown() -> ShutdownStart {
        state.withLock { state in
            if let shutdown = state.shutdown { return .joined(shutdown) }
            let shutdown = QueueShutdown(queue: self)
            state.shutdown = shutdown
            state.scheduler.shutDownBegan() // in the same step: nothing waiting goes on from now
            return .began(shutdown)
        }
    }

    /// Creates an empty queue.
    public override init() {
        engine = .shared
        mention = QueueMention(name: nil, type: Self.self)
        super.init()
        noteStartingName()
    }

    /// Creates an empty queue whose operations use `engine` (tests build isolated worlds so).
    init(engine: OperationsEngine) {
        self.engine = engine
        mention = QueueMention(name: nil, type: Self.self)
        super.init()
        noteStartingName()
    }

    /// What the queue's operations remember of it, for messages and log events.
    let mention: QueueMention

    /// Tells the mention the name the queue starts with: Foundation's default, or the name a
    /// subclass gives by overriding `name` (its setter never reaches this class's `didSet`).
    private func noteStartingName() {
        let name = self.name
        if name == super.name {
            mention.startNamed(name)
        } else {
            mention.rename(name)
        }
    }

    /// The queue's name, for messages, log events and debugging, as Foundation's.
    open override var name: String? {
        didSet { mention.rename(name) }
    }

    /// What the queue's operations share with the other queues of the same engine: categories,
    /// the order of adds, the watchers of plain dependencies.
    let engine: OperationsEngine

    /// Told when operations are added, start and finish. Held weakly.
    public weak var delegate: (any AsyncOperationQueueDelegate)? {
        get { state.withLock { $0.settings.delegate } }
        set { state.withLock { $0.settings.delegate = newValue } }
    }

    /// Every unfinished operation on the queue (those held in its scheduler included), one per
    /// line in add order with what it waits for, and whether the queue is suspended:
    /// `snapshot().description`.
    open override var debugDescription: String {
        snapshot().description
    }

    /// Hears the lifecycle of every operation added from now on (see `OperationLogger`). `nil`,
    /// the default, logs nothing and costs nothing.
    public var logger: (any OperationLogger)? {
        get { state.withLock { $0.settings.logger } }
        set {
            let previous = state.withLock { state in
                defer { state.settings.logger = newValue }
                return state.settings.logger
            }
            _ = previous // released outside the lock
        }
    }

    /// Reports operations that have waited (not executed) longer than this many seconds: one
    /// `.stalled` diagnostic per operation, through `OperationDiagnostics.handler`, saying what
    /// it waits for (for example the category it needs and the operation holding it, and how long
    /// that has been executing). `nil`, the default, reports nothing and costs nothing. The
    /// children of a group that starts on the queue are watched too, with the threshold the queue
    /// has then.
    ///
    /// Times count from when the watch saw each operation waiting (or executing), a fraction of
    /// the threshold apart: what was already so when the threshold was set is reported "at
    /// least" that long. Setting the threshold again while it watches keeps those times and the
    /// reports made; after `nil`, the watch starts afresh.
    ///
    /// ```swift
    /// queue.name = "ledger"
    /// queue.stallReportThreshold = 30
    /// // [Operations] stalled (sync, queue 'ledger'): has waited 30 s without executing: sync:
    /// // waiting for categories; waits for category 'Database' (held by 'migrate'; 1st in line) ...
    /// ```
    public var stallReportThreshold: TimeInterval? {
        get { stallWatch.withLock { $0?.threshold } }
        set {
            guard let newValue else {
                stallWatch.exchange(with: nil)?.stop()
                return
            }
            // Set again while it watches, the new watch goes on from what the old one saw.
            let record = stallWatch.withLock { $0?.record } ?? StallWatch.Record()
            stallWatch.exchange(with: StallWatch(queue: self, threshold: newValue, record: record))?.stop()
        }
    }

    /// How long a condition may take to call its completion handler before the operation fails
    /// with `AsyncOperationError.conditionTimedOut`. Defaults to 60 seconds; `.infinity` waits
    /// forever. The children of a group (a cascade's steps, a retry's attempts) get the time of
    /// the queue the group runs on, as it is when the group starts.
    public var conditionEvaluationTimeout: TimeInterval {
        get { state.withLock { $0.settings.conditionEvaluationTimeout } }
        set { state.withLock { $0.settings.conditionEvaluationTimeout = newValue } }
    }

    // MARK: - Adding

    /// Adds an operation. An `AsyncOperation` runs once its dependencies finished, its conditions
    /// passed and its categories are free; anything else is handed to Foundation as it is.
    ///
    /// Adding an operation that is already on a queue, or has finished, is reported as a
    /// diagnostic (`.addedTwice`, `.addedAfterFinishing`) and ignored instead of crashing.
    ///
    /// The dependencies that conditions bring (`OperationCondition.dependency(for:)`) are added
    /// without calling this method as long as their operation waits for them: an override does
    /// not see them.
    open override func addOperation(_ operation: Operation) {
        if isForwardingToFoundation {
            super.addOperation(operation)
            return
        }
        guard let context = beginAdding(asyncCount: operation is AsyncOperation ? 1 : 0) else {
            return refuseAfterShutDown([operation])
        }
        add(operation, with: context)
    }

    /// Adds one operation, its add begun as `context` says. (Inlined: every add of one passes
    /// here, and out of line it would cost each about 30 instructions.)
    @inline(__always)
    private func add(_ operation: Operation, with context: AddContext) {
        var batch = Batch()
        accept(operation, into: &batch, context)
        give(&batch, context)
        endAdding(context, of: [operation])
    }

    /// Adds operations in order and, if `wait` is true, blocks until all of them have finished.
    open override func addOperations(_ operations: [Operation], waitUntilFinished wait: Bool) {
        if isForwardingToFoundation {
            super.addOperations(operations, waitUntilFinished: wait)
            return
        }
        add(operations, waitUntilFinished: wait, groupBeingCreated: false)
    }

    /// Adds the children a group is created with. Nobody else can start the group meanwhile, so
    /// none of them can run before the add ends, even on the group's suspended queue: their
    /// progress is counted once, as the add ends.
    func addChildrenOfGroupBeingCreated(_ operations: [Operation]) {
        add(operations, waitUntilFinished: false, groupBeingCreated: true)
    }

    private func add(_ operations: [Operation], waitUntilFinished wait: Bool, groupBeingCreated: Bool) {
        let asyncCount = operations.reduce(0) { $0 + ($1 is AsyncOperation ? 1 : 0) }
        guard let context = beginAdding(asyncCount: asyncCount, groupBeingCreated: groupBeingCreated) else {
            refuseAfterShutDown(operations)
            if wait { Self.waitUntilFinished(operations) }
            return
        }
        var batch = Batch()
        batch.operations.reserveCapacity(operations.count)
        for (index, operation) in operations.enumerated() {
            batch.unadmitted = operations.count - index
            accept(operation, into: &batch, context)
        }
        give(&batch, context)
        endAdding(context, of: operations)
        if wait {
            Self.waitUntilFinished(operations)
        }
    }

    /// Wraps `block` in a `BlockOperation` and adds it. If the queue's `qualityOfService` was
    /// set, the operation takes it (and, on a queue that is not serial, the priority it stands
    /// for), as Foundation's own queue does.
    open override func addOperation(_ block: @escaping @Sendable () -> Void) {
        let operation = BlockOperation(block: block)
        if state.withLock({ $0.settings.qualityOfServiceWasSet }) {
            operation.qualityOfService = qualityOfService
        }
        addOperation(operation)
    }

    /// The service level of the queue's operations, as Foundation's; a block added with
    /// `addOperation(_:)` takes it once it was set.
    open override var qualityOfService: QualityOfService {
        get { super.qualityOfService }
        set {
            super.qualityOfService = newValue
            state.withLock { $0.settings.qualityOfServiceWasSet = true }
        }
    }

    /// Runs `barrier` once every operation added before it has finished, and before any operation
    /// added after it starts, counting operations still waiting in the queue's scheduler and
    /// operations other threads are adding at the same moment. The dependency that a condition
    /// of an operation brings (`OperationCondition.dependency(for:)`) counts as added with the
    /// operation, even when the condition's own code places the barrier, or the condition is
    /// added after the barrier while its operation still waits for its dependencies. A suspended
    /// queue runs the barrier only once it resumes, even with nothing ahead of it
    /// (swift-corelibs-foundation runs a barrier on an empty queue at once).
    open override func addBarrierBlock(_ barrier: @escaping @Sendable () -> Void) {
        let barrierOperation = QueueBarrier(barrier)
        barrierOperation.name = "barrier"
        let gate = AsyncOperation()
        gate.name = "barrier gate"
        let placement = state.withLock { $0.scheduler.placeBarrier(barrierOperation, gate: gate) }
        guard case let .place(needsGate, previous) = placement else { return }
        if needsGate {
            barrierOperation.addDependency(gate) // opened once the adds in flight have joined
        }
        if let previous {
            barrierOperation.addDependency(previous) // barriers placed one after another keep their order
        }
        for operation in allOperations(includingBarriers: true) where !operation.dependencies.contains(where: { $0 === barrierOperation }) {
            barrierOperation.addDependency(operation)
        }
        barrierOperation.addObserver(BarrierRelease(queue: self))
        addOperation(barrierOperation)
    }

    /// An add in flight, as the dependency a condition of one of its operations brings joins it
    /// (`addConditionDependency(_:within:)`).
    struct AddInFlight {
        let generation: UInt64
        /// The barrier its operations wait for, if any.
        let barrier: Operation?
    }

    /// What one add reads from the queue's state, in one step with beginning the admission.
    struct AddContext {
        let delegate: (any AsyncOperationQueueDelegate)?
        /// The barrier the operations wait for, if any.
        var barrier: Operation?
        let group: GroupOperation?
        let logger: (any OperationLogger)?
        /// Whether `logger` is set: checked per operation without copying the logger out.
        let isLogging: Bool
        /// Serial or suspended when the add began: each operation asks the scheduler whether it
        /// waits in line (otherwise none does, and the check is skipped).
        let mayWaitInLine: Bool
        /// Whether none of the operations can run before the add ends (they reach Foundation
        /// with its batch, or the group they join cannot start meanwhile): a group then counts
        /// their progress once, as the add ends. Otherwise, an operation kept in the scheduler's
        /// line may be let through by another thread at once (the group starting, the serial
        /// queue moving on), so each is counted as it is admitted.
        let countsGroupProgressOnce: Bool
        let generation: UInt64
        /// Where the operations added to a group's queue stand in categories' lines (0 if the
        /// group has not executed yet: they take their root when they ask).
        let lineRoot: UInt64
        /// The scheduler's count of `cancelAllOperations()` calls as the add began.
        let cancellationsAtBegin: UInt64

        /// The add, as the dependency a condition of one of its operations brings joins it.
        var inFlight: AddInFlight { AddInFlight(generation: generation, barrier: barrier) }
    }

    /// `nil` once the queue is shut down: the add is refused.
    private func beginAdding(asyncCount: Int, groupBeingCreated: Bool = false) -> AddContext? {
        state.withLock { state in
            guard state.shutdown == nil else { return nil }
            switch state.scheduler.beginAdmission(counting: asyncCount) {
            case let .admit(generation, barrier):
                return state.addContext(barrier: barrier, generation: generation, groupBeingCreated: groupBeingCreated)
            }
        }
    }

    /// Begins an add as part of `enclosing`, still in flight (`addConditionDependency(_:within:)`);
    /// `nil` once the queue is shut down: the add is refused.
    private func beginAdding(joining enclosing: AddInFlight, asyncCount: Int) -> AddContext? {
        state.withLock { state -> AddContext? in
            guard state.shutdown == nil else { return nil }
            state.scheduler.joinAdmission(of: enclosing.generation, counting: asyncCount)
            // What its operation waits for, not a barrier placed since.
            return state.addContext(barrier: enclosing.barrier, generation: enclosing.generation, groupBeingCreated: false)
        }
    }

    /// Adds the dependency a condition of an operation being added brings, as part of that add
    /// (`enclosing`): it waits for the barrier its operation waits for, and a barrier placed
    /// since (from the condition's own code, say) waits for it as for its operation, instead of
    /// the other way round, which would close a cycle through the operation. (It does not go
    /// through `addOperation(_:)`, so a subclass's override does not see it.)
    func addConditionDependency(_ dependency: Operation, within enclosing: AddInFlight) {
        guard let context = beginAdding(joining: enclosing, asyncCount: dependency is AsyncOperation ? 1 : 0) else {
            return refuseAfterShutDown([dependency])
        }
        add(dependency, with: context)
    }

    /// Adds the dependency that a condition brings when it is added to an operation waiting for
    /// its dependencies on this queue. It counts as added with that operation: it waits for the
    /// `barriers` the operation waits for, not for one placed since, which waits for the
    /// operation and so, through it, for the dependency (waiting for that barrier would close a
    /// cycle). (It does not go through `addOperation(_:)`, so a subclass's override does not see
    /// it.)
    func addConditionDependency(_ dependency: Operation, waitingFor barriers: [Operation]) {
        guard var context = beginAdding(asyncCount: dependency is AsyncOperation ? 1 : 0) else {
            return refuseAfterShutDown([dependency])
        }
        context.barrier = nil // it waits for `barriers` instead
        if dependency.looksUnused { // again, as another thread may have added it: a barrier may wait for it then
            for barrier in barriers {
                dependency.addDependency(barrier)
            }
        }
        add(dependency, with: context)
    }

    /// Ends an add once its operations are held or with Foundation. A barrier placed while the
    /// add was in flight waits for them too.
    private func endAdding(_ context: AddContext, of operations: @autoclosure () -> [Operation]) {
        var end = state.withLock { $0.scheduler.endAdmission(generation: context.generation, cancellationsAtBegin: context.cancellationsAtBegin) }
        if case let .joinBarrier(barrier) = end {
            for operation in operations() where operation !== barrier {
                barrier.addDependency(operation)
            }
            end = state.withLock { $0.scheduler.endAdmission(generation: context.generation, joined: true, cancellationsAtBegin: context.cancellationsAtBegin) }
        }
        guard case let .ended(gates, cancelOperations) = end else { return }
        if cancelOperations {
            cancelOwn(operations())
        }
        for gate in gates {
            gate.finish()
        }
    }

    /// `cancelAllOperations()` ran while these were being added: those given straight to
    /// Foundation were in neither list it read, so the add cancels those it admitted (latest
    /// first, as it does; unless they started meanwhile, as with Foundation's own queue), not
    /// those it refused, which belong to another queue or have finished. (Those held or kept
    /// were cancelled as the queue took them.)
    private func cancelOwn(_ operations: [Operation]) {
        for operation in operations.reversed() {
            let isOwn = (operation as? AsyncOperation).map { $0.lifecycle.queue === self }
                ?? (PlainOperationRegistry.queue(of: operation) === mention)
            if isOwn { operation.cancelUnlessExecuting(with: nil) }
        }
    }

    /// What one add hands to Foundation at its end: operations that can run at once (a concurrent
    /// queue), and whether this add delivers the serial queue's outbox.
    struct Batch {
        /// One operation for an add of one: kept inline, with no buffer to allocate.
        var operations = SmallArray<Operation>()
        var deliversOutbox = false
        /// How many of the add's operations are still to be admitted, the one being admitted
        /// included; 0 for an add of one.
        var unadmitted = 0
        /// One of its operations was held already, and made room in the held table for the rest.
        var reservedHeldRoom = false
        /// Children admitted to the group this queue runs, not yet counted in its progress: one
        /// progress change per add rather than one per child, made before any of them can run
        /// (see `AddContext.countsGroupProgressOnce`).
        var admittedToGroup = ProgressDelta()
    }

    /// Hands an add's batch to Foundation, then the outbox if this add delivers it.
    private func give(_ batch: inout Batch, _ context: AddContext) {
        countAdmittedChildren(of: &batch, context)
        giveToFoundation(batch.operations)
        if batch.deliversOutbox {
            deliverOutbox()
        }
    }

    /// Admits one operation: an `AsyncOperation` into the scheduler (or `batch`, when it can run
    /// at once), anything else into `batch` for Foundation.
    private func accept(_ operation: Operation, into batch: inout Batch, _ context: AddContext) {
        context.delegate?.operationQueue(self, willAdd: operation)
        // A barrier orders itself after the one before it. An operation whose add is refused
        // (it is on a queue already, perhaps one the barrier waits for) is left as it is.
        if let barrier = context.barrier, !(operation is QueueBarrier), operation.looksUnused {
            operation.addDependency(barrier)
        }
        if let operation = operation as? AsyncOperation {
            var attachment = OperationLifecycle.LoggerAttachment.notAttached
            if context.isLogging, let logger = context.logger {
                attachment = operation.attach(logger, from: self) // only one not yet on a queue takes it
            }
            admit(operation, batch: &batch, context, logging: attachment)
            return
        }
        let ticket = engine.tickets.next()
        if operation.isFinished || operation.isExecuting {
            reportRefusedAdd(.addedAfterFinishing, of: operation, RefusedAddReason.finishedOrExecuting)
        } else if PlainOperationRegistry.register(operation, on: self, ticket: ticket) != nil {
            reportRefusedAdd(.addedTwice, of: operation, RefusedAddReason.alreadyOnAQueue)
        } else {
            if context.isLogging { context.logger?.log(.added, of: operation, on: self) }
            admitToGroup(operation, into: &batch, context)
            let dependencies = operation.dependencies
            if !dependencies.isEmpty {
                engine.dependencyWatcher.keepAlive(operation, untilFinished: dependencies)
            }
            handOffOrQueue(operation, ticket: ticket, into: &batch, context)
        }
    }

    /// `attachment`: what attaching the queue's logger came to, for `.added` (and the
    /// cancellation the logger missed, if any).
    private func admit(_ operation: AsyncOperation, batch: inout Batch, _ context: AddContext, logging attachment: OperationLifecycle.LoggerAttachment) {
        let ticket = engine.tickets.next()
        switch operation.lifecycle.enqueue(on: self, ticket: ticket, lineRoot: context.lineRoot) {
        case let .reject(kind, message):
            operation.logAdded(attachment, refused: true) // it went elsewhere since the logger joined
            reportRefusedAdd(kind, of: operation, message)
            perform(state.withLock { $0.scheduler.refusedAtAdd() }) // counted by beginAdding
        case .handOffNow:
            operation.logAdded(attachment)
            admitToGroup(operation, into: &batch, context)
            handOffOrQueue(operation, ticket: ticket, into: &batch, context)
        case let .runPipeline(conditions, turn):
            operation.logAdded(attachment)
            admitToGroup(operation, into: &batch, context)
            countAdmittedChildren(of: &batch, context) // before it can run
            giveToFoundation(batch.operations) // keep Foundation's order the order of adding
            batch.operations.removeAll(keepingCapacity: true)
            let reservingFor = batch.reservedHeldRoom ? 1 : batch.unadmitted
            batch.reservedHeldRoom = true
            // User code first (the conditions' dependencies and categories), so that nothing
            // comes between the turn taken as it is held and the evaluation it begins.
            let attachedDependencies = operation.attachConditionDependencies(conditions, to: self, joining: context.inFlight)
            // Waiting for nothing, on a queue that runs and is not serial, it reads its categories
            // now (once): if it needs none, it asks for its turn as it is held, and a condition
            // takes a step of the queue and one of its own fewer (`finishEnqueuing(holdingTurnWith:)`).
            var categories: [String]?
            if case .asHeld = turn, !attachedDependencies, !context.mayWaitInLine {
                categories = AsyncOperation.categories(of: conditions)
            }
            let asksTurn = categories?.isEmpty == true
            let (admission, missedCancelAll) = state.withLock {
                ($0.scheduler.admitHeld(operation, reservingFor: reservingFor, askingTurnFor: asksTurn ? ticket : nil),
                 $0.scheduler.cancelledAll(since: context.cancellationsAtBegin))
            }
            if case let .held(letThrough) = admission {
                perform(letThrough) // operations waiting for a slot, added earlier, go first
            }
            if missedCancelAll {
                operation.cancelIfWaiting(with: nil) // cancelAllOperations() ran during this add, before the queue held it
            }
            operation.endAdd(of: conditions, to: self, joining: context.inFlight, turn: admission, categories: consume categories)
        }
    }

    /// An operation that needs nothing more goes to Foundation with `batch`, unless the queue is
    /// suspended, or serial with earlier operations still on their way: then it waits in line. On
    /// a serial queue it goes through the outbox, so that it never overtakes an operation let
    /// through a moment earlier by another thread.
    private func handOffOrQueue(_ operation: Operation, ticket: UInt64, into batch: inout Batch, _ context: AddContext) {
        guard context.mayWaitInLine else {
            batch.operations.append(operation)
            return
        }
        let (admission, missedCancelAll) = state.withLock {
            ($0.scheduler.admitReady(operation, ticket: ticket), $0.scheduler.cancelledAll(since: context.cancellationsAtBegin))
        }
        switch admission {
        case .handOff:
            batch.operations.append(operation)
        case var .kept(letThrough):
            if missedCancelAll {
                operation.cancelUnlessExecuting(with: nil) // cancelAllOperations() ran during this add, before the queue kept it
            }
            if context.isLogging, let operation = operation as? AsyncOperation {
                operation.logWaiting() // for its turn, or for a suspended queue
            }
            // The outbox is delivered once the add ends, with the rest of its batch.
            batch.deliversOutbox = batch.deliversOutbox || letThrough.deliversOutbox
            letThrough.deliversOutbox = false
            if !letThrough.isEmpty {
                countAdmittedChildren(of: &batch, context) // before they can run
            }
            perform(letThrough)
        }
    }

    /// Counts `operation` among the children of the group this queue runs, if any: in the
    /// group's progress with the rest of the add, or now if it could run before the add ends.
    private func admitToGroup(_ operation: Operation, into batch: inout Batch, _ context: AddContext) {
        guard let group = context.group else { return }
        group.childWasAdmitted(operation, progress: &batch.admittedToGroup)
        if !context.countsGroupProgressOnce {
            group.countAdmitted(&batch.admittedToGroup)
        }
    }

    /// Counts the children admitted so far in the progress of the group this queue runs: before
    /// any of them can run, so that none is counted finished before it is counted admitted.
    private func countAdmittedChildren(of batch: inout Batch, _ context: AddContext) {
        context.group?.countAdmitted(&batch.admittedToGroup)
    }

    /// Blocks until every one of `operations` has finished: an `AsyncOperation` through the
    /// engine's own finish signal, anything else through Foundation's.
    private static func waitUntilFinished(_ operations: [Operation]) {
        for operation in operations {
            guard let operation = operation as? AsyncOperation else {
                operation.waitUntilFinished()
                continue
            }
            let finished = DispatchSemaphore(value: 0)
            let listener = FinishListener()
            listener.listen(to: operation) { finished.signal() }
            finished.wait()
        }
    }

    // MARK: - The way to execution

    /// What a queue tells an operation on its way to execution, read in one step.
    struct Turn {
        let passage: QueueScheduler.Passage
        /// The group this queue runs the children of, if any.
        let group: GroupOperation?
        /// Where its operations stand in categories' lines (see `Settings.lineRoot`).
        let lineRoot: UInt64
    }

    /// An operation's dependencies finished: whether it may go on to its conditions (or
    /// categories) now. If not, it waits in line and `continueTowardsExecution()` is called when
    /// its turn comes (or, with `needsSlot`, a slot frees up).
    func requestTurn(for operation: AsyncOperation, ticket: UInt64, needsSlot: Bool = false) -> Turn {
        let turn = state.withLock { state in
            Turn(
                passage: state.scheduler.requestTurn(for: operation, ticket: ticket, needsSlot: needsSlot),
                group: state.settings.groupIfSet,
                lineRoot: state.settings.lineRoot
            )
        }
        if needsSlot && turn.passage == .parked {
            placeBySlotPriority(operation, ticket: ticket, standingAt: .normal)
        }
        return turn
    }

    /// Whether an operation may ask for its categories right now (the queue runs and has a free
    /// slot: it may change the next moment; park with `parkUnlessFreeToTakeCategories`, which
    /// decides under the lock), and where it stands in their lines.
    var categoryTurn: Turn {
        state.withLock { state in
            Turn(passage: state.scheduler.mayTakeCategories ? .proceed : .parked, group: state.settings.groupIfSet, lineRoot: state.settings.lineRoot)
        }
    }

    /// A group's queue: its children stand at `root` in categories' lines from now on.
    func setLineRoot(_ root: UInt64) {
        state.withLock { $0.settings.lineRoot = root }
    }

    /// Where this queue's operations stand in categories' lines (see `Settings.lineRoot`).
    var lineRoot: UInt64 {
        state.withLock { $0.settings.lineRoot }
    }

    /// Parks `operation` if the queue is suspended or has no free slot;
    /// `continueTowardsExecution()` is called when it may go on.
    func parkUnlessFreeToTakeCategories(_ operation: AsyncOperation, ticket: UInt64) -> QueueScheduler.Passage {
        let passage = state.withLock { $0.scheduler.parkUnlessFreeToTakeCategories(operation, ticket: ticket) }
        if passage == .parked {
            placeBySlotPriority(operation, ticket: ticket, standingAt: .normal)
        }
        return passage
    }

    /// If `operation` waits in the slot line, it takes the place its priority gives it: once it
    /// parked (it joined at `.normal`, `standingAt`, which needs no change), or when its
    /// `queuePriority` changed (`standingAt` unknown). The priority is read outside the lock,
    /// since a subclass may override the properties, and only for an operation that waits: most
    /// never do.
    func placeBySlotPriority(_ operation: AsyncOperation, ticket: UInt64, standingAt current: Operation.QueuePriority? = nil) {
        var priority = Self.slotPriority(of: operation)
        guard priority != current else { return }
        while true {
            state.withLock { $0.scheduler.priorityChanged(ticket: ticket, to: priority) }
            // A priority set meanwhile was applied first: apply it again over the one read before.
            let now = Self.slotPriority(of: operation)
            guard now != priority else { return }
            priority = now
        }
    }

    /// The priority `operation` waits for a slot with, as Foundation ranks its own on a queue
    /// wider than 1: its `queuePriority`, or, at `.normal`, the one its `qualityOfService` stands
    /// for (Foundation does so only for a priority never set; a priority set to `.normal` cannot
    /// be told from one never set). Read outside every lock: a subclass may override either
    /// property.
    static func slotPriority(of operation: Operation) -> Operation.QueuePriority {
        let priority = operation.queuePriority
        guard priority == .normal else { return priority }
        switch operation.qualityOfService {
        case .userInteractive: return .veryHigh
        case .userInitiated: return .high
        case .utility: return .low
        case .background: return .veryLow
        default: return .normal
        }
    }

    /// Gives an operation that is cleared to run to Foundation's queue, unless it holds categories
    /// and the queue is suspended or out of slots (then it gives them back and waits).
    func handOff(_ operation: AsyncOperation, ticket: UInt64, holdsCategories: Bool) {
        switch state.withLock({ $0.scheduler.clearedToRun(operation, ticket: ticket, holdsCategories: holdsCategories) }) {
        case let .handOff(letThrough):
            perform(letThrough)
        case .giveBackCategories:
            operation.giveBackCategories()
        }
    }

    private func perform(_ letThrough: QueueScheduler.LetThrough) {
        if !letThrough.handOff.isEmpty {
            giveToFoundation(letThrough.handOff)
            state.withLock { $0.scheduler.gaveToFoundation(letThrough.handOff) }.signal()
        }
        if letThrough.deliversOutbox {
            deliverOutbox()
        }
        if letThrough.proceedsByPriority && letThrough.onward.count > 1 {
            for onward in Self.byPriority(letThrough.onward, of: { $0.operation }) {
                goOn(onward)
            }
        } else {
            for onward in letThrough.onward {
                goOn(onward)
            }
        }
    }

    private func goOn(_ onward: QueueScheduler.LetThrough.Onward) {
        switch onward {
        case let .proceed(operation):
            operation.continueTowardsExecution(on: self)
        case let .openGate(gate):
            openGate(gate)
        }
    }

    /// `operations` (in add order), highest slot priority first; in add order within one.
    /// Reads their priorities: call it outside every lock.
    static func byPriority<Element>(_ elements: [Element], of operation: (Element) -> Operation?) -> [Element] {
        elements.map { (rank: operation($0).map { SlotLine.rank(of: slotPriority(of: $0)) } ?? SlotLine.rank(of: .normal), element: $0) }
            .enumerated()
            .sorted { ($0.element.rank, $0.offset) < ($1.element.rank, $1.offset) }
            .map(\.element.element)
    }

    /// `operation` finished while it was being added, perhaps before this queue held it: the
    /// queue lets go of it, and of any turn it gave it, as for any finish before a hand-off (a
    /// second time changes nothing).
    func forgetOperationFinishedWhileAdded(_ operation: AsyncOperation, ticket: UInt64) {
        perform(state.withLock { $0.scheduler.finishedWhileAdded(operation, ticket: ticket) })
    }

    /// The turn taken with `ticket` ends, and goes on to the next operation (a serial queue
    /// would otherwise wait for it for ever): an operation gives up a turn it was given without
    /// using it (it had finished already, its finish heard, or something stood in its way as it
    /// was held with its turn), or a plain operation given to Foundation finished and its
    /// dependents heard of it, or waited for dependencies as Foundation got it.
    func endTurn(ticket: UInt64) {
        perform(state.withLock { $0.scheduler.turnEnded(ticket: ticket) })
    }

    private func perform(_ departure: QueueScheduler.Departure) {
        perform(departure.letThrough)
        departure.idleWaiters.signal()
    }

    /// Gives the serial queue's outbox to Foundation, in order, until it is empty: this thread is
    /// its one deliverer meanwhile.
    private func deliverOutbox() {
        var given: [Operation] = []
        repeat {
            let delivery = state.withLock { [given] in $0.scheduler.takeOutbox(given: given) }
            delivery.idleWaiters.signal()
            given = delivery.next
            guard !delivery.plainTurns.isEmpty else { // the usual case: no plain operation among them
                giveToFoundation(SmallArray(given))
                continue
            }
            var givenUp: [QueueScheduler.PlainTurn] = []
            var gated: [GateOperation] = []
            var openedAtOnce: [GateOperation] = []
            for turn in delivery.plainTurns {
                switch arrival(of: turn) {
                case .keepsTurn:
                    break
                case .givesTurnUp:
                    givenUp.append(turn)
                case let .keepsTurnBehind(gate):
                    openedAtOnce.append(gate)
                case let .waitsBehind(gate):
                    givenUp.append(turn)
                    gated.append(gate)
                }
            }
            giveToFoundation(SmallArray(given))
            for gate in openedAtOnce {
                openGate(gate) // its turn is its own already
            }
            for gate in gated { // before their turns end: one whose dependencies finish meanwhile goes first again
                openGateOnceReady(gate)
            }
            for turn in givenUp {
                endTurn(ticket: turn.ticket) // Foundation's serial queue runs others meanwhile
            }
        } while !given.isEmpty
    }

    /// How a plain operation about to reach Foundation on a serial queue, with the turn, goes on.
    private enum PlainArrival {
        /// Ready: it keeps the turn until it has finished (`keepsTurnUntilItLeft(_:)`).
        case keepsTurn
        /// Not ready, with no dependency (a subclass not ready for reasons of its own): it gives
        /// the turn up and runs whenever Foundation finds it ready.
        case givesTurnUp
        /// Behind a gate, its dependencies having finished just as it was gated: it keeps the
        /// turn, and the gate opens once Foundation has it.
        case keepsTurnBehind(GateOperation)
        /// Behind a gate, waiting for dependencies: it gives the turn up, and the gate opens in
        /// its turn once they have finished (`openGateOnceReady(_:)`).
        case waitsBehind(GateOperation)
    }

    /// Decides how the plain operation holding `turn` goes on (read outside every lock: a
    /// subclass may override `isReady` or `dependencies`). One that waits for dependencies is held
    /// back behind a gate, an operation it depends on that only this queue finishes, so that it
    /// runs in its turn, not as soon as they finish (see `GateOperation`). Its dependencies are
    /// read again once the gate is in place: the last one may have finished since the first read,
    /// and a finish after the second read can no longer let it start.
    private func arrival(of turn: QueueScheduler.PlainTurn) -> PlainArrival {
        guard !keepsTurnUntilItLeft(turn) else { return .keepsTurn }
        let operation = turn.operation
        guard !operation.dependencies.isEmpty else { return .givesTurnUp }
        let gate = GateOperation(holdingBack: operation, ticket: turn.ticket)
        operation.addDependency(gate)
        _ = engine.dependencyWatcher.watch(operation) { // finished, perhaps cancelled before its turn
            operation.removeDependency(gate) // (which also ends the gate's hold on it)
            gate.stopListening()
        }
        guard operation.dependencies.allSatisfy({ $0 === gate || $0.isFinished }) else { return .waitsBehind(gate) }
        return .keepsTurnBehind(gate) // the gate holds it until `openGate(_:)`, which keeps the turn
    }

    /// Asks for the gated operation's turn once its dependencies (read again at each finish: one
    /// may be added meanwhile) have all finished, listening to one at a time through the gate
    /// (which stops listening if the operation finishes first). It asks before the turn of the
    /// one that finished last ends (an `AsyncOperation`'s ends once its finish listeners have
    /// heard, a plain one's once its watchers have), so that it goes before operations added
    /// after it, as on Foundation's serial queue.
    private func openGateOnceReady(_ gate: GateOperation) {
        let operation = gate.operation
        guard !operation.isFinished else { return } // cancelled: Foundation finished it without its dependencies
        guard let unfinished = operation.dependencies.first(where: { $0 !== gate && !$0.isFinished }) else {
            perform(state.withLock { $0.scheduler.plainOperationReady(gate) })
            return
        }
        gate.keepListener { // the queue lives until it opens the gate, or the operation has finished
            guard let unfinished = unfinished as? AsyncOperation else {
                return .watch(engine.dependencyWatcher.watch(unfinished) { self.openGateOnceReady(gate) })
            }
            let listener = FinishListener(serialQueueTicket: gate.ticket) // held by its own handler until it fires or stops
            listener.listen(to: unfinished) { [listener] in
                withExtendedLifetime(listener) {}
                self.openGateOnceReady(gate)
            }
            return .finishListener(listener)
        }
    }

    /// The turn of a gated plain operation came: it keeps it until it has finished and its
    /// dependents have heard of it (watched before the gate opens, so that it cannot finish
    /// first), and the gate opens. (Once it has finished, the gate leaves its dependencies:
    /// `arrival(of:)`.)
    private func openGate(_ gate: GateOperation) {
        keepTurnUntilItLeft(gate.operation, ticket: gate.ticket)
        gate.start()
    }

    /// A plain operation about to reach Foundation took the turn of a serial queue: it keeps it
    /// until it has finished and its dependents have heard of it (watched before Foundation has
    /// it, so that it cannot finish first), unless it waits for dependencies (read outside every
    /// lock: a subclass may override `isReady` or `dependencies`): then it goes behind a gate
    /// (`arrival(of:)`). Whether it keeps it.
    private func keepsTurnUntilItLeft(_ turn: QueueScheduler.PlainTurn) -> Bool {
        // Its dependencies all finished counts as ready: Foundation tells an operation's
        // dependents one after another as it finishes, so `isReady` may lag behind.
        let operation = turn.operation
        guard operation.isReady || !operation.dependencies.isEmpty && operation.dependencies.allSatisfy(\.isFinished) else { return false }
        keepTurnUntilItLeft(operation, ticket: turn.ticket)
        return true
    }

    /// The plain operation holding the turn taken with `ticket` keeps it until it has finished
    /// and its dependents have heard of it (call it before it can finish), or until it stops
    /// being ready before it starts (`checkStillReady`).
    private func keepTurnUntilItLeft(_ operation: Operation, ticket: UInt64) {
        engine.dependencyWatcher.watchAfterOtherWatchers(operation) { [weak self] in
            self?.endTurn(ticket: ticket)
        }
        checkStillReady(operation, ticket: ticket, after: Self.firstReadinessCheck)
    }

    /// How long after a plain operation took the turn, ready, the queue first looks whether it
    /// still is; each look after that waits twice as long, up to `lastReadinessCheck`.
    private static let firstReadinessCheck: TimeInterval = 0.05
    private static let lastReadinessCheck: TimeInterval = 1

    /// A plain operation that kept the turn, ready, may stop being ready before Foundation starts
    /// it (a dependency added to it, say, on an operation behind it): it then gives the turn up,
    /// as Foundation's serial queue runs others while one waits, rather than wait for ever. Looked
    /// at now and then until it runs or finished (Foundation tells nobody of a change of
    /// `isReady` on Linux); read outside every lock, as a subclass may override it.
    private func checkStillReady(_ operation: Operation, ticket: UInt64, after delay: TimeInterval) {
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [weak self, weak operation] in
            guard let self, let operation, !operation.isFinished, !operation.isExecuting else { return }
            guard operation.isReady else {
                self.endTurn(ticket: ticket) // ends the turn if it still holds it
                return
            }
            guard self.state.withLock({ $0.scheduler.holdsTurn(ticket: ticket) }) else { return }
            self.checkStillReady(operation, ticket: ticket, after: min(delay * 2, Self.lastReadinessCheck))
        }
    }

    private var isForwardingToFoundation: Bool {
        PerThreadState.current.queueForwardingToFoundation == ObjectIdentifier(self)
    }

    /// Hands `operations` to Foundation's own implementation. Marked per thread and per queue, so
    /// that this queue's overrides pass them straight through if Foundation calls back into them,
    /// while an add to another queue made meanwhile (by an observer, say) still goes through that
    /// queue's scheduler.
    ///
    /// The batch and the let-through list keep a single operation inline, so that no list of ours
    /// is allocated for it on the path every operation takes; it goes through `addOperation(_:)`.
    /// (Foundation on Linux wraps it in a one-element array literal of its own, which costs less
    /// than the list we used to grow for it.)
    private func giveToFoundation(_ operations: SmallArray<Operation>) {
        guard !operations.isEmpty else { return }
        let thread = PerThreadState.current
        let previous = thread.queueForwardingToFoundation
        thread.queueForwardingToFoundation = ObjectIdentifier(self)
        defer { thread.queueForwardingToFoundation = previous }
        if operations.count == 1 {
            super.addOperation(operations[0])
        } else {
            super.addOperations(operations.array, waitUntilFinished: false)
        }
    }

    // MARK: - Events from operations

    /// `operation`, added with `ticket`, started: the delegate hears it, and on a queue made
    /// concurrent since it was handed off, its turn ends (on a serial queue the turn lasts until
    /// it left: `operationDidLeave(ticket:)`).
    func operationDidStart(_ operation: AsyncOperation, ticket: UInt64) {
        let (delegate, letThrough) = state.withLock { state in
            (state.settings.delegateIfSet, state.scheduler.handedOffOperationStarted(ticket: ticket))
        }
        delegate?.operationQueue(self, didStart: operation) // before the next one can finish
        if let letThrough {
            perform(letThrough)
        }
    }

    func operationDidFinish(_ operation: AsyncOperation, ticket: UInt64, errors: [any Error], wasHandedOff: Bool) {
        let (delegate, group, letThrough) = state.withLock { state in
            var letThrough: QueueScheduler.LetThrough?
            if wasHandedOff {
                letThrough = state.scheduler.handedOffOperationStarted(ticket: ticket) // if it finished unstarted
            } else {
                state.scheduler.finishedBeforeHandOff(operation, ticket: ticket)
            }
            return (state.settings.delegateIfSet, state.settings.groupIfSet, letThrough)
        }
        if let letThrough {
            perform(letThrough)
        }
        delegate?.operationQueue(self, didFinish: operation, errors: errors)
        group?.recordChildFinished(operation, errors: errors)
    }

    /// Called last when the operation added with `ticket` finished, once Foundation has let go
    /// of it and its dependents have heard of it: ends its turn on a serial queue, and wakes
    /// `waitUntilAllOperationsAreFinished()` when nothing is left.
    func operationDidLeave(ticket: UInt64) {
        perform(state.withLock { $0.scheduler.operationLeft(ticket: ticket) })
    }

    // MARK: - Foundation's API, counting held operations

    /// Whether the queue starts operations. While suspended, operations still wait for their
    /// dependencies, but none has its conditions evaluated, takes a mutually exclusive category
    /// or starts.
    open override var isSuspended: Bool {
        get { super.isSuspended }
        set {
            let letThrough = state.withLock { $0.scheduler.setSuspended(newValue) }
            super.isSuspended = newValue
            if newValue {
                stepOutOfCategoryLines()
            }
            perform(letThrough) // those resumed go on highest priority first (`proceedsByPriority`)
        }
    }

    /// A suspended queue takes no category: its operations waiting in a category's line leave
    /// it, so the category goes to the next waiter of another queue, and take their place again
    /// (the same place, by their ticket) when the queue resumes.
    private func stepOutOfCategoryLines() {
        let held = state.withLock { $0.scheduler.held.all }
        for operation in held {
            operation.leaveCategoryLinesWhileSuspended()
        }
    }

    /// How many operations may execute at once; 1 makes the queue serial: operations then start
    /// in the order they were added (once their dependencies finished), whatever their conditions,
    /// categories and priorities (plain Foundation operations aside, and those already with
    /// Foundation when the queue was made serial: see the README's known limitations).
    open override var maxConcurrentOperationCount: Int {
        get { super.maxConcurrentOperationCount }
        set {
            let narrower = Self.isNarrower(newValue, than: super.maxConcurrentOperationCount)
            if narrower {
                super.maxConcurrentOperationCount = newValue
            }
            let (letThrough, onTheirWay) = state.withLock { state in
                (state.scheduler.setWidth(newValue), narrower ? state.scheduler.allWaiting : [])
            }
            perform(letThrough)
            guard narrower else {
                // Widened only now: those a serial queue held back reach Foundation while it is
                // still serial, and it ranks them as it ranks operations added to a serial queue
                // (by `queuePriority` alone), then starts them by rank as the slots open.
                super.maxConcurrentOperationCount = newValue
                return
            }
            // Operations that Foundation has not started may now wait long for a slot, maybe for
            // one a group holds until its child gets their categories: they give them back, and
            // ask again once started. Those still on their way to Foundation are held until it
            // has them, so between the two lists (read in this order) none is missed.
            for case let operation as AsyncOperation in onTheirWay + super.operations {
                operation.yieldCategoriesUntilStarted()
            }
        }
    }

    /// Whether `width` lets fewer operations run at once than `previous` (negative: no limit).
    private static func isNarrower(_ width: Int, than previous: Int) -> Bool {
        guard width >= 0 else { return false }
        return previous < 0 || width < previous
    }

    /// The operations on the queue that have not finished, in the order they were added, including
    /// those still waiting in the queue's scheduler for dependencies, conditions or categories.
    ///
    /// `operations` and `operationCount` are Foundation's own on every platform and list only what
    /// Foundation's queue has been given (swift-corelibs-foundation declares them where Swift
    /// cannot override them, and one answer on every platform beats two): use `allOperations` and
    /// `allOperationCount` for the whole picture.
    ///
    /// As Foundation's lists, it leaves out the operation behind `addBarrierBlock(_:)`.
    public var allOperations: [Operation] {
        allOperations(includingBarriers: false)
    }

    /// Every unfinished operation on the queue, in add order; with `includingBarriers`, the
    /// operations behind `addBarrierBlock(_:)` too (what a cancel or a shut-down reaches).
    func allOperations(includingBarriers: Bool) -> [Operation] {
        let listed = allOperationsIncludingBarriers
        return includingBarriers ? listed : listed.filter { !($0 is QueueBarrier) }
    }

    private var allOperationsIncludingBarriers: [Operation] {
        let waiting = state.withLock { $0.scheduler.allWaiting }
        let running = super.operations
        // Foundation's list is in the order Foundation was given them, which is not add order
        // once an operation waited in the scheduler (for a dependency, say) while a later one went.
        var seen = Set<ObjectIdentifier>()
        var merged: [(ticket: UInt64, operation: Operation)] = []
        merged.reserveCapacity(waiting.count + running.count)
        for operation in waiting where seen.insert(ObjectIdentifier(operation)).inserted {
            merged.append((Self.ticket(of: operation) ?? 0, operation))
        }
        var previousTicket: UInt64 = 0
        for operation in running where seen.insert(ObjectIdentifier(operation)).inserted {
            // An operation that came to Foundation by another way (none of ours gives it a ticket)
            // keeps its place after the one before it.
            let ticket = Self.ticket(of: operation) ?? previousTicket
            previousTicket = ticket
            merged.append((ticket, operation))
        }
        return merged.enumerated()
            .sorted { ($0.element.ticket, $0.offset) < ($1.element.ticket, $1.offset) }
            .map(\.element.operation)
    }

    private static func ticket(of operation: Operation) -> UInt64? {
        if let operation = operation as? AsyncOperation {
            let ticket = operation.lifecycle.ticket
            return ticket == 0 ? nil : ticket
        }
        return PlainOperationRegistry.ticket(of: operation)
    }

    /// The number of operations on the queue that have not finished, including those still
    /// waiting in the queue's scheduler. See `allOperations` for why this exists beside
    /// `operationCount`.
    public var allOperationCount: Int {
        let waiting = state.withLock { $0.scheduler.allWaiting }
        let running = super.operations
        // An operation being handed off is briefly in both lists: count it once.
        guard !waiting.isEmpty else { return running.reduce(0) { $0 + ($1 is QueueBarrier ? 0 : 1) } }
        var seen = Set<ObjectIdentifier>()
        return (waiting + running).reduce(0) { count, operation in
            count + (!(operation is QueueBarrier) && seen.insert(ObjectIdentifier(operation)).inserted ? 1 : 0)
        }
    }


    /// Cancels every operation on the queue, including those still waiting. Operations waiting
    /// for dependencies, conditions or categories finish at once, without executing. One that
    /// waits for nothing but its turn (a suspended queue, or a serial queue's line) finishes
    /// without executing when the queue gets to it, as on Foundation's own queue. An operation
    /// whose add is under way on another thread is cancelled as the queue takes it (unless it
    /// goes straight to Foundation and starts first, as on Foundation's own queue).
    open override func cancelAllOperations() {
        state.withLock { $0.scheduler.cancellingAll() } // adds in flight cancel theirs as they end
        // Latest first, so no dependent is released to run by the cancellation of what it waits for.
        for operation in allOperations(includingBarriers: true).reversed() {
            operation.cancel()
        }
    }

    /// Blocks until every operation on the queue, including those still waiting, has finished.
    ///
    /// It keeps no reference to the operations it waits for, so each is freed as it finishes.
    open override func waitUntilAllOperationsAreFinished() {
        repeat {
            waitUntilNoAsyncOperationIsUnfinished()
            super.waitUntilAllOperationsAreFinished() // plain operations, and Foundation's last word
        } while !state.withLock({ $0.scheduler.isIdle })
    }

    /// A barrier finished: later operations no longer wait for it.
    fileprivate func barrierFinished(_ barrier: AsyncOperation) {
        state.withLock { $0.scheduler.barrierFinished(barrier) }
    }

    private func waitUntilNoAsyncOperationIsUnfinished() {
        if case let .wait(idle) = state.withLock({ $0.scheduler.waitForIdle() }) {
            idle.wait()
        }
    }
}

/// The operation behind `addBarrierBlock(_:)`.
final class QueueBarrier: AsyncBlockOperation, @unchecked Sendable {}

/// Stops later operations from waiting for a barrier once it has finished. Holds the queue
/// strongly, as the barrier's queue holds its work (and a weak reference would slow every retain
/// of the queue from then on: see `QueueMention`); the barrier lets go of it when it finishes.
private struct BarrierRelease: OperationObserver {
    let queue: AsyncOperationQueue

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        queue.barrierFinished(operation)
    }
}
