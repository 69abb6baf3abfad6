import Foundation

/// Waits, without blocking a thread, until `condition` holds, checking every millisecond; `false`
/// if `timeout` passed first. For async tests, where blocking one of the few threads of Swift's
/// cooperative pool could starve the very tasks being waited for.
public func eventually(timeout: TimeInterval = generousTimeout, _ condition: @Sendable () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        if Date() > deadline { return false }
        try? await Task.sleep(nanoseconds: 1_000_000)
    }
    return true
}
