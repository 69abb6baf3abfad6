import Foundation

/// A composite that runs its children one after another: each starts once the one before it
/// succeeded, in the order they were declared.
///
/// Declare the children with factories, then say what happens when all of them succeeded and
/// what happens when one fails:
///
/// ```swift
/// let signUp = CascadeOperation { children in
///     children.add { CreateAccount(form) }
///     children.add { UploadAvatar(form.avatar) }
///     children.add { SendWelcomeMail(form.email) }
/// } completion: {
///     print("signed up")
/// } cancellation: { failure in
///     failure.attempt < 3 ? .rerun(after: 1) : .cancel
/// }
/// queue.addOperation(signUp)
/// ```
///
/// A child's factory is called when the child is due to run, so it can read what the children
/// before it left behind. When a child fails or is cancelled, the cascade stops until the
/// cancellation handler has answered: `.cancel` ends the cascade (later children never run),
/// `.rerun` runs a new attempt of the child before going on, `.carryOn` goes on with the next
/// child. See `CompositeOperation` for the rules both composites share.
// @unchecked Sendable: no state of its own; `CompositeOperation` keeps its state under a lock.
open class CascadeOperation: CompositeOperation, @unchecked Sendable {
    /// Creates a cascade of the children `declare` adds, in order.
    ///
    /// - Parameters:
    ///   - declare: Called once, now, to declare the children.
    ///   - completion: Called once when every child has succeeded (or was carried on), before
    ///     the cascade finishes.
    ///   - cancellation: Called when a child fails or is cancelled; its answer decides what the
    ///     cascade does next. Without one, the cascade cancels.
    public init(
        _ declare: (_ children: inout CompositeChildren) -> Void,
        completion: (@Sendable () -> Void)? = nil,
        cancellation: (@Sendable (CompositeFailure) -> CompositeResolution)? = nil
    ) {
        super.init(mode: .serial, declaration: declare, completion: completion, cancellation: cancellation)
    }
}
