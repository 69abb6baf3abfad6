import Foundation

/// The rules of one operation's categories held beyond its process, without threads.
///
/// The operation first gets its categories within the process (`ExclusivityController`), so only
/// the first in line of each category asks the locks. Then it acquires the leases of the
/// categories that have a lock, one at a time, sorted by name; only once it holds all of them does
/// it go on to run. Each acquisition round has a generation, so an answer that arrives after the
/// round was abandoned (the operation finished, its queue was suspended) is recognised and its
/// leases given straight back.
struct CategoryLockGateState: Sendable {
    /// Why a round was stopped before it ended.
    enum Stop: Sendable, Equatable {
        /// The operation finished (it was cancelled, say): give everything back.
        case finished
        /// Its queue was suspended: the operation gave its categories back, and asks again later.
        case suspended
    }

    private enum Phase: Sendable {
        /// Holds no lease, and asks for none.
        case idle
        /// Acquiring its leases in round `generation`; `current` is the category asked for now, by
        /// `request`; `lost` the first category whose lease, granted in this round, was lost
        /// before the round ended (the round then fails with `CategoryLockError.lost`).
        case acquiring(generation: UInt64, request: CategoryLockRequest?, current: String?, stop: Stop?, lost: String?)
        /// Holds every lease of round `generation`; `lost` names those lost since (still given
        /// back at the end, but their fencing tokens are stale).
        case held(generation: UInt64, leases: [String: any CategoryLease], lost: Set<String>)
        /// The operation finished: nothing is acquired any more.
        case done
    }

    private var phase = Phase.idle
    private var generation: UInt64 = 0

    // MARK: Acquiring

    enum BeginAction {
        /// Start round `generation`.
        case acquire(generation: UInt64)
        /// The operation finished already: give its in-process categories back.
        case giveBackLocally
        /// A round is under way or done already: nothing to do.
        case none
    }

    /// The operation was granted its categories within the process.
    mutating func begin() -> BeginAction {
        switch phase {
        case .idle, .acquiring(_, _, _, .suspended, _):
            // A round stopped by a suspension may still be ending: its answer is stale now.
            generation += 1
            phase = .acquiring(generation: generation, request: nil, current: nil, stop: nil, lost: nil)
            return .acquire(generation: generation)
        case .done:
            return .giveBackLocally
        case .acquiring, .held:
            return .none
        }
    }

    enum AskAction {
        /// Ask the lock.
        case ask
        /// The round was stopped meanwhile, or a lease it got was lost: give back what it got,
        /// ask no more, and end the round (`failed`).
        case endRound
    }

    /// Round `round` now asks for `category` with `request`.
    mutating func nowAcquiring(_ category: String, with request: CategoryLockRequest, round: UInt64) -> AskAction {
        guard case let .acquiring(current, _, _, nil, nil) = phase, current == round else { return .endRound }
        phase = .acquiring(generation: current, request: request, current: category, stop: nil, lost: nil)
        return .ask
    }

    enum WaitCheck {
        /// Still waiting for that lock's answer: tell the operation's logger what it waits for.
        case reportWaiting
        /// Answered, or the round ended: nothing to report.
        case none
    }

    /// Round `round` asked for `category` a moment ago (`CategoryLockGate.waitReportDelay`).
    func waitChecked(_ category: String, round: UInt64) -> WaitCheck {
        guard case let .acquiring(current, _, asked?, nil, nil) = phase, current == round, asked == category else { return .none }
        return .reportWaiting
    }

    enum OutcomeAction {
        /// Every lease is held: the operation goes on to run.
        case proceed
        /// The round was abandoned: give these leases back, and nothing else.
        case release([any CategoryLease])
        /// The operation finished meanwhile: give the leases back, then its in-process categories.
        case releaseAndGiveBackLocally([any CategoryLease])
        /// The locks could not be reached: the operation fails with the error, then gives its
        /// in-process categories back.
        case fail(any Error)
        /// A lease was lost before the operation ran: give these leases back, then fail as `fail`.
        case releaseAndFail([any CategoryLease], any Error)
    }

