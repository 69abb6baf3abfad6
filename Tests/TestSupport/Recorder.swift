import Foundation

/// A thread-safe list that tests append to from any thread.
public final class Recorder<Element>: @unchecked Sendable {
    // @unchecked Sendable: `elements` is only touched while holding `lock`.
    private let lock = NSLock()
    private var elements: [Element] = []

    public init() {}

    public func append(_ element: Element) {
        lock.lock()
        defer { lock.unlock() }
        elements.append(element)
    }

    public var all: [Element] {
        lock.lock()
        defer { lock.unlock() }
        return elements
    }

    public var count: Int { all.count }
}

/// A thread-safe counter.
public final class Counter: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched while holding `lock`.
    private let lock = NSLock()
    private var value = 0

    public init() {}

    @discardableResult
    public func increment() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }

    public var current: Int {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}
