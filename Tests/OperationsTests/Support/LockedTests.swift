import Foundation
@testable import Operations
import Testing
import TestSupport

// `Locked` is the engine's one lock. On Linux it is a futex lock of our own (`PlatformMutex`):
// a thread that finds it held spins briefly, then sleeps in the kernel until the holder gives it
// up. These tests contend for it on purpose, on threads of their own (`race`), with every wait
// bounded: a lost wake-up fails them instead of hanging them. Under ThreadSanitizer (`swift test
// --sanitize=thread`) they also show that every hand-over is an atomic the sanitizer sees: a lock
// the kernel handed over instead (a priority-inheritance futex) made it report the counts as raced.

@Suite struct LockedTests {
    private struct Tallies {
        var count = 0
        var everyHundredth: [Int] = []
    }

    @Test func contendedLock_letsOneThreadInAtATime() {
        let threads = 4
        let rounds = 20_000
        let tallies = Locked.make(Tallies())
        let allReturned = race(threads) { _ in
            for round in 0..<rounds {
                tallies.withLock { tallies in
                    tallies.count += 1
                    if round % 100 == 0 { tallies.everyHundredth.append(round) }
                }
            }
        }
        #expect(allReturned)
        let final = tallies.withLock { $0 }
        #expect(final.count == threads * rounds)
        #expect(final.everyHundredth.count == threads * rounds / 100)
    }

    /// Each holder keeps the lock for 5 ms, far longer than a waiter spins: the others fall asleep
    /// in the kernel, and each give-up must wake one of them.
    @Test func threadsAsleepOnTheLock_areWokenOneAfterAnother() {
        let threads = 4
        let turns = 5
        let inside = Locked.make((now: 0, most: 0, total: 0))
        let allReturned = race(threads) { _ in
            for _ in 0..<turns {
                inside.withLock { inside in
                    inside.now += 1
                    inside.most = max(inside.most, inside.now)
                    usleep(5_000)
                    inside.now -= 1
                    inside.total += 1
                }
            }
        }
        #expect(allReturned)
        let final = inside.withLock { $0 }
        #expect(final.most == 1)
        #expect(final.total == threads * turns)
    }

    #if os(Linux) || os(Android)
    /// The kernel is given the mutex's address as the address of its 32-bit word.
    @Test func mutex_isItsWordAndNothingElse() {
        #expect(MemoryLayout<PlatformMutex>.size == MemoryLayout<UInt32>.size)
        #expect(MemoryLayout<PlatformMutex>.alignment == MemoryLayout<UInt32>.alignment)
    }
    #endif

    @Test func exchange_returnsTheOldValue_andKeepsTheNewOne() {
        let value = Locked.make("old")
        #expect(value.exchange(with: "new") == "old")
        #expect(value.withLock { $0 } == "new")
    }

    @Test func valueBuiltInPlace_isTheLockedValue() {
        let value = Locked.make(building: { [1, 2, 3] })
        #expect(value.withLock { $0.reduce(0, +) } == 6)
    }
}
