import Foundation
import Operations

/// Calls a closure when the operation finishes, with its final errors.
///
/// ```swift
/// save.addObserver(FinishedObserver { _, errors in
///     if !errors.isEmpty { alert(errors) }
/// })
/// ```
public struct FinishedObserver: OperationObserver {
    private let handler: @Sendable (AsyncOperation, [any Error]) -> Void

    /// Creates an observer that calls `handler` with the operation and its errors when it finishes.
    public init(_ handler: @escaping @Sendable (AsyncOperation, [any Error]) -> Void) {
        self.handler = handler
    }

    public func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        handler(operation, errors)
    }
}
