import Foundation
import Operations
import Testing
import TestSupport

// `addBarrierBlock(_:)` is atomic with adds from other threads: every operation of the queue is
// either before the barrier (it finished before the barrier block started) or after it (it
// started after the barrier block finished); none overlaps or straddles the block.

@Suite("Barrier atomicity")
struct BarrierAtomicityTests {
    init() {
        _ = DiagnosticsLog.shared // capture diagnostics before any test reports one
    }

    static let rounds = 100
    static let adders = 3
    static let operationsPerAdder = 20

    @Test func barrierAddedWhileOtherThreadsAdd_isAtomic_everyOperationIsBeforeOrAfterIt() throws {
        // Stops at the first round that goes wrong (`#require`), with the round in the message
        for round in 0..<Self.rounds {
            // Given a queue, and operations that record when they start and end on a shared clock
            let queue = AsyncOperationQueue()
            queue.maxConcurrentOperationCount = 4
            let clock = Counter()
            let spans = Recorder<Span>()
            let barrierSpan = Recorder<Span>()
            let added = Recorder<Operation>()
            let addedBeforeTheCall = Recorder<String>()
            let addedAfterTheCall = Recorder<String>()

            // When threads add operations while one of them adds a barrier in the middle
            let raced = race(Self.adders + 1) { index in
                if index == Self.adders {
                    let half = Self.operationsPerAdder / 2
                    for number in 0..<Self.operationsPerAdder {
                        if number == half {
                            queue.addBarrierBlock {
                                let start = clock.increment()
                                usleep(500) // widens the window for an overlap; nothing is timed
                                barrierSpan.append(Span(label: "barrier", start: start, end: clock.increment()))
                            }
                        }
                        let label = "barrier-thread-\(number)"
                        (number < half ? addedBeforeTheCall : addedAfterTheCall).append(label)
                        queue.addOperation(Self.operation(label, clock: clock, spans: spans, added: added))
                    }
                } else {
                    for number in 0..<Self.operationsPerAdder {
                        queue.addOperation(Self.operation("adder\(index)-\(number)", clock: clock, spans: spans, added: added))
                    }
                }
            }
            try #require(raced, "round \(round): the adds did not return")

            // Then every operation ran either wholly before or wholly after the barrier block
            try #require(waitUntilFinished(added.all), "round \(round)")
            try #require(waitUntil { barrierSpan.count == 1 }, "round \(round): the barrier never ran")
            let barrier = try #require(barrierSpan.all.first)
            let all = spans.all
            try #require(all.count == (Self.adders + 1) * Self.operationsPerAdder, "round \(round)")
            let straddling = all.filter { !($0.end < barrier.start || $0.start > barrier.end) }
            try #require(straddling.isEmpty, "round \(round): overlap the barrier \(barrier): \(straddling)")

            // And those the barrier's thread added before the call were before it, those after, after
            let before = Set(addedBeforeTheCall.all)
            let after = Set(addedAfterTheCall.all)
            let wrongSide = all.filter { (before.contains($0.label) && $0.end > barrier.start) || (after.contains($0.label) && $0.start < barrier.end) }
            try #require(wrongSide.isEmpty, "round \(round): on the wrong side of the barrier \(barrier): \(wrongSide)")
        }
    }

    /// When an operation ran, on the test's shared clock (a counter ticked at every event).
    struct Span: Sendable, CustomStringConvertible {
        let label: String
        let start: Int
        let end: Int

        var description: String { "\(label) [\(start), \(end)]" }
    }

    private static func operation(_ label: String, clock: Counter, spans: Recorder<Span>, added: Recorder<Operation>) -> AsyncBlockOperation {
        let operation = AsyncBlockOperation {
            let start = clock.increment()
            usleep(100) // widens the window for an overlap; nothing is timed
            spans.append(Span(label: label, start: start, end: clock.increment()))
        }
        operation.name = label
        added.append(operation)
        return operation
    }
}
