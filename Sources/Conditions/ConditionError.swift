import Foundation
import Operations

/// Why a ready-made condition failed.
public enum ConditionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Some dependencies finished with errors (their names).
    case dependenciesFailed([String])
    /// Some dependencies were cancelled (their names).
    case dependenciesCancelled([String])
    /// A `NegatedCondition`'s inner condition was satisfied.
    case negatedConditionSatisfied(String)
    /// A `BlockCondition`'s check returned `false`.
    case blockConditionFailed

    public var description: String {
        switch self {
        case let .dependenciesFailed(names):
            return "dependencies failed: \(names.joined(separator: ", "))"
        case let .dependenciesCancelled(names):
            return "dependencies were cancelled: \(names.joined(separator: ", "))"
        case let .negatedConditionSatisfied(name):
            return "the negated condition '\(name)' was satisfied"
        case .blockConditionFailed:
            return "the block condition returned false"
        }
    }
}
