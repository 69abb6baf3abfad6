import Foundation

/// An operation that finishes when you say so, with conditions, observers and errors.
///
/// Subclass it and override `execute()`; call `finish(with:)` when the work is done, from any
/// thread. Add it to an `AsyncOperationQueue`, which waits for its dependencies, evaluates its
/// conditions, enforces mutual exclusion and only then lets it execute.
///
/// ```swift
/// final class DownloadOperation: AsyncOperation, @unchecked Sendable {
///     override func execute() {
///         session.download(url) { result in
///             if case let .failure(error) = result {
///                 self.finish(with: error)
///             } else {
///                 self.finish()
///             }
///         }
///     }
/// }
/// ```
///
/// Its life runs through these states: initialized, pending (on a queue, waiting for
/// dependencies), evaluating conditions, waiting for mutually exclusive categories, ready (handed
/// to Foundation), executing and finished. Every transition is atomic and announced to Foundation
/// with `isReady`, `isExecuting` and `isFinished` key-value notifications.
///
/// Once it finishes, it lets go of its observers, conditions and dependencies, so that long
/// chains of operations can be released without deep recursion. `dependencies` is therefore empty
/// after the operation has finished.
// @unchecked Sendable: every mutable property lives in `lifecycle`, reached only under its lock.
open class AsyncOperation: Operation, @unchecked Sendable {
    let lifecycle: LifecycleStorage

    /// Creates an operation in the initialized state.
    public override init() {
        lifecycle = LifecycleStorage()
        super.init()
    }

    /// Creates an `AsyncBlockOperation`, whose block its lifecycle keeps.
    init(block: BlockInvocation.Body) {
        lifecycle = LifecycleStorage(block: block)
        super.init()
    }

    deinit {
        var released = lifecycle.takeDependencies()
        DeferredRelease.release(&released)
    }

    // MARK: - Override points

    /// Does the operation's work. Override it, and call `finish(with:)` when the work is done.
    ///
    /// Called once, after `operationDidStart` (and a cancel made meanwhile) has reached every
    /// observer. On an `AsyncOperationQueue`, on the thread Foundation's queue starts the
    /// operation on (its `underlyingQueue`, with `OperationQueue.current` the queue). Started by
    /// hand or by a plain `OperationQueue`, on the thread that let it through: the one that called
    /// `start()` if nothing held it back, otherwise the one that answered its last condition. One
    /// granted its categories on another thread (by the finish of the operation that held one),
    /// or through a category's lock, executes on a Dispatch thread of its `qualityOfService`:
    /// never inside another operation's finish, which would keep that operation's dependents
    /// waiting until this one returns. (So does one that gave its categories back as its queue
    /// narrowed and asks for them again once Foundation starts it, on its queue's
    /// `underlyingQueue` if it has one, where `OperationQueue.current` is not the queue.) The
    /// default calls `main()` and then finishes, so a subclass that overrides `main()` behaves
    /// like a synchronous operation.
    /// Cancellation is cooperative: check `isCancelled` and finish early when it becomes true.
    open func execute() {
        main()
        finish()
    }

    /// Called when the operation is cancelled while it executes. `AsyncBlockOperation` uses it
    /// to finish at once.
    func cancellationDuringExecution() {}

    /// Called once when the operation is cancelled, in any state before its finish, after its
    /// observers heard it and it reacted (`cancellationDuringExecution()`). A group cancels its
    /// progress here.
    func wasCancelled() {}

    /// Called once the operation's finish is final, before `isFinished` becomes true, to release
    /// what it owns.
    func releaseResources() {}

    // MARK: - Foundation's view

    /// Always `true`: the operation finishes when `finish(with:)` is called, not when
    /// `execute()` returns.
    open override var isAsynchronous: Bool { true }

    /// Whether Foundation's queue may start the operation: all dependencies have finished (or it
    /// was cancelled), and on an `AsyncOperationQueue` its conditions passed and its categories
    /// are held.
    public final override var isReady: Bool {
        switch lifecycle.readiness {
        case let .decided(isReady):
            return isReady
        case let .alsoFoundations(isReady):
            return isReady && super.isReady
        }
    }

