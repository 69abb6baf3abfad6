import Dispatch
import Operations
import Tracing

/// Makes each operation on a queue a span of swift-distributed-tracing, from its start to its
/// finish, in the trace of the code that added it.
///
/// ```swift
/// queue.logger = TracingOperationLogger(tracer: InstrumentationSystem.tracer)
///
/// withSpan("POST /jobs") { _ in
///     queue.addOperation(job)      // job's span is a child of "POST /jobs"
/// }
/// ```
///
/// - **Parent.** The span current where the operation was added (`ServiceContext.current`, read
///   on the adding thread, in `async` and synchronous code alike) is its parent, although it runs
///   later on another thread. A group's children are children of the group's span (a retry's
///   attempts, a cascade's steps).
/// - **Links.** An operation added with dependencies not finished yet (a chain's links, say)
///   links to their spans, so a trace shows that its work follows theirs. A dependency that had
///   finished before the add is not linked: its span has ended, and the logger keeps no ended
///   spans (it would grow with every operation).
/// - **Waiting.** What it waited for before it started is recorded as span events with the
///   time they happened: `waiting` (attribute `operation.waits_for`), `conditions_answered`,
///   `categories_granted` (`operation.categories`).
/// - **Outcome.** A failed operation records each of its errors and sets the span's status to
///   error; a cancelled one adds a `cancelled` event whose `operation.cancel_reason` says why. An
///   operation that never started (cancelled while it waited) still gets a span, from its add
///   to its finish, with `operation.started` false; a group's child that never started is a
///   child of the group's span even if the group had not started when the child finished (its
///   span is then made as the group starts or finishes, with the child's own times, so it may
///   lie wholly before its parent's start), unless an operation added with it as a dependency
///   waits for its span to link to.
///
/// Spans are named after the operation and carry `operation.id` and, if the queue was given a
/// name, `queue.name`. The tracer is
/// the one given (by default the one bootstrapped in `InstrumentationSystem`); nothing else is
/// read from or written to global state.
public final class TracingOperationLogger: OperationLogger, Sendable {
    /// Where the spans are made.
    public let tracer: any Tracer
    /// `.debug`: the waiting events are needed.
    public var minimumLevel: OperationLogLevel { .debug }

    private let state = LockedValue(TracingState())

    /// Makes spans with `tracer`.
    public init(tracer: any Tracer = InstrumentationSystem.tracer) {
        self.tracer = tracer
    }

    /// Records `event` on its operation's span.
    public func log(_ event: OperationLogEvent) {
        guard !event.isFoundationOperation else { return }
        let now = DefaultTracerClock.now
        switch event.kind {
        case .added:
            let parent = ServiceContext.current // the adding thread's (or task's) span
            state.withLock { $0.added(event, parent: parent, at: now) }
        case let .waiting(reasons):
            note(event, SpanEvent(name: "waiting", at: now, attributes: [
                "operation.waits_for": .stringArray(reasons.map(\.description)),
            ]))
        case let .conditionsAnswered(failures):
            note(event, SpanEvent(name: "conditions_answered", at: now, attributes: ["operation.condition_failures": .int64(Int64(failures))]))
        case let .categoriesGranted(categories):
            note(event, SpanEvent(name: "categories_granted", at: now, attributes: ["operation.categories": .stringArray(categories)]))
        case let .produced(name):
            note(event, SpanEvent(name: "produced", at: now, attributes: ["operation.produced": .string(name)]))
        case .cancelled:
            let reason = event.errors.isEmpty ? "cancelled" : event.errors.map { "\($0)" }.joined(separator: "; ")
            note(event, SpanEvent(name: "cancelled", at: now, attributes: ["operation.cancel_reason": .string(reason)]))
        case .started:
            start(event, at: now)
        case .finished:
            finish(event, at: now)
        }
    }

    /// Adds `spanEvent` to the operation's span, or keeps it for the span to come.
    private func note(_ event: OperationLogEvent, _ spanEvent: SpanEvent) {
        if let span = state.withLock({ $0.note(spanEvent, for: event.operationID) }) {
            span.addEvent(spanEvent)
        }
    }

    private func start(_ event: OperationLogEvent, at now: DefaultTracerClock.Instant) {
        let (taken, released) = state.withLock { $0.takePending(event.operationID) }
        _ = released // a span context let go of outside the lock
        guard let pending = taken else { return }
        let span = makeSpan(for: event, pending, at: now, started: true)
        let followers = state.withLock { $0.started(event.operationID, span: span) }
        _ = followers // released outside the lock
        endSpans(of: pending.finishedChildren, under: span)
    }

    private func finish(_ event: OperationLogEvent, at now: DefaultTracerClock.Instant) {
        let (outcome, released) = state.withLock { $0.finish(event, at: now) }
        _ = released // a span context let go of outside the lock
        switch outcome {
        case let .started(span):
            end(span, with: event.errors, at: now)
        case let .neverStarted(finished):
            endNeverStarted(finished)
        case .keptForGroup, .unknown:
            break
        }
    }

