import Foundation

/// A `ResultOperation` whose output is what an `async throws` closure returns, run in its own
/// `Task`.
///
/// It behaves as `AsyncTaskOperation` does (cancelling the operation cancels the task, and the
/// operation finishes once the closure has returned or thrown), and produces the returned value
/// as its `output`.
///
/// ```swift
/// let fetch = ResultTaskOperation { try await api.user(id: 42) }
/// queue.addOperation(fetch)
/// let user = try await fetch.value
/// ```
// @unchecked Sendable: `runner` is Sendable (its state is under its own lock); the rest is
// `ResultOperation`'s.
open class ResultTaskOperation<Output: Sendable>: ResultOperation<Output>, @unchecked Sendable {
    private let runner: TaskRunner<Output>

    /// Creates an operation whose output is what `body` returns, run in a task of the given
    /// priority (by default, the priority `Task` picks).
    public init(priority: TaskPriority? = nil, _ body: @escaping @Sendable () async throws -> Output) {
        runner = TaskRunner(priority: priority, body: body)
        super.init()
    }

    /// Starts the closure's task. Subclasses rarely override this.
    open override func execute() {
        guard !isCancelled else {
            finish()
            return
        }
        let started = runner.start { [self] result in
            switch result {
            case let .success(output):
                finishProducing(output)
            case let .failure(error):
                finish(afterTaskThrew: error)
            }
        }
        if !started {
            finish()
        }
    }

    override func cancellationDuringExecution() {
        runner.cancel()
    }

    override func releaseResources() {
        runner.release()
    }
}
