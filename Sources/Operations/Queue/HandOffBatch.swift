import Foundation

/// Hand-offs to Foundation held back while the dependents of one finished operation are told,
/// then given in one add per queue. Foundation then chooses among the operations made ready
/// together by their priority, as it does for its own; given one by one, the first one told would
/// take a free slot, whatever its priority.
///
/// Only its own thread touches a batch (it hangs off `PerThreadState`).
final class HandOffBatch {
    private var entries: [(queue: AsyncOperationQueue, operations: [Operation])] = []

    /// Runs `body`, which tells dependents of a finish, collecting the hand-offs made meanwhile on
    /// this thread (within an enclosing call, that call collects them), then gives them.
    static func collecting(_ body: () -> Void) {
        let thread = PerThreadState.current
        guard thread.handOffBatch == nil else { return body() }
        let batch = HandOffBatch()
        thread.handOffBatch = batch
        body()
        thread.handOffBatch = nil
        batch.give()
    }

    /// `queue` let `operations` through: they go to Foundation with the rest of the batch.
    func add(_ operations: SmallArray<Operation>, for queue: AsyncOperationQueue) {
        if let index = entries.firstIndex(where: { $0.queue === queue }) {
            entries[index].operations.append(contentsOf: operations.array)
        } else {
            entries.append((queue, operations.array))
        }
    }

    private func give() {
        for entry in entries {
            entry.queue.giveBatched(entry.operations)
        }
    }
}
