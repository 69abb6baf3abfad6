import Foundation
import Operations

/// Inverts a condition: satisfied when the inner condition fails, failed when it is satisfied.
///
/// The inner condition's dependency is kept; its mutually exclusive categories are not (a
/// negated exclusion makes no sense). Fails with `ConditionError.negatedConditionSatisfied`.
public struct NegatedCondition<Inner: OperationCondition>: OperationCondition {
    /// The condition being inverted.
    public let inner: Inner

    /// Inverts `inner`.
    public init(_ inner: Inner) {
        self.inner = inner
    }

    /// "Not<inner name>".
    public var name: String { "Not<\(inner.name)>" }

    /// The inner condition's dependency.
    public func dependency(for operation: AsyncOperation) -> Foundation.Operation? {
        inner.dependency(for: operation)
    }

    /// Evaluates `inner` and inverts its answer.
    public func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        let innerName = inner.name
        inner.evaluate(for: operation) { result in
            completion(Self.inverting(result, of: innerName))
        }
    }

    private static func inverting(_ result: ConditionResult, of innerName: String) -> ConditionResult {
        switch result {
        case .satisfied:
            return .failed(ConditionError.negatedConditionSatisfied(innerName))
        case .failed:
            return .satisfied
        }
    }
}

extension NegatedCondition: AnswersAtOnce where Inner: AnswersAtOnce {
    /// Asks `inner` and inverts its answer; what the queue calls instead of
    /// `evaluate(for:completion:)`.
    package func answer(for operation: AsyncOperation) -> ConditionResult {
        Self.inverting(inner.answer(for: operation), of: inner.name)
    }
}
