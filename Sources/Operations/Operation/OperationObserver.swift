import Foundation

/// Something told about the milestones of an `AsyncOperation`'s life.
///
/// Every method has an empty default, so an observer implements only what it needs. Methods are
/// called on arbitrary threads, never while the framework holds a lock, and in this order:
/// `operationDidStart` exactly once, before `execute()` (only if the operation executes);
/// `operationDidCancel` at most once; `operation(_:didProduce:)` once per operation produced
/// before the finish began (one produced later still runs, unheard); and `operationDidFinish`
/// exactly once, last, with `errors` already final. Do not block in them waiting for a queue or
/// another operation: the calling thread may still owe queues the news of other finishes, and a
/// `waitUntilAllOperationsAreFinished()` that needs it would never return.
public protocol OperationObserver: Sendable {
    /// The operation is about to execute.
    func operationDidStart(_ operation: AsyncOperation)
    /// The operation was cancelled (called at most once).
    func operationDidCancel(_ operation: AsyncOperation)
    /// The operation produced `newOperation` with `produce(_:)`, before its finish began.
    func operation(_ operation: AsyncOperation, didProduce newOperation: Foundation.Operation)
    /// The operation finished; `errors` are final. The last call an observer receives.
    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error])
}

extension OperationObserver {
    public func operationDidStart(_ operation: AsyncOperation) {}
    public func operationDidCancel(_ operation: AsyncOperation) {}
    public func operation(_ operation: AsyncOperation, didProduce newOperation: Foundation.Operation) {}
    public func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {}
}
