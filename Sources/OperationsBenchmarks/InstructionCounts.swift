import Foundation

/// `--instructions`: the benchmark's ratios in instructions instead of seconds.
///
/// Wall-clock ratios swing widely on a shared machine; instruction counts repeat within a few
/// percent. Each workload runs once, alone, in a child process of this executable under
/// `valgrind --tool=callgrind` (which must be on the PATH), and the totals are compared pairwise.
enum InstructionCounts {
    struct Comparison {
        let label: String
        let ours: String
        let reference: String
        let target: String
    }

    static let comparisons = [
        Comparison(label: "W1 vs Foundation BlockOperation", ours: "w1-ours", reference: "w1-foundation", target: "<= 1.00 x"),
        Comparison(label: "W2 vs 8 serial queues", ours: "w2-ours", reference: "w2-reference", target: "<= 1.30 x"),
        Comparison(label: "W3 vs Foundation addOperations-and-wait", ours: "w3-ours", reference: "w3-reference", target: "<= 1.10 x"),
        Comparison(label: "W4 chain 10k vs our 10k plain", ours: "w4-chain", reference: "w4-plain", target: "(no target)"),
        Comparison(label: "W5 vs our plain at the same count", ours: "w5-ours", reference: "w5-plain", target: "<= 1.20 x"),
        Comparison(label: "W6 vs our plain at the same count", ours: "w6-ours", reference: "w5-plain", target: "<= 1.20 x"),
        Comparison(label: "W9 serial vs Foundation's serial queue", ours: "w9-ours", reference: "w9-reference", target: "(no target)"),
        Comparison(label: "W9 serial with a condition vs without", ours: "w9-conditioned", reference: "w9-ours", target: "(no target)"),
    ]

    /// Counts every workload the comparisons name and prints the table; the exit status.
    static func run(only: String?) -> Int32 {
        let chosen = comparisons.filter { only == nil || $0.label.uppercased().hasPrefix(only!) }
        var totals: [String: Double] = [:]
        print("Instructions (millions), one run of each workload under callgrind\n")
        for name in Set(chosen.flatMap { [$0.ours, $0.reference] }).sorted() {
            guard let total = count(name) else {
                print("error: could not count '\(name)' (is valgrind installed and on the PATH?)")
                return 2
            }
            totals[name] = total
            print("  \(name.padding(toLength: 16, withPad: " ", startingAt: 0)) \(String(format: "%10.1f", total / 1_000_000))")
        }
        print("\nRatios (ours / reference, instructions)")
        for comparison in chosen {
            guard let ours = totals[comparison.ours], let reference = totals[comparison.reference] else { continue }
            let ratio = String(format: "%.2f x", ours / reference)
            let note = comparison.target.hasPrefix("(") ? comparison.target : "target \(comparison.target)"
            print("  \(comparison.label.padding(toLength: 48, withPad: " ", startingAt: 0)) \(ratio.padding(toLength: 9, withPad: " ", startingAt: 0)) \(note)")
        }
        return 0
    }

    /// The instructions one run of `workload` takes, from callgrind's summary.
    private static func count(_ workload: String) -> Double? {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        return nil
        #else
        let output = FileManager.default.temporaryDirectory
            .appendingPathComponent("operations-callgrind-\(ProcessInfo.processInfo.processIdentifier)-\(workload).out")
        defer { try? FileManager.default.removeItem(at: output) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["valgrind", "--tool=callgrind", "--callgrind-out-file=\(output.path)",
                             CommandLine.arguments[0], "--profile", workload, "--iterations", "1"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        process.waitUntilExit()
        guard process.terminationStatus == 0, let text = try? String(contentsOf: output, encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("summary:") || line.hasPrefix("totals:") {
            if let value = line.split(separator: " ").last.flatMap({ Double($0) }) { return value }
        }
        return nil
        #endif
    }
}
