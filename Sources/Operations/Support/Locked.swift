/// A value that can only be reached while holding its lock: the one lock type of this package
/// (`package`, so the Conditions and Observers modules use it too). Like NIO's locked value box,
/// it is `Sendable` only where its value is.
///
/// The value and the mutex live in one allocation, so the mutex never moves. Never call user code
/// (blocks, observers, conditions) inside `withLock`, and never release it there either (a
/// closure's or an object's `deinit` is user code): collect what must be called or released,
/// return it, and call or drop it after the lock is released.
///
/// Locks never nest: a thread holds at most one (`LockDiscipline` checks it in debug builds).
package struct Locked<Value> {
    private let storage: LockStorage<Value>

    private init(storage: LockStorage<Value>) {
        self.storage = storage
    }

    package static func make(_ value: Value) -> Locked<Value> {
        Locked(storage: LockStorage.make { value })
    }

    /// Builds the value in place: no copy of a large value (an operation's whole lifecycle).
    package static func make(building build: () -> Value) -> Locked<Value> {
        Locked(storage: LockStorage.make(build))
    }

    @inline(__always)
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try storage.withLock(body)
    }

    /// Replaces the value and returns the old one, to be released (or used) after unlocking:
    /// a value's `deinit` may be user code.
    @discardableResult
    package func exchange(with newValue: Value) -> Value {
        withLock { value in
            defer { value = newValue }
            return value
        }
    }
}

// @unchecked Sendable: the value is only reachable through `withLock`, which holds the mutex.
extension Locked: @unchecked Sendable where Value: Sendable {}

/// The allocation behind `Locked`: the value and its mutex side by side.
final class LockStorage<Value>: ManagedBuffer<Value, PlatformMutex> {
    static func make(_ build: () -> Value) -> LockStorage<Value> {
        let buffer = create(minimumCapacity: 1) { _ in build() }
        let storage = unsafeDowncast(buffer, to: LockStorage<Value>.self)
        storage.withUnsafeMutablePointerToElements { mutex in
            mutex.initialize(to: PlatformMutex())
        }
        return storage
    }

    deinit {
        // ManagedBuffer destroys the header (the value) itself; the mutex is ours.
        _ = withUnsafeMutablePointerToElements { mutex in mutex.deinitialize(count: 1) }
    }

    @inline(__always)
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        #if DEBUG
        LockDiscipline.willLock()
        defer { LockDiscipline.didUnlock() }
        #endif
        return try withUnsafeMutablePointers { value, mutex in
            PlatformMutex.lock(mutex) // the platform's choice of mutex: PlatformMutex.swift
            defer { PlatformMutex.unlock(mutex) }
            return try body(&value.pointee)
        }
    }
}

extension Optional {
    /// Returns the value and leaves `nil` behind: inside `withLock`, return what this takes out,
    /// so that it is released after unlocking (a closure's or an object's `deinit` is user code).
    ///
    /// ```swift
    /// let released = state.withLock { $0.block.take() }
    /// _ = released // dropped here, outside the lock
    /// ```
    package mutating func take() -> Wrapped? {
        defer { self = nil }
        return self
    }
}
