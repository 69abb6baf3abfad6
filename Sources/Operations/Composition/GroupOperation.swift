import Foundation

/// An operation made of child operations, which runs them on its own queue and finishes once
/// every one of them has finished.
///
/// Children run with the full engine: dependencies, conditions, mutual exclusion and observers.
/// They start when the group executes; until then they wait (their conditions are not evaluated
/// either). Children may be added while the group runs, until it finishes, and operations a child
/// produces are awaited too. Groups nest.
///
/// ```swift
/// let group = GroupOperation(operations: [fetchUser, fetchSettings])
/// group.maxConcurrentOperationCount = 1     // one after another, in the order added
/// group.addObserver(FinishedObserver { _, errors in print(errors) })
/// queue.addOperation(group)
/// ```
///
/// The group's `errors` hold every child's errors, then its own. Cancelling the group cancels its
/// children; it still finishes only once they have. So does a group finished by hand
/// (`finish(with:)`) while children are left: they are cancelled, and the group is heard finished
/// once they have, with their errors before its own. A child that needs a mutually exclusive
/// category its enclosing group holds could never run, so it fails at once with
/// `AsyncOperationError.categoryHeldByEnclosingGroup`.
///
/// Its `progress` counts the children: `totalUnitCount` those admitted (growing as children are
/// added or produced), `completedUnitCount` those finished, and `fractionCompleted` is 1 once the
/// group has finished (a group that finishes with no child counts one unit then, done). A child
/// group's progress is a child of its parent's, as Foundation's child progress works, so nested
/// groups report partial progress. Cancelling the progress cancels the group, and cancelling the
/// group cancels its progress.
///
/// ```swift
/// let overall = Progress(totalUnitCount: 1)                   // say, the one a progress bar shows
/// overall.addChild(group.progress, withPendingUnitCount: 1)
/// print("\(Int(group.progress.fractionCompleted * 100)) %")  // or observe it with key-value observing
/// ```
///
/// Foundation gives a progress one parent. A group made while a progress is current may have its
/// progress's parent already, so the group it is nested in counts it as one unit, done when it
/// finishes, rather than by its children. Show the progress of the outermost group only: giving
/// a progress bar (`addChild`) the progress of a group that is also nested in another group
/// gives that progress two parents, which swift-corelibs-foundation stops the process for.
///
/// Subclasses add their children in `execute()` and then call `super.execute()`:
///
/// ```swift
/// final class SyncEverything: GroupOperation, @unchecked Sendable {
///     override func execute() {
///         addChildren([SyncContacts(), SyncCalendars()])
///         super.execute()
///     }
/// }
/// ```
// @unchecked Sendable: `children` lives in a `Locked` value; the queue is thread-safe.
open class GroupOperation: AsyncOperation, ProgressReporting, @unchecked Sendable {
    /// The queue that runs the children.
    let queue: AsyncOperationQueue
    private let children = Locked.make(GroupStateMachine<Foundation.Operation>())

    /// The group's progress, in children: admitted (`totalUnitCount`) and finished
    /// (`completedUnitCount`). Made with `Progress(totalUnitCount:)`, so it becomes a child of
    /// the thread's current progress, if any, when the group is created. Cancelling it cancels
    /// the group, and cancelling the group cancels it.
    public let progress: Progress
    /// `progress` was made while a progress was current, and so may have its parent already
    /// (Foundation gives the current one only the next progress made): a group this one is
    /// nested in counts it as one child, not as a child progress.
    private let progressHasParent: Bool

    /// Creates a group with `operations` as its first children.
    public init(operations: [Foundation.Operation] = []) {
        queue = AsyncOperationQueue()
        progressHasParent = Progress.current() != nil
        progress = Progress(totalUnitCount: 0)
        super.init()
        prepare(operations)
    }

