import Foundation
import Operations
import Testing
import TestSupport

// Misuse never crashes the process: the same plain Foundation operation added from several
// threads to several `AsyncOperationQueue`s at once runs exactly once, and every other add is
// reported and ignored. Foundation itself traps on a second add, so a check that is not atomic
// with the add lets two of them through and crashes.

@Suite("Misuse from many threads")
struct MisuseFromManyThreadsTests {
    init() {
        _ = DiagnosticsLog.shared // capture diagnostics before any test reports one
    }

    static let threads = 4
    static let rounds = 200

    @Test func samePlainOperation_addedFromManyThreadsToSuspendedQueues_runsOnce_andTheOtherAddsAreReported() throws {
        // Stops at the first round that goes wrong (`#require`), with the round in the message
        for round in 0..<Self.rounds {
            // Given one plain operation and suspended queues, so it cannot start during the adds
            let name = uniqueName("plain-raced")
            let ran = Counter()
            let operation = BlockOperation { ran.increment() }
            operation.name = name
            let queues = (0..<Self.threads).map { _ in AsyncOperationQueue() }
            queues.forEach { $0.isSuspended = true }

            // When every thread adds it to its own queue at the same moment
            try #require(race(Self.threads) { index in queues[index].addOperation(operation) }, "round \(round)")
            queues.forEach { $0.isSuspended = false }

            // Then it runs once, and every other add was reported as a second add
            try #require(waitUntilFinished([operation]), "round \(round)")
            try #require(ran.current == 1, "round \(round)")
            try #require(DiagnosticsLog.shared.kinds(about: name) == Array(repeating: .addedTwice, count: Self.threads - 1), "round \(round)")
        }
    }

    @Test func samePlainOperation_addedFromManyThreadsToRunningQueues_runsOnce_andTheOtherAddsAreReported() throws {
        // Stops at the first round that goes wrong (`#require`), with the round in the message
        for round in 0..<Self.rounds {
            // Given one plain operation that cannot finish before every add returned
            let name = uniqueName("plain-raced")
            let ran = Counter()
            let addsReturned = Signal()
            let operation = BlockOperation {
                ran.increment()
                _ = addsReturned.wait()
            }
            operation.name = name
            let queues = (0..<Self.threads).map { _ in AsyncOperationQueue() }

            // When every thread adds it to its own running queue at the same moment
            try #require(race(Self.threads) { index in queues[index].addOperation(operation) }, "round \(round)")
            addsReturned.signal()

            // Then it runs once, and every other add was reported (as a second add, or as the add
            // of an operation already executing, when it came after the operation had started)
            try #require(waitUntilFinished([operation]), "round \(round)")
            try #require(ran.current == 1, "round \(round)")
            let kinds = DiagnosticsLog.shared.kinds(about: name)
            try #require(kinds.count == Self.threads - 1 && kinds.allSatisfy { $0 == .addedTwice || $0 == .addedAfterFinishing }, "round \(round): \(kinds)")
        }
    }

    @Test func sameAsyncOperation_addedFromManyThreadsToSuspendedQueues_runsOnce_andTheOtherAddsAreReported() throws {
        // Stops at the first round that goes wrong (`#require`), with the round in the message
        for round in 0..<Self.rounds {
            // Given one AsyncOperation and suspended queues, so it cannot start during the adds
            let name = uniqueName("async-raced")
            let ran = Counter()
            let operation = AsyncBlockOperation { ran.increment() }
            operation.name = name
            let queues = (0..<Self.threads).map { _ in AsyncOperationQueue() }
            queues.forEach { $0.isSuspended = true }

            // When every thread adds it to its own queue at the same moment
            try #require(race(Self.threads) { index in queues[index].addOperation(operation) }, "round \(round)")
            queues.forEach { $0.isSuspended = false }

            // Then it runs once, and every other add was reported as a second add
            try #require(waitUntilFinished([operation]), "round \(round)")
            try #require(ran.current == 1, "round \(round)")
            try #require(operation.errors.isEmpty, "round \(round): \(operation.errors)")
            try #require(DiagnosticsLog.shared.kinds(about: name) == Array(repeating: .addedTwice, count: Self.threads - 1), "round \(round)")
        }
    }
}
