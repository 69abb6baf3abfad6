import Foundation

/// An operation that runs an attempt and, while attempts fail, runs a fresh one, up to
/// `maxAttempts` in all, waiting between attempts as its `BackoffPolicy` says.
///
/// Operations cannot be restarted, so it makes each attempt with `makeAttempt`, which receives
/// the attempt's number (1 for the first) and must return a new operation each time. Attempts run
/// one after another as children of the retry operation (it is a `GroupOperation`), with their
/// conditions, categories and observers honoured.
///
/// ```swift
/// let fetch = RetryOperation(maxAttempts: 4, backoff: .exponential(initial: 0.5).withJitter()) { _ in
///     FetchFeed(url: feedURL)
/// }
/// queue.addOperation(fetch)
/// try await fetch.finished()
/// let feed = fetch.lastAttempt?.output
/// ```
///
/// An attempt fails when it finishes with errors (one cancelled with `cancel()`, which records
/// none, does not fail: cancel it with `cancel(with:)` to have it retried). It is retried if
/// attempts remain, the retry operation has not been cancelled, and `shouldRetry` (if given)
/// returns true for each of its errors. The retry operation succeeds as soon as an attempt
/// succeeds; otherwise its `errors` are **the last attempt's errors**, so it fails the way its
/// last attempt did (`shouldRetry` sees every error of every failed attempt, if earlier ones
/// matter to you). Operations an attempt produces are waited for and their errors kept, as in
/// any group (API.md 7): work an attempt hands off that fails still fails the retry operation.
///
/// If `makeAttempt` returns an operation that was already queued or run, the retry operation is
/// cancelled with `AsyncOperationError.childReused`, beside the errors of the attempt before.
///
/// Cancelling the retry operation cancels the running attempt, or the wait before the next one,
/// and it then finishes without further attempts; cancelled during a wait, its errors are those
/// of the attempt that was waiting to be retried. `makeAttempt` and `shouldRetry` are released
/// once it has finished; `lastAttempt` is kept so that its result can be read.
// @unchecked Sendable: `state` lives in a `Locked` value; the rest is `GroupOperation`'s.
public final class RetryOperation<Attempt: AsyncOperation>: GroupOperation, @unchecked Sendable {

    /// The most attempts made, the first one included.
    public let maxAttempts: Int
    /// How long to wait before each retry.
    public let backoff: BackoffPolicy
    private let state: Locked<RetryStateMachine<Attempt>>

    /// Creates an operation that makes up to `maxAttempts` attempts (at least one) with
    /// `makeAttempt`, waiting between them as `backoff` says.
    ///
    /// - Parameters:
    ///   - maxAttempts: how many attempts to make at most, the first included; at least one is
    ///     made whatever the value.
    ///   - backoff: how long to wait before each retry; by default not at all.
    ///   - shouldRetry: decides, for each error of a failed attempt, whether that error is worth
    ///     another attempt; all must be. It is asked about every error of every failed attempt,
    ///     in order, the last attempt's included. By default every failure is retried.
    ///   - makeAttempt: returns a new operation for attempt number `attempt` (1 for the first).
    ///     Called when the attempt is due, on an arbitrary thread.
    public init(
        maxAttempts: Int,
        backoff: BackoffPolicy = .none,
        shouldRetry: (@Sendable (any Error) -> Bool)? = nil,
        makeAttempt: @escaping @Sendable (_ attempt: Int) -> Attempt
    ) {
        self.maxAttempts = max(maxAttempts, 1)
        self.backoff = backoff
        state = Locked.make(RetryStateMachine(makeAttempt: makeAttempt, shouldRetry: shouldRetry))
        super.init()
    }

    /// How many attempts have been made so far (started or about to start).
    public var attemptCount: Int {
        state.withLock { $0.attemptCount }
    }

    /// The latest attempt: the running one while the retry operation runs, the last one once it
    /// has finished (read its results there). `nil` before the first attempt.
    public var lastAttempt: Attempt? {
        state.withLock { $0.lastAttempt }
    }

