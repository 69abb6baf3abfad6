import Foundation

// Events and questions whose answer needs several facts of the lifecycle at once. Each is answered
// in one step, so that `LifecycleStorage` takes its lock once for it and no caller reads the
// state a second time to decide.
extension OperationLifecycle {
    // MARK: - Questions

    /// What `isReady` answers.
    enum Readiness {
        /// On a queue of ours, or past it: the lifecycle decides alone.
        case decided(Bool)
        /// On no queue of ours: Foundation's own readiness counts too (Apple's rule for subclasses
        /// that override `isReady`).
        case alsoFoundations(Bool)
    }

    var readiness: Readiness {
        phase == .initialized ? .alsoFoundations(isReadyForFoundation) : .decided(isReadyForFoundation)
    }

    /// What waiting for the operation's finish, or failing for it, reads from it.
    struct Outcome {
        let errors: [any Error]
        let isCancelled: Bool
    }

    var outcome: Outcome {
        Outcome(errors: errors, isCancelled: isCancelled)
    }

    /// What a blocking wait needs to know before it begins.
    struct WaitStart {
        let phase: Phase
        let isBeforeExecution: Bool
        /// The queue it is on: one of ours, or the plain queue that started it.
        let queue: OperationQueue?
    }

    var waitStart: WaitStart {
        WaitStart(phase: phase, isBeforeExecution: isBeforeExecution, queue: queue ?? foreignQueue)
    }

    /// The queue the operation is on, or last ran on: for messages.
    var lastKnownQueue: QueueMention? {
        lastQueueMention
    }

    /// The categories it holds right now.
    var heldCategories: [String] {
        holdsCategories ? categories : []
    }

    /// Where a group's children stand in lines, from what the group knows: its queue (whose
    /// enclosing group may have a root already) and its own place.
    struct PlaceOnQueue {
        let queue: AsyncOperationQueue?
        let place: LinePlace
    }

    var placeOnQueue: PlaceOnQueue {
        PlaceOnQueue(queue: queue, place: linePlace)
    }

    /// Whether `error` is among its errors (a wait's own timeout, say).
    func collected(_ error: AsyncOperationError) -> Bool {
        errors.contains { ($0 as? AsyncOperationError) == error }
    }

    /// What a blocking wait whose timeout passed does once it cancelled the operation with
    /// `timedOut`.
    enum TimedOutWait {
        /// Throw the timeout: the cancel took it, or the operation's finish began and is held
        /// until its children finish (a group finished by hand), which may take any time.
        case throwTimeout
        /// It finished on its own just before the cancel; its finish is being delivered (for a
        /// moment only: an observer told of it may block).
        case waitForFinishBeingDelivered
    }

    /// What a blocking wait whose timeout passed does now, having cancelled the operation with
    /// `timedOut` (asked again while it waits for a finish being delivered).
    func afterWaitTimedOut(_ timedOut: AsyncOperationError) -> TimedOutWait {
        collected(timedOut) || holdsFinish ? .throwTimeout : .waitForFinishBeingDelivered
    }

    /// Whether an `UpstreamCondition` already links it to the operation `upstream`.
    func isLinked(toUpstream upstream: ObjectIdentifier) -> Bool {
        conditions.contains { ($0 as? UpstreamCondition)?.upstreamID == upstream }
    }

    /// Where it stands in its categories' lines while it waits for them: what stepping out of
    /// them (its queue was suspended) needs. `nil` if it stands in none.
    struct StandingInLine {
        let place: LinePlace
        let categories: [String]
        let queue: AsyncOperationQueue
        let ticket: UInt64
        let lockGate: CategoryLockGate?
    }

    var standingInLine: StandingInLine? {
        guard phase == .waitingForCategories, isInLine, !holdsCategories, !categories.isEmpty, let queue else { return nil }
        return StandingInLine(place: linePlace, categories: categories, queue: queue, ticket: ticket, lockGate: categoryLockGate)
    }

    // MARK: - Events

