import Foundation

/// How long tests wait for something that should happen quickly. Generous on purpose: a test
/// fails only when the event never comes, never because a machine is slow.
public let generousTimeout: TimeInterval = 30

/// How long a thread that a test blocks on purpose (an operation body waiting for a `Signal`)
/// waits before it gives up. Far longer than `generousTimeout`: on a loaded 2-core machine the
/// cooperative pool can be busy with other tests for over a minute, so the test that would let the
/// thread go may not run again until long after `generousTimeout`. Giving up early would change
/// what the test sees, not just how long a failing test takes.
public let blockingTimeout: TimeInterval = 600

/// How many times `waitUntil` and `eventually` check their condition, a millisecond apart, before
/// they give up, however much time has passed: a thread or task that was kept from running past
/// its deadline (by a loaded machine) still gives the awaited work a fair chance. A short timeout
/// (a check that something does not happen) asks for a check per millisecond of it at most.
public let minimumChecks = 2_000

func requiredChecks(within timeout: TimeInterval) -> Int {
    Int(min(Double(minimumChecks), max(0, timeout * 1_000)))
}

/// Waits until `condition` holds, checking every millisecond; `false` if `timeout` passed first
/// and the condition was checked at least `minimumChecks` times.
@discardableResult
public func waitUntil(timeout: TimeInterval = generousTimeout, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    let checksNeeded = requiredChecks(within: timeout)
    var checks = 0
    while !condition() {
        checks += 1
        if Date() > deadline, checks >= checksNeeded { return false }
        usleep(1_000)
    }
    return true
}

/// Waits until every operation in `operations` has finished; `false` if `timeout` passed first.
@discardableResult
public func waitUntilFinished(_ operations: [Operation], timeout: TimeInterval = generousTimeout) -> Bool {
    waitUntil(timeout: timeout) { operations.allSatisfy(\.isFinished) }
}

/// A one-shot signal: `signal()` from any thread, `wait()` with a long timeout (`blockingTimeout`).
public final class Signal: @unchecked Sendable {
    // @unchecked Sendable: DispatchSemaphore is thread-safe.
    private let semaphore = DispatchSemaphore(value: 0)

    public init() {}

    public func signal() {
        semaphore.signal()
    }

    /// `true` if signalled before `timeout`.
    public func wait(timeout: TimeInterval = blockingTimeout) -> Bool {
        semaphore.wait(timeout: .now() + timeout) == .success
    }
}

/// Checks that an object is released: hold it weakly, drop every strong reference, then ask.
public final class WeakProbe<Object: AnyObject>: @unchecked Sendable {
    // @unchecked Sendable: a weak reference is read atomically by the runtime.
    public private(set) weak var object: Object?

    public init(_ object: Object) {
        self.object = object
    }

    /// `true` once the object has been released (waiting for in-flight work to let go of it).
    public func isReleased(timeout: TimeInterval = generousTimeout) -> Bool {
        waitUntil(timeout: timeout) { object == nil }
    }
}
