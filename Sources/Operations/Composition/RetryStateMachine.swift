import Foundation

/// The rules of a `RetryOperation`'s attempts, without threads or side effects: how many were
/// made, the latest one, the wait before the next, and the errors that wait is for.
///
/// `RetryOperation` keeps it under one lock and does what its events return after unlocking: it
/// makes attempts and asks `shouldRetry` (user code) outside the lock, and the closures leave in
/// `release()`'s result, to be released after unlocking.
struct RetryStateMachine<Attempt: AsyncOperation> {
    typealias MakeAttempt = @Sendable (_ attempt: Int) -> Attempt
    typealias ShouldRetry = @Sendable (any Error) -> Bool

    /// What a finished child of the retry operation was.
    enum ChildRole {
        case attempt
        case backoffWait
        /// An operation an attempt produced.
        case other
    }

    /// What an event lets go of, to be released after unlocking: its `deinit` may be user code.
    struct Released {
        var makeAttempt: MakeAttempt?
        var shouldRetry: ShouldRetry?
        var backoffWait: DelayOperation?
        /// The attempt a newer one replaced as `lastAttempt`.
        var previousAttempt: Attempt?
    }

    /// Whether another attempt is due.
    enum AttemptDue {
        /// Make attempt `number` with `make` (outside the lock).
        case make(MakeAttempt, number: Int)
        /// The retry operation has finished: no more attempts.
        case none
    }

    /// What follows the factory's returning an operation that was already queued or run.
    enum Rejection {
        /// The retry operation stops: it is cancelled with `AsyncOperationError.childReused`.
        case cancelRetry
    }

    /// What follows the end of the wait before the next attempt.
    enum BackoffEnd {
        /// Make the next attempt; if none follows, report `pendingErrors` (the failed attempt's).
        /// The wait leaves in `released`.
        case waited(pendingErrors: [any Error], released: Released)
    }

    private(set) var attemptCount = 0
    private(set) var lastAttempt: Attempt?
    private(set) var shouldRetry: ShouldRetry?
    private var makeAttempt: MakeAttempt?
    /// The wait before the next attempt, while it runs.
    private var backoffWait: DelayOperation?
    /// The errors of the failed attempt the wait is for, reported if no attempt follows.
    private var errorsAwaitingRetry: [any Error] = []

    init(makeAttempt: @escaping MakeAttempt, shouldRetry: ShouldRetry?) {
        self.makeAttempt = makeAttempt
        self.shouldRetry = shouldRetry
    }

    func role(of child: Operation) -> ChildRole {
        if child === lastAttempt { return .attempt }
        if child === backoffWait { return .backoffWait }
        return .other
    }

    /// The next attempt is due: counts it.
    mutating func attemptDue() -> AttemptDue {
        guard let makeAttempt else { return .none }
        attemptCount += 1
        return .make(makeAttempt, number: attemptCount)
    }

    /// The factory returned an operation that was already queued or run: it does not count.
    mutating func attemptRejected() -> Rejection {
        attemptCount -= 1
        return .cancelRetry
    }

    /// The factory made `attempt`, now the latest; the one before leaves.
    mutating func attemptMade(_ attempt: Attempt) -> Released {
        defer { lastAttempt = attempt }
        return Released(previousAttempt: lastAttempt)
    }

    /// A failed attempt is to be retried after `wait`; `errors` are reported if none follows.
    mutating func backoffStarted(_ wait: DelayOperation, after errors: [any Error]) -> Released {
        defer {
            backoffWait = wait
            errorsAwaitingRetry = errors
        }
        return Released(backoffWait: backoffWait)
    }

    /// The wait before the next attempt finished.
    mutating func backoffFinished() -> BackoffEnd {
        defer { errorsAwaitingRetry = [] }
        return .waited(pendingErrors: errorsAwaitingRetry, released: Released(backoffWait: backoffWait.take()))
    }

    /// The retry operation finished: no attempt is made any more.
    mutating func release() -> Released {
        Released(makeAttempt: makeAttempt.take(), shouldRetry: shouldRetry.take(), backoffWait: backoffWait.take())
    }
}