    /// The operation's priority among those waiting for a slot on its queue, as Foundation's.
    /// Changed while the operation waits in its queue's scheduler for a slot, it moves to its
    /// new place, as it would in Foundation's own queue.
    open override var queuePriority: Operation.QueuePriority {
        get { super.queuePriority }
        set {
            super.queuePriority = newValue
            if let queue = lifecycle.queue {
                queue.placeBySlotPriority(self, ticket: lifecycle.ticket)
            }
        }
    }

    /// Whether the operation is executing.
    public final override var isExecuting: Bool {
        lifecycle.isExecutingForFoundation
    }

    /// Whether the operation has finished; its `errors` are final from then on.
    public final override var isFinished: Bool {
        lifecycle.phase == .finished
    }

    /// Whether `cancel()` or `cancel(with:)` was called.
    public final override var isCancelled: Bool {
        lifecycle.isCancelled
    }

    /// Every error the operation collected: from failed conditions, `cancel(with:)` and
    /// `finish(with:)`. Final once `isFinished` is true.
    public final var errors: [any Error] {
        lifecycle.errors
    }

    /// The operation's name and state and, while it waits, exactly what for:
    /// `snapshot().description`, for instance
    /// `save: waiting for categories; waits for category 'Database' (held by 'migrate'; 1st in line)`.
    open override var debugDescription: String {
        snapshot().description
    }

    /// The engine of the queue the operation is on (`OperationsEngine.shared` if it is on none
    /// of ours, or has finished).
    var engine: OperationsEngine {
        lifecycle.queue?.engine ?? .shared
    }

    /// Whether the operation was never added to a queue, started or finished.
    var isUnused: Bool {
        lifecycle.phase == .initialized
    }

    /// Whether the operation collected any error.
    public final var isFailed: Bool {
        lifecycle.hasErrors
    }

    // MARK: - Starting

    /// Starts the operation. Foundation's queue calls this; do not call it yourself while the
    /// operation is on an `AsyncOperationQueue`.
    ///
    /// Called by hand (or by a plain `OperationQueue`), the operation evaluates its conditions and
    /// waits for its categories itself, then executes where `execute()` says: to keep execution
    /// on a queue's threads, add it to an `AsyncOperationQueue`.
    /// Started by hand before its dependencies
    /// finished, it finishes with `AsyncOperationError.startedBeforeDependenciesFinished`.
    public final override func start() {
        withExtendedLifetime(self) {
            #if canImport(Darwin)
            willChangeValue(forKey: ObservedKey.isExecuting)
            #endif
            let action = lifecycle.start()
            #if canImport(Darwin)
            didChangeValue(forKey: ObservedKey.isExecuting)
            #endif
            switch action {
            case .none:
                break
            case let .execute(observers, queue, ticket):
                beginExecution(observers: observers, queue: queue, ticket: ticket)
            case let .finish(finishing):
                perform(finishing)
            case .finishNotReady:
                OperationDiagnostics.report(.startedOutOfTurn, self, "start() was called before all dependencies finished; the operation finished without executing")
                finish(with: AsyncOperationError.startedBeforeDependenciesFinished(operation: displayName))
            case let .runPipelineInline(conditions):
                let callerQueue = OperationQueue.current
                let ticket = OperationsEngine.shared.tickets.next() // started by hand: on no queue of ours
                lifecycle.startedOn(callerQueue, mention: callerQueue.map(QueueMention.of), ticket: ticket)
                runPipeline(conditions, addingDependenciesTo: callerQueue)
            case let .acquireCategories(categories, lineRoot):
                acquireCategoriesOnceStarted(categories, lineRoot: lineRoot)
            case let .reportOutOfTurn(message):
                OperationDiagnostics.report(.startedOutOfTurn, self, message)
            }
        }
    }

