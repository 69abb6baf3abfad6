import Foundation

/// The gate of a plain operation that waits for dependencies as it reaches Foundation on a
/// serial queue: an operation it depends on that nobody runs but the queue. The operation gives
/// its turn up; once its dependencies have finished it waits for its turn again, by its ticket
/// (`QueueScheduler.plainOperationReady(_:)`), and when the turn comes the queue finishes the
/// gate, and the operation keeps the turn until it has finished and its dependents have heard
/// of it. The gate is listed among the operation's `dependencies`, as `Operations.PlainGate`,
/// until that operation has finished; the queue's descriptions leave it out.
final class GateOperation: Operation, @unchecked Sendable { // @unchecked: immutable beyond Operation's own state
    /// The plain operation it holds back.
    let operation: Operation
    /// The ticket `operation` was added with, whose turn it waits for.
    let ticket: UInt64

    init(holdingBack operation: Operation, ticket: UInt64) {
        self.operation = operation
        self.ticket = ticket
        super.init()
        name = "Operations.PlainGate"
    }
}
