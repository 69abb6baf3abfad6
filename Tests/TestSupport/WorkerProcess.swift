import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process of this package's `category-lock-worker`, for tests that share host-wide
/// categories between processes. Its waits are bounded, and `stop()` kills it with `SIGKILL`:
/// call it (or `defer` it) so that no process outlives its test.
public final class WorkerProcess: @unchecked Sendable { // @unchecked: `process` is only touched through its own thread-safe API
    private let process = Process()

    /// The built `category-lock-worker`, found beside the test binary (both are built into the
    /// same folder, whatever `--scratch-path` says).
    public static var executable: URL {
        let testBinary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var folder = testBinary.deletingLastPathComponent()
        while folder.path != "/" {
            let candidate = folder.appendingPathComponent("category-lock-worker")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            folder = folder.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("category-lock-worker")
    }

    /// Starts `category-lock-worker` with `arguments`.
    public init(_ arguments: [String]) throws {
        process.executableURL = Self.executable
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        try process.run()
    }

    public var pid: Int32 { process.processIdentifier }

    /// Waits until the process exits, at most `timeout` seconds: its exit status, or `nil`.
    public func waitForExit(timeout: TimeInterval = blockingTimeout) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline { return nil }
            usleep(5_000)
        }
        return process.terminationStatus
    }

    /// Kills the process with `SIGKILL` (if it still runs) and reaps it.
    public func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
        }
        _ = waitForExit(timeout: 30)
    }
}

/// A fresh temporary directory, removed by `remove()`.
public struct TemporaryDirectory: Sendable {
    public let url: URL

    public init(_ prefix: String = "operations") {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    public var path: String { url.path }

    public func file(_ name: String) -> String { url.appendingPathComponent(name).path }

    public func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

/// What the workers wrote to their shared log, checked: no two operations of a category
/// overlapped, fencing tokens grew strictly per category, every operation finished exactly once.
public struct SharedLogCheck: Sendable {
    public private(set) var problems: [String] = []
    /// Operations that began executing.
    public private(set) var begun = 0
    /// Finishes heard, by operation name.
    public private(set) var finishes: [String: Int] = [:]
    /// Workers that reached their end.
    public private(set) var workersDone = 0

    public init(logFile: String) {
        let text = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
        var holders: [String: String] = [:]
        var lastToken: [String: UInt64] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ").map(String.init)
            guard let kind = fields.first else { continue }
            switch kind {
            case "begin" where fields.count >= 4, "end" where fields.count >= 4, "holding" where fields.count >= 4:
                let name = fields[3]
                for pair in fields[2].split(separator: ",") {
                    let parts = pair.split(separator: ":").map(String.init)
                    guard parts.count == 2 else { problems.append("malformed: \(line)"); continue }
                    let category = parts[0]
                    if kind == "end" {
                        if holders[category] != name { problems.append("'\(name)' ended '\(category)' held by \(holders[category] ?? "nobody")") }
                        holders[category] = nil
                        continue
                    }
                    if let holder = holders[category] { problems.append("'\(name)' began '\(category)' while '\(holder)' held it") }
                    holders[category] = name
                    guard let token = UInt64(parts[1]) else { problems.append("'\(name)' had no token for '\(category)'"); continue }
                    if let last = lastToken[category], token <= last { problems.append("'\(name)' got token \(token) for '\(category)' after \(last)") }
                    lastToken[category] = token
                }
                if kind == "begin" { begun += 1 }
            case "finish" where fields.count >= 3:
                finishes[fields[2], default: 0] += 1
            case "done":
                workersDone += 1
            default:
                break
            }
        }
        problems += finishes.filter { $0.value != 1 }.map { "'\($0.key)' finished \($0.value) times" }
    }

    /// The latest token seen for `category`.
    public static func lastToken(of category: String, in logFile: String) -> UInt64? {
        let text = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
        var token: UInt64?
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 4, fields[0] == "begin" || fields[0] == "holding" else { continue }
            for pair in fields[2].split(separator: ",") where pair.hasPrefix("\(category):") {
                token = UInt64(pair.dropFirst(category.count + 1)) ?? token
            }
        }
        return token
    }
}

/// How many file descriptors this process has open on `path` (Linux), for tests that check that
/// nothing is left behind.
public func openFileDescriptors(on path: String) -> Int {
    let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    let target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    return descriptors.filter { descriptor in
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)")) == target
    }.count
}