    func beginExecution(observers: [any OperationObserver], queue: AsyncOperationQueue?, ticket: UInt64) {
        for observer in observers {
            observer.operationDidStart(self)
        }
        queue?.operationDidStart(self, ticket: ticket)
        var next = lifecycle.startDelivered()
        if case let .deliverCancel(observers, followUp) = next {
            // Cancelled while its start was being announced: every observer heard the start.
            for observer in observers {
                observer.operationDidCancel(self)
            }
            react(toCancel: followUp)
            next = lifecycle.cancelDeliveredAfterStart()
        }
        switch next {
        case let .finish(heldBack):
            perform(heldBack) // finished while its start (or its cancel) was being announced
            return
        case .skipExecution, .deliverCancel:
            return // finished meanwhile; another notification in flight delivers the finish
        case .execute:
            break
        }
        #if canImport(ObjectiveC)
        autoreleasepool { execute() } // as Foundation's own start() wraps main()
        #else
        execute()
        #endif
    }

    // MARK: - Finishing

    /// Finishes the operation, adding `error` (if any) to its `errors`.
    ///
    /// Call it exactly once when the work is done, from any thread. The first call wins; later
    /// calls change nothing (and, unless the operation was cancelled, report a
    /// `.finishedTwice` diagnostic that names the error the late call dropped and, through
    /// `file` and `line`, where that call was made). Observers hear `operationDidFinish`, then
    /// the operation becomes `isFinished`, frees its categories and lets its dependents proceed.
    public final func finish(with error: (any Error)? = nil, file: StaticString = #fileID, line: UInt = #line) {
        finish(errors: error.map { [$0] } ?? [], by: .finish(CallSite(file: file, line: line)))
    }

    /// Finishes the operation, adding `error` (if any) to its `errors`: `finish(with:file:line:)`
    /// as a function value (`completion: operation.finish(with:)`), which has no call site to
    /// report.
    @_disfavoredOverload
    public final func finish(with error: (any Error)? = nil) {
        finish(errors: error.map { [$0] } ?? [])
    }

    final func finish(errors newErrors: [any Error], by call: FinishCall = .framework) {
        withExtendedLifetime(self) {
            let action = if case .continuation = call {
                lifecycle.finishFromContinuation(errors: newErrors)
            } else {
                lifecycle.finish(errors: newErrors)
            }
            if case .reportDuplicate = action {
                reportIgnoredFinish(call, dropping: newErrors)
            } else {
                perform(action)
            }
        }
    }

    func perform(_ action: OperationLifecycle.FinishAction) {
        switch action {
        case .none:
            break
        case .reportDuplicate:
            reportIgnoredFinish(.framework, dropping: [])
        case let .deliver(observers, errors, mayBeHeld):
            if mayBeHeld {
                deliverUnlessHeldBack(observers: observers, errors: errors)
            } else {
                deliverFinish(observers: observers, errors: errors)
            }
        case let .releaseCategoriesEarly(categories):
            releaseCategories(categories, to: engine.exclusivity)
        }
    }

    private func deliverFinish(observers: [any OperationObserver], errors: [any Error]) {
        guard !observers.isEmpty else {
            completeFinish()
            return
        }
        deliveringFinish {
            for observer in observers {
                observer.operationDidFinish(self, errors: errors)
            }
            completeFinish()
        }
    }

    /// Runs `body`, which hands this operation's finish to user code (observers, progress
    /// observers), with the thread marked as delivering it: a wait for the operation from that
    /// user code throws instead of blocking the finish it waits for.
    func deliveringFinish(_ body: () -> Void) {
        let thread = PerThreadState.current
        thread.finishing.append(ObjectIdentifier(self))
        body()
        thread.finishing.removeLast()
    }

    /// Offers a subclass, once, to hold back the finish of an operation that never executed (or,
    /// if it asked, of any operation: `OperationLifecycle.offerHoldAfterExecution()`), and
    /// delivers the finish unless it holds it. What is delivered is read as the hold ends: a
    /// group's children may have added their errors meanwhile.
    private func deliverUnlessHeldBack(observers: [any OperationObserver], errors: [any Error]) {
        // Stored first: the subclass may deliver it before returning.
        guard lifecycle.offerToHoldFinish() == .offer else {
            return deliverFinish(observers: observers, errors: errors)
        }
        if holdsFinish() { return }
        perform(lifecycle.takeHeldFinish()) // `.none` if the subclass delivered it after all
    }

    /// Called once when the operation is about to finish without having executed (or, if it
    /// asked, at any finish). Return `true` to hold the finish back and deliver it later with
    /// `deliverHeldFinish()`: a group uses it to finish only after its children have.
    func holdsFinish() -> Bool { false }

