import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process started from an executable built beside the test binary. Its waits are
/// bounded, and `stop()` kills it with `SIGKILL`: `defer` it, so that no process outlives its test.
public final class ChildProcess: @unchecked Sendable { // @unchecked: `process` is only touched through its own thread-safe API
    private let process = Process()

    /// Starts the executable `name`, built into the test binary's folder, with `arguments`.
    public init(_ name: String, _ arguments: [String]) throws {
        let folder = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        process.executableURL = folder.appendingPathComponent(name)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        try process.run()
    }

    public var pid: Int32 { process.processIdentifier }

    /// Waits until the process exits, at most `timeout` seconds: its exit status, or `nil`.
    public func waitForExit(timeout: TimeInterval = 600) async -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline { return nil }
            try? await Task.sleep(nanoseconds: 5_000_000)
        }
        return process.terminationStatus
    }

    /// Kills the process with `SIGKILL`, if it still runs, and reaps it.
    public func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// What processes sharing categories wrote to their shared log ("begin <pid> <category>:<token>,...
/// <operation>", "end ...", "lost ...", "finish <pid> <operation> ...", "done <pid> <count>"),
/// checked: no two operations of a category overlapped, tokens grew strictly per category, every
/// operation finished exactly once.
/// Appends `line` to the shared log at `path` as the workers do (one `write` with `O_APPEND`, so
/// that it never lands inside another process's line).
public func appendToSharedLog(_ line: String, at path: String) {
    let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
    guard descriptor >= 0 else { return }
    defer { close(descriptor) }
    let bytes = Array((line + "\n").utf8)
    _ = write(descriptor, bytes, bytes.count)
}

public struct SharedLogCheck: Sendable {
    public private(set) var problems: [String] = []
    public private(set) var begun = 0
    public private(set) var finishes: [String: Int] = [:]
    public private(set) var workersDone = 0
    /// How many holders logged that the lock counted their lease lost ("lost <pid>
    /// <category>:<token>,... <operation>"); their categories count as free from that line on.
    public private(set) var leasesLost = 0
    /// The latest token of each category.
    public private(set) var lastToken: [String: UInt64] = [:]

    public init(logFile: String) {
        let text = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
        var holders: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ").map(String.init)
            switch fields.first {
            case "begin", "holding", "end":
                guard fields.count >= 4 else { problems.append("malformed: \(line)"); continue }
                record(fields[0], name: fields[3], tokens: fields[2], holders: &holders)
            case "finish" where fields.count >= 3:
                finishes[fields[2], default: 0] += 1
            case "done":
                workersDone += 1
            case "lost":
                guard fields.count >= 4 else { problems.append("malformed: \(line)"); continue }
                leasesLost += 1
                record("end", name: fields[3], tokens: fields[2], holders: &holders) // free from here
            default:
                break
            }
        }
        problems += finishes.filter { $0.value != 1 }.map { "'\($0.key)' finished \($0.value) times" }
    }

    private mutating func record(_ kind: String, name: String, tokens: String, holders: inout [String: String]) {
        if kind == "begin" { begun += 1 }
        for pair in tokens.split(separator: ",") {
            let parts = pair.split(separator: ":").map(String.init)
            guard parts.count == 2 else { problems.append("malformed tokens of '\(name)'"); continue }
            let category = parts[0]
            if kind == "end" {
                holders[category] = nil
                continue
            }
            if let holder = holders[category], kind == "begin" {
                problems.append("'\(name)' began '\(category)' while '\(holder)' held it")
            }
            holders[category] = name
            guard let token = UInt64(parts[1]) else { problems.append("'\(name)' had no token for '\(category)'"); continue }
            if let last = lastToken[category], token <= last {
                problems.append("'\(name)' got token \(token) for '\(category)' after \(last)")
            }
            lastToken[category] = token
        }
    }
}
