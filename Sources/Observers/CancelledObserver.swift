import Foundation
import Operations

/// Calls a closure when the operation is cancelled.
public struct CancelledObserver: OperationObserver {
    private let handler: @Sendable (AsyncOperation) -> Void

    /// Creates an observer that calls `handler` with the operation when it is cancelled.
    public init(_ handler: @escaping @Sendable (AsyncOperation) -> Void) {
        self.handler = handler
    }

    public func operationDidCancel(_ operation: AsyncOperation) {
        handler(operation)
    }
}
