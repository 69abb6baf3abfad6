import Foundation

/// A child of a composite that failed or was cancelled, as its cancellation handler sees it.
///
/// The handler answers with a `CompositeResolution`:
///
/// ```swift
/// let sync = CascadeOperation { children in
///     children.add { DownloadChanges() }
///     children.add { ApplyChanges() }
/// } cancellation: { failure in
///     if failure.isCancelled { return .cancel }
///     return failure.attempt < 3 ? .rerun : .carryOn
/// }
/// ```
public struct CompositeFailure: Sendable {
    /// The operation that failed or was cancelled; it has finished.
    public let child: Foundation.Operation
    /// The child's position among the composite's declared children, counting from 0.
    public let index: Int
    /// Which run of the child failed: 1 the first time, 2 after one rerun, and so on.
    public let attempt: Int
    /// The child's errors; empty when it was cancelled without an error (and always for plain
    /// Foundation operations, which carry no errors).
    public let errors: [any Error]
    /// Whether the child was cancelled (possibly with errors too).
    public let isCancelled: Bool
}
