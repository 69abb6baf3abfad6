#if canImport(Darwin)
import os

/// `Locked`'s mutex on Apple platforms.
typealias PlatformMutex = os_unfair_lock

extension os_unfair_lock {
    @inline(__always)
    static func lock(_ mutex: UnsafeMutablePointer<os_unfair_lock>) {
        os_unfair_lock_lock(mutex)
    }

    @inline(__always)
    static func unlock(_ mutex: UnsafeMutablePointer<os_unfair_lock>) {
        os_unfair_lock_unlock(mutex)
    }
}
#elseif os(Linux) || os(Android)
internal import OperationsFutex
import Synchronization

/// `Locked`'s mutex on Linux: one 32-bit word and the kernel's futex, the way glibc's own mutex
/// works, without the function calls and the type checks around it (`pthread_mutex_t` cost four
/// times the instructions per lock).
///
/// The word is 0 when the lock is free, 1 when it is held, and 2 when it is held and a thread may
/// be asleep waiting for it. Taking a free lock and giving up one nobody waits for are one atomic
/// instruction each. A thread that finds the lock held spins briefly (our critical sections are
/// short), then marks the word 2 and sleeps on it; giving up a lock marked 2 wakes one sleeper,
/// which competes for the lock again. The lock is always taken by an atomic instruction of this
/// file, never handed over by the kernel, so ThreadSanitizer sees every hand-over. (The toolchain's
/// `Mutex` on Linux is a priority-inheritance futex, which the kernel hands to the sleeping thread
/// in turn: under contention the threads queued behind one another, and W2 ran up to 3.6 times
/// slower.)
struct PlatformMutex: ~Copyable {
    private static let free: UInt32 = 0
    private static let held: UInt32 = 1
    private static let heldWithSleepers: UInt32 = 2
    /// How many times a thread looks at a held lock before it sleeps.
    private static let spins = 100

    private let word = Atomic<UInt32>(PlatformMutex.free)

    @inline(__always)
    static func lock(_ mutex: UnsafeMutablePointer<PlatformMutex>) {
        let taken = mutex.pointee.word.compareExchange(expected: free, desired: held, successOrdering: .acquiring, failureOrdering: .relaxed).exchanged
        if !taken {
            lockContended(mutex)
        }
    }

    @inline(__always)
    static func unlock(_ mutex: UnsafeMutablePointer<PlatformMutex>) {
        if mutex.pointee.word.exchange(free, ordering: .releasing) == heldWithSleepers {
            operations_futex_wake_one(wordAddress(mutex))
        }
    }

    @inline(never)
    private static func lockContended(_ mutex: UnsafeMutablePointer<PlatformMutex>) {
        var state = spinWhileHeld(mutex)
        if state == free {
            let (taken, found) = mutex.pointee.word.compareExchange(expected: free, desired: held, successOrdering: .acquiring, failureOrdering: .relaxed)
            if taken { return }
            state = found
        }
        while true {
            // Marking the word 2 takes the lock if it was free; a lock taken this way may wake a
            // thread for nothing when it is given up, which is harmless.
            if state != heldWithSleepers, mutex.pointee.word.exchange(heldWithSleepers, ordering: .acquiring) == free {
                return
            }
            operations_futex_wait(wordAddress(mutex), heldWithSleepers)
            state = spinWhileHeld(mutex)
        }
    }

    private static func spinWhileHeld(_ mutex: UnsafeMutablePointer<PlatformMutex>) -> UInt32 {
        var remaining = spins
        while true {
            let state = mutex.pointee.word.load(ordering: .relaxed)
            if state != held || remaining == 0 { return state }
            operations_spin_hint()
            remaining -= 1
        }
    }

    /// The word's address for the kernel: the struct's only stored property is the word, at
    /// offset 0 (`LockedTests` checks that the struct is the word's 4 bytes and nothing else).
    private static func wordAddress(_ mutex: UnsafeMutablePointer<PlatformMutex>) -> UnsafeMutableRawPointer {
        UnsafeMutableRawPointer(mutex)
    }
}
#else
#error("Locked needs a mutex for this platform: os_unfair_lock on Apple platforms, a futex on Linux")
#endif
