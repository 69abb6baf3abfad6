import Foundation

/// Calls a handler once an operation has finished: after its `errors` are final, its observers
/// have heard `operationDidFinish` and `isFinished` has become true.
///
/// It is one of the operation's finish watchers, told last as dependents are. The watched
/// operation holds its listener weakly: whoever waits keeps the listener alive, and `stop()`s it
/// when it gives up.
///
/// ```swift
/// let listener = FinishListener()
/// listener.listen(to: operation) { semaphore.signal() }
/// ```
final class FinishListener: FinishWatcher {
    private let handler = Locked<(@Sendable () -> Void)?>.make(nil)
    /// Where it is told among the watched operation's other dependents, if it stands for an
    /// operation waiting on a serial queue (a gated plain one): by that operation's ticket, as
    /// that queue's own waiting operations are. Otherwise it is told with the dependents of
    /// normal priority, before those waiting on a serial queue.
    let serialQueueTicket: UInt64?

    /// `serialQueueTicket`: the ticket, on a serial queue, of the operation it listens for.
    init(serialQueueTicket: UInt64? = nil) {
        self.serialQueueTicket = serialQueueTicket
    }

    /// Starts listening to `operation`; `handler` is called once, on the thread that finishes it
    /// (at once, on this thread, if it has already finished). Call it once per listener.
    func listen(to operation: AsyncOperation, _ handler: @escaping @Sendable () -> Void) {
        self.handler.withLock { $0 = handler }
        if case .alreadyFinished = operation.addDependent(self) {
            fire()
        }
    }

    /// Drops the handler: a finish heard from now on calls nothing.
    func stop() {
        let released = handler.withLock { $0.take() }
        _ = released // its captures are released outside the lock
    }

    func dependencyDidFinish(_ id: ObjectIdentifier) {
        fire()
    }

    private func fire() {
        handler.withLock { $0.take() }?()
    }
}
