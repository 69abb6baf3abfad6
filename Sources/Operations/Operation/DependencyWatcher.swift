import Foundation

/// Tells an `AsyncOperation` when a plain Foundation dependency finishes.
///
/// Foundation offers no portable way to observe an operation finishing (there is no real
/// key-value observing on Linux), so a tiny watcher operation that depends on it runs on a
/// private queue and reports back: one watcher per watched operation, however many listen, so
/// that its reports come in a known order (those asked for with `watch`, in order, then those
/// asked for with `watchAfterOtherWatchers`), one after another on the watcher's thread, as
/// Foundation tells an operation's dependents one after another as it finishes.
/// One per engine (`OperationsEngine.dependencyWatcher`).
final class DependencyWatcher: Sendable {
    private let queue: OperationQueue
    private let table = Locked.make(Table())

    private struct Table {
        /// The watch of each watched operation, by its identity, until it reports.
        var watches: [ObjectIdentifier: Watch] = [:]
        /// The key of the latest subscription (a listener that may stop).
        var lastKey: UInt64 = 0
    }

    init() {
        queue = OperationQueue()
        queue.name = "Operations.DependencyWatcher"
    }

    /// Those listening for one operation's finish, and the operation that tells them.
    // @unchecked Sendable: changed only under `table`'s lock, but `watcher`, set once before the
    // watch is shared.
    private final class Watch: @unchecked Sendable {
        /// The operation of the private queue that waits for the watched one, then reports.
        var watcher: Operation?
        /// Listeners that may stop, by key in increasing order; a stopped one leaves `nil`.
        var reports: [(key: UInt64, report: (@Sendable () -> Void)?)] = []
        /// How many of `reports` have not stopped.
        var listening = 0
        /// Listeners told after every other (`watchAfterOtherWatchers`).
        var lastReports: [@Sendable () -> Void] = []

        var isEmpty: Bool { listening == 0 && lastReports.isEmpty }

        /// Stops the listener with `key`, if it listens; its report, to be released after
        /// unlocking.
        func stop(key: UInt64) -> (@Sendable () -> Void)? {
            var low = 0
            var high = reports.count
            while low < high { // keys increase: a binary search, not a walk through thousands
                let middle = (low + high) / 2
                if reports[middle].key < key { low = middle + 1 } else { high = middle }
            }
            guard low < reports.count, reports[low].key == key, let report = reports[low].report else { return nil }
            reports[low].report = nil
            listening -= 1
            return report
        }
    }

    /// One listener's place in a watch: stop it (`stop(_:)`) to stop listening.
    final class Subscription: Sendable {
        fileprivate let watched: ObjectIdentifier
        fileprivate let key: UInt64
        fileprivate let watcher: DependencyWatcher

        /// The listener with `key` of the watch of the operation `watched` (a test may make one
        /// to hand to an operation's lifecycle).
        init(watched: ObjectIdentifier, key: UInt64, watcher: DependencyWatcher) {
            self.watched = watched
            self.key = key
            self.watcher = watcher
        }
    }

    /// Calls `report` once `operation` has finished or been cancelled. Stop the returned
    /// subscription to stop listening.
    func watch(_ operation: Operation, report: @escaping @Sendable () -> Void) -> Subscription {
        let key = join(operation) { watch, key in
            watch.reports.append((key, report))
            watch.listening += 1
        }
        return Subscription(watched: ObjectIdentifier(operation), key: key, watcher: self)
    }

    /// Calls `report` once `operation` has finished or been cancelled, after every report asked
    /// for with `watch(_:report:)` before it finished: a serial queue's turn, held by a plain
    /// operation, ends once that operation's dependents have heard of its finish, as Foundation's
    /// serial queue picks its next operation among those ready then.
    func watchAfterOtherWatchers(_ operation: Operation, report: @escaping @Sendable () -> Void) {
        _ = join(operation) { watch, _ in watch.lastReports.append(report) }
    }

