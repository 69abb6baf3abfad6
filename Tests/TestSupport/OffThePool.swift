import Foundation

/// Runs `body`, a long stretch of pure computation (an exhaustive exploration, say), on threads
/// kept for such work instead of the shared pool's, and returns what it returns. It stays part
/// of the calling test's task, so `#expect` inside it is the test's as usual.
///
/// On Linux, Swift's tasks, `DispatchQueue.global()` and Foundation's operation queues all run on
/// Dispatch's shared threads, as many as there are cores while none of them sleeps. A test that
/// computes for minutes on two of them (a sanitizer slows the explorations tenfold) holds up every
/// other test on a 2-core machine for as long: an operation handed to Foundation is not started,
/// a waiting task is not resumed, and their time-outs run out. On threads of their own the bodies
/// take their share of the cores beside the pool instead: as many threads as there are cores,
/// shared by every such body, first come first served. (Before macOS 15 and its peers, which
/// have no task executors, `body` runs where the test runs.)
///
/// ```swift
/// let report = await offThePool { exploreEveryOrder(from: model, events: ..., key: ..., check: ...) }
/// ```
public func offThePool<Value>(_ body: () -> Value) async -> Value {
    if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
        return await withTaskExecutorPreference(ComputationThreads.shared) {
            body()
        }
    }
    return body()
}

/// Threads of their own, one per core, that run the jobs given to them in the order given: the
/// executor `offThePool(_:)` prefers.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
final class ComputationThreads: TaskExecutor, @unchecked Sendable {
    // @unchecked Sendable: `jobs` is only touched while holding `condition`.
    static let shared = ComputationThreads(count: ProcessInfo.processInfo.activeProcessorCount)

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []

    private init(count: Int) {
        for index in 0..<max(1, count) {
            let thread = Thread { [unowned self] in runJobs() }
            thread.name = "offThePool \(index)"
            thread.start()
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func runJobs() {
        while true {
            condition.lock()
            while jobs.isEmpty {
                condition.wait()
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
