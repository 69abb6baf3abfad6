import Foundation

/// The errors the engine itself puts into an operation's `errors`.
///
/// Errors that conditions, blocks and subclasses report are kept as they are; these cases are the
/// ones the framework adds when it refuses to run an operation or stops it.
public enum AsyncOperationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The operation was added to a queue while its dependencies formed a cycle through `dependency`.
    /// It finishes without executing, which lets the rest of the cycle proceed.
    case dependencyCycle(operation: String, dependency: String)
    /// A condition did not call its completion handler within the queue's
    /// `conditionEvaluationTimeout`.
    case conditionTimedOut(condition: String, after: TimeInterval)
    /// A condition released its completion handler without ever calling it.
    case conditionNeverAnswered(condition: String)
    /// The operation did not finish within `after` seconds of starting (see `TimeoutObserver`).
    case timedOut(after: TimeInterval)
    /// `start()` was called by hand while some of the operation's dependencies had not finished.
    case startedBeforeDependenciesFinished(operation: String)
    /// The operation needs a mutually exclusive category that an enclosing group already holds,
    /// so it could never run.
    case categoryHeldByEnclosingGroup(category: String, operation: String)
    /// `operation` did not execute because `upstream`, an operation before it in a chain, failed;
    /// `reason` describes `upstream`'s errors. Along a chain, `upstream` and `reason` name the
    /// first operation that failed, not the link just before.
    case upstreamFailed(operation: String, upstream: String, reason: String)
    /// `operation` did not execute because `upstream`, an operation before it in a chain, was
    /// cancelled, with or without a reason (`cancel(with:)`, a timeout: `upstream`'s own `errors`
    /// keep it). Along a chain, `upstream` names the first operation that was cancelled.
    case upstreamCancelled(operation: String, upstream: String)
    /// `operation` takes an input that never arrived: `upstream` (when named) finished without
    /// producing an output, or the operation was never given an input at all.
    case missingInput(operation: String, upstream: String?)
    /// A composite could not run its child `child` (again): the child's factory returned an
    /// operation that had already been queued or run, instead of a new one.
    case childReused(composite: String, child: String)
    /// The operation finished with several errors, listed in `errors` in the order it collected
    /// them. Thrown by `runAndWait()`, `finished()` and `value` instead of choosing one of them.
    case multipleErrors(operation: String, errors: [any Error])
    /// `runAndWait(timeout:)` gave up after `after` seconds. The operation was cancelled with this
    /// error (unless its finish had begun: the error is then not among its errors), and may still
    /// be finishing when it is thrown.
    case waitTimedOut(operation: String, after: TimeInterval)
    /// `runAndWait()` was called where the operation could never run until the call returned: for
    /// instance on the main thread for an operation on the main queue. `reason` says why; nothing
    /// was started.
    case waitWouldDeadlock(operation: String, reason: String)
    /// A `ResultOperation` finished without errors, without being cancelled and without producing
    /// its output, so there is no value to return.
    case finishedWithoutOutput(operation: String)
    /// The operation's queue was shut down (`AsyncOperationQueue.shutDown(gracePeriod:)`): it
    /// was added after the shut-down began, or it still waited when it began, or it still ran
    /// when the grace period ended. It was cancelled with this error.
    case queueShutDown
    /// The operation names the mutually exclusive category `category` with a `CategoryLock` other
    /// than the one its other conditions, or other operations still in this process, name it
    /// with. A category is one category whatever lock names it, so it finishes without executing.
    case categoryLockConflict(category: String, operation: String)

    public var description: String {
        switch self {
        case let .dependencyCycle(operation, dependency):
            return "'\(operation)' was not run: its dependency on '\(dependency)' closes a dependency cycle"
        case let .conditionTimedOut(condition, seconds):
            return "condition '\(condition)' did not answer within \(Self.format(seconds)) s"
        case let .conditionNeverAnswered(condition):
            return "condition '\(condition)' released its completion handler without calling it"
        case let .timedOut(seconds):
            return "the operation did not finish within \(Self.format(seconds)) s of starting"
        case let .startedBeforeDependenciesFinished(operation):
            return "'\(operation)' was started by hand before all of its dependencies had finished"
        case let .categoryHeldByEnclosingGroup(category, operation):
            return "'\(operation)' needs the mutually exclusive category '\(category)', which its enclosing group already holds"
        case let .upstreamFailed(operation, upstream, reason):
            return "'\(operation)' was not run: '\(upstream)', before it in the chain, failed: \(reason)"
        case let .upstreamCancelled(operation, upstream):
            return "'\(operation)' was not run: '\(upstream)', before it in the chain, was cancelled"
        case let .missingInput(operation, upstream?):
            return "'\(operation)' was not run: '\(upstream)' finished without producing its input"
        case let .missingInput(operation, nil):
            return "'\(operation)' was not run: it was never given an input"
        case let .childReused(composite, child):
            return "'\(composite)' could not run '\(child)': its factory returned an operation that was already queued or run; a child's factory must return a new operation each time"
        case let .multipleErrors(operation, errors):
            return "'\(operation)' failed with \(errors.count) errors: " + errors.map { String(describing: $0) }.joined(separator: "; ")
        case let .waitTimedOut(operation, seconds):
            return "gave up waiting for '\(operation)' after \(Self.format(seconds)) s and cancelled it"
        case let .waitWouldDeadlock(operation, reason):
            return "waiting for '\(operation)' here would never end: \(reason)"
        case let .finishedWithoutOutput(operation):
            return "'\(operation)' finished without producing its output"
        case let .categoryLockConflict(category, operation):
            return "'\(operation)' names the mutually exclusive category '\(category)' with a different lock than other conditions or operations in this process; one category takes one lock"
        case .queueShutDown:
            return "the operation's queue was shut down: it takes no new operation, cancels those that wait, and cancels those still running once its grace period is over"
        }
    }

    /// Whether two errors are the same case with the same context. Errors inside
    /// `multipleErrors` are compared with `==` when their type is `Equatable`, otherwise by type
    /// and description.
    public static func == (lhs: AsyncOperationError, rhs: AsyncOperationError) -> Bool {
        // Switching on `lhs` alone keeps this exhaustive: a new case fails to compile until listed.
        switch lhs {
        case let .dependencyCycle(a1, a2):
            guard case let .dependencyCycle(b1, b2) = rhs else { return false }
            return a1 == b1 && a2 == b2
        case let .conditionTimedOut(a1, a2):
            guard case let .conditionTimedOut(b1, b2) = rhs else { return false }
            return a1 == b1 && a2 == b2
        case let .conditionNeverAnswered(a):
            guard case let .conditionNeverAnswered(b) = rhs else { return false }
            return a == b
        case let .timedOut(a):
            guard case let .timedOut(b) = rhs else { return false }
            return a == b
        case let .startedBeforeDependenciesFinished(a):
            guard case let .startedBeforeDependenciesFinished(b) = rhs else { return false }
            return a == b
        case let .categoryHeldByEnclosingGroup(a1, a2):
            guard case let .categoryHeldByEnclosingGroup(b1, b2) = rhs else { return false }
            return a1 == b1 && a2 == b2
        case let .upstreamFailed(a1, a2, a3):
            guard case let .upstreamFailed(b1, b2, b3) = rhs else { return false }
            return a1 == b1 && a2 == b2 && a3 == b3
        case let .upstreamCancelled(a1, a2):
            guard case let .upstreamCancelled(b1, b2) = rhs else { return false }
            return a1 == b1 && a2 == b2
        case let .missingInput(a1, a2):
            guard case let .missingInput(b1, b2) = rhs else { return false }
            return a1 == b1 && a2 == b2
        case let .childReused(a1, a2):
            guard case let .childReused(b1, b2) = rhs else { return false }
            return a1 == b1 && a2 == b2
        case let .multipleErrors(a1, a2):
            guard case let .multipleErrors(b1, b2) = rhs else { return false }
            return a1 == b1 && a2.count == b2.count && zip(a2, b2).allSatisfy(Self.isSameError)
        case let .waitTimedOut(a1, a2):
            guard case let .waitTimedOut(b1, b2) = rhs else { return false }
            return a1 == b1 && a2 == b2
        case let .waitWouldDeadlock(a1, a2):
            guard case let .waitWouldDeadlock(b1, b2) = rhs else { return false }
            return a1 == b1 && a2 == b2
        case let .finishedWithoutOutput(a):
            guard case let .finishedWithoutOutput(b) = rhs else { return false }
            return a == b
        case .queueShutDown:
            guard case .queueShutDown = rhs else { return false }
            return true
        case let .categoryLockConflict(a1, a2):
            guard case let .categoryLockConflict(b1, b2) = rhs else { return false }
            return a1 == b1 && a2 == b2
        }
    }

    private static func isSameError(_ lhs: any Error, _ rhs: any Error) -> Bool {
        let boxed: Any = lhs
        if let lhs = boxed as? any Equatable {
            return lhs.isEqual(toAny: rhs)
        }
        return ObjectIdentifier(type(of: lhs)) == ObjectIdentifier(type(of: rhs))
            && String(reflecting: lhs) == String(reflecting: rhs)
    }

    private static func format(_ seconds: TimeInterval) -> String {
        guard seconds.isFinite, abs(seconds) < 1e15 else { return String(seconds) } // Int() would trap
        return seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }
}

private extension Equatable {
    /// Whether `other` is a value of this type equal to `self`.
    func isEqual(toAny other: Any) -> Bool {
        (other as? Self) == self
    }
}
