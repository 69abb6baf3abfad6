import Foundation

// Benchmarks W1 to W7 and W9 against Foundation and Dispatch, in one process, with every run
// checked for correctness. Run with `swift run -c release operations-benchmarks`.
// `--quick` runs each workload once at a tenth of the size (a smoke test).

let arguments = CommandLine.arguments
let quick = arguments.contains("--quick")
let scale = quick ? 10 : 1
// `--repetitions N` takes the median of N runs instead of 3.
let repetitions = quick ? 1 : arguments.firstIndex(of: "--repetitions").flatMap { $0 + 1 < arguments.count ? Int(arguments[$0 + 1]) : nil }.map { max($0, 1) } ?? 3
// `--only W2` (or W1, W3, W4, W5, W6, W7, W9, memory) runs one section, for profiling and quick checks.
let only: String? = arguments.firstIndex(of: "--only").flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1].uppercased() : nil }

func shouldRun(_ section: String) -> Bool {
    only == nil || only == section.uppercased()
}

if let index = arguments.firstIndex(of: "--memory-probe"), index + 1 < arguments.count {
    // Child process mode: run one W1 variant once and print the peak memory. Variants:
    // foundation, async, and the same with "-all-waiting" (added to a suspended queue).
    let count = 100_000 / scale
    let variant = arguments[index + 1]
    let allWaiting = variant.hasSuffix("-all-waiting")
    let problem = variant.hasPrefix("foundation")
        ? Workloads.foundationBlocks(count, allWaiting: allWaiting)
        : Workloads.asyncBlocks(count, allWaiting: allWaiting)
    print(problem == nil ? String(format: "%.1f", peakResidentMegabytes()) : "WRONG")
    exit(0)
}

if let index = arguments.firstIndex(of: "--handoff-worker"), index + 3 < arguments.count {
    // Child process mode of W7: one worker's share of the handoffs.
    exit(HostWideHandoffs.work(arguments[index + 1], directory: arguments[index + 2], count: Int(arguments[index + 3]) ?? 0))
}

if let index = arguments.firstIndex(of: "--foundation-chain"), index + 1 < arguments.count {
    // Child process mode of W4: Foundation's chain, timed here (see `Harness.timeInChildProcess`).
    let run = Harness.time { Workloads.foundationChain(Int(arguments[index + 1]) ?? 0) }
    print(run.problem ?? String(run.seconds)) // the parent reads a number, or what went wrong
    exit(0)
}

if arguments.contains("--instructions") {
    // The ratios in instructions, each workload counted under callgrind in a child process.
    exit(InstructionCounts.run(only: only))
}

if let index = arguments.firstIndex(of: "--profile"), index + 1 < arguments.count {
    // Profiling mode: run one workload untimed, `--iterations N` times (default 20), so that a
    // profiler (perf, valgrind --tool=callgrind) sees nothing else.
    let iterations = arguments.firstIndex(of: "--iterations").flatMap { $0 + 1 < arguments.count ? Int(arguments[$0 + 1]) : nil } ?? 20
    guard let workload = Workloads.profiled[arguments[index + 1]] else {
        print("unknown workload '\(arguments[index + 1])'; one of: \(Workloads.profiled.keys.sorted().joined(separator: ", "))")
        exit(2)
    }
    for _ in 0..<iterations {
        if let problem = workload() {
            print("WRONG: \(problem)")
            exit(1)
        }
    }
    exit(0)
}

func ratio(_ ours: Measurement, _ reference: Measurement) -> String {
    String(format: "%.2f x", ours.median / reference.median)
}

var failures: [String] = []
var rows: [(String, String, String)] = []

@MainActor func record(_ measurements: [Measurement]) {
    for measurement in measurements {
        failures += measurement.problems.map { "\(measurement.label): \($0)" }
    }
}

print("Operations benchmarks: medians of \(repetitions) after a warm-up run, seconds (machine: \(ProcessInfo.processInfo.activeProcessorCount) cores)\n")

if shouldRun("W1") {
    print("W1: \(100_000 / scale) trivial block operations")
    let measured = Harness.compare([
        ("Dispatch concurrent queue (reference)", { Harness.time { Workloads.dispatchBlocks(100_000 / scale) } }),
        ("Foundation BlockOperation on OperationQueue (reference)", { Harness.time { Workloads.foundationBlocks(100_000 / scale) } }),
        ("AsyncBlockOperation on AsyncOperationQueue", { Harness.time { Workloads.asyncBlocks(100_000 / scale) } }),
    ], repetitions: repetitions)
    let (w1Dispatch, w1Foundation, w1Ours) = (measured[0], measured[1], measured[2])
    record([w1Dispatch, w1Foundation, w1Ours])
    rows.append(("W1 vs Foundation BlockOperation", ratio(w1Ours, w1Foundation), "<= 0.90 x"))
}

