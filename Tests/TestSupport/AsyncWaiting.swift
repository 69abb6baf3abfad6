import Foundation

/// Waits, without blocking a thread, until `condition` holds, checking every millisecond; `false`
/// if `timeout` passed first and the condition was checked at least `minimumChecks` times. For
/// async tests, where blocking one of the few threads of Swift's cooperative pool could starve the
/// very tasks being waited for.
///
/// The count matters on a loaded machine: other tests can keep the cooperative pool busy for
/// longer than `timeout`, so that the deadline passes before the task being waited for ever ran.
/// Each check sleeps, which lets the pool run that task, so a wait gives up only once the
/// condition had a fair chance.
public func eventually(timeout: TimeInterval = generousTimeout, _ condition: @Sendable () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    let checksNeeded = requiredChecks(within: timeout)
    var checks = 0
    while !condition() {
        checks += 1
        if Date() > deadline, checks >= checksNeeded { return false }
        try? await Task.sleep(nanoseconds: 1_000_000)
    }
    return true
}
