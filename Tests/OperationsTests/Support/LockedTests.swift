import Dispatch
@testable import Operations
import Testing

// `Locked` is the engine's one lock. On Linux it is a futex lock of our own (`PlatformMutex`),
// whose contended path sleeps in the kernel and competes again on waking; these tests contend for
// it on purpose. Under ThreadSanitizer (`swift test --sanitize=thread`) they also show that every
// hand-over is an atomic the sanitizer sees: a lock the kernel handed over instead (a
// priority-inheritance futex) made it report the counted value as raced.

@Suite struct LockedTests {
    private struct Tallies {
        var count = 0
        var everyHundredth: [Int] = []
    }

    @Test func contendedLock_letsOneThreadInAtATime() {
        let threads = 4
        let rounds = 20_000
        let tallies = Locked.make(Tallies())
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for round in 0..<rounds {
                tallies.withLock { tallies in
                    tallies.count += 1
                    if round % 100 == 0 { tallies.everyHundredth.append(round) }
                }
            }
        }
        let final = tallies.withLock { $0 }
        #expect(final.count == threads * rounds)
        #expect(final.everyHundredth.count == threads * rounds / 100)
    }

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
