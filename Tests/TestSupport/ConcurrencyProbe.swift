import Foundation

/// Tracks how many pieces of work run at once per key, and the most ever seen.
///
/// Call `enter(key)` when work starts and `leave(key)` when it ends; `maximum(key)` is the
/// highest number that were inside together.
public final class ConcurrencyProbe: @unchecked Sendable {
    // @unchecked Sendable: both dictionaries are only touched while holding `lock`.
    private let lock = NSLock()
    private var inside: [String: Int] = [:]
    private var peaks: [String: Int] = [:]

    public init() {}

    public func enter(_ key: String) {
        lock.lock()
        defer { lock.unlock() }
        let now = inside[key, default: 0] + 1
        inside[key] = now
        peaks[key] = max(peaks[key, default: 0], now)
    }

    public func leave(_ key: String) {
        lock.lock()
        defer { lock.unlock() }
        inside[key, default: 0] -= 1
    }

    public func maximum(_ key: String) -> Int {
        lock.lock()
        defer { lock.unlock() }
        return peaks[key, default: 0]
    }

    public var overallMaximum: Int {
        lock.lock()
        defer { lock.unlock() }
        return peaks.values.max() ?? 0
    }
}
