import Operations
import ServiceLifecycle

/// Runs operation queues as a `Service` of a `ServiceGroup`: when the group shuts down
/// gracefully (on SIGTERM, say), the queues shut down gracefully too.
///
/// ```swift
/// let queue = AsyncOperationQueue()
/// let group = ServiceGroup(
///     services: [server, OperationQueueService(queue)],   // the server stops after the queue has drained
///     gracefulShutdownSignals: [.sigterm],
///     logger: logger
/// )
/// try await group.run()
/// ```
///
/// Until the graceful shutdown the service only waits; the queues run as usual. Then every
/// queue `shutDown(gracePeriod:)`s at once: it takes no new operation (one added later finishes
/// with `AsyncOperationError.queueShutDown`), cancels those that wait, lets the running ones
/// finish, and the service returns when every queue is empty.
///
/// The queues' grace period is the group's. By default (`gracePeriod` nil) the running
/// operations may take as long as the group allows: when its `maximumGracefulShutdownDuration`
/// is over, the group cancels the service, and the queues cancel what still runs and return once
/// it has finished. Give `gracePeriod` to cancel them sooner, so that services shut down after
/// this one (those before it in the group's list) keep time of their own. If the group is
/// cancelled without a graceful shutdown, the queues shut down at once the same way.
///
/// A `ServiceGroup` shuts its services down in reverse order: list the HTTP server before this
/// service, so that it still answers (refusing new work, reporting progress) while the queues
/// drain.
public struct OperationQueueService: Service, CustomStringConvertible {
    /// The queues it shuts down.
    public let queues: [AsyncOperationQueue]
    /// How long running operations may go on once the shutdown began; `nil`: until the group
    /// cancels the service.
    public let gracePeriod: Duration?

    /// A service that shuts `queues` down gracefully with its group.
    public init(_ queues: AsyncOperationQueue..., gracePeriod: Duration? = nil) {
        self.init(queues: queues, gracePeriod: gracePeriod)
    }

    /// A service that shuts `queues` down gracefully with its group.
    public init(queues: [AsyncOperationQueue], gracePeriod: Duration? = nil) {
        self.queues = queues
        self.gracePeriod = gracePeriod
    }

    /// Waits for the group's graceful shutdown (or cancellation), then shuts every queue down
    /// and returns once all of them are empty.
    public func run() async throws {
        try? await gracefulShutdown() // returns on a graceful shutdown, throws if cancelled: shut down either way
        await withTaskGroup(of: Void.self) { group in
            for queue in queues {
                group.addTask {
                    if let gracePeriod {
                        await queue.shutDown(gracePeriod: gracePeriod)
                    } else {
                        await queue.shutDown(gracePeriod: .infinity)
                    }
                }
            }
        }
    }

    /// `OperationQueueService` and the queues' names.
    public var description: String {
        "OperationQueueService(" + queues.map { $0.name ?? "unnamed" }.joined(separator: ", ") + ")"
    }
}
