import Foundation

/// Decides whether a thread may block until an operation on a given queue finishes, and counts
/// the threads that block from inside an operation of that queue.
///
/// Blocking can never end when the operation needs the very thread, or the very concurrency slot,
/// that is waiting for it:
/// - the main thread waiting for an operation on the main queue (`OperationQueue.main`, or a
///   queue whose `underlyingQueue` is the main dispatch queue);
/// - an operation waiting for another operation on its own queue while every one of the queue's
///   `maxConcurrentOperationCount` slots is taken by an operation that waits the same way.
///
/// Waits through other queues (the main thread waiting for an operation whose dependency runs on
/// the main queue, say) are not detected; a timeout bounds those.
/// One per engine (`OperationsEngine.blockingWaits`).
final class BlockingWait: Sendable {
    /// A thread allowed to block; give it back to `end(_:)` once it stops waiting.
    struct Registration {
        fileprivate let queue: ObjectIdentifier?
    }

    /// For each queue, how many threads are blocked inside one of its operations.
    private let waitersInside = Locked<[ObjectIdentifier: Int]>.make([:])

    init() {}

    /// Registers the calling thread as about to block until `operation`, on `queue`, finishes;
    /// `needsSlot` is false once the operation executes (it holds its slot already). Throws
    /// `AsyncOperationError.waitWouldDeadlock` if the wait could never end.
    func begin(waitingFor operation: AsyncOperation, on queue: OperationQueue, needsSlot: Bool) throws -> Registration {
        if Self.isOnMainQueue && Self.isMain(queue) {
            throw AsyncOperationError.waitWouldDeadlock(
                operation: operation.displayName,
                reason: "it runs on the main queue, which the waiting main thread would block"
            )
        }
        guard OperationQueue.current === queue else {
            return Registration(queue: nil)
        }
        let slots = queue.maxConcurrentOperationCount
        let id = ObjectIdentifier(queue)
        let waiters = waitersInside.withLock { waiters -> Int? in
            let count = waiters[id, default: 0]
            if needsSlot && slots != OperationQueue.defaultMaxConcurrentOperationCount && count + 1 >= slots {
                return count
            }
            waiters[id] = count + 1
            return nil
        }
        if let waiters {
            let name = queue.displayName // a group's own queue is called after its group
            let others = waiters == 0 ? "" : " (\(waiters) already waiting the same way)"
            throw AsyncOperationError.waitWouldDeadlock(
                operation: operation.displayName,
                reason: "it runs on '\(name)', whose \(slots) concurrent slot\(slots == 1 ? " is" : "s are") taken by operations waiting for it\(others)"
            )
        }
        return Registration(queue: id)
    }

    /// The thread stopped waiting.
    func end(_ registration: Registration) {
        guard let id = registration.queue else { return }
        waitersInside.withLock { waiters in
            let remaining = waiters[id, default: 1] - 1
            waiters[id] = remaining > 0 ? remaining : nil
        }
    }

    private static func isMain(_ queue: OperationQueue) -> Bool {
        // Not `underlyingQueue === DispatchQueue.main`: on Linux each `DispatchQueue.main` is a
        // new wrapper of the same queue. The key set on the main queue tells it apart.
        queue === OperationQueue.main || queue.underlyingQueue?.getSpecific(key: mainQueueKey) != nil
    }

    /// Whether the calling code runs on the main thread or the main dispatch queue (the main
    /// actor's executor). On Linux, once `dispatchMain()` has been called (as Swift's async `main`
    /// does), the main queue is drained by a pool thread, so `Thread.isMainThread` alone misses it.
    private static var isOnMainQueue: Bool {
        Thread.isMainThread || DispatchQueue.getSpecific(key: mainQueueKey) != nil
    }

    /// A key set on the main queue only.
    private static let mainQueueKey: DispatchSpecificKey<Void> = {
        let key = DispatchSpecificKey<Void>()
        DispatchQueue.main.setSpecific(key: key, value: ())
        return key
    }()
}
