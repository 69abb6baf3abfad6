import Conditions
import Foundation
import Observers
import Operations

/// Makes the operation that runs a job: a `RetryOperation` holding the job's account (a mutually
/// exclusive category) from its first attempt to its last, backoff included, whose attempts each
/// work `durationMs`, fail while fewer than `failTimes` have run, and time out.
enum JobOperation {
    static let maxAttempts = 3
    static let backoff = BackoffPolicy.exponential(initial: 0.05, multiplier: 2, maximum: 1)

    static func make(for job: Job, _ request: JobRequest, timeout: TimeInterval, store: JobStore) -> AsyncOperation {
        let id = job.id
        let retry = RetryOperation(maxAttempts: maxAttempts, backoff: backoff) { attempt in
            let work = AsyncBlockOperation { finish in
                store.attemptStarted(id)
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(request.durationMs)) {
                    finish(attempt <= request.failTimes ? AttemptFailed(attempt: attempt) : nil)
                }
            }
            work.name = "job \(id) attempt \(attempt)"
            work.addObserver(TimeoutObserver(timeout: timeout))
            return work
        }
        retry.name = "job \(id)"
        retry.addCondition(ExclusiveCategory("account:\(request.account)"))
        retry.addObserver(BlockObserver(
            didStart: { _ in store.started(id, at: Date()) },
            didFinish: { operation, errors in
                let state: JobState = operation.isCancelled ? .cancelled : errors.isEmpty ? .succeeded : .failed
                store.finished(id, state: state, at: Date())
            }
        ))
        return retry
    }
}
