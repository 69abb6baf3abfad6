import Foundation

/// Watches what an `AsyncOperationQueue` does: for services that log, count or trace their work.
///
/// Every method has an empty default. Methods are called on arbitrary threads, never while the
/// queue holds a lock. The queue keeps its delegate weakly.
public protocol AsyncOperationQueueDelegate: AnyObject, Sendable {
    /// `operation` is about to be added to `queue` (any operation, plain Foundation ones included).
    func operationQueue(_ queue: AsyncOperationQueue, willAdd operation: Operation)
    /// `operation` is about to execute: its dependencies finished, its conditions passed and
    /// its categories are held.
    func operationQueue(_ queue: AsyncOperationQueue, didStart operation: AsyncOperation)
    /// `operation` finished with `errors` (empty on success).
    func operationQueue(_ queue: AsyncOperationQueue, didFinish operation: AsyncOperation, errors: [any Error])
}

extension AsyncOperationQueueDelegate {
    public func operationQueue(_ queue: AsyncOperationQueue, willAdd operation: Operation) {}
    public func operationQueue(_ queue: AsyncOperationQueue, didStart operation: AsyncOperation) {}
    public func operationQueue(_ queue: AsyncOperationQueue, didFinish operation: AsyncOperation, errors: [any Error]) {}
}
