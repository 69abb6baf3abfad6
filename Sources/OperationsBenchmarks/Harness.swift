import Foundation

/// One timed run of a workload: how long it took and whether its result was correct.
struct Run {
    let seconds: Double
    let problem: String?
}

/// Runs a workload several times and keeps the median.
struct Measurement {
    let label: String
    let runs: [Run]

    var median: Double {
        let sorted = runs.filter { $0.seconds > 0 }.map(\.seconds).sorted()
        return sorted.isEmpty ? .nan : sorted[sorted.count / 2] // no timed run: every one went wrong
    }

    var problems: [String] { runs.compactMap(\.problem) }
}

enum Harness {
    /// Runs `body` once to warm up (thread pool, allocator; its time is discarded, its
    /// correctness is not) when more than one repetition is asked for, then `repetitions` times.
    static func measure(_ label: String, repetitions: Int, _ body: () -> Run) -> Measurement {
        withoutActuallyEscaping(body) { compare([(label, $0)], repetitions: repetitions)[0] }
    }

    /// Measures workloads that are compared with one another, interleaved: each warms up once,
    /// then every round runs each of them once. On a shared machine a burst of outside load
    /// then slows all of them in the same round instead of only the one that happened to run.
    static func compare(_ workloads: [(label: String, body: () -> Run)], repetitions: Int) -> [Measurement] {
        var runs = Array(repeating: [Run](), count: workloads.count)
        if repetitions > 1 {
            for (index, workload) in workloads.enumerated() {
                if let problem = workload.body().problem {
                    runs[index].append(Run(seconds: 0, problem: "warm-up: \(problem)"))
                }
            }
        }
        for _ in 0..<repetitions {
            for (index, workload) in workloads.enumerated() {
                runs[index].append(workload.body())
            }
        }
        let measurements = zip(workloads, runs).map { Measurement(label: $0.label, runs: $1) }
        measurements.forEach(report)
        return measurements
    }

    private static func report(_ measurement: Measurement) {
        let status = measurement.problems.isEmpty ? "ok" : "WRONG: \(measurement.problems[0])"
        let each = measurement.runs.filter { $0.seconds > 0 }.map { String(format: "%.3f", $0.seconds) }.joined(separator: " ")
        print("  \(measurement.label.padding(toLength: 58, withPad: " ", startingAt: 0)) \(format(measurement.median)) s  (\(status); runs: \(each))")
    }

    /// Times `body`, which returns a description of anything that went wrong (nil if correct).
    static func time(_ body: () -> String?) -> Run {
        let start = DispatchTime.now().uptimeNanoseconds
        let problem = body()
        let end = DispatchTime.now().uptimeNanoseconds
        return Run(seconds: Double(end - start) / 1e9, problem: problem)
    }

    /// What a child process of this executable came to.
    enum ChildOutcome {
        /// It exited with status 0, having printed this (trimmed).
        case printed(String)
        /// It could not start, exited with another status, or was killed.
        case failed(String)
    }

    /// Runs this executable again with `arguments` and waits for it; `nil` where there are no
    /// child processes.
    static func runThisExecutable(_ arguments: [String]) -> ChildOutcome? {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        return nil
        #else
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        do { try process.run() } catch { return .failed("cannot start a child process: \(error)") }
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            let ending = process.terminationReason == .exit ? "exited with" : "was killed by signal"
            return .failed("the child process \(ending) \(process.terminationStatus)")
        }
        return .printed(output.trimmingCharacters(in: .whitespacesAndNewlines))
        #endif
    }

    /// Runs this executable again with `arguments`, in a child process that times its workload
    /// and prints the seconds (or what went wrong), so that nothing the workload leaves running
    /// outlives it. Where there are no child processes, times `here` in this process instead.
    static func timeInChildProcess(_ arguments: [String], orHere here: () -> String?) -> Run {
        switch runThisExecutable(arguments) {
        case nil:
            return time(here)
        case let .failed(problem)?:
            return Run(seconds: 0, problem: problem)
        case let .printed(text)?:
            guard let seconds = Double(text) else {
                return Run(seconds: 0, problem: text.isEmpty ? "the child process printed nothing" : text)
            }
            return Run(seconds: seconds, problem: nil)
        }
    }

    static func format(_ seconds: Double) -> String {
        String(format: "%7.3f", seconds)
    }
}

/// The peak resident memory of this process, in megabytes.
///
/// On Linux this reads `VmHWM` from /proc/self/status: `ru_maxrss` survives `exec`, so a child
/// process would report its parent's peak.
func peakResidentMegabytes() -> Double {
    #if os(Linux)
    if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
       let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
       let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "") {
        return kilobytes / 1024
    }
    #endif
    var usage = rusage()
    #if canImport(Darwin)
    getrusage(RUSAGE_SELF, &usage)
    return Double(usage.ru_maxrss) / 1_048_576 // bytes
    #else
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return Double(usage.ru_maxrss) / 1024 // kilobytes
    #endif
}

/// A thread-safe counter for workload bodies.
final class Tally: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched while holding `lock`.
    private let lock = NSLock()
    private var value = 0

    func add() {
        lock.lock()
        value += 1
        lock.unlock()
    }

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}

/// Checks that at most one piece of work per category runs at a time.
final class ExclusionCheck: @unchecked Sendable {
    // @unchecked Sendable: `inside` and `violations` are only touched while holding `lock`.
    private let lock = NSLock()
    private var inside: [Int]
    private var violations = 0

    init(categories: Int) {
        inside = Array(repeating: 0, count: categories)
    }

    func enter(_ category: Int) {
        lock.lock()
        inside[category] += 1
        if inside[category] > 1 { violations += 1 }
        lock.unlock()
    }

    func leave(_ category: Int) {
        lock.lock()
        inside[category] -= 1
        lock.unlock()
    }

    var violationCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return violations
    }
}
