import Foundation
import Testing
import TestSupport

// The soak: seeded random rounds of about a thousand operations each, run one after another
// until a budget of operations (or of seconds) is spent. Each round mixes everything the library
// offers, through its public API only:
//
// - every kind of operation: `AsyncBlockOperation` with a throwing block or a continuation (called
//   at once, later from another thread, or never, with a `TimeoutObserver` on it or on an
//   enclosing operation), `ResultBlockOperation`, a subclass of `AsyncOperation` (which may
//   `produce` another), a plain `BlockOperation`;
// - dependencies on earlier siblings (across four queues at top level) and chains of up to 300;
// - every condition of the Conditions module (`BlockCondition`, `NegatedCondition`,
//   `SilentCondition`, `NoFailedDependencies`, `NoCancelledDependencies`, `ExclusiveCategory`,
//   `MutuallyExclusive`) and conditions answered later from another thread;
// - 1 to 3 of 8 categories on any operation, children of groups, cascades, transactions and
//   retries included; never one an enclosing operation holds (that fails by design), and only
//   categories numbered above those (two groups whose children need each other's categories
//   would deadlock by design, as locks taken in opposite orders do);
// - groups nested three deep, `CascadeOperation` and `TransactionOperation` whose cancellation
//   handlers answer `.cancel`, `.rerun`, `.rerun(after:)` and `.carryOn`, `RetryOperation`;
// - every observer, the ready-made ones counting each event;
// - four `AsyncOperationQueue`s (the first serial for good, the others switching between widths
//   1, 2, 4 and the default under load), and two chaos threads that cancel random operations,
//   suspend and resume queues while operations are being added, call `cancelAllOperations` and
//   add late children to running groups.
//
// Only invariants are checked, never time (see Soak/SoakChecks.swift): every operation finishes
// exactly once (`operationDidFinish` once and last, `operationDidStart` and `operationDidCancel` at
// most once, the ready-made observers agreeing); nothing executes after a failed condition,
// before its dependencies or outside its group; conditions are evaluated after dependencies and
// before the finish; no block starts after its operation finished; no category is ever held by two
// executing operations; a group, composite or retry finishes after everything it admitted, a
// group's errors hold its children's; composites' handlers never overlap and complete once; a
// retry retries until it succeeds or runs out; timeouts come from the right observer; every queue
// drains (on a timeout the failure lists every queue's `debugDescription`); the serial queue, and
// serial groups, start what has no dependency in the order added; and once every reference is
// dropped, every operation and queue is released.
//
// Size and replay (environment variables):
// - OPERATIONS_SOAK_OPERATIONS=N: operations in all (default 60,000; 8,000 at the small scale);
// - OPERATIONS_SOAK_SECONDS=S: stop after S seconds instead (or whichever comes first);
// - OPERATIONS_STRESS_SCALE=small: the small scale, which is also chosen by itself when a
//   sanitizer is linked into the test process (see `StressScale`);
// - OPERATIONS_SOAK_SEED=S: replays the round of seed S (printed in every failure), once;
// - OPERATIONS_SOAK_FRESH_SEEDS=1: four fresh seeds instead of the fixed ones and one fresh;
// - OPERATIONS_SOAK_SUMMARY=1: prints what ran (rounds, operations, seconds) per seed;
// - OPERATIONS_SOAK_DUMP=file: appends every violation of a failed round, in full, to `file`;
// - OPERATIONS_SOAK_DRAIN_SECONDS=S: how long a round may take to drain (default 60, 180 at the
//   small scale) before it counts as stuck;
// - OPERATIONS_SOAK_TRAP_WHEN_STUCK=1: stops the process when a round is stuck, so that the
//   backtracer prints every thread.
//
// Findings the soak made are kept as small tests in SoakFindingsTests.swift.

