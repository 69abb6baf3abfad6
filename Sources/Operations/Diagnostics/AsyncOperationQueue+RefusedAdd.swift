import Foundation

extension AsyncOperationQueue {
    /// Reports an add this queue refused (`.addedTwice`, `.addedAfterFinishing`), naming the
    /// queue the operation is on (or ran on), when known, and this queue, which refused it.
    /// `reason` is what the refusal alone says.
    func reportRefusedAdd(_ kind: OperationDiagnostic.Kind, of operation: Operation, _ reason: String) {
        let current = operation.queueForMessages
        let message: String
        switch (kind, current) {
        case let (.addedTwice, current?) where current === mention:
            message = "the operation is already on queue '\(displayName)'; adding it to the same queue again was ignored, and it runs once"
        case let (.addedTwice, current?):
            message = "the operation is already on queue '\(current.displayName)', so queue '\(displayName)' refused it; the second add was ignored, and it runs once, on '\(current.displayName)'"
        case let (_, current?):
            message = "queue '\(displayName)' refused the operation, which ran on queue '\(current.displayName)': \(reason)"
        case (_, nil):
            message = "queue '\(displayName)' refused the operation: \(reason)"
        }
        let queues = current.map { $0 === mention ? [mention] : [$0, mention] } ?? [mention]
        OperationDiagnostics.report(kind, operation, message, queues: queues)
    }
}

/// What a refused add of a plain operation, or of one already used, says.
enum RefusedAddReason {
    static let finishedOrExecuting = "a finished or executing operation cannot be added to a queue; the add was ignored"
    static let alreadyOnAQueue = "the operation is already on a queue (or was, and Foundation takes an operation once); the second add was ignored"
}
