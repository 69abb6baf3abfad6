import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IntegrationsTestSupport

/// `job-service`, run from the build folder as a child process that is never left behind: its
/// standard output (where it prints its port) is collected as it comes, its standard error (its
/// logs) goes to a file. (`IntegrationsTestSupport.ChildProcess` discards standard output.)
final class JobServiceProcess: @unchecked Sendable {
    // @unchecked Sendable: `process` and the files are set up in init; their own methods are
    // thread-safe; `received` and `printedText` are behind `printedLock`.
    private let process = Process()
    private let output = Pipe()
    private let logFile: URL
    private let printedLock = NSLock()
    /// Standard output so far, gathered by the pipe's readability handler: a wait reads it
    /// without blocking on the pipe, so it ends at its deadline even if the child prints nothing.
    private var received = Data()
    private var printedText = ""

    /// `executable`: another program in job-service's place (to test this launcher itself).
    init(arguments: [String], executable: URL? = nil) throws {
        let binary = try executable ?? Self.binary()
        logFile = FileManager.default.temporaryDirectory.appendingPathComponent("job-service-\(UUID()).log")
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        process.executableURL = binary
        process.arguments = arguments
        process.standardOutput = output
        process.standardError = try FileHandle(forWritingTo: logFile)
        output.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard !data.isEmpty else {
                handle.readabilityHandler = nil // the end of its output
                return
            }
            guard let self else { return }
            self.printedLock.withLock { self.received.append(data) }
        }
        try process.run()
    }

    /// The executable built beside the tests (`swift build --build-tests` builds it), or the one
    /// `JOB_SERVICE_BINARY` names.
    private static func binary() throws -> URL {
        if let path = ProcessInfo.processInfo.environment["JOB_SERVICE_BINARY"] {
            return URL(fileURLWithPath: path)
        }
        var folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = folder.appendingPathComponent("job-service")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            folder = folder.deletingLastPathComponent()
        }
        throw TestFailure("job-service is not built next to the tests (\(CommandLine.arguments[0])): run `swift build --build-tests` first")
    }

    /// The port it prints once it listens ("job-service listening on HOST:PORT").
    func waitForPort(timeout: TimeInterval = 60) throws -> Int {
        let deadline = Date().addingTimeInterval(timeout)
        var text = ""
        while true {
            let exited = !process.isRunning // read before the output, so its last words are in
            text = printedLock.withLock { String(decoding: received, as: UTF8.self) }
            if let port = Self.port(in: text) {
                printedLock.withLock { printedText = text }
                return port
            }
            if exited || Date() >= deadline { break }
            usleep(10_000)
        }
        throw TestFailure("job-service did not start listening within \(timeout) s: \(text)\n\(log)")
    }

    /// The port in "job-service listening on HOST:PORT", once the line is complete.
    private static func port(in text: String) -> Int? {
        guard let line = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().first(where: { $0.contains("listening on") }),
              let port = line.split(separator: ":").last.flatMap({ Int($0) }), port > 0 else { return nil }
        return port
    }

    /// What it printed on standard output up to its port.
    var printed: String { printedLock.withLock { printedText } }

    var isRunning: Bool { process.isRunning }

    var log: String {
        (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
    }

    func signal(_ signal: Int32) {
        Foundation.kill(process.processIdentifier, signal)
    }

    func terminate() {
        signal(SIGTERM)
    }

    /// Waits for the process to exit: its status (nil if it did not) and when.
    func waitForExit(timeout: TimeInterval) -> Exit {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline {
            usleep(5_000)
        }
        let at = Date()
        return Exit(status: process.isRunning ? nil : process.terminationStatus, at: at)
    }

    /// Its exit status, or nil if it still runs after `timeout` seconds: `waitForExit(timeout:)`
    /// for async tests, without blocking a thread of Swift's concurrency pool.
    func exitStatus(within timeout: TimeInterval) async -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline { return nil }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        return process.terminationStatus
    }

    /// Kills it if it still runs, reaps it, and removes its log.
    func kill() {
        if process.isRunning {
            Foundation.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        output.fileHandleForReading.readabilityHandler = nil
        try? FileManager.default.removeItem(at: logFile)
    }
}

/// How a child process ended: its exit status (nil if it had not ended) and when it was seen.
struct Exit {
    let status: Int32?
    let at: Date

    /// Seconds from `start` to the exit.
    func after(_ start: Date) -> TimeInterval {
        at.timeIntervalSince(start)
    }
}

/// A minimal JSON-over-HTTP client for the service on loopback; every request times out.
struct HTTPClient: Sendable {
    let port: Int

    private func request(_ path: String, method: String, body: Data? = nil) async throws -> (Int, Data) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        request.httpBody = body
        request.timeoutInterval = 10
        if body != nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
    }

    private static func object(_ data: Data) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }

    /// The status and the JSON object answered to `body` (any text) sent with `method`.
    func send(_ method: String, _ path: String, _ body: String? = nil) async throws -> (status: Int, body: [String: Any]) {
        let (status, data) = try await request(path, method: method, body: body.map { Data($0.utf8) })
        return (status, Self.object(data))
    }

    func post(_ path: String, _ object: [String: any Sendable]) async throws -> (status: Int, body: [String: Any]) {
        let (status, data) = try await request(path, method: "POST", body: try JSONSerialization.data(withJSONObject: object))
        return (status, Self.object(data))
    }

    func get(_ path: String) async throws -> (status: Int, body: [String: Any]) {
        let (status, data) = try await request(path, method: "GET")
        return (status, Self.object(data))
    }

    func text(_ path: String) async throws -> String {
        String(decoding: try await request(path, method: "GET").1, as: UTF8.self)
    }

    /// The job `id` once `condition` holds for it; throws after `timeout` seconds.
    func waitFor(_ id: String, timeout: TimeInterval = 30, _ condition: ([String: Any]) -> Bool) async throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(timeout)
        var last: [String: Any] = [:]
        while Date() < deadline {
            let (status, job) = try await get("/jobs/\(id)")
            if status == 200 {
                last = job
                if condition(job) { return job }
            }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        throw TestFailure("job \(id) never got there; last seen: \(last)")
    }

    /// The job `id` once its state satisfies `condition`.
    func waitForState(of id: String, timeout: TimeInterval = 30, _ condition: (String) -> Bool) async throws -> [String: Any] {
        try await waitFor(id, timeout: timeout) { condition($0["state"] as? String ?? "") }
    }
}

/// What an error of `POST /jobs` says past the example body it may quote (`... "failTimes": 0}: `).
func explanation(of error: String) -> String {
    error.range(of: "0}: ").map { String(error[$0.upperBound...]) } ?? error
}
