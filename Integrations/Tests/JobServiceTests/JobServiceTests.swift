import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IntegrationsTestSupport
import Testing

/// Starts `job-service` as a child process, posts a few hundred jobs over 20 accounts, scrapes
/// its metrics, sends SIGTERM in the middle, and checks what the service promises: no two jobs
/// of one account ran at once; every job accepted before the signal ended as succeeded, failed
/// after its retries, or cancelled by the shutdown; every job posted after it got 503; the
/// process exited 0 within its grace period.
@Suite(.serialized) struct JobServiceTests {
    private static let graceSeconds = 10.0
    /// Long enough for this test to post its 150 late jobs and read every final state on a busy
    /// machine, after a drain that may take only milliseconds.
    private static let lingerSeconds = 4.0

    @Test func aDrainOnSIGTERM_keepsEveryPromise() async throws {
        let service = try JobServiceProcess(arguments: ["--port", "0", "--grace-seconds", String(Self.graceSeconds), "--linger-seconds", String(Self.lingerSeconds), "--job-timeout-seconds", "2"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())

        // Before the signal: 150 jobs over 20 accounts, some failing once, some every time.
        var accepted: [String: (account: String, failTimes: Int)] = [:]
        for index in 0..<150 {
            let account = "account-\(index % 20)"
            let failTimes = index % 7 == 0 ? 3 : index % 5 == 0 ? 1 : 0
            // The last 40 take long, two per account, so that some still wait when the signal comes.
            let durationMs = index >= 110 ? 400 : 5 + index % 4 * 10
            let (status, body) = try await client.post("/jobs", ["account": account, "durationMs": durationMs, "failTimes": failTimes])
            #expect(status == 202, "POST /jobs answered \(status): \(body)")
            if let id = body["id"] as? String { accepted[id] = (account, failTimes) }
        }
        #expect(accepted.count == 150)

        let (status, malformed) = try await client.post("/jobs", ["account": 42])
        #expect(status == 400 && (malformed["error"] as? String)?.isEmpty == false)
        #expect(try await client.get("/jobs/no-such-job").status == 404)

        let metrics = try await client.text("/metrics")
        for name in ["operations_added_total", "operations_started_total", "operations_finished_total", "operations_waiting", "operations_running", "operations_wait_duration_seconds_count"] {
            #expect(metrics.contains("\(name){queue=\"jobs\""), "/metrics lacks \(name):\n\(metrics)")
        }

        // The signal, in the middle of the work; then the other 150 posts.
        let signalled = Date()
        service.terminate()
        var firstRefused = false
        var acceptedAfterRefusal = 0
        for index in 150..<300 {
            // A service that has drained and lingered may be gone already: refused too.
            guard let (status, _) = try? await client.post("/jobs", ["account": "account-\(index % 20)", "durationMs": 5]) else {
                firstRefused = true
                break
            }
            if status == 503 {
                firstRefused = true
            } else if firstRefused {
                acceptedAfterRefusal += 1
            } else if status == 202, Date().timeIntervalSince(signalled) > 2 {
                // (Within the first moments, the service may not have received the signal yet.)
                Issue.record("a job posted \(Date().timeIntervalSince(signalled)) s after SIGTERM was accepted")
            }
        }
        #expect(firstRefused && acceptedAfterRefusal == 0)

        // While the queue drains, GET keeps answering: follow every accepted job to its end.
        var final: [String: [String: Any]] = [:]
        let deadline = Date().addingTimeInterval(Self.graceSeconds + 5)
        while final.count < accepted.count, Date() < deadline, service.isRunning {
            for id in accepted.keys where final[id] == nil {
                guard let (status, job) = try? await client.get("/jobs/\(id)") else { break }
                #expect(status == 200)
                if let state = job["state"] as? String, ["succeeded", "failed", "cancelled"].contains(state) {
                    final[id] = job
                }
            }
        }
        #expect(final.count == accepted.count, "only \(final.count) of \(accepted.count) accepted jobs were seen to end")

        let exit = service.waitForExit(timeout: Self.graceSeconds + 10)
        #expect(exit.status == 0, "job-service exited with \(String(describing: exit.status)); its log:\n\(service.log)")
        #expect(exit.after(signalled) < Self.graceSeconds, "job-service took \(exit.after(signalled)) s to exit after SIGTERM")

        // Every job ended as it should have.
        for (id, job) in final {
            let state = job["state"] as? String
            let attempts = job["attempts"] as? Int ?? -1
            switch state {
            case "succeeded":
                #expect(attempts == accepted[id]!.failTimes + 1, "\(id): succeeded after \(attempts) attempts")
            case "failed":
                #expect(attempts == 3 && accepted[id]!.failTimes >= 3, "\(id): failed after \(attempts) attempts")
            default:
                #expect(state == "cancelled")
            }
        }
        #expect(final.values.contains { $0["state"] as? String == "cancelled" }, "the signal came in the middle: some jobs were still waiting")
        #expect(final.values.contains { $0["state"] as? String == "succeeded" })

        // No two jobs of one account ran at once.
        let byAccount = Dictionary(grouping: final.values) { $0["account"] as? String ?? "" }
        for (account, jobs) in byAccount {
            let runs = jobs.compactMap { job -> (Double, Double)? in
                guard let start = job["startedAt"] as? Double, let end = job["finishedAt"] as? Double else { return nil }
                return (start, end)
            }.sorted { $0.0 < $1.0 }
            for (before, after) in zip(runs, runs.dropFirst()) {
                #expect(after.0 >= before.1, "two jobs of \(account) overlapped: \(before) and \(after)")
            }
        }
    }
}

/// The launcher the job-service tests share keeps its waits bounded.
@Suite struct JobServiceProcessTests {
    @Test func waitingForThePort_endsAtTheDeadline_whenTheChildPrintsNothing() throws {
        let silent = try JobServiceProcess(arguments: ["30"], executable: URL(fileURLWithPath: "/bin/sleep"))
        defer { silent.kill() }
        let start = Date()
        #expect(throws: TestFailure.self) { try silent.waitForPort(timeout: 0.5) }
        #expect(Date().timeIntervalSince(start) < 20, "the wait outlived its deadline by far")
        #expect(silent.isRunning)
    }
}
