import Foundation

/// A requirement an `AsyncOperation` must meet before it executes.
///
/// Add conditions with `AsyncOperation.addCondition(_:)`. An `AsyncOperationQueue` evaluates them
/// after all of the operation's dependencies (including those the conditions produce) have
/// finished, and before `execute()`. If any condition fails, `execute()` is never called and the
/// operation finishes with one error per failed condition.
///
/// ```swift
/// struct NetworkReachable: OperationCondition {
///     func evaluate(for operation: AsyncOperation,
///                   completion: @escaping @Sendable (ConditionResult) -> Void) {
///         completion(reachability.isReachable ? .satisfied : .failed(NetworkError.offline))
///     }
/// }
/// ```
public protocol OperationCondition: Sendable {
    /// A name for messages and errors. Defaults to the type's name.
    var name: String { get }

    /// Categories of which at most one operation may execute at a time, process-wide.
    /// Defaults to none. See `MutuallyExclusive` in the `Conditions` module.
    var mutuallyExclusiveCategories: Set<String> { get }

    /// The lock that extends `mutuallyExclusiveCategories` beyond this process: across processes
    /// on a host (`FileCategoryLock`) or a cluster. Defaults to `nil`: they reach as far as this
    /// process.
    var categoryLock: (any CategoryLock)? { get }

    /// An operation that must finish before this condition is evaluated, such as one that asks
    /// the user for permission. The queue adds it to itself and makes it a dependency of
    /// `operation`. Defaults to `nil`.
    ///
    /// It counts as added with `operation`: it waits for the barriers `operation` waits for
    /// (`addBarrierBlock(_:)`), not for one placed after `operation` was added, which waits for
    /// `operation` (and so for the dependency, unless `operation` is cancelled first). The queue
    /// adds it directly, so an override of `addOperation(_:)` does not see it (its delegate's
    /// `willAdd` does), unless `operation` no longer waits for it. A dependency is not added
    /// again if it is on one of the package's queues, or running, or finished, or if another
    /// condition of `operation` brought it (added with this one or before it), so one dependency
    /// may serve several conditions of an operation. One that a plain `OperationQueue` holds and
    /// has not started cannot be told apart from an unused one: returned for two operations (or
    /// again after `removeDependency(_:)`), it would be added twice, and that queue traps, so
    /// give it to one operation's conditions only. An operation started by hand adds it to the
    /// queue that started it, if any, or else to a queue of the package's own.
    ///
    /// For a condition added while `operation` waits for its dependencies, `operation` does not
    /// go on until this returns: do not wait here for `operation` to finish.
    func dependency(for operation: AsyncOperation) -> Foundation.Operation?

    /// Decides whether `operation` may execute.
    ///
    /// Call `completion` exactly once, on any thread, now or later. A condition that releases
    /// `completion` without calling it fails the operation with
    /// `AsyncOperationError.conditionNeverAnswered`; one that holds it longer than the queue's
    /// `conditionEvaluationTimeout` fails it with `.conditionTimedOut`. Do not block the calling
    /// thread: it may be the thread that added the operation, that called `addCondition(_:)`, or
    /// that finished what the operation waited for (a dependency, or on a serial queue the
    /// operation before it).
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void)
}

/// The answer a condition gives.
public enum ConditionResult: Sendable {
    /// The operation may proceed.
    case satisfied
    /// The operation must not execute; the error becomes one of its `errors`.
    case failed(any Error)
}

extension OperationCondition {
    /// The condition's type name.
    public var name: String { String(describing: type(of: self)) }

    /// No categories.
    public var mutuallyExclusiveCategories: Set<String> { [] }

    /// No dependency.
    public func dependency(for operation: AsyncOperation) -> Foundation.Operation? { nil }
}

/// A condition of this package that is satisfied by construction: its `evaluate` answers
/// `.satisfied` at once, and it exists for its mutually exclusive categories (or its dependency).
/// The queue answers it without calling `evaluate`, saving the completion handler's allocations
/// on the hot path of every exclusive operation. Only structs conform (`ConditionKinds` relies on
/// it: it remembers the answer by the type a condition was boxed as).
package protocol SatisfiedByConstruction: OperationCondition {}

/// A condition of this package that always answers at once, on the calling thread: the queue asks
/// `answer(for:)` instead of `evaluate(for:completion:)`, and so needs no completion handler, no
/// watch for a handler dropped unanswered, and no lock per answer. Its `evaluate(for:completion:)`
/// must call `completion` with what `answer(for:)` returns. Only structs conform (`ConditionKinds`
/// relies on it, as for `SatisfiedByConstruction`).
package protocol AnswersAtOnce: OperationCondition {
    /// Decides whether `operation` may execute, as `evaluate(for:completion:)` would.
    func answer(for operation: AsyncOperation) -> ConditionResult
}

extension AnswersAtOnce {
    /// The answer of `condition`, if its type is this one (as `ConditionKinds` reports it);
    /// `nil` otherwise.
    ///
    /// Both types are opened from their existentials, compared, and the condition is taken as
    /// this type: a cast (`condition as? Self`) would instantiate metadata and cost
    /// about a thousand instructions, more than the rest of answering.
    static func answer<Condition: OperationCondition>(of condition: Condition, for operation: AsyncOperation) -> ConditionResult? {
        guard Condition.self == Self.self else { return nil }
        return unsafeBitCast(condition, to: Self.self).answer(for: operation) // the same type, checked above
    }
}
