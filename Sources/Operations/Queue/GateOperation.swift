import Foundation

/// The gate of a plain operation that waits for dependencies on a serial queue: an operation it
/// depends on that nobody runs but the queue, which finishes it once the plain operation's turn
/// has come (see `QueueScheduler.PlainGate`). It is listed among the plain operation's
/// `dependencies`, as `Operations.PlainGate`, until that operation has finished; the queue's
/// descriptions leave it out.
final class GateOperation: Operation, @unchecked Sendable { // @unchecked: no state beyond Operation's own
    override init() {
        super.init()
        name = "Operations.PlainGate"
    }
}
