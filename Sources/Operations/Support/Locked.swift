#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

#if canImport(Darwin)
typealias PlatformMutex = os_unfair_lock
#else
typealias PlatformMutex = pthread_mutex_t
#endif

/// A value that can only be reached while holding its lock.
///
/// The value and the mutex live in one allocation, so the mutex never moves. Never call user code
/// (blocks, observers, conditions) inside `withLock`: collect what must be called, return it, and
/// call it after the lock is released.
// @unchecked Sendable: the value is only reachable through `withLock`, which holds the mutex.
struct Locked<Value>: @unchecked Sendable {
    private let storage: LockStorage<Value>

    private init(storage: LockStorage<Value>) {
        self.storage = storage
    }

    static func make(_ value: Value) -> Locked<Value> {
        Locked(storage: LockStorage.make(value))
    }

    @inline(__always)
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try storage.withLock(body)
    }
}

/// The allocation behind `Locked`: the value and its mutex side by side.
final class LockStorage<Value>: ManagedBuffer<Value, PlatformMutex> {
    static func make(_ value: Value) -> LockStorage<Value> {
        let buffer = create(minimumCapacity: 1) { _ in value }
        let storage = unsafeDowncast(buffer, to: LockStorage<Value>.self)
        storage.withUnsafeMutablePointerToElements { mutex in
            #if canImport(Darwin)
            mutex.initialize(to: os_unfair_lock())
            #else
            mutex.initialize(to: pthread_mutex_t())
            let status = pthread_mutex_init(mutex, nil)
            precondition(status == 0, "pthread_mutex_init failed: \(status)")
            #endif
        }
        return storage
    }

    deinit {
        // ManagedBuffer destroys the header (the value) itself; the mutex is ours to tear down.
        withUnsafeMutablePointerToElements { mutex in
            #if !canImport(Darwin)
            pthread_mutex_destroy(mutex)
            #endif
            mutex.deinitialize(count: 1)
        }
    }

    @inline(__always)
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try withUnsafeMutablePointers { value, mutex in
            #if canImport(Darwin)
            os_unfair_lock_lock(mutex)
            defer { os_unfair_lock_unlock(mutex) }
            #else
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            #endif
            return try body(&value.pointee)
        }
    }
}
