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
    /// cancelled. Along a chain, `upstream` names the first operation that was cancelled.
    case upstreamCancelled(operation: String, upstream: String)
    /// `operation` takes an input that never arrived: `upstream` (when named) finished without
    /// producing an output, or the operation was never given an input at all.
    case missingInput(operation: String, upstream: String?)
    /// A composite could not run its child `child` (again): the child's factory returned an
    /// operation that had already been queued or run, instead of a new one.
    case childReused(composite: String, child: String)

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
        }
    }

    private static func format(_ seconds: TimeInterval) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }
}
