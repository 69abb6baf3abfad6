import Foundation
import Operations

/// A condition decided by a closure: satisfied when it returns `true`.
///
/// Fails with `ConditionError.blockConditionFailed` when the closure returns `false`; when it
/// throws, the thrown error is the failure. The closure runs on the thread that evaluates the
/// condition: keep it quick.
///
/// ```swift
/// sync.addCondition(BlockCondition { settings.syncEnabled })
/// ```
public struct BlockCondition: OperationCondition, AnswersAtOnce {
    private let check: @Sendable () throws -> Bool

    /// Creates a condition satisfied when `check` returns `true`.
    public init(_ check: @escaping @Sendable () throws -> Bool) {
        self.check = check
    }

    /// Runs the closure.
    public func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(answer(for: operation))
    }

    /// Runs the closure; what the queue calls instead of `evaluate(for:completion:)`.
    package func answer(for operation: AsyncOperation) -> ConditionResult {
        do {
            return try check() ? .satisfied : .failed(ConditionError.blockConditionFailed)
        } catch {
            return .failed(error)
        }
    }
}