    /// Round `round` got every lease.
    mutating func acquired(_ leases: [String: any CategoryLease], round: UInt64) -> OutcomeAction {
        guard case let .acquiring(current, _, _, stop, lost) = phase, current == round else {
            return .release(Array(leases.values)) // a stale round: cannot happen, but loses nothing
        }
        switch stop {
        case nil:
            if let lost {
                // A lease went before the operation could run: it must never run without it.
                phase = .idle
                return .releaseAndFail(Array(leases.values), CategoryLockError.lost(category: lost))
            }
            phase = .held(generation: round, leases: leases, lost: [])
            return .proceed
        case .suspended:
            phase = .idle
            return .release(Array(leases.values))
        case .finished:
            phase = .done
            return .releaseAndGiveBackLocally(Array(leases.values))
        }
    }

    /// Round `round` ended without its leases (the ones it got are given back already).
    mutating func failed(_ error: any Error, round: UInt64) -> OutcomeAction {
        guard case let .acquiring(current, _, _, stop, lost) = phase, current == round else { return .release([]) }
        switch stop {
        case nil:
            phase = .idle
            return .fail(lost.map { CategoryLockError.lost(category: $0) } ?? error)
        case .suspended:
            phase = .idle
            return .release([])
        case .finished:
            phase = .done
            return .releaseAndGiveBackLocally([])
        }
    }

    // MARK: Stopping and releasing

    enum StopAction {
        /// Nothing was acquiring or held.
        case none
        /// Cancel the round's request (if it made one): its outcome gives back what it got.
        case cancel(CategoryLockRequest?)
        /// Give these leases back.
        case release([any CategoryLease])
    }

    /// The operation finished: stop a round under way, or give back the leases held.
    mutating func finished() -> StopAction {
        switch phase {
        case .acquiring(_, _, _, .suspended, _):
            return .none // stopped already, its categories given back: it ends by itself
        case let .acquiring(round, request, category, _, lost):
            phase = .acquiring(generation: round, request: request, current: category, stop: .finished, lost: lost)
            return .cancel(request)
        case let .held(_, leases, _):
            phase = .done
            return .release(Array(leases.values))
        case .idle:
            phase = .done
            return .none
        case .done:
            return .none
        }
    }

    /// Its queue was suspended while it waited for a lock: the round stops, and the operation
    /// gives its in-process categories back (`.cancel`), or it is not waiting for a lock (`.none`).
    mutating func suspended() -> StopAction {
        guard case let .acquiring(round, request, category, nil, lost) = phase else { return .none }
        phase = .acquiring(generation: round, request: request, current: category, stop: .suspended, lost: lost)
        return .cancel(request)
    }

    /// The operation gives its in-process categories back without finishing (its queue was
    /// suspended, or narrowed): the leases go back with them.
    mutating func releaseHeld() -> StopAction {
        guard case let .held(_, leases, _) = phase else { return .none }
        phase = .idle
        return .release(Array(leases.values))
    }

    enum LostAction {
        /// The lease no longer matters (its round ended).
        case none
        /// The operation holds that round's leases: cancel it with the error.
        case cancel(CategoryLockError)
        /// The round is still acquiring: cancel its request (if any), so that it ends soon and
        /// fails with `CategoryLockError.lost`.
        case endRound(CategoryLockRequest?)
    }

    /// The lease of `category`, granted in round `round`, was lost.
    mutating func lost(_ category: String, round: UInt64) -> LostAction {
        switch phase {
        case .held(let current, let leases, var lost) where current == round:
            lost.insert(category)
            phase = .held(generation: current, leases: leases, lost: lost)
            return .cancel(.lost(category: category))
        case let .acquiring(current, request, awaited, nil, lost) where current == round:
            phase = .acquiring(generation: current, request: request, current: awaited, stop: nil, lost: lost ?? category)
            return .endRound(request)
        default:
            return .none
        }
    }

    // MARK: Reading

    /// The fencing token of `category`'s lease, while held and not lost.
    func fencingToken(for category: String) -> UInt64? {
        guard case let .held(_, leases, lost) = phase, !lost.contains(category) else { return nil }
        return leases[category]?.fencingToken
    }

    /// The category a round under way waits for now.
    var awaitedCategory: String? {
        guard case let .acquiring(_, _, category, nil, _) = phase else { return nil }
        return category
    }
}
