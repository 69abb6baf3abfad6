/// Told when an operation it waits for has finished: an `AsyncOperation` that depends on it, or a
/// `FinishListener` (run-and-wait, the async bridges, `addOperations(_:waitUntilFinished:)`).
///
/// An operation keeps its watchers weakly and tells them last, once it is finished, its observers
/// have heard `operationDidFinish` and Foundation has let go of it.
protocol FinishWatcher: AnyObject, Sendable {
    /// The operation identified by `id` has finished. Called on the thread that finished it.
    func dependencyDidFinish(_ id: ObjectIdentifier)
}

extension AsyncOperation: FinishWatcher {}
