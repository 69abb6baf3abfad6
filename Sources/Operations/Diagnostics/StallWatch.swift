import Foundation

/// Watches a queue for operations that wait (not execute) longer than a threshold, and reports
/// each once through `OperationDiagnostics` as `.stalled`, with what it waits for and, for a
/// category, since when its holder has been executing: the holder is found by identity in the
/// engine, whichever queue it is on.
///
/// It looks at the queue's snapshot on a timer (a quarter of the threshold, between 10 ms and
/// 1 s), so a queue that is not watched pays nothing. An operation's waiting time (and a
/// holder's executing time) counts from the first look that saw it so; what the watch's very
/// first look found already waiting or executing began earlier, and so may the execution of a
/// holder on another queue that no earlier look saw, so their reports say "at least".
/// A watch that replaces another (the threshold set again) takes over what that one saw: times
/// go on, and an operation reported is not reported again.
final class StallWatch: Sendable {
    /// What the looks saw, kept across the watches of one queue while its threshold is set.
    final class Record: Sendable {
        fileprivate let seen = Locked<Seen.Table>.make(Seen.Table())
    }

    fileprivate struct Seen {
        var waitingSince: Since?
        var executingSince: Since?
        var wasReported = false

        struct Table {
            var entries: [ObjectIdentifier: Seen] = [:]
            /// A look has been made: what a look sees from now on began since the one before.
            var hasLooked = false
        }
    }

    /// When a state was first seen; `isLowerBound`: it was already so at the watch's first look.
    fileprivate struct Since {
        let time: DispatchTime
        let isLowerBound: Bool
    }

    let threshold: TimeInterval
    /// What it saw, for the watch that may replace it.
    let record: Record
    private let queue: Weak<AsyncOperationQueue>
    private let timer: TimerBox

    /// `record`: what the watch this one replaces saw (a new one if none).
    init(queue: AsyncOperationQueue, threshold: TimeInterval, record: Record) {
        self.queue = Weak(queue)
        self.threshold = threshold
        self.record = record
        timer = TimerBox(DispatchSource.makeTimerSource(queue: .global()))
        let interval = min(max(threshold / 4, 0.01), 1)
        timer.source.setEventHandler { [weak self] in self?.look() }
        timer.source.schedule(deadline: .now() + interval, repeating: interval)
        timer.source.resume()
    }

    /// Stops watching.
    func stop() {
        timer.source.cancel()
    }

    deinit {
        timer.source.cancel()
    }

    private func look() {
        guard let queue = queue.object else {
            stop()
            return
        }
        let operations = queue.allOperations
        let snapshots = operations.map { ($0, ($0 as? AsyncOperation)?.snapshot() ?? queue.snapshot(ofPlain: $0)) }
        // The holders of the categories its operations wait for, by identity, on any queue.
        let holders = operations.map { (($0 as? AsyncOperation)?.holdersOfAwaitedCategories() ?? []) }
        let executingHolders = holders.joined().filter { $0.holder.isExecuting }.map(\.holder)
        let watched = Set(operations.map(ObjectIdentifier.init))
        let stalled = record.seen.withLock { table -> [(Operation, String)] in
            // Read under the lock: two watches may share the record for a moment (the threshold
            // set again while a look of the old one runs), and times must not go back.
            let now = DispatchTime.now()
            let firstSeen = Since(time: now, isLowerBound: !table.hasLooked)
            var next: [ObjectIdentifier: Seen] = [:]
            var stalled: [(Operation, String)] = []
            for holder in executingHolders {
                // A holder of another queue that no look saw before (or not since nobody waited
                // for it) may have been executing for long: it began at least that long ago. One
                // of this queue's own was seen by every look, so it began since the last.
                let id = ObjectIdentifier(holder)
                let unseen = watched.contains(id) ? firstSeen : Since(time: now, isLowerBound: true)
                next[id] = Seen(executingSince: table.entries[id].map { $0.executingSince ?? firstSeen } ?? unseen)
            }
            for ((operation, snapshot), holders) in zip(snapshots, holders) {
                let id = ObjectIdentifier(operation)
                var entry = table.entries[id] ?? Seen()
                entry.executingSince = next[id]?.executingSince ?? entry.executingSince
                switch snapshot.state {
                case .executing, .finishing, .finished:
                    if entry.executingSince == nil { entry.executingSince = firstSeen }
                default:
                    if entry.waitingSince == nil { entry.waitingSince = firstSeen }
                    if let since = entry.waitingSince, !entry.wasReported,
                       Self.seconds(from: since.time, to: now) >= threshold {
                        entry.wasReported = true
                        let holding = holders.map { (name: $0.holder.displayName, since: next[ObjectIdentifier($0.holder)]?.executingSince) }
                        stalled.append((operation, Self.message(for: snapshot, waited: since, holders: holding, now: now)))
                    }
                }
                next[id] = entry
            }
            table.entries = next
            table.hasLooked = true
            return stalled
        }
        for (operation, message) in stalled {
            OperationDiagnostics.report(.stalled, operation, message)
        }
    }

    private static func message(for snapshot: OperationSnapshot, waited: Since, holders: [(name: String, since: Since?)], now: DispatchTime) -> String {
        var message = "has waited \(duration(since: waited, to: now)) without executing: \(snapshot)"
        for holder in holders {
            if let since = holder.since {
                message += " ('\(holder.name)' has been executing for \(duration(since: since, to: now)))"
            }
        }
        return message
    }

    /// "1.5 s", or "at least 1.5 s" for a state the watch found when it began.
    private static func duration(since: Since, to now: DispatchTime) -> String {
        (since.isLowerBound ? "at least " : "") + format(seconds(from: since.time, to: now))
    }

    private static func seconds(from start: DispatchTime, to end: DispatchTime) -> TimeInterval {
        TimeInterval(end.uptimeNanoseconds &- start.uptimeNanoseconds) / 1_000_000_000
    }

    private static func format(_ seconds: TimeInterval) -> String {
        seconds < 10 ? String(format: "%.1f s", seconds) : "\(Int(seconds)) s"
    }
}

/// A Dispatch timer source, shared between the watch and its event handler.
// @unchecked Sendable: the source is set up once in `StallWatch.init`; afterwards it is only
// cancelled, which Dispatch allows from any thread (its sources are not marked Sendable on Linux).
private final class TimerBox: @unchecked Sendable {
    let source: any DispatchSourceTimer

    init(_ source: any DispatchSourceTimer) {
        self.source = source
    }
}
