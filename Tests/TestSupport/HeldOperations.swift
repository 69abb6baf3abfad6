import Foundation
import Operations

/// Operations that a test finishes by hand: each keeps its continuation until the test calls
/// `finish(_:with:)`, so a test can hold work "running" without blocking any thread.
public final class HeldOperations: @unchecked Sendable {
    // @unchecked Sendable: both dictionaries are only touched while holding `lock`.
    private let lock = NSLock()
    private var continuations: [String: AsyncBlockOperation.Continuation] = [:]
    private var starts: [String: Int] = [:]

    public init() {}

    /// A new operation named `key` that records its start and runs until `finish(key)`.
    public func make(_ key: String) -> AsyncBlockOperation {
        let operation = AsyncBlockOperation { [weak self] finish in
            self?.started(key, finish)
        }
        operation.name = key
        return operation
    }

    private func started(_ key: String, _ finish: @escaping AsyncBlockOperation.Continuation) {
        lock.lock()
        defer { lock.unlock() }
        continuations[key] = finish
        starts[key, default: 0] += 1
    }

    /// How many operations named `key` have started.
    public func startCount(_ key: String) -> Int {
        lock.lock()
        defer { lock.unlock() }
        return starts[key, default: 0]
    }

    /// Waits until `count` operations named `key` have started; `false` if that never happened.
    @discardableResult
    public func waitUntilStarted(_ key: String, count: Int = 1, timeout: TimeInterval = generousTimeout) -> Bool {
        waitUntil(timeout: timeout) { startCount(key) >= count }
    }

    /// Finishes the latest operation named `key` that started, with `error` if any.
    public func finish(_ key: String, with error: (any Error)? = nil) {
        lock.lock()
        let finish = continuations.removeValue(forKey: key)
        lock.unlock()
        finish?(error)
    }
}
