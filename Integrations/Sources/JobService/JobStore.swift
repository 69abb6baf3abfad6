import Foundation
import Operations

/// Every job the service accepted, by id: safe to use from any thread.
final class JobStore: Sendable {
    private let jobs = LockedValue<[String: Job]>([:])

    func insert(_ job: Job) {
        jobs.withLock { $0[job.id] = job }
    }

    /// Forgets a job that was refused after all (the queue began shutting down meanwhile).
    func remove(_ id: String) {
        jobs.withLock { $0[id] = nil }
    }

    func attemptStarted(_ id: String) {
        jobs.withLock { $0[id]?.attempts += 1 }
    }

    func started(_ id: String, at date: Date) {
        jobs.withLock { jobs in
            jobs[id]?.state = .running
            jobs[id]?.startedAt = date
        }
    }

    func finished(_ id: String, state: JobState, at date: Date) {
        let operation = jobs.withLock { jobs -> AsyncOperation? in
            defer {
                jobs[id]?.state = state
                jobs[id]?.finishedAt = date
                jobs[id]?.operation = nil
            }
            return jobs[id]?.operation
        }
        _ = operation // released outside the lock
    }

    /// The job's JSON, or `nil` for an unknown id.
    func response(for id: String) -> JobResponse? {
        guard let (job, operation) = jobs.withLock({ jobs in jobs[id].map { ($0, $0.operation) } }) else { return nil }
        let waitsFor = job.state == .waiting ? (operation?.snapshot().waitsFor.map(\.description) ?? []) : []
        return job.response(waitsFor: waitsFor)
    }
}
