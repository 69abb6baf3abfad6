import Operations

/// The rules of one acquisition of a category by a `PostgresCategoryLock`, without threads: who
/// waits for the lease, whether the session may still be cancelled, when it gives up, and who
/// hears that the lease was lost. `LockSession` performs the actions it returns.
struct LockSessionState: Sendable {
    typealias Waiter = CheckedContinuation<any CategoryLease, any Error>

    private enum Phase: Sendable {
        /// `acquire` has not stored its waiter yet; `abandoned` is set if the request was given up
        /// already (a cancellation that came first).
        case starting(abandoned: (any Error)?)
        /// The waiter waits for the lease; `connected` once the session has a connection, from
        /// when its task may no longer be cancelled (a query cut short could leave the lock held).
        case waiting(Waiter, connected: Bool)
        /// The lease is out; `sleeper` is the pause between two heartbeats, woken on release.
        case held(sleeper: Task<Void, Never>?)
        /// Nobody wants a lease any more: abandoned, released or lost. The session unlocks and ends.
        case ended
    }

    private var phase = Phase.starting(abandoned: nil)
    /// The session's task, and the timer that gives up once no connection came in time.
    private var holder: Task<Void, Never>?
    private var timer: Task<Void, Never>?
    /// When the current streak of failures began (nil while things work), in uptime nanoseconds.
    private var failingSince: UInt64?
    private var lastError: (any Error)?
    /// When the server last showed it was there (a connection handed out, an answer), in uptime
    /// nanoseconds: a connected session it stays silent to for `unavailableTimeout` is given up on.
    private var lastContact: UInt64 = 0
    /// The request was abandoned before the session's task was known, and that task had no
    /// connection then (so it never will): it may be cancelled once it is known.
    private var cancelHolderWhenStarted = false
    /// How many times in a row, with no contact with the server since, the timer went off late
    /// and looked again instead of giving up.
    private var lateLooks = 0

    /// A timer that goes off this late (in seconds) says the process was too busy to run its
    /// tasks, the session's among them: the silence it measured may be the process's own.
    static let lateness = 0.25
    /// How soon a timer that went off late looks again (the session has had the time to ask the
    /// server since), and how many times it does so before it gives up all the same.
    static let lookAgainAfterLateness = 0.5
    static let lateLooksAllowed = 4

    // MARK: Starting

    enum WaitAction {
        /// Start the session's task and the timer, then report them (`started`).
        case start
        /// The request was given up before it waited: fail the waiter at once.
        case fail(Waiter, any Error)
    }

    /// `acquire` waits for the lease with `waiter`.
    mutating func wait(with waiter: Waiter) -> WaitAction {
        guard case let .starting(abandoned) = phase else { return .fail(waiter, CancellationError()) }
        if let abandoned {
            phase = .ended
            return .fail(waiter, abandoned)
        }
        phase = .waiting(waiter, connected: false)
        return .start
    }

    /// The session's task and the timer were started: the tasks to cancel at once, if the request
    /// was abandoned meanwhile.
    mutating func started(holder: Task<Void, Never>, timer: Task<Void, Never>) -> [Task<Void, Never>] {
        guard case .waiting = phase else { return cancelHolderWhenStarted ? [holder, timer] : [timer] }
        self.holder = holder
        self.timer = timer
        return []
    }

    // MARK: Giving up

    enum AbandonAction {
        case none
        /// Fail the waiter with the error, and cancel these tasks (the session's own only while it
        /// has no connection: with one, it notices by itself and unlocks).
        case fail(Waiter, any Error, cancel: [Task<Void, Never>])
    }

    /// Nobody wants the lease any more: the request was cancelled, or acquiring failed.
    mutating func abandon(with error: any Error) -> AbandonAction {
        switch phase {
        case .starting(nil):
            phase = .starting(abandoned: error)
            return .none
        case let .waiting(waiter, connected):
            phase = .ended
            cancelHolderWhenStarted = !connected
            let tasks = (connected ? [] : [holder].compactMap { $0 }) + [timer].compactMap { $0 }
            holder = nil
            timer = nil
            return .fail(waiter, error, cancel: tasks)
        case .starting, .held, .ended:
            return .none
        }
    }

    enum TimerAction {
        /// Nothing more to watch: the lease is out, or nobody waits any more.
        case stop
        /// Look again after this many seconds.
        case checkAgain(after: Double)
        /// The server stayed out of reach for `unavailableTimeout`: perform this.
        case giveUp(AbandonAction)
        /// The server fell silent to the connected session for `unavailableTimeout`: perform
        /// this, and close the session's connection. Its statement in flight may never return,
        /// and would keep the pooled connection (and the session's task) until the socket fails.
        case giveUpAndCloseConnection(AbandonAction)
    }