    /// Adds a listener (`listen`, given a new key) to the watch of `operation`, making the watch
    /// first if there is none: its watcher is made outside the lock, and dropped if another
    /// thread made one first. Returns the listener's key.
    private func join(_ operation: Operation, listening listen: (Watch, UInt64) -> Void) -> UInt64 {
        let id = ObjectIdentifier(operation)
        let joined = table.withLock { table -> UInt64? in
            guard let watch = table.watches[id] else { return nil }
            table.lastKey += 1
            listen(watch, table.lastKey)
            return table.lastKey
        }
        if let joined { return joined }
        let watch = Watch()
        let watcher = BlockOperation { [self, weak watch] in // the watch holds its watcher
            if let watch { report(watch, of: id) }
        }
        watcher.addDependency(operation)
        watch.watcher = watcher
        let (key, made) = table.withLock { table -> (UInt64, Bool) in
            table.lastKey += 1
            if let existing = table.watches[id] {
                listen(existing, table.lastKey)
                return (table.lastKey, false)
            }
            listen(watch, table.lastKey)
            table.watches[id] = watch
            return (table.lastKey, true)
        }
        if made {
            queue.addOperation(watcher)
        } else {
            Self.detach(watcher) // another thread's watch came first
        }
        return key
    }

    /// The watched operation finished: its listeners hear of it, in order.
    private func report(_ watch: Watch, of id: ObjectIdentifier) {
        let (reports, lastReports) = table.withLock { table in
            if table.watches[id] === watch {
                table.watches[id] = nil // a listener from now on gets a watch of its own, which reports at once
            }
            defer {
                watch.reports = []
                watch.listening = 0
                watch.lastReports = []
            }
            return (watch.reports, watch.lastReports)
        }
        for entry in reports {
            entry.report?()
        }
        for report in lastReports {
            report()
        }
    }

    /// Stops `subscription`: its report is not made (unless it is being made already). A watch
    /// left with nobody listening stops too.
    static func stop(_ subscription: Subscription) {
        subscription.watcher.stop(subscription)
    }

    private func stop(_ subscription: Subscription) {
        // Both released after unlocking: the report is the listener's closure.
        let (stopped, removed) = table.withLock { table -> (Watch?, (@Sendable () -> Void)?) in
            guard let watch = table.watches[subscription.watched],
                  let removed = watch.stop(key: subscription.key) else { return (nil, nil) }
            guard watch.isEmpty else { return (nil, removed) }
            table.watches[subscription.watched] = nil
            return (watch, removed)
        }
        withExtendedLifetime(removed) {}
        if let watcher = stopped?.watcher {
            Self.detach(watcher)
        }
    }

    /// Keeps `operation` alive until each of `dependencies` has finished.
    ///
    /// swift-corelibs-foundation's `Operation` points from a dependency to its dependents without
    /// retaining them, and does not take a cancelled dependent out: a plain operation cancelled
    /// and released before its dependency finished is freed while the dependency still points at
    /// it, and the dependency's finish then touches freed memory. A queue keeps the plain
    /// operations it is given alive until then (it already does so for its own operations).
    func keepAlive(_ operation: Operation, untilFinished dependencies: [Operation]) {
        // A listener of each dependency's watch (one operation of the private queue per watched
        // dependency, not one per kept operation): Foundation looks through every operation of a
        // queue each time one is added, so thousands of keepers of one dependency cost time that
        // grows with their square.
        for dependency in dependencies where !dependency.isFinished {
            _ = watch(dependency) { withExtendedLifetime(operation) {} }
        }
    }

    /// Stops `watcher`. It first detaches from the watched operation: Foundation keeps an
    /// unretained pointer from a dependency to its dependents, which must not outlive the watcher.
    private static func detach(_ watcher: Operation) {
        for dependency in watcher.dependencies {
            watcher.removeDependency(dependency)
        }
        watcher.cancel()
    }
}
