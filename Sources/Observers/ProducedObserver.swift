import Foundation
import Operations

/// Calls a closure when the operation produces another operation.
public struct ProducedObserver: OperationObserver {
    private let handler: @Sendable (AsyncOperation, Foundation.Operation) -> Void

    /// Creates an observer that calls `handler` with the operation and what it produced.
    public init(_ handler: @escaping @Sendable (AsyncOperation, Foundation.Operation) -> Void) {
        self.handler = handler
    }

    public func operation(_ operation: AsyncOperation, didProduce newOperation: Foundation.Operation) {
        handler(operation, newOperation)
    }
}
