#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The engine's rule for its locks, checked in debug builds: a thread holds at most one at a time.
///
/// Every engine lock is a `Locked` value, and no lock is taken while another is held: a storage
/// takes its lock once per event, and a state machine whose action concerns another machine names
/// the event to send it, which the storage sends after unlocking. With no lock ever taken inside
/// another, lock-order deadlocks cannot happen, and user code (never called under a lock) cannot
/// take part in one. Debug builds (tests included) count the locks each thread holds and report a
/// second one; release builds check nothing and pay nothing.
package enum LockDiscipline {
    /// What a violation does on this thread: by default it stops the process with the message
    /// (`assertionFailure`), so that a regression fails the test run that meets it.
    package typealias ViolationHandler = (String) -> Void

    /// Runs `body` with `handler` hearing this thread's violations instead, for tests that trip
    /// the check on purpose.
    package static func withViolationHandler<Result>(_ handler: @escaping ViolationHandler, _ body: () throws -> Result) rethrows -> Result {
        let thread = PerThreadState.current
        let previous = thread.lockViolationHandler
        thread.lockViolationHandler = handler
        defer { thread.lockViolationHandler = previous }
        return try body()
    }

    #if DEBUG
    /// A lock is about to be taken by this thread.
    @inline(__always)
    static func willLock() {
        let thread = PerThreadState.current
        thread.locksHeld += 1
        guard thread.locksHeld > 1 else { return }
        let message = "an engine lock was taken while this thread held another (\(thread.locksHeld) held); locks must never nest"
        if let handler = thread.lockViolationHandler {
            handler(message)
        } else {
            assertionFailure(message)
        }
    }

    /// The lock taken last by this thread was released.
    @inline(__always)
    static func didUnlock() {
        PerThreadState.current.locksHeld -= 1
    }
    #endif
}
