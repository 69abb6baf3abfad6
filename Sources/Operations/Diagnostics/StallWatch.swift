import Foundation

/// Watches a queue for operations that wait (not execute) longer than a threshold, and reports
/// each once through `OperationDiagnostics` as `.stalled`, with what it waits for and, for a
/// category, since when its holder has been executing: the holder is found by identity in the
/// engine, whichever queue it is on.
///
/// It looks at the queue's snapshot on a timer (a quarter of the threshold, between 10 ms and
/// 1 s), so a queue that is not watched pays nothing. An operation's waiting time counts from
/// the first look that saw it waiting.
final class StallWatch: Sendable {
    private struct Seen {
        var waitingSince: DispatchTime?
        var executingSince: DispatchTime?
        var wasReported = false
    }

    let threshold: TimeInterval
    private let queue: Weak<AsyncOperationQueue>
    private let seen = Locked<[ObjectIdentifier: Seen]>.make([:])
    private let timer: TimerBox

    init(queue: AsyncOperationQueue, threshold: TimeInterval) {
        self.queue = Weak(queue)
        self.threshold = threshold
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
        let now = DispatchTime.now()
        let stalled = seen.withLock { table -> [(Operation, String)] in
            var next: [ObjectIdentifier: Seen] = [:]
            var stalled: [(Operation, String)] = []
            for holder in executingHolders {
                let id = ObjectIdentifier(holder)
                next[id] = Seen(executingSince: table[id]?.executingSince ?? now)
            }
            for ((operation, snapshot), holders) in zip(snapshots, holders) {
                let id = ObjectIdentifier(operation)
                var entry = table[id] ?? Seen()
                entry.executingSince = next[id]?.executingSince ?? entry.executingSince
                switch snapshot.state {
                case .executing, .finishing, .finished:
                    if entry.executingSince == nil { entry.executingSince = now }
                default:
                    if entry.waitingSince == nil { entry.waitingSince = now }
                    if let since = entry.waitingSince, !entry.wasReported,
                       Self.seconds(from: since, to: now) >= threshold {
                        entry.wasReported = true
                        let holding = holders.map { (name: $0.holder.displayName, since: next[ObjectIdentifier($0.holder)]?.executingSince) }
                        stalled.append((operation, Self.message(for: snapshot, waited: Self.seconds(from: since, to: now), holders: holding, now: now)))
                    }
                }
                next[id] = entry
            }
            table = next
            return stalled
        }
        for (operation, message) in stalled {
            OperationDiagnostics.report(.stalled, operation, message)
        }
    }

    private static func message(for snapshot: OperationSnapshot, waited: TimeInterval, holders: [(name: String, since: DispatchTime?)], now: DispatchTime) -> String {
        var message = "has waited \(format(waited)) without executing: \(snapshot)"
        for holder in holders {
            if let since = holder.since {
                message += " ('\(holder.name)' has been executing for \(format(seconds(from: since, to: now))))"
            }
        }
        return message
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
