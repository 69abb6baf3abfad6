import Foundation
import Operations

/// Evaluates a condition without producing its dependency.
///
/// Use it to check, for instance, whether permission was already granted, without asking.
/// Keeps the inner condition's categories, the lock they are held under beyond this process
/// (`categoryLock`) and its evaluation; its name is `Silent<inner name>`.
public struct SilentCondition<Inner: OperationCondition>: OperationCondition {
    /// The condition evaluated silently.
    public let inner: Inner

    /// Wraps `inner`.
    public init(_ inner: Inner) {
        self.inner = inner
    }

    /// "Silent<inner name>".
    public var name: String { "Silent<\(inner.name)>" }

    /// The inner condition's categories.
    public var mutuallyExclusiveCategories: Set<String> { inner.mutuallyExclusiveCategories }

    /// The inner condition's lock: its categories reach as far as they do without the wrapper.
    public var categoryLock: (any CategoryLock)? { inner.categoryLock }

    /// Always `nil`: the point of the wrapper.
    public func dependency(for operation: AsyncOperation) -> Foundation.Operation? { nil }

    /// Evaluates `inner`.
    public func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        inner.evaluate(for: operation, completion: completion)
    }
}

extension SilentCondition: AnswersAtOnce where Inner: AnswersAtOnce {
    /// Asks `inner`; what the queue calls instead of `evaluate(for:completion:)`.
    package func answer(for operation: AsyncOperation) -> ConditionResult {
        inner.answer(for: operation)
    }
}