    /// Makes and starts the first attempt.
    public override func execute() {
        if !isCancelled, let first = makeNextAttempt() {
            admitChildren([first])
        }
        super.execute()
    }

    // MARK: - Book-keeping

    override func recordChildFinished(_ child: Operation, errors: [any Error]) {
        switch state.withLock({ $0.role(of: child) }) {
        case .attempt:
            let willRetry = retry(afterAttemptFailedWith: errors)
            super.recordChildFinished(child, errors: errors, keeping: willRetry ? [] : errors)
        case .backoffWait:
            let end = state.withLock { $0.backoffFinished() }
            guard case let .waited(pending, released) = end else { return }
            _ = released // the wait leaves outside the lock
            if !startAttempt() {
                super.recordChildFinished(child, errors: pending + errors)
                return
            }
            super.recordChildFinished(child, errors: errors)
        case .other: // an operation an attempt produced: its errors are kept, as in any group
            super.recordChildFinished(child, errors: errors)
        }
    }

    /// Whether `shouldRetry` (if given) accepts each of `errors`. It is asked about every one,
    /// also past a refusal and for the last attempt: it is where the errors of attempts before
    /// the last can be seen.
    private static func everyError(of errors: [any Error], isRetryableBy shouldRetry: (@Sendable (any Error) -> Bool)?) -> Bool {
        guard let shouldRetry else { return true }
        var acceptsEvery = true
        for error in errors where !shouldRetry(error) {
            acceptsEvery = false
        }
        return acceptsEvery
    }

    /// Arranges the next attempt if the one that finished with `errors` is to be retried.
    private func retry(afterAttemptFailedWith errors: [any Error]) -> Bool {
        guard !errors.isEmpty else { return false }
        let (attemptCount, shouldRetry) = state.withLock { ($0.attemptCount, $0.shouldRetry) }
        let retryable = Self.everyError(of: errors, isRetryableBy: shouldRetry)
        guard retryable, attemptCount < maxAttempts, !childrenAreStopping else { return false }
        let delay = backoff.delay(beforeAttempt: attemptCount + 1)
        guard delay > 0 else {
            return startAttempt()
        }
        let wait = DelayOperation(delay)
        wait.name = "RetryOperation backoff before attempt \(attemptCount + 1)"
        let previousWait = state.withLock { $0.backoffStarted(wait, after: errors) }
        _ = previousWait // released outside the lock
        admitChildren([wait]) // cancelled at once if the retry operation was cancelled meanwhile
        return true
    }

    /// Makes the next attempt and adds it; `false` if there is none (cancelled, or finished).
    private func startAttempt() -> Bool {
        guard !childrenAreStopping, let attempt = makeNextAttempt() else { return false }
        admitChildren([attempt]) // cancelled at once if the retry operation was cancelled meanwhile
        return true
    }

    private func makeNextAttempt() -> Attempt? {
        guard case let .make(makeAttempt, number) = state.withLock({ $0.attemptDue() }) else { return nil }
        let attempt = makeAttempt(number)
        guard attempt.isUnused else {
            // Operations cannot be restarted: stop, as composites do with a reused child.
            switch state.withLock({ $0.attemptRejected() }) {
            case .cancelRetry:
                cancel(with: AsyncOperationError.childReused(composite: displayName, child: attempt.displayName))
            }
            return nil
        }
        let previous = state.withLock { $0.attemptMade(attempt) }
        _ = previous // the attempt it replaces leaves outside the lock
        return attempt
    }

    override var refusalOfChildrenFromOutside: String? {
        "children were added to a RetryOperation, which makes its own attempts with makeAttempt; they finish cancelled on a shared queue"
    }

    override var refusalOfWidth: String? {
        "maxConcurrentOperationCount was set on a RetryOperation, which runs one attempt at a time; it was ignored"
    }

    override func releaseResources() {
        super.releaseResources()
        let released = state.withLock { $0.release() }
        _ = released // the closures' captures are released outside the lock
    }
}
