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
    private let didStart: (@Sendable (AsyncOperation) -> Void)?
    private let didCancel: (@Sendable (AsyncOperation) -> Void)?
    private let didProduce: (@Sendable (AsyncOperation, Foundation.Operation) -> Void)?
    private let didFinish: (@Sendable (AsyncOperation, [any Error]) -> Void)?

    /// Creates an observer that calls the given closures.
    public init(
        didStart: (@Sendable (AsyncOperation) -> Void)? = nil,
        didCancel: (@Sendable (AsyncOperation) -> Void)? = nil,
        didProduce: (@Sendable (AsyncOperation, Foundation.Operation) -> Void)? = nil,
        didFinish: (@Sendable (AsyncOperation, [any Error]) -> Void)? = nil
    ) {
        self.didStart = didStart
        self.didCancel = didCancel
        self.didProduce = didProduce
        self.didFinish = didFinish
    }

    public func operationDidStart(_ operation: AsyncOperation) {
        didStart?(operation)
    }

    public func operationDidCancel(_ operation: AsyncOperation) {
        didCancel?(operation)
    }

    public func operation(_ operation: AsyncOperation, didProduce newOperation: Foundation.Operation) {
        didProduce?(operation, newOperation)
    }

    public func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        didFinish?(operation, errors)
    }
}