    /// Creates a group whose children run with `engine` (tests build isolated worlds so).
    init(operations: [Foundation.Operation] = [], engine: OperationsEngine) {
        queue = AsyncOperationQueue(engine: engine)
        progressHasParent = Progress.current() != nil
        progress = Progress(totalUnitCount: 0)
        super.init()
        prepare(operations)
    }

    private func prepare(_ operations: [Foundation.Operation]) {
        lifecycle.offerHoldAfterExecution() // a finish by hand waits for the children too
        queue.name = "GroupOperation children"
        queue.isSuspended = true
        queue.attach(to: self)
        add(children: operations, beingCreated: true)
        // Only now can anyone else reach the group (a cancel of the progress's parent: Foundation
        // calls a handler set on a progress cancelled meanwhile at once).
        progress.isCancellable = true
        progress.cancellationHandler = { [weak self] in self?.cancel() }
    }

    /// Adds a child. Allowed until the group finishes; later children are reported as
    /// `.configuredTooLate` and run on a shared queue, so no work is lost. A child added to a
    /// cancelled group is cancelled. A `RetryOperation` makes its own children: one added to it
    /// from outside is reported as `.notSupported` and finishes cancelled.
    public final func addChild(_ operation: Foundation.Operation) {
        addChildren([operation])
    }

    /// Adds children, in order.
    public final func addChildren(_ operations: [Foundation.Operation]) {
        add(children: operations, beingCreated: false)
    }

    /// `beingCreated`: the children the group is created with, added before anyone else can
    /// start the group (see `AsyncOperationQueue.addChildrenOfGroupBeingCreated(_:)`).
    private func add(children operations: [Foundation.Operation], beingCreated: Bool) {
        guard !operations.isEmpty else { return }
        if let refusal = refusalOfChildrenFromOutside {
            OperationDiagnostics.report(.notSupported, self, refusal)
            operations.forEach { $0.cancel() }
            queue.engine.fallbackQueue.addOperations(operations, waitUntilFinished: false) // they finish, cancelled
            return
        }
        admitChildren(operations, beingCreated: beingCreated)
    }

    /// Why this kind of group takes no children from outside, if it does not.
    var refusalOfChildrenFromOutside: String? { nil }

    /// Adds children the group itself made (an attempt, a composite's declared child), in order.
    func admitChildren(_ operations: [Foundation.Operation], beingCreated: Bool = false) {
        let groupIsCancelled = isCancelled
        if let tooLate = children.withLock({ $0.admissionOnceDone(groupIsCancelled: groupIsCancelled) }) {
            if tooLate == .tooLateNeverToRun {
                operations.forEach { $0.cancel() } // the group stopped its children: these must not run
            }
            OperationDiagnostics.report(.configuredTooLate, self, "children were added after the group finished; they run (or, the group having stopped its children, finish cancelled) on a shared queue")
            queue.engine.fallbackQueue.addOperations(operations, waitUntilFinished: false)
            return
        }
        if beingCreated {
            queue.addChildrenOfGroupBeingCreated(operations)
        } else {
            queue.addOperations(operations, waitUntilFinished: false)
        }
    }

    /// How many children may execute at once; 1 runs them one after another, in the order added.
    /// Defaults to Foundation's default (as many as the system allows). A `RetryOperation` runs
    /// one attempt at a time whatever this says: setting it there is reported as `.notSupported`
    /// and ignored.
    public final var maxConcurrentOperationCount: Int {
        get { queue.maxConcurrentOperationCount }
        set {
            if let refusal = refusalOfWidth {
                OperationDiagnostics.report(.notSupported, self, refusal)
                return
            }
            queue.maxConcurrentOperationCount = newValue
        }
    }

    /// Why this kind of group ignores `maxConcurrentOperationCount`, if it does.
    var refusalOfWidth: String? { nil }

