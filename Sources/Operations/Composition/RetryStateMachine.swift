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

    /// The closures and the wait a finished retry operation lets go of.
    struct Released {
        var makeAttempt: MakeAttempt?
        var shouldRetry: ShouldRetry?
        var backoffWait: DelayOperation?
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

    /// The next attempt is due: counts it and returns its number with the factory to make it
    /// with (outside the lock); `nil` once the retry operation has finished.
    mutating func attemptDue() -> (make: MakeAttempt, number: Int)? {
        guard let makeAttempt else { return nil }
        attemptCount += 1
        return (makeAttempt, attemptCount)
    }

    /// The factory returned an operation that was already queued or run: it does not count.
    mutating func attemptRejected() {
        attemptCount -= 1
    }

    mutating func attemptMade(_ attempt: Attempt) {
        lastAttempt = attempt
    }

    /// A failed attempt is to be retried after `wait`; `errors` are reported if none follows.
    mutating func backoffStarted(_ wait: DelayOperation, after errors: [any Error]) {
        backoffWait = wait
        errorsAwaitingRetry = errors
    }

    /// The wait before the next attempt finished: the errors it was for, and the wait (to
    /// release outside the lock).
    mutating func backoffFinished() -> (pendingErrors: [any Error], wait: DelayOperation?) {
        defer { errorsAwaitingRetry = [] }
        return (errorsAwaitingRetry, backoffWait.take())
    }

    /// The retry operation finished: no attempt is made any more.
    mutating func release() -> Released {
        Released(makeAttempt: makeAttempt.take(), shouldRetry: shouldRetry.take(), backoffWait: backoffWait.take())
    }
}