if shouldRun("W2") {
    print("\nW2: \(20_000 / scale) operations, mutual exclusion over 8 categories")
    let measured = Harness.compare([
        ("8 serial OperationQueues (reference)", { Harness.time { Workloads.serialQueues(20_000 / scale, categories: 8) } }),
        ("one Foundation OperationQueue, no exclusion (floor)", { Harness.time { Workloads.foundationBlocks(20_000 / scale) } }),
        ("ExclusiveCategory on one AsyncOperationQueue", { Harness.time { Workloads.exclusiveOperations(20_000 / scale, categories: 8) } }),
    ], repetitions: repetitions)
    let (w2Reference, w2Floor, w2Ours) = (measured[0], measured[1], measured[2])
    record([w2Reference, w2Floor, w2Ours])
    rows.append(("W2 vs 8 serial queues", ratio(w2Ours, w2Reference), "<= 1.40 x"))
    rows.append(("W2 floor: Foundation's own queue vs 8 serial", ratio(w2Floor, w2Reference), "(the cost of one Foundation queue)"))
    rows.append(("W2 vs that floor", ratio(w2Ours, w2Floor), "(our exclusion on top of it)"))
}

if shouldRun("W3") {
    print("\nW3: a group of \(10_000 / scale) children")
    let measured = Harness.compare([
        ("Foundation addOperations(waitUntilFinished:) (reference)", { Harness.time { Workloads.foundationBatch(10_000 / scale) } }),
        ("GroupOperation on an AsyncOperationQueue, waited for", { Harness.time { Workloads.group(10_000 / scale) } }),
    ], repetitions: repetitions)
    let (w3Reference, w3Ours) = (measured[0], measured[1])
    record([w3Reference, w3Ours])
    rows.append(("W3 vs Foundation addOperations-and-wait", ratio(w3Ours, w3Reference), "<= 1.00 x"))
}

if shouldRun("W4") {
    print("\nW4: chains of dependent operations")
    let measured = Harness.compare([
        ("\(10_000 / scale) independent operations (our own baseline)", { Harness.time { Workloads.asyncBlocks(10_000 / scale) } }),
        ("chain of \(10_000 / scale)", { Harness.time { Workloads.asyncChain(10_000 / scale) } }),
        ("chain of \(100_000 / scale)", { Harness.time { Workloads.asyncChain(100_000 / scale) } }),
    ], repetitions: repetitions)
    let (w4Independent, w4Chain10k, w4Chain100k) = (measured[0], measured[1], measured[2])
    // In a process of its own: after its chain finished, Foundation's queue went on working for
    // seconds, during whatever was measured next (the 1M chain took 8.4 s right after it, 5.5 s
    // after a 5 s pause).
    let w4Foundation = Harness.measure("Foundation chain of \(10_000 / scale) (reference, 1 run, own process)", repetitions: 1) {
        Harness.timeInChildProcess(["--foundation-chain", String(10_000 / scale)]) { Workloads.foundationChain(10_000 / scale) }
    }
    record([w4Independent, w4Chain10k, w4Chain100k, w4Foundation])
    rows.append(("W4 chain 10k vs 10k independent", ratio(w4Chain10k, w4Independent), "<= 1.00 x"))
    rows.append(("W4 chain 100k vs chain 10k", ratio(w4Chain100k, w4Chain10k), "<= 15.00 x"))
    if !quick {
        let w4Million = Harness.measure("chain of 1,000,000 (completes and is released)", repetitions: 1) { Harness.time { Workloads.asyncChain(1_000_000) } }
        record([w4Million])
        rows.append(("W4 chain of 1,000,000, seconds", String(format: "%.2f s", w4Million.median), "<= 6 s"))
    }
}

if shouldRun("W5") || shouldRun("W6") {
    print("\nW5 and W6: \(20_000 / scale) operations")
    let measured = Harness.compare([
        ("plain (our own W1 at this count)", { Harness.time { Workloads.asyncBlocks(20_000 / scale) } }),
        ("3 observers each", { Harness.time { Workloads.observedOperations(20_000 / scale) } }),
        ("2 satisfied conditions each", { Harness.time { Workloads.conditionedOperations(20_000 / scale) } }),
    ], repetitions: repetitions)
    let (w56Baseline, w5, w6) = (measured[0], measured[1], measured[2])
    record([w56Baseline, w5, w6])
    rows.append(("W5 vs our W1 at the same count", ratio(w5, w56Baseline), "<= 1.25 x"))
    rows.append(("W6 vs our W1 at the same count", ratio(w6, w56Baseline), "<= 1.25 x"))
}

