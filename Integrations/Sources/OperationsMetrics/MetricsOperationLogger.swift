import CoreMetrics
import Dispatch
import Operations

/// Turns the lifecycle of the operations on a queue into swift-metrics metrics, per queue,
/// labelled with the queue's name.
///
/// ```swift
/// let registry = PrometheusCollectorRegistry()
/// queue.logger = MetricsOperationLogger(factory: PrometheusMetricsFactory(registry: registry))
/// ```
///
/// | metric | kind | what |
/// |---|---|---|
/// | `operations_added_total` | counter | operations added to the queue |
/// | `operations_started_total` | counter | operations that started executing |
/// | `operations_finished_total` | counter | operations that finished, however they did |
/// | `operations_failed_total` | counter | operations that finished with errors without being cancelled |
/// | `operations_cancelled_total` | counter | operations that were cancelled |
/// | `operations_waiting` | meter (gauge) | operations added that have not started (nor finished) |
/// | `operations_running` | meter (gauge) | operations executing now |
/// | `operations_wait_duration_seconds` | timer | for each operation that started: the time from its add to its start |
/// | `operations_wait_reason_duration_seconds` | timer | the same time, split by what the operation waited for (label `reason`) |
/// | `operations_run_duration_seconds` | timer | for each operation that started: the time from its start to its finish |
///
/// Every metric has the label `queue`: the name the queue was given, or `unnamed` (Foundation's
/// default name holds the queue's address, and would give every queue a label of its own). The `reason` of a wait is
/// `dependencies`, `conditions`, `category`, `suspended_queue`, `serial_turn`, `group_start`, or
/// `slot` (a free slot on its queue, and the rest of the time: handed to Foundation's queue,
/// waiting for a thread), as the queue's `OperationSnapshot` explains it at each moment.
///
/// The children of groups (a retry's attempts, a cascade's steps) are left out unless
/// `includesGroupChildren` is true: their queue is the group's, whose name says nothing.
/// Plain Foundation operations are left out too: their queue does not tell when they start or
/// finish.
///
/// It keeps no global state and reads none but the factory it is given, `MetricsSystem.factory`
/// by default. If that is swift-metrics' no-op factory (nothing was bootstrapped), it asks the
/// queue for no event at all (its `minimumLevel` is `.error`), so the queue does not even attach
/// it: it costs nothing.
public final class MetricsOperationLogger: OperationLogger, Sendable {
    /// Where the metrics are made.
    public let factory: any MetricsFactory
    /// Whether the children of groups are counted too (under their group's queue).
    public let includesGroupChildren: Bool
    /// `.trace` (every event is needed), or `.error` (none) with the no-op factory.
    public let minimumLevel: OperationLogLevel

    private let state = LockedValue(State())

    /// Records the metrics of the operations on the queues it is the logger of, through
    /// `factory`.
    public init(factory: any MetricsFactory = MetricsSystem.factory, includesGroupChildren: Bool = false) {
        self.factory = factory
        self.includesGroupChildren = includesGroupChildren
        minimumLevel = factory is NOOPMetricsHandler ? .error : .trace
    }

    /// Updates the metrics for `event`.
    public func log(_ event: OperationLogEvent) {
        guard !event.isFoundationOperation, includesGroupChildren || event.groupID == nil else { return }
        let queueName = event.queueName ?? "unnamed"
        let (metrics, update) = state.withLock { state -> (QueueMetrics?, Update) in
            // Read under the lock, so that the times the state sees never go backwards.
            let now = DispatchTime.now().uptimeNanoseconds
            return (state.queues[queueName], state.record(event, at: now))
        }
        let queueMetrics = metrics ?? makeMetrics(for: queueName)
        queueMetrics.apply(update)
    }

    private func makeMetrics(for queueName: String) -> QueueMetrics {
        let made = QueueMetrics(queue: queueName, factory: factory)
        return state.withLock { state in
            if let existing = state.queues[queueName] { return existing } // another thread was first
            state.queues[queueName] = made
            return made
        }
    }
}

/// What one event changes: counters to increment, meters to move, durations to record.
struct Update {
    var added = false
    var started = false
    var finished = false
    var failed = false
    var cancelled = false
    var waitingDelta = 0
    var runningDelta = 0
    /// Nanoseconds from add to start, and the part of it spent on each reason.
    var wait: UInt64?
    var waitByReason: [(WaitReason, UInt64)] = []
    var run: UInt64?
}

/// What an operation waited for, as a metric label.
enum WaitReason: String, CaseIterable {
    case dependencies
    case conditions
    case category
    case suspendedQueue = "suspended_queue"
    case serialTurn = "serial_turn"
    case groupStart = "group_start"
    case slot

    init(_ reason: OperationSnapshot.Reason) {
        switch reason {
        case .dependency: self = .dependencies
        case .condition: self = .conditions
        case .category, .categoryHeldElsewhere: self = .category
        case .suspendedQueue: self = .suspendedQueue
        case .turnOnSerialQueue: self = .serialTurn
        case .groupToStart: self = .groupStart
        case .freeSlot: self = .slot
        }
    }
}

