import Foundation

/// An operation whose work is an `async throws` closure, run in its own `Task`.
///
/// It finishes when the closure returns; an error it throws becomes the operation's error.
/// Cancelling the operation while the closure runs cancels its task: the closure sees
/// `Task.isCancelled`, and `Task.sleep`, `URLSession` and most async APIs throw
/// `CancellationError`. Cancellation is cooperative, as for any task: the operation finishes once
/// the closure has returned (or thrown), so its mutually exclusive categories are never freed
/// while the closure still runs. A `CancellationError` thrown after the operation was cancelled
/// is not recorded as an error.
///
/// ```swift
/// let refresh = AsyncTaskOperation {
///     let data = try await feed.download()
///     try await store.replaceFeed(with: data)
/// }
/// refresh.addCondition(MutuallyExclusive<Store>())
/// queue.addOperation(refresh)
/// ```
///
/// Cancelled before it executes, the closure never runs. The closure and its task are released
/// when the operation finishes. It is a `ResultTaskOperation` whose output is `()`; for a
/// closure that returns a value, use `ResultTaskOperation` itself.
// @unchecked Sendable: no state of its own; the rest is `ResultTaskOperation`'s.
open class AsyncTaskOperation: ResultTaskOperation<Void>, @unchecked Sendable {
    /// Creates an operation that runs `body` in a task of the given priority (by default, the
    /// priority `Task` picks) and finishes when it returns.
    public override init(priority: TaskPriority? = nil, _ body: @escaping @Sendable () async throws -> Void) {
        super.init(priority: priority, body)
    }
}
