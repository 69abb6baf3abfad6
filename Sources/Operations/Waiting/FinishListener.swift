import Foundation

/// Calls a handler once an operation has finished: after its `errors` are final, its observers
/// have heard `operationDidFinish` and `isFinished` has become true.
///
/// It rides on the engine's own dependency tracking: a listener is an operation that is never
/// run and waits for the watched one as a dependent does. The engine tells dependents last, once
/// the operation is finished, so the handler may rely on `isFinished`. The watched operation holds
/// its listener weakly: whoever waits keeps the listener alive, and `stop()` when it gives up.
///
/// ```swift
/// let listener = FinishListener()
/// listener.listen(to: operation) { semaphore.signal() }
/// ```
// @unchecked Sendable: `handler` lives in a `Locked` value; the rest is `AsyncOperation`'s.
final class FinishListener: AsyncOperation, @unchecked Sendable {
    private let handler = Locked<(@Sendable () -> Void)?>.make(nil)

    /// Starts listening to `operation`; `handler` is called once, on the thread that finishes it
    /// (at once, on this thread, if it has already finished). Call it once per listener.
    func listen(to operation: AsyncOperation, _ handler: @escaping @Sendable () -> Void) {
        self.handler.withLock { $0 = handler }
        let id = ObjectIdentifier(operation)
        lifecycle.withLock { $0.awaitFinish(of: id) } // as addDependency(_:) counts it
        startWaiting(for: operation)
    }

    /// Drops the handler: a finish heard from now on calls nothing.
    func stop() {
        handler.withLock { $0 = nil }
    }

    /// The engine announces the last dependency of an operation that is on no queue finishing as
    /// "ready"; a listener's only dependency is the watched operation, so this is its finish.
    override func announceReadiness() {
        let handler = self.handler.withLock { handler in
            defer { handler = nil }
            return handler
        }
        handler?()
    }
}