    /// Delivers a finish held back by `holdsFinish()`.
    /// `childErrors` come first in its errors (a group's children's, as for a group that ran).
    func deliverHeldFinish(prepending childErrors: [any Error] = []) {
        perform(lifecycle.takeHeldFinish(prepending: childErrors))
    }

    private func completeFinish() {
        releaseResources() // before isFinished: whoever sees it finished sees it complete
        #if canImport(Darwin)
        willChangeValue(forKey: ObservedKey.isExecuting)
        #endif
        willChangeValue(forKey: ObservedKey.isFinished)
        var remains = lifecycle.completeFinish()
        let exclusivity = (remains.queue?.engine ?? .shared).exclusivity
        if !remains.categoriesToWithdraw.isEmpty {
            exclusivity.withdraw(place: remains.linePlace, from: remains.categoriesToWithdraw)
        }
        remains.categoryLockGate?.operationFinished() // its leases go before its categories
        if !remains.categoriesToRelease.isEmpty {
            exclusivity.release(remains.categoriesToRelease)
        }
        remains.queue?.operationDidFinish(self, ticket: remains.linePlace.ticket, errors: remains.errors, wasHandedOff: remains.wasHandedOff)
        #if canImport(Darwin)
        didChangeValue(forKey: ObservedKey.isExecuting) // pairs the will above, executed or not
        #endif
        didChangeValue(forKey: ObservedKey.isFinished) // Foundation's queue lets go of it here
        for watcher in remains.watchers {
            DependencyWatcher.stop(watcher)
        }
        if let queue = remains.queue {
            leave(queue, ticket: remains.linePlace.ticket, afterTelling: remains.dependents)
        } else if !remains.dependents.isEmpty {
            notifyDependents(remains.dependents)
        }
        DeferredRelease.release(&remains.released)
    }

    /// Tells `dependents` it finished, then `queue` that it left. On a serial queue, dependents
    /// that asked for their turn meanwhile then go before whoever waited in line and was added
    /// after them. Both go through the thread's trampoline: a thread already telling operations
    /// of a finish (a dependent that finished as it heard of another) tells these later, in
    /// order, so the queue hears it left after them; and the next operation its leave lets
    /// through, finishing at once (its condition fails), does not recurse into another leave,
    /// which a long line would take past the stack.
    private func leave(_ queue: AsyncOperationQueue, ticket: UInt64, afterTelling dependents: SmallArray<WeakFinishWatcher>) {
        if !dependents.isEmpty {
            notifyDependents(dependents)
        }
        Trampoline.run(with: (queue, ticket)) { queue, ticket in queue.operationDidLeave(ticket: ticket) }
    }

    // MARK: - Cancelling

    /// Cancels the operation; the same as `cancel(with: nil)`. Subclasses that override it must
    /// call `super.cancel()`.
    open override func cancel() {
        cancel(with: nil)
    }

    /// Cancels the operation, adding `error` (if any) to its `errors`.
    ///
    /// Before the operation executes, it finishes without executing. While it executes,
    /// cancellation is cooperative: `isCancelled` becomes true and `execute()` decides (an
    /// `AsyncBlockOperation` waiting for its continuation finishes at once). Observers hear
    /// `operationDidCancel` once, and never before `operationDidStart`: a cancel made while the
    /// start is being announced (by an observer hearing it, say) sets `isCancelled` and its error
    /// at once, and is delivered, with the operation's reaction (a group cancels its children),
    /// once every observer heard the start. After the operation finished, or after
    /// `finish(with:)` was called on it, nothing changes.
    public final func cancel(with error: (any Error)?) {
        cancel(with: error, onlyBeforeExecution: false)
    }

    /// Cancels the operation unless it executes already (decided in one step with the
    /// cancellation): what a queue that shuts down does to the operations still waiting.
    final func cancelIfWaiting(with error: (any Error)?) {
        cancel(with: error, onlyBeforeExecution: true)
    }

    private func cancel(with error: (any Error)?, onlyBeforeExecution: Bool) {
        withExtendedLifetime(self) {
            deliverCancel(recordCancel(with: error, onlyBeforeExecution: onlyBeforeExecution))
        }
    }

