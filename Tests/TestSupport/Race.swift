import Foundation

/// Runs `body(index)` for every index in `0..<count`, each on a thread of its own, released
/// together: every thread waits until all of them have arrived, then they all run `body` at
/// once, so that the calls really race. Returns `false` if they had not all returned within
/// `timeout` (a body that hangs fails the test instead of hanging it).
///
/// Own threads, not `DispatchQueue.concurrentPerform`: on a machine with few cores that runs only
/// as many bodies at once as there are cores, and a start barrier would wait forever.
///
/// ```swift
/// #expect(race(4) { index in queues[index].addOperation(operation) })
/// ```
@discardableResult
public func race(_ count: Int, timeout: TimeInterval = generousTimeout, _ body: @escaping @Sendable (Int) -> Void) -> Bool {
    let arrived = Counter()
    let deadline = Date().addingTimeInterval(timeout)
    let done = (0..<count).map { index in
        runOnOwnThread {
            arrived.increment()
            while arrived.current < count {
                sched_yield() // spin: a blocking wake-up would release the threads one by one
            }
            body(index)
        }
    }
    return done.allSatisfy { $0.wait(timeout: max(deadline.timeIntervalSinceNow, 0)) }
}