    /// The span of an operation that never started (cancelled while it waited): from its add to
    /// its finish, so that its fate is visible, with those of its children that never started
    /// either under it.
    private func endNeverStarted(_ finished: TracingState.Finished) {
        let span = makeSpan(for: finished.event, finished.pending, at: finished.pending.addedAt, started: false)
        let (followers, lateChildren) = state.withLock { $0.neverStartedSpanMade(finished.event.operationID, span: span) }
        _ = followers // released outside the lock
        endSpans(of: finished.pending.finishedChildren + lateChildren, under: span)
        end(span, with: finished.event.errors, at: finished.at)
    }

    /// Children of a group that finished without starting before the group's span existed:
    /// their spans, under the group's, with the times they had.
    private func endSpans(of children: [TracingState.Finished], under group: any Span) {
        for var child in children {
            child.pending.parent = group.context
            endNeverStarted(child)
        }
    }

    private func end(_ span: any Span, with errors: [any Error], at instant: DefaultTracerClock.Instant) {
        for error in errors {
            span.recordError(error, attributes: [:], at: instant)
        }
        if !errors.isEmpty {
            span.setStatus(SpanStatus(code: .error, message: errors.map { "\($0)" }.joined(separator: "; ")))
        }
        span.end(at: instant)
    }

    private func makeSpan(for event: OperationLogEvent, _ pending: TracingState.Pending, at instant: DefaultTracerClock.Instant, started: Bool) -> any Span {
        let span = tracer.startSpan(event.operationName, context: pending.parent ?? .topLevel, ofKind: .internal, at: instant)
        span.attributes["operation.id"] = Int64(clamping: event.operationID.rawValue)
        if let queueName = event.queueName {
            span.attributes["queue.name"] = queueName
        }
        if !started {
            span.attributes["operation.started"] = false
        }
        for link in pending.links {
            span.addLink(SpanLink(context: link, attributes: [:]))
        }
        for spanEvent in pending.events {
            span.addEvent(spanEvent)
        }
        return span
    }
}

/// The spans on their way, under the logger's lock: what each operation's span will need, and
/// the spans of the operations running.
struct TracingState: Sendable {
    /// An operation added and not started yet.
    struct Pending: Sendable {
        var addedAt: DefaultTracerClock.Instant
        /// Its parent: its group's span, or the span current where it was added.
        var parent: ServiceContext?
        var groupID: OperationID?
        /// Its dependencies' span contexts, and the dependencies not started yet.
        var links: [ServiceContext] = []
        var events: [SpanEvent] = []
        /// Its children that finished without starting while it had no span yet (a group that
        /// has not started): their spans are made under its own once it has one.
        var finishedChildren: [Finished] = []
    }

    /// An operation that finished without starting, with what its span needs.
    struct Finished: Sendable {
        /// Its `.finished` event: its name, its queue, its errors.
        var event: OperationLogEvent
        var pending: Pending
        /// When it finished.
        var at: DefaultTracerClock.Instant
    }

    /// What an operation's finish comes to.
    enum FinishOutcome {
        /// It started: end its span.
        case started(any Span)
        /// It never started: make its span, from its add to its finish, and end it.
        case neverStarted(Finished)
        /// It never started, and its group's span does not exist yet: its span is made under the
        /// group's once it does (as the group starts, or once the span of a group that finished
        /// without starting is made).
        case keptForGroup
        /// Its add was not heard.
        case unknown
    }

    /// An operation that started: its span, and the operations waiting for its context (they
    /// were added with it as a dependency before it started).
    struct Running: Sendable {
        var span: any Span
    }

    /// A group that finished while some of its children were still pending: one thread can
    /// deliver a child's `.finished` after another delivered the group's, which the child's
    /// finish let finish. Kept until its last pending child is accounted for.
    enum EndedGroup {
        /// It never started, and its span is being made: children finishing meanwhile wait here.
        case spanComing(lateChildren: [Finished])
        /// Its span (ended) is this.
        case ended(ServiceContext)
    }

    private var pending: [OperationID: Pending] = [:]
    private var running: [OperationID: Running] = [:]
    /// For an operation not started yet, the operations that depend on it.
    private var followers: [OperationID: [OperationID]] = [:]
    /// For a group, how many of its children are pending (added, neither started nor finished).
    private var pendingChildren: [OperationID: Int] = [:]
    private var endedGroups: [OperationID: EndedGroup] = [:]