    /// The first half of a cancel: records it (`isCancelled`, `error` among the errors), and
    /// returns what is left to deliver (`deliverCancel(_:)`). A finish waits meanwhile.
    final func recordCancel(with error: (any Error)?, onlyBeforeExecution: Bool = false) -> OperationLifecycle.CancelAction {
        #if canImport(Darwin)
        willChangeValue(forKey: ObservedKey.isCancelled)
        #endif
        let action = lifecycle.cancel(error: error, onlyBeforeExecution: onlyBeforeExecution)
        #if canImport(Darwin)
        didChangeValue(forKey: ObservedKey.isCancelled)
        #endif
        return action
    }

    /// The second half of a cancel, on any thread: the observers hear of it, and the operation
    /// reacts (a running one is interrupted, a waiting one lets go of what it held).
    final func deliverCancel(_ action: OperationLifecycle.CancelAction) {
        guard case let .cancel(observers, followUp) = action else { return }
        for observer in observers {
            observer.operationDidCancel(self)
        }
        let heldBack = lifecycle.notificationDelivered()
        react(toCancel: followUp)
        perform(heldBack)
    }

    /// What the operation does once its observers heard it was cancelled.
    private func react(toCancel followUp: OperationLifecycle.CancelFollowUp) {
        switch followUp {
        case .none:
            break
        case .interruptExecution:
            cancellationDuringExecution()
        case .announceReady:
            announceReadiness()
        case let .releaseCategories(categories):
            releaseCategories(categories, to: engine.exclusivity)
        }
        wasCancelled() // after the operation's own reaction: a group has cancelled its children
    }

    // MARK: - Dependencies

    /// Makes this operation wait until `operation` has finished (or been cancelled).
    ///
    /// Add dependencies before the operation starts waiting for them: before it is added to a
    /// queue, or while it still waits for others. Later additions are reported as
    /// `.configuredTooLate` and ignored. A dependency that would close a cycle is reported as
    /// `.dependencyCycle`; the operation then finishes with `AsyncOperationError.dependencyCycle`
    /// when it is added to a queue, instead of waiting forever.
    ///
    /// Unlike Foundation, the operation keeps its own account of dependencies: Foundation's
    /// queue only ever sees it once it can run, and it lets go of its dependencies when it
    /// finishes.
    open override func addDependency(_ operation: Operation) {
        if operation === self {
            addDependencyOnItself()
            return
        }
        // Before it is on a queue, Foundation (and KVO on Apple platforms) reads `isReady`,
        // which this changes: announced around the change, whatever its outcome (a balanced pair
        // with no change in between is harmless, and needs no second look at the state).
        willChangeValue(forKey: ObservedKey.isReady)
        defer { didChangeValue(forKey: ObservedKey.isReady) }
        switch lifecycle.addDependency(operation) {
        case .tooLate:
            OperationDiagnostics.report(.configuredTooLate, self, "addDependency(_:) was called after the operation stopped waiting for dependencies; '\(operation.displayName)' was ignored")
        case .alreadyThere:
            break
        case let .added(dependents):
            waitForNewDependency(operation, dependents: dependents)
        }
    }

    /// Stops waiting for `operation`. Has no effect once the operation stopped waiting for its
    /// dependencies.
    open override func removeDependency(_ operation: Operation) {
        switch lifecycle.removeDependency(operation) {
        case let .removed(watcher, then):
            if let watcher { DependencyWatcher.stop(watcher) }
            perform(then)
        }
    }

    /// The operations this one waits for, in the order they were added. Empty once the
    /// operation has finished: finished operations let go of their dependencies.
    open override var dependencies: [Operation] {
        lifecycle.dependencies
    }

    func announceReadiness() {
        willChangeValue(forKey: ObservedKey.isReady)
        didChangeValue(forKey: ObservedKey.isReady)
    }
}

/// The key-value keys Foundation's queues listen to.
enum ObservedKey {
    static let isReady = "isReady"
    static let isExecuting = "isExecuting"
    static let isFinished = "isFinished"
    static let isCancelled = "isCancelled"
}
