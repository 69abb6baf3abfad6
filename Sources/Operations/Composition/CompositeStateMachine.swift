import Foundation

/// The rules of a composite (cascade or transaction), without threads or side effects.
///
/// `CompositeOperation` keeps one under its lock. Each event method changes the state and returns
/// the steps to take next (build and add a child, start a rerun timer, call the completion
/// handler, cancel the composite); the composite takes them after unlocking, so user code (the
/// children's factories and the handlers) never runs under the lock.
///
/// `Child` is the operation type: the machine only keeps children to hand them back for
/// cancellation, and tells them apart by identity.
struct CompositeStateMachine<Child: AnyObject> {
    enum Mode {
        /// A cascade: one child at a time, each after the one before it succeeded.
        case serial
        /// A transaction: every child at once.
        case concurrent
    }

    enum Phase {
        /// Declared, not executing yet.
        case idle
        case running
        /// Cancelled, from outside or by a `.cancel` resolution: nothing more is started.
        case cancelled
        /// Every child succeeded (or was carried on); the completion handler was called.
        case completed
    }

    enum SlotState: Equatable {
        /// Not started yet (a cascade's later children).
        case waiting
        /// Due to start: its factory is being called.
        case launching
        /// Its operation is on the composite's queue.
        case running
        /// Failed; the cancellation handler is deciding.
        case resolving
        /// To be run again once a timer fires.
        case delayed
        case succeeded
        /// Failed, and the handler answered `.carryOn`.
        case carriedOn

        var isDone: Bool { self == .succeeded || self == .carriedOn }
    }

    struct Slot: Equatable {
        var state = SlotState.waiting
        /// How many times the child was started (or is being started).
        var attempts = 0
    }

    /// A live operation the composite added: a child's current attempt or a rerun timer.
    struct Entry {
        let child: Child
        let slot: Int
        let isTimer: Bool
    }

    /// What the composite does next.
    enum Step: Equatable {
        /// Call the child's factory and add the new operation (attempt `attempt`).
        case launch(slot: Int, attempt: Int)
        /// Start a timer; when it fires, ask `delayElapsed` whether to launch.
        case launchAfter(delay: TimeInterval, slot: Int, attempt: Int)
        /// Call the completion handler.
        case complete
        /// Cancel the composite itself (which cancels its live children).
        case cancelComposite
    }

    /// What to do with a child that finished.
    enum FinishReaction: Equatable {
        /// Record its errors and take `steps`.
        case record(steps: [Step])
        /// Ask the cancellation handler, then call `resolve`.
        case askHandler(slot: Int, attempt: Int)
    }

    /// The outcome of the cancellation handler's answer.
    struct Resolution: Equatable {
        /// Whether the failed child's errors become the composite's.
        var keepsErrors: Bool
        var steps: [Step]
    }

    let mode: Mode
    private(set) var phase = Phase.idle
    private(set) var slots: [Slot]
    private var live: [ObjectIdentifier: Entry] = [:]

    init(mode: Mode, childCount: Int) {
        self.mode = mode
        self.slots = Array(repeating: Slot(), count: childCount)
    }

    // MARK: - Events

    /// The composite executes: start the first child (cascade) or all of them (transaction).
    mutating func start() -> [Step] {
        guard phase == .idle else { return [] }
        phase = .running
        guard !slots.isEmpty else { return complete() }
        switch mode {
        case .serial:
            return [launch(0)]
        case .concurrent:
            return slots.indices.map { launch($0) }
        }
    }

    /// What to do with a child a factory just made.
    enum LaunchAction: Equatable {
        /// Add it: it is the slot's current attempt.
        case add
        /// The composite was cancelled meanwhile (or the attempt is stale): add it cancelled,
        /// so that it still finishes (the composite waits for it) rather than never.
        case addCancelled
    }

    /// The factory of `slot` returned `child` for `attempt`.
    mutating func launched(_ child: Child, slot: Int, attempt: Int) -> LaunchAction {
        guard phase == .running, slots.indices.contains(slot),
              slots[slot].state == .launching, slots[slot].attempts == attempt
        else { return .addCancelled }
        slots[slot].state = .running
        live[ObjectIdentifier(child)] = Entry(child: child, slot: slot, isTimer: false)
        return .add
    }