/// The book-keeping of the operations on their way, under the logger's lock: pure data.
struct State {
    /// One operation between its add and its finish.
    struct Tracked {
        var addedAt: UInt64
        var startedAt: UInt64?
        /// Since when it waits for `reason` (the slot, when no reason was given).
        var segmentStart: UInt64
        var reason = WaitReason.slot
        var waited: [WaitReason: UInt64] = [:]
        var cancelled = false
    }

    var queues: [String: QueueMetrics] = [:]
    var tracked: [OperationID: Tracked] = [:]

    mutating func record(_ event: OperationLogEvent, at now: UInt64) -> Update {
        var update = Update()
        let id = event.operationID
        switch event.kind {
        case .added:
            guard tracked[id] == nil else { break }
            tracked[id] = Tracked(addedAt: now, segmentStart: now)
            update.added = true
            update.waitingDelta = 1
        case let .waiting(reasons):
            closeSegment(of: id, at: now, next: reasons.first.map(WaitReason.init) ?? .slot)
        case .conditionsAnswered, .categoriesGranted:
            closeSegment(of: id, at: now, next: .slot)
        case .started:
            closeSegment(of: id, at: now, next: .slot)
            guard var operation = tracked[id], operation.startedAt == nil else { break }
            operation.startedAt = now
            tracked[id] = operation
            update.started = true
            update.waitingDelta = -1
            update.runningDelta = 1
            update.wait = now.elapsed(since: operation.addedAt)
            update.waitByReason = WaitReason.allCases.compactMap { reason in
                operation.waited[reason].map { (reason, $0) }
            }
        case .cancelled:
            tracked[id]?.cancelled = true
            update.cancelled = tracked[id] != nil
        case .produced:
            break
        case .finished:
            guard let operation = tracked.removeValue(forKey: id) else { break }
            update.finished = true
            update.failed = !event.errors.isEmpty && !operation.cancelled
            if let startedAt = operation.startedAt {
                update.runningDelta = -1
                update.run = now.elapsed(since: startedAt)
            } else {
                update.waitingDelta = -1
            }
        }
        return update
    }

    /// Ends the wait for the current reason and starts one for `next`. An event the core reports
    /// late (a `waiting` noticed after the operation moved on) changes nothing once it started.
    private mutating func closeSegment(of id: OperationID, at now: UInt64, next: WaitReason) {
        guard var operation = tracked[id], operation.startedAt == nil else { return }
        operation.waited[operation.reason, default: 0] += now.elapsed(since: operation.segmentStart)
        operation.segmentStart = now
        operation.reason = next
        tracked[id] = operation
    }
}

/// The metrics of one queue.
final class QueueMetrics: Sendable {
    let added: Counter
    let started: Counter
    let finished: Counter
    let failed: Counter
    let cancelled: Counter
    let waiting: Meter
    let running: Meter
    let wait: Timer
    let waitByReason: [String: Timer]
    let run: Timer

    init(queue: String, factory: any MetricsFactory) {
        let dimensions = [("queue", queue)]
        added = Counter(label: "operations_added_total", dimensions: dimensions, factory: factory)
        started = Counter(label: "operations_started_total", dimensions: dimensions, factory: factory)
        finished = Counter(label: "operations_finished_total", dimensions: dimensions, factory: factory)
        failed = Counter(label: "operations_failed_total", dimensions: dimensions, factory: factory)
        cancelled = Counter(label: "operations_cancelled_total", dimensions: dimensions, factory: factory)
        waiting = Meter(label: "operations_waiting", dimensions: dimensions, factory: factory)
        running = Meter(label: "operations_running", dimensions: dimensions, factory: factory)
        wait = Timer(label: "operations_wait_duration_seconds", dimensions: dimensions, factory: factory)
        run = Timer(label: "operations_run_duration_seconds", dimensions: dimensions, factory: factory)
        var byReason: [String: Timer] = [:]
        for reason in WaitReason.allCases {
            byReason[reason.rawValue] = Timer(
                label: "operations_wait_reason_duration_seconds",
                dimensions: dimensions + [("reason", reason.rawValue)],
                factory: factory
            )
        }
        waitByReason = byReason
    }

    func apply(_ update: Update) {
        if update.added { added.increment() }
        if update.started { started.increment() }
        if update.finished { finished.increment() }
        if update.failed { failed.increment() }
        if update.cancelled { cancelled.increment() }
        if update.waitingDelta > 0 { waiting.increment(by: Double(update.waitingDelta)) }
        if update.waitingDelta < 0 { waiting.decrement(by: Double(-update.waitingDelta)) }
        if update.runningDelta > 0 { running.increment(by: Double(update.runningDelta)) }
        if update.runningDelta < 0 { running.decrement(by: Double(-update.runningDelta)) }
        if let wait = update.wait { self.wait.recordNanoseconds(Int64(clamping: wait)) }
        for (reason, nanoseconds) in update.waitByReason {
            waitByReason[reason.rawValue]?.recordNanoseconds(Int64(clamping: nanoseconds))
        }
        if let run = update.run { self.run.recordNanoseconds(Int64(clamping: run)) }
    }
}

extension UInt64 {
    /// Nanoseconds from `start` to this time, 0 if `start` is later.
    func elapsed(since start: UInt64) -> UInt64 {
        self >= start ? self - start : 0
    }
}
