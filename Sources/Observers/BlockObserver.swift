import Foundation
import Operations

/// An observer made of closures, one per event; leave out the ones you do not need.
///
/// ```swift
/// operation.addObserver(BlockObserver(
///     didStart: { op in log("started \(op.name ?? "")") },
///     didFinish: { op, errors in log("finished with \(errors.count) errors") }
/// ))
/// ```
public struct BlockObserver: OperationObserver {
    /// The closures, behind one reference, allocated once when the observer is made. The observer
    /// then fits in an existential's inline buffer, so adding one observer to many operations
    /// allocates nothing per operation (four optional closures would not fit, and each
    /// `addObserver(_:)` would box a copy on the heap).
    private final class Handlers: Sendable {
        let didStart: (@Sendable (AsyncOperation) -> Void)?
        let didCancel: (@Sendable (AsyncOperation) -> Void)?
        let didProduce: (@Sendable (AsyncOperation, Foundation.Operation) -> Void)?
        let didFinish: (@Sendable (AsyncOperation, [any Error]) -> Void)?

        init(
            didStart: (@Sendable (AsyncOperation) -> Void)?,
            didCancel: (@Sendable (AsyncOperation) -> Void)?,
            didProduce: (@Sendable (AsyncOperation, Foundation.Operation) -> Void)?,
            didFinish: (@Sendable (AsyncOperation, [any Error]) -> Void)?
        ) {
            self.didStart = didStart
            self.didCancel = didCancel
            self.didProduce = didProduce
            self.didFinish = didFinish
        }
    }

    private let handlers: Handlers

    /// Creates an observer that calls the given closures.
    public init(
        didStart: (@Sendable (AsyncOperation) -> Void)? = nil,
        didCancel: (@Sendable (AsyncOperation) -> Void)? = nil,
        didProduce: (@Sendable (AsyncOperation, Foundation.Operation) -> Void)? = nil,
        didFinish: (@Sendable (AsyncOperation, [any Error]) -> Void)? = nil
    ) {
        handlers = Handlers(didStart: didStart, didCancel: didCancel, didProduce: didProduce, didFinish: didFinish)
    }

    /// Calls `didStart`, if given.
    public func operationDidStart(_ operation: AsyncOperation) {
        handlers.didStart?(operation)
    }

    /// Calls `didCancel`, if given.
    public func operationDidCancel(_ operation: AsyncOperation) {
        handlers.didCancel?(operation)
    }

    /// Calls `didProduce`, if given.
    public func operation(_ operation: AsyncOperation, didProduce newOperation: Foundation.Operation) {
        handlers.didProduce?(operation, newOperation)
    }

    /// Calls `didFinish`, if given.
    public func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        handlers.didFinish?(operation, errors)
    }
}
