import Foundation
import Operations
import Testing
import TestSupport

// The examples of the "Running and waiting" and "async/await" docs (README and the AsyncAwait article),
// verbatim between the `// docs:` markers, so that they keep compiling and doing what the text says.

private struct Report: Sendable, Equatable {
    let pages: Int
}

// Stays its own type: the README's example retries on `$0 is ServerBusy`, quoted verbatim below.
private struct ServerBusy: Error {}

/// Fails twice, then gives a report: what a flaky network call looks like.
private actor FlakyServer {
    private var calls = 0

    func downloadReport() async throws -> Report {
        calls += 1
        if calls < 3 { throw ServerBusy() }
        return Report(pages: 12)
    }
}

@Suite struct CompositionBridgesDocTests {
    @Test func runAndWait_example() throws {
        // docs:
        // A "sync operation": it waits until its block says it is done, whatever happens between.
        let sync = AsyncBlockOperation { finish in
            DispatchQueue.global().async {
                finish(nil)                       // finished later, from another thread
            }
        }
        try sync.runAndWait(timeout: 5)           // throws its errors, or .waitTimedOut after 5 s

        let answer = try ResultBlockOperation { 6 * 7 }.runAndWait()   // 42: a ResultOperation returns its output
        // :docs
        #expect(answer == 42)
    }

    @Test func asyncAwait_example() async throws {
        // docs:
        let queue = AsyncOperationQueue()

        let report = ResultTaskOperation { () async throws -> Report in
            try await Task.sleep(nanoseconds: 1_000_000)   // any async work; cancelled with the operation
            return Report(pages: 3)
        }
        queue.addOperation(report)
        let pages = try await report.value.pages           // cancelling this task cancels `report`

        let cleanUp = AsyncBlockOperation {}
        queue.addOperation(cleanUp)
        try await cleanUp.finished()                       // any operation: throws its errors
        // :docs

        #expect(pages == 3)
    }

    @Test func retryAndDelay_example() async throws {
        let queue = AsyncOperationQueue()
        let server = FlakyServer()

        // docs:
        let download = RetryOperation(
            maxAttempts: 4,
            backoff: .exponential(initial: 0.01, maximum: 1).withJitter(),
            shouldRetry: { $0 is ServerBusy }
        ) { _ in
            ResultTaskOperation { try await server.downloadReport() }
        }
        queue.addOperation(download)
        try await download.finished()                      // fails as the last attempt did, if all fail
        let report = download.lastAttempt?.output          // Report(pages: 12), on the third attempt

        let pause = DelayOperation(0.05)                   // or DelayOperation(until: date)
        let upload = AsyncBlockOperation { /* runs once the pause is over */ }
        upload.addDependency(pause)
        queue.addOperations([pause, upload], waitUntilFinished: false)
        try await upload.finished()
        // :docs

        #expect(report == Report(pages: 12))
        #expect(download.attemptCount == 3)
    }
}
