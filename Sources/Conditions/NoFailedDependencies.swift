import Foundation
import Operations

/// Fails if any of the operation's dependencies finished with errors.
///
/// Only `AsyncOperation` dependencies carry errors; plain Foundation dependencies never fail.
/// Fails with `ConditionError.dependenciesFailed`, naming them.
public struct NoFailedDependencies: OperationCondition {
    /// Creates the condition.
    public init() {}

    /// Evaluates against the operation's dependencies, which have all finished by now.
    public func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        let failed = operation.dependencies
            .compactMap { $0 as? AsyncOperation }
            .filter(\.isFailed)
            .map { $0.name ?? String(describing: type(of: $0)) }
        completion(failed.isEmpty ? .satisfied : .failed(ConditionError.dependenciesFailed(failed)))
    }
}