    /// Starts the children. A subclass that adds children here calls `super.execute()` after
    /// adding them.
    open override func execute() {
        queue.setLineRoot(lineRootOfChildren()) // before they can run
        if let enclosing = lifecycle.queue {
            // The children's conditions get the time the group's own queue gives conditions,
            // and its stall reports cover them.
            queue.conditionEvaluationTimeout = enclosing.conditionEvaluationTimeout
            if let threshold = enclosing.stallReportThreshold {
                queue.stallReportThreshold = threshold
            }
        }
        queue.isSuspended = false
        let start = children.withLock { $0.executionBegan() }
        perform(start.action) // start.released goes after unlocking
    }

    /// Where the children stand in categories' lines: where this group stands, that is at its
    /// outermost enclosing group (or at itself), so that no operation waiting for a category the
    /// group holds ever keeps them out of another one.
    private func lineRootOfChildren() -> UInt64 {
        let own = lifecycle.placeOnQueue
        let enclosingRoot = own.queue?.lineRoot ?? 0
        return enclosingRoot != 0 ? enclosingRoot : own.place.root
    }

    /// Called when a child finished, with its errors, before the group decides whether it is
    /// done: a subclass may add more children here (to retry a failed one, say). Called on an
    /// arbitrary thread. The default does nothing.
    open func childDidFinish(_ child: Foundation.Operation, errors: [any Error]) {}

    // MARK: - Book-keeping

    /// Counts `child` among the children. Its share of the progress goes into `pending`, which
    /// the queue applies with `countAdmitted(_:)` before the child can run: as the add ends, or at
    /// once if the child could be let through before that (and here if the child is cancelled
    /// or watched).
    func childWasAdmitted(_ child: Foundation.Operation, progress pending: inout ProgressDelta) {
        let groupIsCancelled = isCancelled
        let admission = children.withLock { $0.childAdmitted(child, groupIsCancelled: groupIsCancelled) }
        switch admission {
        case .tooLate:
            // Added just as the group finished: the group cannot wait for it. It still runs.
            OperationDiagnostics.report(.configuredTooLate, child, "the child was added as its group finished; it runs, but the group did not wait for it")
            return
        case .tooLateNeverToRun:
            // As above, but the group stopped its children (cancelled, or finished otherwise than
            // by its last child): they must not run.
            child.cancel()
            OperationDiagnostics.report(.configuredTooLate, child, "the child was added as its group finished, having stopped its children; it finishes cancelled, and the group did not wait for it")
            return
        case .counted, .countedNeverToRun:
            break
        }
        pending.admitted += 1
        if let childGroup = child as? GroupOperation, !childGroup.progressHasParent {
            // A child group's progress rolls up into this one as Foundation's child progress does.
            pending.childProgress.append(childGroup.progress)
        }
        if admission == .countedNeverToRun {
            countAdmitted(&pending) // before the cancel can finish it
            child.cancel() // joined a group that will never run its children: it must not run either
        }
        guard !(child is AsyncOperation) else { return }
        countAdmitted(&pending)
        _ = queue.engine.dependencyWatcher.watch(child) { [weak self] in
            self?.recordChildFinished(child, errors: [])
        }
    }

    func recordChildFinished(_ child: Foundation.Operation, errors: [any Error]) {
        recordChildFinished(child, errors: errors, keeping: errors)
    }

    /// A child finished with `errors`, which `childDidFinish(_:errors:)` hears; the group keeps
    /// `kept` among its own (a composite or a retry drops those of an attempt it runs again).
    func recordChildFinished(_ child: Foundation.Operation, errors: [any Error], keeping kept: [any Error]) {
        childDidFinish(child, errors: errors)
        // The group is done only once every child it counted has finished: this one was admitted
        // as it finished (`.tooLate`), never counted, and its finish counts for nothing either.
        guard !children.withLock(\.isDone) else { return }
        if !Self.rollsUpByItself(child) {
            // Counted before the group hears of it: the child that turns out last then finds
            // every other child counted, and the group's completion comes after all of them.
            updateProgress(ProgressDelta(finished: 1))
        }
        perform(children.withLock { $0.childFinished(errors: kept) })
    }

