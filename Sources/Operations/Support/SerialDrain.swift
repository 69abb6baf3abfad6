/// Work handed in by many threads and done by one thread at a time, in the order it was handed
/// in: the engine's one drainer, as a pure value its owner keeps under its lock.
///
/// The thread whose submission finds nobody draining becomes the drainer: after unlocking, it
/// takes the pending items (`takeNext()`, one lock each time) and does them until none is left.
/// Everyone else only leaves their item. So the work never runs under a lock, never on two
/// threads at once, and a thread never waits for another to do it.
///
/// A group's progress changes (`ProgressApplier`), a composite's finished children, a serial
/// queue's hand-offs to Foundation (`QueueScheduler`'s outbox) and an operation's log events
/// (`LogEventOrder`) all go through one.
struct SerialDrain<Item> {
    private var pending: [Item] = []
    private(set) var isDraining = false

    /// Whether anything waits to be done.
    var isEmpty: Bool { pending.isEmpty }

    /// What the submitter does after unlocking.
    enum Submission {
        /// It is the drainer now: take and do items until `takeNext()` ends the drain.
        case drain
        /// The drainer does it.
        case leftToDrainer
    }

    /// Hands `item` in.
    mutating func submit(_ item: Item) -> Submission {
        pending.append(item)
        return becomeDrainerIfNone()
    }

    /// Hands nothing in, but becomes the drainer if nobody is (a caller with work of its own to
    /// do first, before what others leave).
    mutating func becomeDrainerIfNone() -> Submission {
        guard !isDraining else { return .leftToDrainer }
        isDraining = true
        return .drain
    }

    /// What the drainer takes next.
    enum Next {
        /// Do these, in order, then ask again.
        case items([Item])
        /// Nothing is left: the drain is over, and the caller is no longer the drainer.
        case done
    }

    /// The drainer takes everything pending, in order.
    mutating func takeNext() -> Next {
        guard !pending.isEmpty else {
            isDraining = false
            return .done
        }
        defer { pending = [] }
        return .items(pending)
    }

    /// The drainer takes the oldest pending item only (for work that another item may change:
    /// a composite's handlers decide one finished child at a time).
    mutating func takeOldest() -> Next {
        guard !pending.isEmpty else {
            isDraining = false
            return .done
        }
        return .items([pending.removeFirst()])
    }
}

extension SerialDrain: Sendable where Item: Sendable {}
