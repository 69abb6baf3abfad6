import Foundation

/// The gate of a plain operation that waits for dependencies as it reaches Foundation on a
/// serial queue: an operation it depends on that nobody runs but the queue. The operation gives
/// its turn up; once its dependencies have finished it waits for its turn again, by its ticket
/// (`QueueScheduler.plainOperationReady(_:)`), and when the turn comes the queue finishes the
/// gate, and the operation keeps the turn until it has finished and its dependents have heard
/// of it. The gate is listed among the operation's `dependencies`, as `Operations.PlainGate`,
/// until that operation has finished; the queue's descriptions leave it out.
final class GateOperation: Operation, @unchecked Sendable { // @unchecked: `waits` is behind its lock; the rest is immutable beyond Operation's own state
    /// The plain operation it holds back.
    let operation: Operation
    /// The ticket `operation` was added with, whose turn it waits for.
    let ticket: UInt64
    /// What the queue listens to while the operation's dependencies finish, one at a time.
    private let waits = Locked<Waits>.make(Waits())

    init(holdingBack operation: Operation, ticket: UInt64) {
        self.operation = operation
        self.ticket = ticket
        super.init()
        name = "Operations.PlainGate"
    }

    /// Listens for the finish of one of the operation's dependencies: `subscribe` makes the
    /// listener (outside every lock), and the gate keeps it, so that `stopWaiting()` can stop it.
    func wait(_ subscribe: () -> Wait) {
        let step = waits.withLock { $0.beginStep() }
        let wait = subscribe()
        waits.withLock { $0.keep(wait, madeIn: step) }?.stop()
    }

    /// The operation has finished (cancelled before its turn, say): the gate stops listening, so
    /// that a dependency that never finishes does not keep it, its operation and its queue.
    func stopWaiting() {
        waits.withLock { $0.end() }?.stop()
    }

    /// A listener for one dependency's finish.
    enum Wait {
        /// For a plain dependency.
        case watch(DependencyWatcher.Subscription)
        /// For an `AsyncOperation` dependency.
        case listener(FinishListener)

        func stop() {
            switch self {
            case let .watch(subscription): DependencyWatcher.stop(subscription)
            case let .listener(listener): listener.stop()
            }
        }
    }

    /// The listener the gate keeps, by step: a listener may report before the gate has kept it,
    /// and the next step (for the next dependency) begin meanwhile; a step's listener is kept only
    /// while no later step has begun. Once over, any listener made is stopped at once.
    struct Waits {
        private var current: Wait?
        private var latestStep: UInt64 = 0
        private var isOver = false

        /// A new listener is about to be made: its step.
        mutating func beginStep() -> UInt64 {
            latestStep += 1
            return latestStep
        }

        /// The listener made in `step`: kept; or returned, to stop, once over. One overtaken by
        /// a later step has reported already: nothing to keep or stop.
        mutating func keep(_ wait: Wait, madeIn step: UInt64) -> Wait? {
            guard !isOver else { return wait }
            guard step == latestStep else { return nil }
            current = wait
            return nil
        }

        /// Listening is over: the listener to stop, if any.
        mutating func end() -> Wait? {
            isOver = true
            defer { current = nil }
            return current
        }
    }
}