    /// Whether `child` is a group whose progress is a child of this one's, which counts its
    /// finish by itself (Foundation's child progress).
    private static func rollsUpByItself(_ child: Foundation.Operation) -> Bool {
        guard let childGroup = child as? GroupOperation else { return false }
        return !childGroup.progressHasParent
    }

    private func perform(_ action: GroupStateMachine<Foundation.Operation>.Action) {
        switch action {
        case .none:
            break
        case let .finish(childErrors):
            let finish = lifecycle.finish(afterChildren: childErrors) // the children's errors first
            if case .reportDuplicate = finish {
                reportIgnoredFinish(.framework, dropping: childErrors) // it had finished already
            } else {
                perform(finish)
            }
        case let .deliverHeldFinish(childErrors):
            deliverHeldFinish(prepending: childErrors)
        }
    }

    /// Cancelled before it executed, stopped by a failed condition, or finished by hand while
    /// children are left: the children will not run (on), but the group still finishes only
    /// after they have (cancelled), with their errors.
    override func holdsFinish() -> Bool {
        switch children.withLock({ $0.holdFinish() }) {
        case .doNotHold:
            return false
        case let .drainChildren(admittedBefore):
            drain(cancelling: admittedBefore)
            return true
        case let .deliverHeldFinish(childErrors, _):
            deliverHeldFinish(prepending: childErrors)
            return true
        case .interruptChildren:
            cancellationDuringExecution() // as a cancel does: a composite or a retry stops too
            return true
        }
    }

    /// Whether its children are being stopped: it is cancelled, or finishing other than by its
    /// last child's finish. A composite or a retry starts nothing more then.
    var childrenAreStopping: Bool {
        let groupIsCancelled = isCancelled
        return children.withLock { $0.childrenMustNotRun(groupIsCancelled: groupIsCancelled) }
    }

    override func cancellationDuringExecution() {
        queue.cancelAllOperations()
    }

    /// A cancelled group's progress is cancelled too, as cancelling the progress cancels the group.
    override func wasCancelled() {
        updateProgress(ProgressDelta(cancels: true))
    }

    /// Applies the admissions counted in `pending` to the progress, and empties it.
    func countAdmitted(_ pending: inout ProgressDelta) {
        guard pending.admitted > 0 else { return }
        updateProgress(pending)
        pending = ProgressDelta()
    }

    /// Adds `delta` to `progress` through the engine's applier, never under a lock and never
    /// two threads at once (see `ProgressApplier`).
    private func updateProgress(_ delta: ProgressDelta) {
        queue.engine.progress.apply(delta, to: progress)
    }

    /// The group finished: its progress is complete (a group without children counts as one
    /// unit done) before its parent group hears of it, and before it is `isFinished`.
    private func completeProgress() {
        queue.engine.progress.applyAndWait(ProgressDelta(completes: true), to: progress)
    }

    override func releaseResources() {
        queue.stallReportThreshold = nil // nothing left to watch
        deliveringFinish { completeProgress() } // progress observers are user code
        if case let .drainChildren(admittedBefore) = children.withLock({ $0.finished() }) {
            // Finished without executing (cancelled, or a condition failed): the children never
            // will. Cancel them and let the queue drain them.
            drain(cancelling: admittedBefore)
        }
    }

    /// The group will never execute: its children are cancelled and its queue lets them finish.
    /// Those admitted before are cancelled by name too: one still on its way into the queue
    /// (added from another thread a moment ago) escapes `cancelAllOperations()`, and the queue
    /// would then run it once resumed.
    private func drain(cancelling admittedBefore: [Foundation.Operation]) {
        for child in admittedBefore {
            child.cancel()
        }
        queue.cancelAllOperations()
        queue.isSuspended = false
    }

    /// The first of `categories` this group (or a group enclosing it) holds while it executes.
    func heldCategory(among categories: [String]) -> String? {
        let held = lifecycle.heldCategories
        if let category = categories.first(where: held.contains) {
            return category
        }
        return lifecycle.queue?.group?.heldCategory(among: categories)
    }
}
