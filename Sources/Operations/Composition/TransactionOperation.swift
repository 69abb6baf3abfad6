import Foundation

/// A composite that runs all its children at once and completes when every one of them has
/// succeeded, in whatever order they finish.
///
/// ```swift
/// let refresh = TransactionOperation { children in
///     children.add { FetchInbox() }
///     children.add { FetchCalendar() }
///     children.add { FetchContacts() }
/// } completion: {
///     print("everything is fresh")
/// } cancellation: { failure in
///     failure.index == 2 ? .carryOn : .cancel     // contacts are optional
/// }
/// queue.addOperation(refresh)
/// ```
///
/// When a child fails or is cancelled, the others keep running while the cancellation handler
/// decides: `.cancel` cancels those still running, `.rerun` starts a new attempt of the failed
/// child, `.carryOn` lets the transaction complete without it. Children failing together are
/// presented to the handler one at a time. `maxConcurrentOperationCount` limits how many
/// children run at once. See `CompositeOperation` for the rules both composites share.
// @unchecked Sendable: no state of its own; `CompositeOperation` keeps its state under a lock.
open class TransactionOperation: CompositeOperation, @unchecked Sendable {
    /// Creates a transaction of the children `declare` adds.
    ///
    /// - Parameters:
    ///   - declare: Called once, now, to declare the children.
    ///   - completion: Called once when every child has succeeded (or was carried on), before
    ///     the transaction finishes.
    ///   - cancellation: Called when a child fails or is cancelled; its answer decides what the
    ///     transaction does next. Without one, the transaction cancels.
    public init(
        _ declare: (_ children: inout CompositeChildren) -> Void,
        completion: (@Sendable () -> Void)? = nil,
        cancellation: (@Sendable (CompositeFailure) -> CompositeResolution)? = nil
    ) {
        super.init(mode: .concurrent, declaration: declare, completion: completion, cancellation: cancellation)
    }
}
