/// The order in which a logger hears one operation's events: the order they were made, one at a
/// time.
///
/// Events of one operation are made on several threads (the adding thread, the worker that runs
/// it, a thread that cancels it). They pass through the engine's one drainer (`SerialDrain`):
/// whoever makes an event while none is being heard delivers it on its own thread, then what
/// was made meanwhile; an event made meanwhile is left to that deliverer.
///
/// A `.waiting` event describes a snapshot, and the operation may move on between the snapshot
/// and the event: it is made only if no other event was made since the snapshot began
/// (`madeSince:`), so that it never comes after the event that ended the wait.
///
/// An operation's first event is `.added`: an event made before it (a cancel or a finish racing
/// the add, heard by the logger that joined a moment earlier) is kept and heard right after it,
/// and after the cancellation the logger joined too late to hear, if there was one.
///
/// Its last is `.finished`: an event made after it (a grant on its way as a cancel finished the
/// operation, on another thread) is dropped.
struct LogEventOrder {
    /// What to do with an event that was made.
    enum Admission: Equatable {
        /// Deliver it now, then ask `delivered()` for what was made meanwhile.
        case deliver
        /// Another thread is delivering and delivers it in turn: nothing more to do.
        case leftToTheDeliverer
        /// Its snapshot is older than an event made since: drop it.
        case stale
        /// `.finished` was made before it: drop it.
        case afterTheFinish
    }

    /// How many events were made; a snapshot remembers it as its mark.
    private(set) var eventsMade: UInt64 = 0
    private var drain = SerialDrain<OperationLogEvent>()
    /// Events made before `.added`, kept to be heard right after it; `nil` once it was made (or
    /// if the order does not wait for it).
    private var madeBeforeAdded: [OperationLogEvent]?
    /// Whether `.finished` was made.
    private var finishedMade = false

    /// `waitsForAdded`: the logger joins as the operation is being added, and hears `.added`
    /// first, whatever was made before it.
    init(waitsForAdded: Bool = false) {
        madeBeforeAdded = waitsForAdded ? [] : nil
    }

    /// `event` was made. `mark`: the `eventsMade` read before its snapshot, for a snapshot event.
    /// Made before the add (`added(_:thenMissed:)`) of an order that waits for it, it is kept for
    /// after the add.
    mutating func made(_ event: OperationLogEvent, madeSince mark: UInt64? = nil) -> Admission {
        if finishedMade {
            return .afterTheFinish
        }
        if let mark, mark != eventsMade {
            return .stale
        }
        eventsMade &+= 1
        if case .finished = event.kind {
            finishedMade = true
        }
        if madeBeforeAdded != nil {
            madeBeforeAdded?.append(event)
            return .leftToTheDeliverer // whoever delivers the add
        }
        // Its maker delivers it first, itself, if nobody is delivering: it is not left pending.
        switch drain.isDraining ? drain.submit(event) : drain.becomeDrainerIfNone() {
        case .drain: return .deliver
        case .leftToDrainer: return .leftToTheDeliverer
        }
    }

    /// The operation was added: `added` (`nil` if the logger does not hear it), then
    /// `missedCancel` (the cancellation before the add, which the logger joined too late to hear
    /// from the observers, if heard), then what was made meanwhile, in that order. `.deliver`: the
    /// caller delivers them all, through `delivered()`. (Also how an add that was refused after
    /// the logger joined lets go of what was kept, with neither event.)
    mutating func added(_ added: OperationLogEvent?, thenMissed missedCancel: OperationLogEvent?) -> Admission {
        let events = [added, missedCancel].compactMap { $0 }
        eventsMade &+= UInt64(events.count)
        let kept = madeBeforeAdded ?? []
        madeBeforeAdded = nil
        var admission = Admission.leftToTheDeliverer
        for event in events + kept where drain.submit(event) == .drain {
            admission = .deliver
        }
        return admission
    }

    /// The deliverer heard what it had: what was made meanwhile, to hear next in this order, or
    /// `.done` (it is no longer the deliverer).
    mutating func delivered() -> SerialDrain<OperationLogEvent>.Next {
        drain.takeNext()
    }
}