@Suite("Soak", .serialized)
struct SoakStressTests {
    static let seedVariable = "OPERATIONS_SOAK_SEED"
    /// Fixed seeds, plus one fresh seed per test run (or only the one given in the environment;
    /// or, with OPERATIONS_SOAK_FRESH_SEEDS=1, four fresh ones, for soaks run again and again).
    static let seeds: [UInt64] = ProcessInfo.processInfo.environment["OPERATIONS_SOAK_FRESH_SEEDS"] != nil
        ? (0..<4).map { _ in UInt64.random(in: .min ... .max) }
        : stressSeeds(fixed: [0x50AC_0001, 0x50AC_CA05, 0x50AC_D1CE], replayVariable: seedVariable)

    @Test(arguments: seeds)
    func randomRounds_keepEveryInvariant(seed: UInt64) {
        let budget = SoakBudget.current(seedCount: Self.seeds.count)
        let started = Date()
        var operations = 0
        var round = 0
        repeat {
            // Given a round drawn from its seed; when it runs to the end
            let roundSeed = SoakBudget.seed(ofRound: round, of: seed)
            let report = SoakRound.run(SoakPlan(seed: roundSeed, operations: SoakBudget.roundSize))
            operations += report.operationCount
            round += 1

            // Then
            let violations = report.violations()
            #expect(violations.isEmpty, """
                soak round seed \(roundSeed) (round \(round) of seed \(seed); replay: \(Self.seedVariable)=\(roundSeed)): \
                \(violations.count) violations in \(report.operationCount) operations, first: \(violations.prefix(15))
                """)
            if !violations.isEmpty { SoakBudget.dump(violations, seed: roundSeed) }
            if !report.recovered { break } // a round stuck for good may leave categories held
        } while !budget.isSpent(operations: operations, since: started)

        if ProcessInfo.processInfo.environment["OPERATIONS_SOAK_SUMMARY"] != nil {
            // Standard error, not `print`: this module's `print` is quiet (see QuietPrint.swift).
            let line = "soak seed \(seed): \(round) rounds, \(operations) operations, \(String(format: "%.1f", Date().timeIntervalSince(started))) s, scale \(StressScale.current)\n"
            FileHandle.standardError.write(Data(line.utf8))
        }
    }
}

/// How much a soak runs, from the environment (see the comment at the top of the file).
struct SoakBudget {
    /// Operations a round's plan aims at; factories make a few more.
    static let roundSize = 1_000

    var operations: Int
    var seconds: TimeInterval?

    static func current(seedCount: Int) -> SoakBudget {
        let environment = ProcessInfo.processInfo.environment
        let operations = environment["OPERATIONS_SOAK_OPERATIONS"].flatMap { Int($0) }
        let seconds = environment["OPERATIONS_SOAK_SECONDS"].flatMap { TimeInterval($0) }
        if environment[SoakStressTests.seedVariable] != nil, operations == nil, seconds == nil {
            return SoakBudget(operations: 1) // a replay: one round
        }
        let total = operations ?? (seconds == nil ? (StressScale.current == .small ? 8_000 : 60_000) : .max)
        let share = total == .max ? .max : max(1, total / seedCount)
        return SoakBudget(operations: share, seconds: seconds.map { $0 / Double(seedCount) })
    }

    func isSpent(operations done: Int, since started: Date) -> Bool {
        if done >= operations { return true }
        if let seconds, Date().timeIntervalSince(started) >= seconds { return true }
        return false
    }

    /// Writes every violation in full to the file OPERATIONS_SOAK_DUMP names, if any (failure
    /// messages show only the first ones).
    static func dump(_ violations: [String], seed: UInt64) {
        guard let path = ProcessInfo.processInfo.environment["OPERATIONS_SOAK_DUMP"] else { return }
        let text = "soak round seed \(seed)\n" + violations.joined(separator: "\n\n") + "\n\n"
        if let handle = FileHandle(forWritingAtPath: path) {
            handle.seekToEndOfFile()
            handle.write(Data(text.utf8))
            handle.closeFile()
        } else {
            _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        }
    }

    /// The seed of round `round` of a test case: the case's own seed first, then a mix.
    static func seed(ofRound round: Int, of seed: UInt64) -> UInt64 {
        guard round > 0 else { return seed }
        var random = SplitMix64(seed: seed ^ (UInt64(round) &* 0x9E37_79B9_7F4A_7C15))
        return random.next()
    }
}
