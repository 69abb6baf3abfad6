import Foundation

/// A flag one thread raises and another polls without sleeping.
public final class Flag: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched while holding `lock`.
    private let lock = NSLock()
    private var value = false

    public init() {}

    public func raise() {
        lock.lock()
        defer { lock.unlock() }
        value = true
    }

    public var isRaised: Bool {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}

/// Busy-waits for `turns` loop turns: a delay far shorter than any sleep, for hitting the narrow
/// windows a race test aims at.
public func spin(turns: Int) {
    var sum = 0
    for turn in 0..<turns { sum &+= turn }
    withExtendedLifetime(sum) {} // keeps the loop from being optimized away
}