    /// What to do with a rerun timer just made.
    enum TimerAction: Equatable {
        case add
        /// The composite was cancelled meanwhile: the rerun will not happen.
        case drop
    }

    /// A rerun timer for `slot` was created.
    mutating func timerCreated(_ timer: Child, slot: Int) -> TimerAction {
        guard phase == .running else { return .drop }
        live[ObjectIdentifier(timer)] = Entry(child: timer, slot: slot, isTimer: true)
        return .add
    }

    /// The rerun timer of `slot` fired: the attempt to launch now, unless the composite was
    /// cancelled meanwhile.
    mutating func delayElapsed(slot: Int, attempt: Int) -> [Step] {
        guard phase == .running, slots.indices.contains(slot),
              slots[slot].state == .delayed, slots[slot].attempts == attempt
        else { return [] }
        slots[slot].state = .launching
        return [.launch(slot: slot, attempt: attempt)]
    }

    /// An operation on the composite's queue finished. Operations the composite did not launch
    /// (children added with `addChild`, operations children produced) are only recorded.
    /// `compositeIsStopping`: the composite was cancelled (or finished by hand) already, though
    /// that has not reached this machine yet (its observers are hearing the cancel): no handler is
    /// called any more.
    mutating func childFinished(_ id: ObjectIdentifier, failed: Bool, compositeIsStopping: Bool) -> FinishReaction {
        noteStop(compositeIsStopping)
        guard let entry = live.removeValue(forKey: id), !entry.isTimer, phase == .running else {
            return .record(steps: [])
        }
        guard failed else {
            slots[entry.slot].state = .succeeded
            return .record(steps: advance(after: entry.slot))
        }
        slots[entry.slot].state = .resolving
        return .askHandler(slot: entry.slot, attempt: slots[entry.slot].attempts)
    }

    /// The cancellation handler answered `resolution` for the child in `slot`;
    /// `compositeIsStopping` as for `childFinished`.
    mutating func resolve(slot: Int, with resolution: CompositeResolution, compositeIsStopping: Bool) -> Resolution {
        noteStop(compositeIsStopping)
        guard phase == .running, slots.indices.contains(slot), slots[slot].state == .resolving else {
            // Cancelled while the handler decided: the answer no longer matters.
            return Resolution(keepsErrors: true, steps: [])
        }
        switch resolution {
        case .cancel:
            phase = .cancelled
            return Resolution(keepsErrors: true, steps: [.cancelComposite])
        case let .rerun(after: delay):
            slots[slot].attempts += 1
            let attempt = slots[slot].attempts
            if delay > 0 {
                slots[slot].state = .delayed
                return Resolution(keepsErrors: false, steps: [.launchAfter(delay: delay, slot: slot, attempt: attempt)])
            }
            slots[slot].state = .launching
            return Resolution(keepsErrors: false, steps: [.launch(slot: slot, attempt: attempt)])
        case .carryOn:
            slots[slot].state = .carriedOn
            return Resolution(keepsErrors: false, steps: advance(after: slot))
        }
    }

    /// The composite is cancelled: nothing more starts. Returns the live operations to cancel.
    mutating func cancel() -> [Child] {
        if phase == .idle || phase == .running {
            phase = .cancelled
        }
        return live.values.map(\.child)
    }

    /// A cancel (or a finish by hand) of the composite seen before `cancel()` reached the
    /// machine stops it as that will (the live operations are cancelled then).
    private mutating func noteStop(_ compositeIsStopping: Bool) {
        if compositeIsStopping, phase == .idle || phase == .running {
            phase = .cancelled
        }
    }

    /// The composite finished: let go of every operation.
    mutating func release() {
        live = [:]
    }

    // MARK: - Helpers

    private mutating func launch(_ slot: Int) -> Step {
        slots[slot].attempts += 1
        slots[slot].state = .launching
        return .launch(slot: slot, attempt: slots[slot].attempts)
    }

    /// `slot` is done: start the next child (cascade), or complete once every child is done.
    private mutating func advance(after slot: Int) -> [Step] {
        switch mode {
        case .serial:
            let next = slot + 1
            return next < slots.count ? [launch(next)] : complete()
        case .concurrent:
            return slots.allSatisfy(\.state.isDone) ? complete() : []
        }
    }

    private mutating func complete() -> [Step] {
        phase = .completed
        return [.complete]
    }
}
