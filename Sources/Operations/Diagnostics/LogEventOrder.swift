/// The order in which a logger hears one operation's events: the order they were made, one at a
/// time.
///
/// Events of one operation are made on several threads (the adding thread, the worker that runs
/// it, a thread that cancels it). Whoever makes an event while none is being heard delivers it
/// on its own thread; an event made meanwhile is left to that deliverer, which hears it after
/// the ones left before it.
///
/// A `.waiting` event describes a snapshot, and the operation may move on between the snapshot
/// and the event: it is made only if no other event was made since the snapshot began
/// (`madeSince:`), so that it never comes after the event that ended the wait.
struct LogEventOrder {
    /// What to do with an event that was made.
    enum Admission: Equatable {
        /// Deliver it now, then ask `delivered()` for what was made meanwhile.
        case deliver
        /// Another thread is delivering and delivers it in turn: nothing more to do.
        case leftToTheDeliverer
        /// Its snapshot is older than an event made since: drop it.
        case stale
    }

    /// What the deliverer does once it heard what it had.
    enum NextDelivery {
        /// Deliver these, made meanwhile, in this order; then ask again.
        case deliver([OperationLogEvent])
        /// Nothing was made meanwhile: delivering is over.
        case done
    }

    private enum Delivery {
        case idle
        case delivering(madeMeanwhile: [OperationLogEvent])
    }

    /// How many events were made; a snapshot remembers it as its mark.
    private(set) var eventsMade: UInt64 = 0
    private var delivery = Delivery.idle

    /// `event` was made. `mark`: the `eventsMade` read before its snapshot, for a snapshot event.
    mutating func made(_ event: OperationLogEvent, madeSince mark: UInt64? = nil) -> Admission {
        if let mark, mark != eventsMade {
            return .stale
        }
        eventsMade &+= 1
        switch delivery {
        case .idle:
            delivery = .delivering(madeMeanwhile: [])
            return .deliver
        case var .delivering(madeMeanwhile):
            delivery = .idle // taken out of the enum, so that appending does not copy the array
            madeMeanwhile.append(event)
            delivery = .delivering(madeMeanwhile: madeMeanwhile)
            return .leftToTheDeliverer
        }
    }

    /// The deliverer heard what it had.
    mutating func delivered() -> NextDelivery {
        guard case let .delivering(madeMeanwhile) = delivery else { return .done }
        guard !madeMeanwhile.isEmpty else {
            delivery = .idle
            return .done
        }
        delivery = .delivering(madeMeanwhile: [])
        return .deliver(madeMeanwhile)
    }
}
