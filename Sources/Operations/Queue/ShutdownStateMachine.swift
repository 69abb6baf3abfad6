/// The rules of an `AsyncOperationQueue`'s shut-down, without threads or side effects.
///
/// A shut-down goes through four states. While adds that began before it are still being
/// admitted, it waits for them (`admitting`; the operations waiting when it began were cancelled
/// by then). Then it knows every operation the queue will ever run: it listens for each one's
/// finish and cancels those that still wait (`draining`); once the
/// grace period is over (or the caller stopped waiting for it), it cancels the running ones too,
/// once, and never while the first sweep still runs, so no operation is cancelled twice.
/// When every operation has finished it waits for the queue to let go of them (`leaving`), and
/// then it is `complete`. `QueueShutdown` keeps one of these under its lock and does what each
/// event returns after unlocking.
struct ShutdownStateMachine {
    /// The draining of the operations the queue had when its adds in flight ended.
    struct Drain: Equatable {
        /// Operations listened for that have not finished.
        var unfinished = 0
        /// The storage is registering finish listeners and cancelling what waits: the count is
        /// not final, and no other cancellation may run meanwhile.
        var sweeping = true
        /// The grace period is over (or the caller stopped waiting for it).
        var graceOver: Bool
        /// The running operations have been cancelled (done once).
        var runningCancelled: Bool
    }

    enum State: Equatable {
        /// Adds begun before the shut-down are still in flight; `graceOver` if the grace period
        /// ended meanwhile.
        case admitting(graceOver: Bool)
        case draining(Drain)
        /// Every operation finished; the queue is letting go of them.
        case leaving
        case complete
    }

    /// What the storage does after an event, outside the lock.
    enum Action: Equatable {
        case none
        /// Listen for every operation's finish (`willListen()` each), cancel those that wait
        /// (and, if `cancelRunning`, the running ones too), let them go on (the scheduler held
        /// them since the shut-down began; a suspended queue resumes), then send `sweepEnded()`.
        case sweep(cancelRunning: Bool)
        /// The grace period is over: cancel the operations still running.
        case cancelRunning
        /// Every operation finished: wait (off the finishing thread) until the queue is empty,
        /// then send `queueEmptied()`.
        case awaitEmptyQueue
    }

    private(set) var state = State.admitting(graceOver: false)

    var isComplete: Bool { state == .complete }

    /// The adds in flight when the shut-down began have ended.
    mutating func admissionsEnded() -> Action {
        guard case let .admitting(graceOver) = state else { return .none }
        state = .draining(Drain(graceOver: graceOver, runningCancelled: graceOver))
        return .sweep(cancelRunning: graceOver)
    }

    /// The storage listens for one more operation's finish.
    mutating func willListen() {
        guard case var .draining(drain) = state, drain.sweeping else { return }
        drain.unfinished += 1
        state = .draining(drain)
    }

    /// The sweep is done: every finish is listened for, and what waited is cancelled.
    mutating func sweepEnded() -> Action {
        guard case var .draining(drain) = state, drain.sweeping else { return .none }
        drain.sweeping = false
        if drain.unfinished == 0 { return leave() }
        let cancelsRunning = drain.graceOver && !drain.runningCancelled
        drain.runningCancelled = drain.runningCancelled || cancelsRunning
        state = .draining(drain)
        return cancelsRunning ? .cancelRunning : .none
    }

    /// One of the operations listened for has finished.
    mutating func operationFinished() -> Action {
        guard case var .draining(drain) = state, drain.unfinished > 0 else { return .none }
        drain.unfinished -= 1
        if drain.unfinished == 0 && !drain.sweeping { return leave() }
        state = .draining(drain)
        return .none
    }

    /// The grace period is over, or a caller stopped waiting for it: running operations are
    /// cancelled, once, and never while the sweep still runs (its end does it then).
    mutating func gracePeriodEnded() -> Action {
        switch state {
        case .admitting:
            state = .admitting(graceOver: true)
            return .none
        case var .draining(drain):
            drain.graceOver = true
            let cancelsRunning = !drain.sweeping && !drain.runningCancelled
            drain.runningCancelled = drain.runningCancelled || cancelsRunning
            state = .draining(drain)
            return cancelsRunning ? .cancelRunning : .none
        case .leaving, .complete:
            return .none
        }
    }

    /// The queue has let go of every operation: the shut-down is complete.
    mutating func queueEmptied() {
        guard state == .leaving else { return }
        state = .complete
    }

    private mutating func leave() -> Action {
        state = .leaving
        return .awaitEmptyQueue
    }
}
