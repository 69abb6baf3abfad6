import Foundation
import Operations

/// Fails if any of the operation's dependencies was cancelled.
///
/// Fails with `ConditionError.dependenciesCancelled`, naming them.
public struct NoCancelledDependencies: OperationCondition, AnswersAtOnce {
    /// Creates the condition.
    public init() {}

    /// Evaluates against the operation's dependencies, which have all finished by now.
    public func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(answer(for: operation))
    }

    /// Looks at the operation's dependencies; what the queue calls instead of
    /// `evaluate(for:completion:)`.
    package func answer(for operation: AsyncOperation) -> ConditionResult {
        let cancelled = operation.dependencies
            .filter(\.isCancelled)
            .map { $0.name ?? String(describing: type(of: $0)) }
        return cancelled.isEmpty ? .satisfied : .failed(ConditionError.dependenciesCancelled(cancelled))
    }
}
