import Foundation

/// A group whose children are declared up front, with a completion handler and a cancellation
/// handler that decides what happens when a child fails: the common ground of
/// `CascadeOperation` (one child after another) and `TransactionOperation` (all at once).
///
/// Children are declared by factories (see `CompositeChildren`), so that a failed child can run
/// again as a new operation. Children run on the composite's own queue with the full engine
/// (dependencies, conditions, mutual exclusion, observers), and composites nest in each other
/// and in any `GroupOperation`, in every direction.
///
/// - The **completion handler** is called once, when every child has succeeded (or failed and
///   was carried on), before the composite finishes. An empty composite calls it when it
///   executes.
/// - The **cancellation handler** is called when a child finishes failed (with errors) or
///   cancelled, once for each such finish, and answers with a `CompositeResolution`: cancel the
///   composite, run the child again (now or after a delay), or carry on. Without a handler, the
///   composite cancels. Calls never overlap, not even in a transaction whose children fail
///   together; after a `.cancel` answer there are no more calls.
/// - Neither handler is called once the composite itself is cancelled (by `cancel()`, by an
///   enclosing group, by a timeout): nothing is left to decide. Observe the composite to hear
///   about that.
///
/// Both handlers run on an arbitrary thread (one a child finished on, or the one executing the
/// composite), never under a lock. The composite's `errors` hold its children's errors, except
/// those of attempts that were run again or carried on, so a composite that recovered reports no
/// failure to whoever waits for it. It lets go of its factories and handlers when it finishes.
///
/// Operations added with `addChild(_:)` and operations children produce run as in any
/// `GroupOperation`: the composite waits for them, but its handlers do not hear about them.
// @unchecked Sendable: `storage` lives in a `Locked` value; the rest is `GroupOperation`'s.
open class CompositeOperation: GroupOperation, @unchecked Sendable {
    typealias Machine = CompositeStateMachine<Foundation.Operation>

    /// A child that finished, waiting for its turn to be handled.
    private struct FinishedChild {
        let child: Foundation.Operation
        let errors: [any Error]
    }

    private struct Storage {
        var machine: Machine
        var factories: [@Sendable () -> Foundation.Operation]
        var completion: (@Sendable () -> Void)?
        var cancellation: (@Sendable (CompositeFailure) -> CompositeResolution)?
        /// Children that finished and are yet to be handled, one at a time, in the order they
        /// finished.
        var inbox = SerialDrain<FinishedChild>()
    }

    private let storage: Locked<Storage>

    init(
        mode: Machine.Mode,
        declaration declare: (inout CompositeChildren) -> Void,
        completion: (@Sendable () -> Void)?,
        cancellation: (@Sendable (CompositeFailure) -> CompositeResolution)?
    ) {
        var children = CompositeChildren()
        declare(&children)
        storage = Locked.make(Storage(
            machine: Machine(mode: mode, childCount: children.count),
            factories: children.factories,
            completion: completion,
            cancellation: cancellation
        ))
        super.init()
    }

    // MARK: - Executing

    /// Starts the declared children: the first one in a cascade, all of them in a transaction.
    public final override func execute() {
        perform(storage.withLock { $0.machine.start() })
        super.execute()
    }

    override func recordChildFinished(_ child: Foundation.Operation, errors: [any Error]) {
        // Children finishing together are handled one at a time, by whichever thread arrived
        // first, so that the handlers never run concurrently. The group keeps counting a child
        // as pending until it is handled, so it cannot finish meanwhile.
        let submission = storage.withLock { $0.inbox.submit(FinishedChild(child: child, errors: errors)) }
        guard case .drain = submission else { return }
        while case let .items(next) = storage.withLock({ $0.inbox.takeOldest() }) {
            next.forEach(handle)
        }
    }

