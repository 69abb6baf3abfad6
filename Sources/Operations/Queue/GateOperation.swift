import Foundation

/// The gate of a plain operation that waits for dependencies as it reaches Foundation on a
/// serial queue: an operation it depends on that nobody runs but the queue
/// (`AsyncOperationQueue.arrival(of:)`). Usually the operation gives its turn up; once its
/// dependencies have finished it waits for its turn again, by its ticket
/// (`QueueScheduler.plainOperationReady(_:)`), and when the turn comes the queue finishes the
/// gate, and the operation keeps the turn until it has finished and its dependents have heard of
/// it. (Should they all have finished as the gate went in, it keeps its turn, and the gate opens
/// as soon as Foundation has it.) Meanwhile the gate keeps the listener of the dependency it
/// waits for, and stops it once its operation has finished (cancelled before its turn, say).
/// The gate is listed among the operation's `dependencies`, as `Operations.PlainGate`, until that
/// operation has finished; the queue's descriptions leave it out.
final class GateOperation: Operation, @unchecked Sendable { // @unchecked: `listening` is behind its lock; the rest is immutable beyond Operation's own state
    /// The plain operation it holds back.
    let operation: Operation
    /// The ticket `operation` was added with, whose turn it waits for.
    let ticket: UInt64
    /// The listener of the dependency the queue waits for, one at a time.
    private let listening = Locked<Listening>.make(.listening(step: 0, current: nil))

    init(holdingBack operation: Operation, ticket: UInt64) {
        self.operation = operation
        self.ticket = ticket
        super.init()
        name = "Operations.PlainGate"
    }

    /// Keeps the listener `make` makes (outside every lock) for the finish of one of the
    /// operation's dependencies, so that `stopListening()` can stop it.
    func keepListener(made make: () -> Listener) {
        let step = listening.withLock { $0.beginStep() }
        let listener = make()
        switch listening.withLock({ $0.keep(listener, madeIn: step) }) {
        case let .release(released):
            withExtendedLifetime(released) {} // released here, after unlocking
        case let .stop(listener):
            listener.stop()
        }
    }

    /// The operation has finished (cancelled before its turn, say): the gate stops listening, so
    /// that a dependency that never finishes does not keep it, its operation and its queue.
    func stopListening() {
        listening.withLock { $0.end() }?.stop()
    }

    /// A listener for one dependency's finish.
    enum Listener {
        /// For a plain dependency.
        case watch(DependencyWatcher.Subscription)
        /// For an `AsyncOperation` dependency.
        case finishListener(FinishListener)

        func stop() {
            switch self {
            case let .watch(subscription): DependencyWatcher.stop(subscription)
            case let .finishListener(listener): listener.stop()
            }
        }
    }

    /// Which listener the gate keeps: by step, as a listener may report before the gate has kept
    /// it, and the next step (for the next dependency) begin meanwhile; a step's listener is kept
    /// only while no later step has begun. Once over, any listener made is stopped at once.
    enum Listening {
        case listening(step: UInt64, current: Listener?)
        case over

        /// What keeping a listener comes to.
        enum Keeping {
            /// Release this one after unlocking, if any: the one the kept listener replaced, or
            /// the listener itself, overtaken by a later step. Either has reported already.
            case release(Listener?)
            /// Listening is over: stop the listener.
            case stop(Listener)
        }

        /// A new listener is about to be made: its step.
        mutating func beginStep() -> UInt64 {
            guard case let .listening(step, current) = self else { return 0 }
            self = .listening(step: step + 1, current: current)
            return step + 1
        }

        /// The listener made in `step`: kept, unless a later step overtook it or listening is
        /// over.
        mutating func keep(_ listener: Listener, madeIn step: UInt64) -> Keeping {
            guard case let .listening(latest, current) = self else { return .stop(listener) }
            guard step == latest else { return .release(listener) }
            self = .listening(step: latest, current: listener)
            return .release(current)
        }

        /// Listening is over: the listener to stop, if any.
        mutating func end() -> Listener? {
            guard case let .listening(_, current) = self else { return nil }
            self = .over
            return current
        }
    }
}