    mutating func added(_ event: OperationLogEvent, parent: ServiceContext?, at now: DefaultTracerClock.Instant) {
        let id = event.operationID
        guard pending[id] == nil, running[id] == nil else { return }
        var operation = Pending(addedAt: now, parent: parent, groupID: event.groupID)
        for dependency in event.dependencyIDs {
            if let span = running[dependency]?.span {
                operation.links.append(span.context)
            } else if pending[dependency] != nil {
                followers[dependency, default: []].append(id)
            }
        }
        pending[id] = operation
        if let groupID = event.groupID {
            pendingChildren[groupID, default: 0] += 1
        }
    }

    /// Keeps `event` for the operation's span; returns the span if it exists already.
    mutating func note(_ event: SpanEvent, for id: OperationID) -> (any Span)? {
        if let span = running[id]?.span { return span }
        pending[id]?.events.append(event)
        return nil
    }

    /// What the span of an operation about to start needs (its parent resolved: its group's
    /// span if it has one), and the context of an ended group no longer needed, to be let go of
    /// outside the lock.
    mutating func takePending(_ id: OperationID) -> (Pending?, released: EndedGroup?) {
        guard var operation = pending.removeValue(forKey: id) else { return (nil, nil) }
        guard let groupID = operation.groupID else { return (operation, nil) }
        if let context = groupContext(groupID) {
            operation.parent = context
        }
        return (operation, childLeftPending(of: groupID))
    }

    /// The context of the group's span, if it exists: running, or ended with children pending.
    private func groupContext(_ groupID: OperationID) -> ServiceContext? {
        if let group = running[groupID]?.span { return group.context }
        if case let .ended(context) = endedGroups[groupID] { return context }
        return nil
    }

    /// One child of the group is no longer pending; returns the ended group's entry if that was
    /// the last one it was kept for.
    private mutating func childLeftPending(of groupID: OperationID) -> EndedGroup? {
        guard let count = pendingChildren[groupID] else { return nil }
        if count > 1 {
            pendingChildren[groupID] = count - 1
            return nil
        }
        pendingChildren[groupID] = nil
        guard case .ended = endedGroups[groupID] else { return nil }
        return endedGroups.removeValue(forKey: groupID)
    }

    /// The operation's span started: operations that depend on it link to it.
    mutating func started(_ id: OperationID, span: any Span) -> [OperationID] {
        running[id] = Running(span: span)
        return linkFollowers(of: id, to: span)
    }

    /// Operations added with `id` as a dependency link to `span`.
    mutating func linkFollowers(of id: OperationID, to span: any Span) -> [OperationID] {
        let waiting = followers.removeValue(forKey: id) ?? []
        for follower in waiting {
            pending[follower]?.links.append(span.context)
        }
        return waiting
    }

    /// The span of `id`, which never started, was made: operations that depend on it link to
    /// it, and its children that finished while it was being made are returned, to be made under it.
    mutating func neverStartedSpanMade(_ id: OperationID, span: any Span) -> (followers: [OperationID], lateChildren: [Finished]) {
        let followers = linkFollowers(of: id, to: span)
        guard case let .spanComing(lateChildren) = endedGroups[id] else { return (followers, []) }
        endedGroups[id] = pendingChildren[id] == nil ? nil : .ended(span.context)
        return (followers, lateChildren)
    }

    /// The operation finished (`event`, at `now`): what that comes to, and the context of an
    /// ended group no longer needed, to be let go of outside the lock.
    mutating func finish(_ event: OperationLogEvent, at now: DefaultTracerClock.Instant) -> (FinishOutcome, released: EndedGroup?) {
        let id = event.operationID
        if let span = running.removeValue(forKey: id)?.span {
            followers[id] = nil
            if pendingChildren[id] != nil {
                endedGroups[id] = .ended(span.context)
            }
            return (.started(span), nil)
        }
        guard var operation = pending.removeValue(forKey: id) else { return (.unknown, nil) }
        if pendingChildren[id] != nil {
            endedGroups[id] = .spanComing(lateChildren: [])
        }
        guard let groupID = operation.groupID else {
            return (.neverStarted(Finished(event: event, pending: operation, at: now)), nil)
        }
        if let context = groupContext(groupID) {
            operation.parent = context
        }
        let outcome = childFinished(Finished(event: event, pending: operation, at: now), of: groupID)
        return (outcome, childLeftPending(of: groupID))
    }

    /// A child that never started finished: kept for its group's span to come, if nothing waits
    /// for its own span (an operation that depends on it may start meanwhile, and links to it
    /// only if its span exists by then), or made now.
    private mutating func childFinished(_ finished: Finished, of groupID: OperationID) -> FinishOutcome {
        guard followers[finished.event.operationID, default: []].isEmpty else { return .neverStarted(finished) }
        if pending[groupID] != nil {
            pending[groupID]?.finishedChildren.append(finished)
            return .keptForGroup
        }
        if case var .spanComing(lateChildren) = endedGroups[groupID] {
            lateChildren.append(finished)
            endedGroups[groupID] = .spanComing(lateChildren: lateChildren)
            return .keptForGroup
        }
        return .neverStarted(finished)
    }
}