    /// The timer went off at `now`: give up, with the error `giveUp` makes of the last failure
    /// seen, if the session has had no connection for `unavailableTimeout` (since the start, or
    /// since the connection it had failed), or has one that the server has not answered on for
    /// that long; otherwise look again when that could next be so. (A connection lost while
    /// waiting in line is bounded too: the client may wait for a new one indefinitely, without
    /// an error. And the lock statements of a session waiting in line are cut short by the server
    /// within a fraction of a second, so a silence that long (at least a second) means the server
    /// is gone, even if the statement in flight never fails: seen after an immediate server stop.)
    ///
    /// `lateBy`: how many seconds after it was due the timer went off. Late by `lateness` or more,
    /// the process was too busy to run its tasks (code elsewhere blocking Swift's concurrency
    /// pool, say), and the session could not ask the server meanwhile: instead of giving up, it
    /// looks again `lookAgainAfterLateness` later, up to `lateLooksAllowed` times in a row
    /// without contact with the server.
    mutating func timerFired(now: UInt64, lateBy: Double = 0, unavailableTimeout: Double, _ giveUp: ((any Error)?) -> any Error) -> TimerAction {
        guard case let .waiting(_, connected) = phase else { return .stop }
        if connected {
            // At least a second: each try in line may itself wait 200 ms for the server.
            let bound = max(unavailableTimeout, 1)
            let silent = Self.seconds(from: lastContact, to: now)
            if silent < bound { return .checkAgain(after: bound - silent) }
            if let lookAgain = lookAgainIfLate(lateBy) { return lookAgain }
            return .giveUpAndCloseConnection(abandon(with: giveUp(nil)))
        }
        if let failingSince { // connected before, or failed to
            let failing = Self.seconds(from: failingSince, to: now)
            if failing < unavailableTimeout { return .checkAgain(after: unavailableTimeout - failing) }
        }
        if let lookAgain = lookAgainIfLate(lateBy) { return lookAgain }
        return .giveUp(abandon(with: giveUp(lastError)))
    }

    private mutating func lookAgainIfLate(_ lateBy: Double) -> TimerAction? {
        guard lateBy >= Self.lateness, lateLooks < Self.lateLooksAllowed else { return nil }
        lateLooks += 1
        return .checkAgain(after: Self.lookAgainAfterLateness)
    }

    /// Seconds from `start` to `end`, 0 if `end` came first: clocks are read before the lock is
    /// taken, so a later reading may be recorded before an earlier one is compared with it.
    private static func seconds(from start: UInt64, to end: UInt64) -> Double {
        end > start ? Double(end - start) / 1_000_000_000 : 0
    }

    // MARK: The session

    /// The session got a connection at `now`: `true` if it should go on, `false` if nobody
    /// waits any more.
    mutating func connected(now: UInt64) -> Bool {
        guard case let .waiting(waiter, _) = phase else { return false }
        phase = .waiting(waiter, connected: true)
        lastContact = now
        lateLooks = 0
        return true
    }

    /// The server answered a lock request (granted or timed out) at `now`: it works.
    mutating func serverAnswered(now: UInt64) {
        failingSince = nil
        lastContact = now
        lateLooks = 0
    }

    enum RetryAction {
        /// Try again after a pause.
        case retry
        /// Stop: the lease is out (a loss is reported by the heartbeat) or nobody waits.
        case stop
        /// Failures lasted `unavailableTimeout`: give up with this error (through `abandon`).
        case giveUp(any Error)
    }

    /// A session attempt failed before its grant (no connection, a dropped one, a server error).
    mutating func attemptFailed(_ error: any Error, now: UInt64, unavailableTimeout: Double) -> RetryAction {
        lastError = error
        guard case let .waiting(waiter, _) = phase else { return .stop }
        phase = .waiting(waiter, connected: false)
        let since = failingSince ?? now
        failingSince = since
        if Self.seconds(from: since, to: now) >= unavailableTimeout {
            return .giveUp(error)
        }
        return .retry
    }

    enum DeliverAction {
        /// Hand the lease to the waiter, and cancel the timer.
        case resume(Waiter, timer: Task<Void, Never>?)
        /// Nobody wants it: unlock.
        case unlock
    }

    /// The session holds the lock and drew its token.
    mutating func granted() -> DeliverAction {
        guard case let .waiting(waiter, _) = phase else { return .unlock }
        phase = .held(sleeper: nil)
        defer { timer = nil }
        return .resume(waiter, timer: timer)
    }

    // MARK: Holding

    /// The session pauses with `sleeper` until its next heartbeat: `false` if the lease was
    /// released (or lost) already, and the session should end now.
    mutating func pausing(with sleeper: Task<Void, Never>) -> Bool {
        guard case .held = phase else { return false }
        phase = .held(sleeper: sleeper)
        return true
    }

    /// Whether the lease is still out.
    var isHeld: Bool {
        if case .held = phase { return true }
        return false
    }

    /// Whether the session should stop waiting for the lock.
    var isAbandoned: Bool {
        if case .waiting = phase { return false }
        return true
    }

    /// The lease was released: the pause to cut short, if the session sleeps.
    mutating func released() -> Task<Void, Never>? {
        guard case let .held(sleeper) = phase else { return nil }
        phase = .ended
        return sleeper
    }

    enum LostAction {
        case none
        /// Tell the holder (`onLost`), and cut the pause short.
        case report(sleeper: Task<Void, Never>?)
    }

    /// The session ended, or stopped answering, while the lease was out.
    mutating func lost() -> LostAction {
        guard case let .held(sleeper) = phase else { return .none }
        phase = .ended
        return .report(sleeper: sleeper)
    }
}
