/// The rules of a `GroupOperation`'s bookkeeping, without threads or side effects: which children
/// are admitted and unfinished, their errors, and when the group may finish.
///
/// A group finishes only once every child it admitted has finished: after executing, when the
/// last child finishes; without executing (cancelled, or a condition failed), by holding its
/// finish back until its cancelled children have drained.
struct GroupStateMachine {
    enum Phase: Equatable {
        /// Not executing yet: children are admitted and wait.
        case waiting
        /// Executing: finishes when no child is left.
        case executing
        /// Finishing without having executed, its finish held back until no child is left.
        case draining
        /// Drained: its held finish is being delivered. No child may join any more.
        case drained
        /// Finished (or finishing): no child may join any more.
        case done
    }

    /// What the group must do after an event.
    enum Action {
        case none
        /// Every child finished after the group executed: finish with these errors.
        case finish([any Error])
        /// Every child drained: deliver the finish held back, with the children's errors first.
        case deliverHeldFinish(childErrors: [any Error])
    }

    private(set) var phase = Phase.waiting
    /// Children admitted and not finished.
    private(set) var unfinishedChildren = 0
    /// Children admitted so far, finished or not (for progress).
    private(set) var admittedChildren = 0
    /// Every child's errors, in the order the children finished.
    private(set) var childErrors: [any Error] = []

    /// No child may join any more.
    var isDone: Bool { phase == .done || phase == .drained }

    /// Children admitted that have finished.
    var finishedChildren: Int { admittedChildren - unfinishedChildren }

    /// What becomes of a child that joins.
    enum Admission: Equatable {
        /// Counted: the group waits for it.
        case counted
        /// Counted, but the group is draining without having executed (cancelled, or a condition
        /// failed): its children never run, so this one must be cancelled too.
        case countedNeverToRun
        /// The group is done (the child was added as it finished): it cannot wait for it.
        case tooLate
    }

    /// A child joins.
    mutating func childAdmitted() -> Admission {
        guard !isDone else { return .tooLate }
        unfinishedChildren += 1
        admittedChildren += 1
        return phase == .draining ? .countedNeverToRun : .counted
    }

    mutating func childFinished(errors: [any Error]) -> Action {
        unfinishedChildren -= 1
        childErrors.append(contentsOf: errors)
        return settle()
    }

    /// The group executes: it finishes at once if it has no unfinished child.
    mutating func executionBegan() -> Action {
        guard phase == .waiting else { return .none }
        phase = .executing
        return settle()
    }

    /// What a group about to finish without executing does with its finish.
    enum HoldAction {
        /// Nothing to hold (it executed after all): finish as usual.
        case doNotHold
        /// Hold the finish back, cancel the children and let them drain: `childFinished`
        /// delivers it once the last one has finished.
        case drainChildren
        /// No child is left: deliver the held finish now, with the children's errors first.
        case deliverHeldFinish(childErrors: [any Error])
    }

    /// The group is about to finish without executing (cancelled, or a condition failed). It
    /// finishes only after its children, and with their errors, as a group that ran does.
    mutating func holdFinishWithoutExecuting() -> HoldAction {
        guard phase == .waiting else { return .doNotHold }
        guard unfinishedChildren == 0 else {
            phase = .draining
            return .drainChildren
        }
        phase = .drained
        return .deliverHeldFinish(childErrors: childErrors)
    }

    /// What a group that finished does with its children.
    enum Finish: Equatable {
        /// Nothing: it executed, and they have finished.
        case none
        /// It never executed: cancel its children and let its queue drain them.
        case drainChildren
    }

    /// The group finished.
    mutating func finished() -> Finish {
        defer { phase = .done }
        return phase == .waiting || phase == .draining || phase == .drained ? .drainChildren : .none
    }

    private mutating func settle() -> Action {
        guard unfinishedChildren == 0 else { return .none }
        switch phase {
        case .executing:
            phase = .done
            return .finish(childErrors)
        case .draining:
            phase = .drained
            return .deliverHeldFinish(childErrors: childErrors)
        case .waiting, .drained, .done:
            return .none
        }
    }
}
