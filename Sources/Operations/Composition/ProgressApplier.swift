import Foundation

/// Applies every change the engine makes to its groups' `Progress` objects, one change at a time,
/// process-wide.
///
/// A group's progress is a Foundation `Progress`, and a child group's progress is a child of its
/// parent's, so a change to one updates the others up the tree. swift-corelibs-foundation's
/// `Progress` takes no lock for that: two threads changing two progresses of one tree (two nested
/// groups whose children finish on different threads) corrupt it. So changes are queued here and
/// applied by whichever thread finds nobody applying, in the order they were made; never under a
/// lock, since progress observers (and a progress's cancellation handler) are user code.
/// One for the process, whatever the engine (`OperationsEngine.progress`).
final class ProgressApplier: Sendable {
    static let processWide = ProgressApplier()

    private struct Change {
        let progress: Progress
        let delta: ProgressDelta
        /// Signalled once the change is applied, for a caller that waits for it.
        let applied: DispatchSemaphore?
    }

    private let changes = Locked<SerialDrain<Change>>.make(SerialDrain())

    /// Applies `delta` to `progress` and returns once it is applied, so that a thread sees its own
    /// change at once. Called from user code that the applying thread is running (a progress
    /// observer), it leaves the change to that thread's loop, which applies it next.
    func apply(_ delta: ProgressDelta, to progress: Progress) {
        if PerThreadState.current.isApplyingProgress {
            let submission = changes.withLock { $0.submit(Change(progress: progress, delta: delta, applied: nil)) }
            _ = submission // this thread is the drainer: its loop applies it next
            return
        }
        submitAndWait(progress, delta)
    }

    /// Applies `delta` to `progress` and returns once it is applied, also when called from user
    /// code that the applying thread is running: then at once, as waiting for itself would never
    /// end.
    func applyAndWait(_ delta: ProgressDelta, to progress: Progress) {
        if PerThreadState.current.isApplyingProgress {
            delta.apply(to: progress)
            return
        }
        submitAndWait(progress, delta)
    }

    /// Applies the change on this thread if nobody is applying (the common case, with nothing
    /// queued or allocated), or waits for the thread that is.
    private func submitAndWait(_ progress: Progress, _ delta: ProgressDelta) {
        let waiter = changes.withLock { changes -> DispatchSemaphore? in
            guard case .leftToDrainer = changes.becomeDrainerIfNone() else { return nil }
            let applied = DispatchSemaphore(value: 0)
            _ = changes.submit(Change(progress: progress, delta: delta, applied: applied))
            return applied
        }
        if let waiter {
            waiter.wait()
            return
        }
        let thread = PerThreadState.current
        thread.isApplyingProgress = true
        defer { thread.isApplyingProgress = false }
        delta.apply(to: progress)
        applyPending()
    }

    /// Applies what other threads left meanwhile until none is left; the caller is the one
    /// applier until then.
    private func applyPending() {
        while case let .items(batch) = changes.withLock({ $0.takeNext() }) {
            for change in batch {
                change.delta.apply(to: change.progress)
                change.applied?.signal()
            }
        }
    }
}

/// Changes to a group's progress on their way to it.
struct ProgressDelta: Sendable {
    var admitted = 0
    var finished = 0
    var childProgress: [Progress] = []
    /// The group finished: complete the progress.
    var completes = false
    /// The group was cancelled: cancel the progress too.
    var cancels = false

    func apply(to progress: Progress) {
        if admitted > 0 { progress.totalUnitCount += Int64(admitted) }
        for child in childProgress {
            progress.addChild(child, withPendingUnitCount: 1)
        }
        if finished > 0 { progress.completedUnitCount += Int64(finished) }
        if cancels && !progress.isCancelled {
            progress.cancel()
        }
        if completes {
            if progress.totalUnitCount == 0 { progress.totalUnitCount = 1 }
            progress.completedUnitCount = progress.totalUnitCount
        }
    }
}
