import Foundation

extension AsyncOperation {
    /// What waiting for the finished operation throws, if anything: its only error as it is,
    /// several as `AsyncOperationError.multipleErrors`, and `CancellationError` for an operation
    /// that was cancelled without an error. `nil` for a success.
    var failure: (any Error)? {
        let outcome = lifecycle.outcome
        switch outcome.errors.count {
        case 0:
            return outcome.isCancelled ? CancellationError() : nil
        case 1:
            return outcome.errors[0]
        default:
            return AsyncOperationError.multipleErrors(operation: displayName, errors: outcome.errors)
        }
    }
}

extension ResultOperation {
    /// What waiting for the finished operation gives (and `result` says): its errors (as
    /// `failure` throws them), else `CancellationError` if it was cancelled, else its output,
    /// else `AsyncOperationError.finishedWithoutOutput`. An operation whose output is `Void` (an
    /// `AsyncTaskOperation`) has nothing to produce: finished without an error, it succeeded.
    var outcome: Result<Output, any Error> {
        if let failure {
            return .failure(failure)
        }
        if let output {
            return .success(output)
        }
        // By type, not by cast: `() as? Output` also succeeds for an existential `Output` (`any
        // Sendable`), which did have something to produce.
        if Output.self == Void.self, let nothing = () as? Output {
            return .success(nothing)
        }
        return .failure(AsyncOperationError.finishedWithoutOutput(operation: displayName))
    }
}
