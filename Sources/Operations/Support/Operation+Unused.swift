import Foundation

extension Foundation.Operation {
    /// Whether the operation was never queued, started or finished, as far as this package can
    /// tell: a plain Foundation operation waiting on a plain `OperationQueue` cannot be told
    /// apart from an unused one.
    var looksUnused: Bool {
        if let operation = self as? AsyncOperation {
            return operation.isUnused
        }
        return !isExecuting && !isFinished && PlainOperationRegistry.ticket(of: self) == nil
    }
}
