import Foundation
import Operations

/// Calls a closure when the operation starts executing.
public struct StartedObserver: OperationObserver {
    private let handler: @Sendable (AsyncOperation) -> Void

    /// Creates an observer that calls `handler` with the operation when it starts.
    public init(_ handler: @escaping @Sendable (AsyncOperation) -> Void) {
        self.handler = handler
    }

    public func operationDidStart(_ operation: AsyncOperation) {
        handler(operation)
    }
}
