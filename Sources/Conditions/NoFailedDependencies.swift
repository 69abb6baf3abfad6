import Foundation
import Operations

/// Fails if any of the operation's dependencies finished with errors.
///
/// Only `AsyncOperation` dependencies carry errors; plain Foundation dependencies never fail.
/// Fails with `ConditionError.dependenciesFailed`, naming them.
public struct NoFailedDependencies: OperationCondition, AnswersAtOnce {
    /// Creates the condition.
    public init() {}

    /// Evaluates against the operation's dependencies, which have all finished by now.
    public func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(answer(for: operation))
    }

    /// Looks at the operation's dependencies; what the queue calls instead of
    /// `evaluate(for:completion:)`.
    package func answer(for operation: AsyncOperation) -> ConditionResult {
        let failed = operation.dependencies
            .compactMap { $0 as? AsyncOperation }
            .filter(\.isFailed)
            .map { $0.name ?? String(describing: type(of: $0)) }
        return failed.isEmpty ? .satisfied : .failed(ConditionError.dependenciesFailed(failed))
    }
}
