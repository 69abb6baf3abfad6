import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IntegrationsTestSupport
import Testing

/// Probes of what Integrations/README.md promises about `job-service` that `JobServiceTests`
/// does not check: its options, the JSON of `GET /jobs/{id}`, timeouts, retries, `/metrics`,
/// and the drain and linger after SIGTERM. Each probe starts its own `job-service` (a child
/// process killed by `defer` whatever happens), bounds every wait, and cites the sentence it checks.
@Suite(.serialized) struct JobServiceProbeTests3 {
    // README: "`--port N` (default 8080; 0 picks a free port and prints it)"; "`durationMs` and
    // `failTimes` default to 0"; "`GET /jobs/{id}` answers `200` with `{"id", "account", "state",
    // "attempts", "startedAt", "finishedAt", "waitsFor"}`"; "`waitsFor` ... is empty otherwise"
    @Test func aJobGivenOnlyAnAccount_succeedsAfterOneAttempt_andItsJSONHasEveryKey() async throws {
        // Given a service on a port it picked and printed
        let service = try JobServiceProcess(arguments: ["--port", "0"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())
        #expect(service.printed.contains("job-service listening on 127.0.0.1:\(client.port)"), "\(service.printed)")

        // When a job is posted with its account alone
        let (status, posted) = try await client.send("POST", "/jobs", #"{"account": "defaults"}"#)
        #expect(status == 202, "\(posted)")
        let id = try #require(posted["id"] as? String)
        let job = try await client.waitForState(of: id) { ["succeeded", "failed", "cancelled"].contains($0) }

        // Then it succeeded after one attempt, and its JSON has exactly the documented keys
        #expect(job["state"] as? String == "succeeded", "\(job)")
        #expect(job["attempts"] as? Int == 1, "\(job)")
        #expect(job["id"] as? String == id && job["account"] as? String == "defaults")
        #expect(Set(job.keys) == ["id", "account", "state", "attempts", "startedAt", "finishedAt", "waitsFor"], "\(job.keys.sorted())")
        #expect((job["waitsFor"] as? [Any])?.isEmpty == true, "\(job)")
        let startedAt = try #require(job["startedAt"] as? Double)
        let finishedAt = try #require(job["finishedAt"] as? Double)
        #expect(startedAt <= finishedAt)
    }

    // README: "`waitsFor` lists what the job waits for while it waits (the queue snapshot's
    // explanation, such as `category 'account:acme' (held by 'job 3f2...'; 1st in line)`)";
    // "the times are seconds since 1970 (fractional), absent until known"; "`attempts` counts the
    // attempts that started"
    @Test func aJobWaitingBehindAnotherOfItsAccount_saysWhoHoldsTheAccount_andHasNoTimesYet() async throws {
        // Given a service running a long job of one account
        let service = try JobServiceProcess(arguments: ["--port", "0", "--grace-seconds", "2"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())
        let account = uniqueName("acme")
        let (_, first) = try await client.send("POST", "/jobs", #"{"account": "\#(account)", "durationMs": 20000}"#)
        let holder = try #require(first["id"] as? String)
        _ = try await client.waitForState(of: holder) { $0 == "running" }

        // When a second job of that account is posted
        let (_, second) = try await client.send("POST", "/jobs", #"{"account": "\#(account)"}"#)
        let waiter = try #require(second["id"] as? String)
        let job = try await client.waitFor(waiter) { ($0["waitsFor"] as? [String])?.isEmpty == false }

        // Then it waits, says for what and behind whom, and has no times and no attempts yet
        #expect(job["state"] as? String == "waiting", "\(job)")
        #expect(job["waitsFor"] as? [String] == ["category 'account:\(account)' (held by 'job \(holder)'; 1st in line)"], "\(job)")
        #expect(job["startedAt"] == nil && job["finishedAt"] == nil, "\(job)")
        #expect(job["attempts"] as? Int == 0, "\(job)")
        service.signal(SIGTERM)
        #expect(await service.exitStatus(within: 20) == 0)
    }

    // README: "**Each attempt has a timeout** (`TimeoutObserver`), and a failing job is retried
    // with exponential backoff (50 ms, then 100 ms), **3 attempts in all**; after the third
    // failure the job is `failed`"; "`--job-timeout-seconds S` (how long one attempt may run)"
    @Test func attemptsThatOutliveTheJobTimeout_failThreeTimes_andTheJobEndsFailed() async throws {
        // Given a service whose attempts may run 0.2 s
        let service = try JobServiceProcess(arguments: ["--port", "0", "--job-timeout-seconds", "0.2"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())

        // When a job whose every attempt would work 30 s is posted
        let (_, posted) = try await client.send("POST", "/jobs", #"{"account": "slow", "durationMs": 30000}"#)
        let id = try #require(posted["id"] as? String)
        let job = try await client.waitForState(of: id) { ["succeeded", "failed", "cancelled"].contains($0) }

        // Then each attempt timed out, and after the third the job failed
        #expect(job["state"] as? String == "failed", "\(job)")
        #expect(job["attempts"] as? Int == 3, "\(job)")
    }

    // README: "A job is a `RetryOperation` with `ExclusiveCategory("account:<account>")`: it
    // holds its account from its first attempt to its last, backoff included"; "the first
    // `failTimes` attempts fail"
    @Test func aJobThatFailsTwice_holdsItsAccountThroughItsBackoff_andSucceedsOnItsThirdAttempt() async throws {
        // Given a service
        let service = try JobServiceProcess(arguments: ["--port", "0"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())
        let account = uniqueName("retrying")

        // When a job failing its first two attempts is posted, then another of its account
        let (_, first) = try await client.send("POST", "/jobs", #"{"account": "\#(account)", "durationMs": 30, "failTimes": 2}"#)
        let (_, second) = try await client.send("POST", "/jobs", #"{"account": "\#(account)", "durationMs": 1}"#)
        let retrying = try #require(first["id"] as? String)
        let other = try #require(second["id"] as? String)
        let a = try await client.waitForState(of: retrying) { ["succeeded", "failed", "cancelled"].contains($0) }
        let b = try await client.waitForState(of: other) { ["succeeded", "failed", "cancelled"].contains($0) }

        // Then the first succeeded on its third attempt, and the second started only after it finished
        #expect(a["state"] as? String == "succeeded" && a["attempts"] as? Int == 3, "\(a)")
        #expect(b["state"] as? String == "succeeded" && b["attempts"] as? Int == 1, "\(b)")
        let aFinished = try #require(a["finishedAt"] as? Double)
        let bStarted = try #require(b["startedAt"] as? Double)
        #expect(bStarted >= aFinished, "\(b) started before \(a) finished")
    }

    // README: "A body that is not such JSON answers `400 {"error": "..."}` saying what is wrong"
    @Test func bodiesThatAreNotAJob_answer400_withAnErrorNamingWhatIsWrong() async throws {
        // Given a service
        let service = try JobServiceProcess(arguments: ["--port", "0"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())

        // When bodies that are not such JSON are posted (with the key each error should name, if any)
        let bodies: [(body: String, names: String?)] = [
            ("not json at all", nil),
            ("", nil),
            ("[]", nil),
            ("{}", "'account'"),
            (#"{"account": 42}"#, "'account'"),
            (#"{"account": "   "}"#, "'account'"),
            (#"{"account": "acme", "durationMs": "fast"}"#, "'durationMs'"),
            (#"{"account": "acme", "durationMs": -5}"#, "'durationMs'"),
            (#"{"account": "acme", "failTimes": "twice"}"#, "'failTimes'"),
        ]
        for (body, names) in bodies {
            let (status, answer) = try await client.send("POST", "/jobs", body)

            // Then each answers 400 with an error, whose explanation (past the example body it quotes) names the key at fault
            #expect(status == 400, "\(body) answered \(status): \(answer)")
            let error = answer["error"] as? String ?? ""
            #expect(!error.isEmpty, "\(body): \(answer)")
            if let names { #expect(explanation(of: error).contains(names), "\(body): \(error)") }
        }
    }

    // README: "SIGTERM drains the queue gracefully. ... jobs that run may finish ...; `GET` keeps
    // answering while the drain runs, and a moment after it, so that clients can read the final
    // states; the process exits 0 within `--grace-seconds`"; "`--linger-seconds S` (how long GET
    // still answers after the drain ...)"
    @Test func aJobRunningAtSIGTERM_finishes_andItsFinalStateStaysReadableDuringTheLinger() async throws {
        // Given a service with a long grace period and linger, running a job of 1.5 s
        let service = try JobServiceProcess(arguments: ["--port", "0", "--grace-seconds", "10", "--linger-seconds", "3"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())
        let (_, posted) = try await client.send("POST", "/jobs", #"{"account": "draining", "durationMs": 1500}"#)
        let id = try #require(posted["id"] as? String)
        _ = try await client.waitForState(of: id) { $0 == "running" }

        // When SIGTERM arrives
        service.signal(SIGTERM)

        // Then the job finishes as it would have, GET still answers once it has, and new jobs get 503
        let job = try await client.waitForState(of: id) { ["succeeded", "failed", "cancelled"].contains($0) }
        #expect(job["state"] as? String == "succeeded", "\(job)")
        let (again, _) = try await client.send("GET", "/jobs/\(id)")
        #expect(again == 200)
        let (refused, answer) = try await client.send("POST", "/jobs", #"{"account": "late"}"#)
        #expect(refused == 503, "\(answer)")
        #expect(await service.exitStatus(within: 30) == 0, "\(service.log)")
    }

    // README: "From the signal on, ... jobs that wait are cancelled (`cancelled`); `GET` keeps
    // answering while the drain runs, and a moment after it"; "the times are seconds since 1970
    // (fractional), absent until known"; "`attempts` counts the attempts that started";
    // "`GET /metrics` serves the Prometheus text of the queue's metrics"; MetricsOperationLogger:
    // "`operations_cancelled_total` | operations that were cancelled"
    @Test func aJobWaitingAtSIGTERM_isCancelledWithoutEverStarting_andTheMetricsStillServedCountIt() async throws {
        // Given a service running a job of 1.5 s, and a second job of its account waiting behind it
        let service = try JobServiceProcess(arguments: ["--port", "0", "--grace-seconds", "10", "--linger-seconds", "3"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())
        let account = uniqueName("queued")
        let (_, first) = try await client.send("POST", "/jobs", #"{"account": "\#(account)", "durationMs": 1500}"#)
        let running = try #require(first["id"] as? String)
        _ = try await client.waitForState(of: running) { $0 == "running" }
        let (_, second) = try await client.send("POST", "/jobs", #"{"account": "\#(account)"}"#)
        let waiting = try #require(second["id"] as? String)
        _ = try await client.waitForState(of: waiting) { $0 == "waiting" }

        // When SIGTERM arrives
        service.signal(SIGTERM)

        // Then the waiting job ends cancelled, never started, with no attempt and a finish time
        let job = try await client.waitForState(of: waiting) { ["succeeded", "failed", "cancelled"].contains($0) }
        #expect(job["state"] as? String == "cancelled", "\(job)")
        #expect(job["attempts"] as? Int == 0, "\(job)")
        #expect(job["startedAt"] == nil && job["finishedAt"] is Double, "\(job)")
        #expect((job["waitsFor"] as? [Any])?.isEmpty == true, "\(job)")
        // And once the running job has finished, /metrics (still served) counts the cancellation
        _ = try await client.waitForState(of: running) { ["succeeded", "failed", "cancelled"].contains($0) }
        let text = try await client.text("/metrics")
        #expect(text.contains("operations_cancelled_total{queue=\"jobs\"} 1"), "\(text)")
        #expect(await service.exitStatus(within: 30) == 0, "\(service.log)")
    }

    // README: "**SIGTERM drains the queue gracefully.** From the signal on, `POST /jobs` answers
    // `503`; jobs that run may finish ...; the process exits 0 within `--grace-seconds`" (a
    // deployment that sends SIGTERM more than once)
    @Test func aSecondSIGTERMDuringTheDrain_doesNotCutItShort() async throws {
        // Given a service running a job of 1.5 s
        let service = try JobServiceProcess(arguments: ["--port", "0", "--grace-seconds", "10", "--linger-seconds", "1"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())
        let (_, posted) = try await client.send("POST", "/jobs", #"{"account": "twice", "durationMs": 1500}"#)
        let id = try #require(posted["id"] as? String)
        _ = try await client.waitForState(of: id) { $0 == "running" }

        // When SIGTERM arrives twice
        service.signal(SIGTERM)
        try await Task.sleep(nanoseconds: 100_000_000)
        service.signal(SIGTERM)

        // Then the running job still finishes, and the process exits 0
        let job = try await client.waitForState(of: id) { ["succeeded", "failed", "cancelled"].contains($0) }
        #expect(job["state"] as? String == "succeeded", "\(job)")
        #expect(await service.exitStatus(within: 30) == 0, "\(service.log)")
    }

    // README: "Jobs still running when the grace period is nearly over are cancelled, so the exit
    // stays in time"; "the process exits 0 within `--grace-seconds`"; "`state` is ... `cancelled`"
    @Test func aJobOutlivingTheGracePeriod_isCancelled_andTheProcessStillExits0() async throws {
        // Given a service with 2 s of grace and 1 s of linger, running a job of 60 s (no timeout before)
        let service = try JobServiceProcess(arguments: ["--port", "0", "--grace-seconds", "2", "--linger-seconds", "1", "--job-timeout-seconds", "100"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())
        let (_, posted) = try await client.send("POST", "/jobs", #"{"account": "endless", "durationMs": 60000}"#)
        let id = try #require(posted["id"] as? String)
        _ = try await client.waitForState(of: id) { $0 == "running" }

        // When SIGTERM arrives
        service.signal(SIGTERM)

        // Then the job is read as cancelled during the linger, and the process exits 0 long before the job would have ended
        let job = try await client.waitForState(of: id, timeout: 15) { ["succeeded", "failed", "cancelled"].contains($0) }
        #expect(job["state"] as? String == "cancelled", "\(job)")
        #expect(await service.exitStatus(within: 15) == 0, "\(service.log)")
    }

    // README: "`--grace-seconds S` (default 10)" (0 is accepted: "0 or more"); "the process exits 0
    // within `--grace-seconds`"
    @Test func aGracePeriodOfZero_stillExits0_afterSIGTERM() async throws {
        // Given an idle service with no grace period at all
        let service = try JobServiceProcess(arguments: ["--port", "0", "--grace-seconds", "0"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())
        #expect(try await client.send("GET", "/jobs/none").status == 404)

        // When SIGTERM arrives
        service.signal(SIGTERM)

        // Then it exits 0
        let status = await service.exitStatus(within: 15)
        #expect(status == 0, "exit status \(String(describing: status)); log:\n\(service.log)")
    }

    // README: "`--linger-seconds S` (... never more than half the grace period)"; "the process
    // exits 0 within `--grace-seconds`"
    @Test func aLingerLongerThanHalfTheGrace_isCut_soTheProcessExits0InTime() async throws {
        // Given a service with 2 s of grace asked to linger 60 s
        let service = try JobServiceProcess(arguments: ["--port", "0", "--grace-seconds", "2", "--linger-seconds", "60"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())
        let (_, posted) = try await client.send("POST", "/jobs", #"{"account": "brief"}"#)
        let id = try #require(posted["id"] as? String)
        _ = try await client.waitForState(of: id) { $0 == "succeeded" }

        // When SIGTERM arrives
        service.signal(SIGTERM)

        // Then it exits 0, far sooner than the linger it was asked for
        let status = await service.exitStatus(within: 20)
        #expect(status == 0, "exit status \(String(describing: status)); log:\n\(service.log)")
    }

    // README: "`GET /metrics` serves the Prometheus text of the queue's metrics (`operations_*`,
    // labelled `queue="jobs"`)"; MetricsOperationLogger: "The children of groups (a retry's
    // attempts, ...) are left out unless `includesGroupChildren` is true"; "`operations_failed_total`
    // | operations that finished with errors without being cancelled"
    @Test func metricsCountJobsNotAttempts_andEveryOperationsSampleIsLabelledJobs() async throws {
        // Given a service
        let service = try JobServiceProcess(arguments: ["--port", "0"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())

        // When four jobs end: two succeed (one after a retry), two fail three times
        var ids: [String] = []
        for (index, failTimes) in [0, 1, 3, 5].enumerated() {
            let (_, posted) = try await client.send("POST", "/jobs", #"{"account": "metered-\#(index)", "durationMs": 5, "failTimes": \#(failTimes)}"#)
            ids.append(try #require(posted["id"] as? String))
        }
        for id in ids { _ = try await client.waitForState(of: id) { ["succeeded", "failed", "cancelled"].contains($0) } }
        let text = try await client.text("/metrics")

        // Then the counters count the four jobs, not their eight attempts; the gauges are back at 0
        let samples = text.split(separator: "\n").filter { $0.hasPrefix("operations_") }
        #expect(!samples.isEmpty)
        #expect(samples.allSatisfy { $0.contains("queue=\"jobs\"") }, "\(samples)")
        func value(_ name: String) -> Double? {
            samples.first { $0.hasPrefix("\(name){queue=\"jobs\"} ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
        }
        #expect(value("operations_added_total") == 4, "\(text)")
        #expect(value("operations_started_total") == 4, "\(text)")
        #expect(value("operations_finished_total") == 4, "\(text)")
        #expect(value("operations_failed_total") == 2, "\(text)")
        #expect(value("operations_waiting") == 0 && value("operations_running") == 0, "\(text)")
    }

    // README: "`--log-level LEVEL` (default `info`; logs go to standard error)"; Running
    // operations in a service: "`info` for a start and a finish, ... `warning` for a finish with
    // errors. Events below the Logger's `logLevel` are not even made"
    @Test func atLogLevelWarning_aFailedJobIsLogged_butNoStartOrSuccess() async throws {
        // Given a service logging at warning
        let service = try JobServiceProcess(arguments: ["--port", "0", "--log-level", "warning"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())

        // When one job fails and another succeeds, and the service stops
        let (_, failing) = try await client.send("POST", "/jobs", #"{"account": "logged-a", "failTimes": 3}"#)
        let (_, passing) = try await client.send("POST", "/jobs", #"{"account": "logged-b"}"#)
        let failed = try #require(failing["id"] as? String)
        let succeeded = try #require(passing["id"] as? String)
        _ = try await client.waitForState(of: failed) { $0 == "failed" }
        _ = try await client.waitForState(of: succeeded) { $0 == "succeeded" }
        service.signal(SIGTERM)
        #expect(await service.exitStatus(within: 20) == 0)

        // Then standard error holds the failed job's warning, and nothing of the successful job
        let log = service.log
        let lines = log.split(separator: "\n")
        #expect(lines.contains { $0.contains("warning") && $0.contains("job \(failed)") }, "\(log)")
        #expect(!lines.contains { $0.contains("job \(succeeded)") }, "\(log)")
        #expect(!lines.contains { $0.contains(" info ") && $0.contains("operation.event=started") }, "\(log)")
    }
}
