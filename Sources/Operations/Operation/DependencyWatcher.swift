import Foundation

/// Tells an `AsyncOperation` when a plain Foundation dependency finishes.
///
/// Foundation offers no portable way to observe an operation finishing (there is no real
/// key-value observing on Linux), so a tiny watcher operation that depends on it runs on a
/// private queue and reports back.
/// One per engine (`OperationsEngine.dependencyWatcher`).
final class DependencyWatcher: Sendable {
    private let queue: OperationQueue

    init() {
        queue = OperationQueue()
        queue.name = "Operations.DependencyWatcher"
    }

    /// Calls `report` once `operation` has finished or been cancelled. Cancel the returned
    /// watcher to stop listening.
    func watch(_ operation: Operation, report: @escaping @Sendable () -> Void) -> Operation {
        let watcher = BlockOperation(block: report)
        watcher.addDependency(operation)
        queue.addOperation(watcher)
        return watcher
    }

    /// Keeps `operation` alive until each of `dependencies` has finished.
    ///
    /// swift-corelibs-foundation's `Operation` points from a dependency to its dependents without
    /// retaining them, and does not take a cancelled dependent out: a plain operation cancelled
    /// and released before its dependency finished is freed while the dependency still points at
    /// it, and the dependency's finish then touches freed memory. A queue keeps the plain
    /// operations it is given alive until then (it already does so for its own operations).
    func keepAlive(_ operation: Operation, untilFinished dependencies: [Operation]) {
        let unfinished = dependencies.filter { !$0.isFinished }
        guard !unfinished.isEmpty else { return }
        let keeper = BlockOperation { withExtendedLifetime(operation) {} }
        for dependency in unfinished {
            keeper.addDependency(dependency)
        }
        queue.addOperation(keeper)
    }

    /// Stops `watcher`. It first detaches from the watched operation: Foundation keeps an
    /// unretained pointer from a dependency to its dependents, which must not outlive the watcher.
    static func stop(_ watcher: Operation) {
        for dependency in watcher.dependencies {
            watcher.removeDependency(dependency)
        }
        watcher.cancel()
    }
}
