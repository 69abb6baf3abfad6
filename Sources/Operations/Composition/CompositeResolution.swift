import Foundation

/// What a composite does after one of its children failed or was cancelled: the answer of its
/// cancellation handler.
///
/// ```swift
/// let sync = CascadeOperation { children in
///     children.add { DownloadChanges() }
///     children.add { ApplyChanges() }
/// } cancellation: { failure in
///     failure.attempt < 3 ? .rerun(after: 0.5) : .cancel
/// }
/// ```
public enum CompositeResolution: Sendable, Equatable {
    /// Cancels the composite: children still running are cancelled, children not yet started
    /// never are, and the completion handler is not called. The composite finishes cancelled,
    /// with the failed child's errors among its own.
    case cancel
    /// Runs the child again, `after` seconds from now, with a new operation from its factory. The
    /// failed attempt's errors are dropped; in a cascade, the children after it wait. A negative
    /// delay counts as zero. `.rerun` is the same without a delay.
    case rerun(after: TimeInterval)
    /// Goes on as if the child had succeeded: its errors are dropped, the children after it run,
    /// and the completion handler is called at the end.
    case carryOn

    /// Runs the child again at once, with a new operation from its factory: `.rerun(after: 0)`.
    public static var rerun: CompositeResolution { .rerun(after: 0) }

    /// Runs the child again after `delay`: `.rerun(after:)` with a `Duration`.
    @available(macOS 13, iOS 16, tvOS 16, watchOS 9, *)
    public static func rerun(after delay: Duration) -> CompositeResolution {
        .rerun(after: delay.timeInterval)
    }
}