if shouldRun("W7") {
    let handoffs = 1_000 / scale
    print("\nW7: \(handoffs) handoffs of one host-wide category between 4 processes")
    let measured = Harness.compare([
        ("bare flock loop in 4 processes (reference)", { Harness.time { HostWideHandoffs.run("flock", handoffs: handoffs, processes: 4) } }),
        ("FileCategoryLock in 4 processes", { Harness.time { HostWideHandoffs.run("ours", handoffs: handoffs, processes: 4) } }),
    ], repetitions: repetitions)
    record(measured)
    rows.append(("W7 vs a bare flock loop", ratio(measured[1], measured[0]), "<= 1.50 x"))
}

if shouldRun("W9") {
    print("\nW9: \(20_000 / scale) operations on one serial queue (maxConcurrentOperationCount = 1)")
    let measured = Harness.compare([
        ("Foundation BlockOperation on a serial OperationQueue (reference)", { Harness.time { Workloads.foundationSerial(20_000 / scale) } }),
        ("AsyncBlockOperation on a serial AsyncOperationQueue", { Harness.time { Workloads.asyncSerial(20_000 / scale) } }),
        ("the same, with a satisfied condition each", { Harness.time { Workloads.asyncSerial(20_000 / scale, conditioned: true) } }),
    ], repetitions: repetitions)
    record(measured)
    rows.append(("W9 serial vs Foundation's serial queue", ratio(measured[1], measured[0]), "(no target)"))
    rows.append(("W9 serial with a condition vs without", ratio(measured[2], measured[1]), "(no target)"))
}

if shouldRun("MEMORY") {
    print("\nPeak memory for W1 (separate processes)")
    @MainActor func probeMemory(_ variant: String) -> Double? {
        guard case let .printed(peak)? = Harness.runThisExecutable(["--memory-probe", variant] + (quick ? ["--quick"] : [])) else {
            return nil // no child processes here, or the probe failed
        }
        return Double(peak)
    }
    // The peak depends on how far the adding thread gets ahead of the workers, which varies a lot
    // from run to run: take the median of several probes of each, alternating. The second
    // comparison adds to a suspended queue, so that every operation is alive at once: the worst
    // case, the same in every run.
    let probes = quick ? 1 : max(repetitions, 5)
    func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
    func listed(_ peaks: [Double]) -> String { peaks.map { String(format: "%.1f", $0) }.joined(separator: ", ") }
    for (suffix, label, target) in [("", "W1 peak memory vs Foundation", "<= 1.50 x"),
                                    ("-all-waiting", "W1 peak memory, all waiting at once", "<= 1.50 x")] {
        var foundationPeaks: [Double] = []
        var ourPeaks: [Double] = []
        for _ in 0..<probes {
            if let peak = probeMemory("foundation" + suffix) { foundationPeaks.append(peak) }
            if let peak = probeMemory("async" + suffix) { ourPeaks.append(peak) }
        }
        guard foundationPeaks.count == probes, ourPeaks.count == probes else {
            failures.append("memory probe failed")
            continue
        }
        let (foundationMemory, ourMemory) = (median(foundationPeaks), median(ourPeaks))
        let what = suffix.isEmpty ? "as W1 runs" : "all added to a suspended queue first"
        print("  \(what): Foundation \(String(format: "%.1f", foundationMemory)) MB (\(listed(foundationPeaks))), ours \(String(format: "%.1f", ourMemory)) MB (\(listed(ourPeaks)))")
        rows.append((label, String(format: "%.2f x", ourMemory / foundationMemory), target))
    }
}

print("\nRatios (ours / reference, medians from this run)")
for (label, value, target) in rows {
    let note = target.hasPrefix("(") ? target : "target \(target)"
    print("  \(label.padding(toLength: 48, withPad: " ", startingAt: 0)) \(value.padding(toLength: 9, withPad: " ", startingAt: 0)) \(note)")
}

if failures.isEmpty {
    print("\nEvery run was correct.")
} else {
    print("\nINCORRECT RUNS:")
    failures.forEach { print("  \($0)") }
    exit(1)
}
