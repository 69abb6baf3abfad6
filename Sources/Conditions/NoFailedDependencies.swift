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
        var failed: [String] = [] // allocates nothing unless one failed (empty arrays share storage)
        for case let dependency as AsyncOperation in operation.dependencies where dependency.isFailed {
            failed.append(dependency.name ?? String(describing: type(of: dependency)))
        }
        return failed.isEmpty ? .satisfied : .failed(ConditionError.dependenciesFailed(failed))
    }
}
