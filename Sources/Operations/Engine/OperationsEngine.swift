import Foundation

/// Everything the engine shares between queues, as one value: mutual exclusion, the order of
/// adds, the watchers of plain dependencies, threads blocked in waits, progress changes, and the
/// queue that runs operations nobody queued. (Two parts stay process-wide on purpose, whatever
/// the engine: `PlainOperationRegistry`, since Foundation's rule that an operation joins at most
/// one queue in its life holds across every queue in the process; and the progress applier, since
/// `Progress` trees do not stop at an engine's edge.)
///
/// `shared` is the one every queue uses by default, process-wide, as categories are. A test can
/// make its own engine and give it to the queues it builds (`AsyncOperationQueue(engine:)`,
/// `GroupOperation(operations:engine:)`): their operations then share categories, tickets and
/// the rest only with each other, so a scenario runs with nothing else in the process reaching
/// in, and its state can be read at the end. An operation uses the engine of the queue it is
/// added to (`shared` if it is started by hand).
final class OperationsEngine: Sendable {
    /// The engine of every queue made with `AsyncOperationQueue()`.
    static let shared = OperationsEngine()

    /// Mutually exclusive categories: who holds them, who waits.
    let exclusivity = ExclusivityController()
    /// Which `CategoryLock` names each category, while operations naming it are under way.
    let categoryLockBindings = CategoryLockBindings()
    /// The order in which operations are added to this engine's queues.
    let tickets = TicketCounter()
    /// Tells operations when their plain Foundation dependencies finish.
    let dependencyWatcher = DependencyWatcher()
    /// Threads blocked in `runAndWait()` inside an operation of a queue.
    let blockingWaits = BlockingWait()
    /// Changes to groups' progress, applied one at a time. The same for every engine: a group's
    /// `Progress` joins whatever tree its user puts it in, and a tree must have one applier.
    let progress = ProgressApplier.processWide
    private let fallback = Locked<AsyncOperationQueue?>.make(nil)

    init() {}

    /// The queue that runs operations produced or required by operations on no queue, and
    /// children added to a group that has finished.
    var fallbackQueue: AsyncOperationQueue {
        if let queue = fallback.withLock({ $0 }) {
            return queue
        }
        let made = AsyncOperationQueue(engine: self)
        made.name = "Operations.FallbackQueue"
        return fallback.withLock { existing in
            if let existing { return existing } // another thread made it first
            existing = made
            return made
        }
    }
}
