import Foundation

extension Foundation.Operation {
    /// Cancels the operation unless it executes already (or finished), with `error` if it is an
    /// `AsyncOperation`, which decides that in one step with the cancellation; a plain operation
    /// as far as Foundation says. What a queue does to operations that must not start: those
    /// still waiting as it shuts down, those an add admitted as `cancelAllOperations()` ran.
    func cancelUnlessExecuting(with error: (any Error)?) {
        if let operation = self as? AsyncOperation {
            operation.cancelIfWaiting(with: error)
        } else if !isExecuting, !isFinished {
            cancel()
        }
    }
}