    /// What recording a dependency cycle came to.
    enum CycleRecording {
        /// Recorded: go on as `action` says.
        case recorded(AdvanceAction)
        /// The dependency was removed since it was added (on another thread): no cycle is left,
        /// and nothing is recorded (its identity, no longer held, could pass to another).
        case dependencyRemoved
    }

    /// The dependency `id`, named `name`, closes a dependency cycle; `wasCounted` if it was just
    /// counted as unfinished (then it is no longer waited for). An operation that waits for its
    /// dependencies finishes now: the dependency it waited for last may have finished while
    /// this one was counted, and no other step would move it on.
    mutating func recordCycle(through id: ObjectIdentifier, name: String, wasCounted: Bool) -> CycleRecording {
        // (A finished operation let go of its dependencies: that one was not removed.)
        if wasCounted, phase != .finished, !dependencies.contains(where: { ObjectIdentifier($0) == id }) {
            return .dependencyRemoved
        }
        markCycle(closedBy: id, name: name, wasCounted: wasCounted)
        return .recorded(advanceIfDependenciesFinished())
    }

    /// What beginning a condition evaluation asks of the operation.
    enum EvaluationStart {
        /// The conditions were handed out before: nothing to do.
        case alreadyHandedOut
        /// Nothing is left to evaluate (every condition is satisfied by construction, say):
        /// perform this instead.
        case settled(ConditionAction)
        /// Call `evaluate(for:completion:)` of the conditions `awaited` names (or ask those that
        /// answer at once), then `conditionsHandedOut(answeredAtOnce:)`.
        case handOut(awaited: ConditionIndexSet)
    }

    /// The conditions were handed out (which counted as a notification in flight).
    struct HandedOut {
        /// What the answers given at once settled, if anything: handle it first.
        let settled: ConditionAction
        /// Conditions that have not answered yet.
        let unanswered: Int
        /// Its queue, whose timeout bounds the wait for them.
        let queue: AsyncOperationQueue?
        /// A finish that came meanwhile and waited for the handing out.
        let then: FinishAction
    }

    /// Every awaited condition was handed out; `answeredAtOnce` are the answers of those that
    /// answered on the spot (`AnswersAtOnce`), taken in the same step.
    mutating func conditionsHandedOut(answeredAtOnce: AnsweredConditions = AnsweredConditions()) -> HandedOut {
        let settled = answeredAtOnce.isEmpty ? .none : conditionsAnswered(answeredAtOnce)
        return HandedOut(settled: settled, unanswered: unansweredConditionCount, queue: queue, then: notificationDelivered())
    }

    /// Leaving its categories' lines to park on its queue until it may ask again.
    struct Parking {
        let move: LineMove
        /// Its place in the queue's order, kept for when it comes back.
        let ticket: UInt64
        let queue: AsyncOperationQueue?
    }

    mutating func leaveLineToPark() -> Parking {
        Parking(move: leaveLine(), ticket: ticket, queue: queue)
    }

    /// What a grant of its categories within the process comes to.
    enum Grant {
        /// A lock extends some of them beyond the process: their leases come first.
        case acquireLeases(CategoryLockGate)
        /// Held wherever they reach: report `categories` as granted (through `logger`, if its
        /// queue has one), then perform `then`.
        case held(categories: [String], logger: LoggingObserver?, then: GrantAction)
    }

    /// Its categories were granted within the process; `leasesAcquired`: and beyond it, by the
    /// lock gate.
    mutating func categoriesGranted(leasesAcquired: Bool) -> Grant {
        // An operation whose finish has begun (a cancel came first) asks no lock for a lease,
        // which could keep the category from another process for nothing, and is not heard
        // granted them: its `.finished` is its last event.
        if !leasesAcquired, !hasBegunFinishing, let categoryLockGate { return .acquireLeases(categoryLockGate) }
        let heardBy = hasBegunFinishing ? nil : logger
        return .held(categories: categories, logger: heardBy, then: categoriesGranted())
    }
}
