import Foundation

extension OperationQueue {
    /// Adds `operations` as a chain: each waits for the one before it, and the chain stops at the
    /// first failure.
    ///
    /// Every operation gets a dependency on the operation before it in the array. Each
    /// `AsyncOperation` in the chain also finishes without executing when the operation before
    /// it failed or was cancelled, with `AsyncOperationError.upstreamFailed` or
    /// `.upstreamCancelled` naming the first failure, so one failure ends the rest of the chain
    /// with errors that say why. Plain Foundation operations (`BlockOperation`) run whatever
    /// happened before them: use one as a last link that reports how the chain went, or between
    /// two links as an adapter that inspects one operation and prepares (or cancels) the next.
    ///
    /// ```swift
    /// let fetch = ResultBlockOperation { try api.user(id: 42) }
    /// let greet = InputBlockOperation { (user: User) in "Hello, \(user.name)" }
    /// greet.takeInput(from: fetch)
    /// let report = BlockOperation { print(greet.result ?? .failure(CancellationError())) }
    /// queue.addChain([fetch, greet, report])
    /// ```
    ///
    /// Works on any `OperationQueue`; an `AsyncOperationQueue` also honours the operations'
    /// conditions, categories and observers. The operations must not be on a queue yet.
    /// Operations added with `addChain` hold the ones before them only until they finish, so a
    /// chain forms no retain cycle.
    public func addChain(_ operations: [Foundation.Operation], waitUntilFinished wait: Bool = false) {
        for (upstream, operation) in zip(operations, operations.dropFirst()) {
            operation.addDependency(upstream)
            if let operation = operation as? AsyncOperation, !operation.isLinked(to: upstream) {
                operation.addCondition(UpstreamCondition(upstream: upstream))
            }
        }
        addOperations(operations, waitUntilFinished: wait)
    }
}
