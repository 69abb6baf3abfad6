/// Runs an `async throws` body in a `Task` for an operation, and cancels that task when the
/// operation is cancelled, however the two calls interleave.
///
/// The body and the task are dropped by `release()`, once the operation has finished.
final class TaskRunner<Output: Sendable>: Sendable {
    typealias Body = @Sendable () async throws -> Output

    private struct State {
        var body: Body?
        var task: Task<Void, Never>?
        var isCancelled = false
    }

    private let state: Locked<State>
    private let priority: TaskPriority?

    init(priority: TaskPriority?, body: @escaping Body) {
        state = Locked.make(State(body: body))
        self.priority = priority
    }

    /// Starts the body in a new task and calls `completion` with its outcome when it ends;
    /// `false` (and no call) if the body was already released.
    func start(completion: @escaping @Sendable (Result<Output, any Error>) -> Void) -> Bool {
        guard let body = state.withLock({ $0.body }) else { return false }
        let task = Task(priority: priority) {
            do {
                completion(.success(try await body()))
            } catch {
                completion(.failure(error))
            }
        }
        let cancelledMeanwhile = state.withLock { state -> Bool in
            if state.body != nil { // not released meanwhile
                state.task = task
            }
            return state.isCancelled
        }
        if cancelledMeanwhile {
            task.cancel()
        }
        return true
    }

    /// Cancels the task, now or as soon as it exists.
    func cancel() {
        let task = state.withLock { state -> Task<Void, Never>? in
            state.isCancelled = true
            return state.task
        }
        task?.cancel()
    }

    /// Drops the body and the task handle (after unlocking: the body's captures are user code).
    func release() {
        let released = state.withLock { ($0.body.take(), $0.task.take()) }
        _ = released
    }
}

extension AsyncOperation {
    /// Finishes the operation with the error its task's body threw. A `CancellationError` thrown
    /// after the operation was cancelled is how the body obeyed, not a failure: it is dropped.
    func finish(afterTaskThrew error: any Error) {
        if error is CancellationError && isCancelled {
            finish()
        } else {
            finish(with: error)
        }
    }
}