    private func handle(_ finished: FinishedChild) {
        let child = finished.child
        let childIsCancelled = child.isCancelled
        let failed = childIsCancelled || !finished.errors.isEmpty
        var keepsErrors = true
        // The composite's own cancel reaches the machine only once its observers heard it
        // (`cancellationDuringExecution`); until then the machine learns of it here, so that no
        // handler is called once the composite is cancelled (or finished by hand).
        let compositeIsStopping = childrenAreStopping
        switch storage.withLock({ $0.machine.childFinished(ObjectIdentifier(child), failed: failed, compositeIsStopping: compositeIsStopping) }) {
        case let .record(steps):
            perform(steps)
        case let .askHandler(slot, attempt):
            let handler = storage.withLock { $0.cancellation }
            let failure = CompositeFailure(child: child, index: slot, attempt: attempt, errors: finished.errors, isCancelled: childIsCancelled)
            let answer = handler?(failure) ?? .cancel
            let stoppedMeanwhile = childrenAreStopping
            let resolution = storage.withLock { $0.machine.resolve(slot: slot, with: answer, compositeIsStopping: stoppedMeanwhile) }
            keepsErrors = resolution.keepsErrors
            perform(resolution.steps)
        }
        // After any new child was added, so the group never sees zero pending children between.
        super.recordChildFinished(child, errors: finished.errors, keeping: keepsErrors ? finished.errors : [])
    }

    private func perform(_ steps: [Machine.Step]) {
        for step in steps {
            switch step {
            case let .launch(slot, attempt):
                launch(slot: slot, attempt: attempt)
            case let .launchAfter(delay, slot, attempt):
                launch(slot: slot, attempt: attempt, after: delay)
            case .complete:
                storage.withLock { $0.completion }?()
            case .cancelComposite:
                cancel()
            }
        }
    }

    private func launch(slot: Int, attempt: Int) {
        let factory = storage.withLock { state in
            state.factories.indices.contains(slot) ? state.factories[slot] : nil
        }
        guard let factory else { return } // released: the composite has finished
        let child = factory()
        guard child.looksUnused else {
            cancel(with: AsyncOperationError.childReused(composite: displayName, child: child.displayName))
            return
        }
        switch storage.withLock({ $0.machine.launched(child, slot: slot, attempt: attempt) }) {
        case .add:
            admitChildren([child])
        case .addCancelled:
            child.cancel() // the composite was cancelled as the factory ran: it finishes cancelled
            admitChildren([child])
        }
    }

    private func launch(slot: Int, attempt: Int, after delay: TimeInterval) {
        let timer = DelayOperation(delay) // the engine's one way to wait
        timer.name = "\(displayName): rerun of child \(slot) in \(delay) s"
        timer.addObserver(RerunTimer(composite: self, slot: slot, attempt: attempt))
        switch storage.withLock({ $0.machine.timerCreated(timer, slot: slot) }) {
        case .add:
            admitChildren([timer])
        case .drop:
            break
        }
    }

    fileprivate func delayElapsed(slot: Int, attempt: Int) {
        perform(storage.withLock { $0.machine.delayElapsed(slot: slot, attempt: attempt) })
    }

    // MARK: - Cancelling and finishing

    override func cancellationDuringExecution() {
        let live = storage.withLock { $0.machine.cancel() }
        super.cancellationDuringExecution()
        // The group's queue cancels what it holds; these may be on their way into it.
        for child in live {
            child.cancel()
        }
    }

    override func releaseResources() {
        let released = storage.withLock { state in
            state.machine.release()
            defer { state.factories = [] }
            return (state.factories, state.completion.take(), state.cancellation.take())
        }
        _ = released // the closures' captures are released outside the lock
        super.releaseResources()
    }
}

/// Launches a child's rerun once its wait is over: heard as the wait finishes, before the
/// composite counts the wait as done, so it never sees a moment with nothing left to run. A wait
/// cut short by the composite's cancellation launches nothing (the composite's state says so).
private struct RerunTimer: OperationObserver {
    weak var composite: CompositeOperation?
    let slot: Int
    let attempt: Int

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        composite?.delayElapsed(slot: slot, attempt: attempt)
    }
}
