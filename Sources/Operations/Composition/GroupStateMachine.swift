/// The rules of a `GroupOperation`'s bookkeeping, without threads or side effects: which children
/// are admitted and unfinished, their errors, and when the group may finish.
///
/// A group finishes only once every child it admitted has finished: after executing, when the
/// last child finishes; without executing (cancelled, or a condition failed), or finished by hand
/// (`finish(with:)`) while children are left, by holding its finish back until its cancelled
/// children have drained.
///
/// `Child` is what identifies a child (`Foundation.Operation` in a group; anything in a test).
/// The children admitted while the group waits are kept until it executes: if it never does, they
/// are cancelled by name, since one still on its way into the children's queue escapes that
/// queue's `cancelAllOperations()`.
struct GroupStateMachine<Child> {
    enum Phase: Equatable {
        /// Not executing yet: children are admitted and wait.
        case waiting
        /// Executing: finishes when no child is left.
        case executing
        /// Finishing other than by its last child's finish (without having executed, or by hand),
        /// its finish held back until no child is left.
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
    /// Children admitted while the group waits, until it executes (or never will).
    private(set) var childrenBeforeExecution: [Child] = []

    /// No child may join any more.
    var isDone: Bool { phase == .done || phase == .drained }
    /// It finishes other than by its last child's finish (cancelled before it executed, a
    /// condition failed, or finished by hand): its children are being stopped, a composite or a
    /// retry starts no more, and a child that joins late must not run.
    private(set) var stopsChildren = false

    /// Children admitted that have finished.
    var finishedChildren: Int { admittedChildren - unfinishedChildren }

    /// What becomes of a child that joins.
    enum Admission: Equatable {
        /// Counted: the group waits for it.
        case counted
        /// Counted, but the group is cancelled or draining (a condition failed, or finished by
        /// hand): its children are stopped, so this one must be cancelled too.
        case countedNeverToRun
        /// The group is done (the child was added as it finished): it cannot wait for it.
        case tooLate
        /// As `tooLate`, and the group is cancelled or stopped its children: this one must not
        /// run either.
        case tooLateNeverToRun
    }

    /// A child joins; `groupIsCancelled` says whether the group was cancelled (its children then
    /// must not run, whatever the phase).
    mutating func childAdmitted(_ child: Child, groupIsCancelled: Bool) -> Admission {
        if let tooLate = admissionOnceDone(groupIsCancelled: groupIsCancelled) {
            return tooLate
        }
        let mustNotRun = childrenMustNotRun(groupIsCancelled: groupIsCancelled)
        unfinishedChildren += 1
        admittedChildren += 1
        if phase == .waiting {
            childrenBeforeExecution.append(child)
        }
        return mustNotRun ? .countedNeverToRun : .counted
    }

    /// What becomes of children that join once the group is done (`.tooLate` or
    /// `.tooLateNeverToRun`), without admitting them; `nil` while it still takes children.
    func admissionOnceDone(groupIsCancelled: Bool) -> Admission? {
        guard isDone else { return nil }
        return childrenMustNotRun(groupIsCancelled: groupIsCancelled) ? .tooLateNeverToRun : .tooLate
    }

    /// Whether the group's children must not run (start nothing more): it is cancelled, or it
    /// stops them (`stopsChildren`).
    func childrenMustNotRun(groupIsCancelled: Bool) -> Bool {
        stopsChildren || groupIsCancelled
    }

    mutating func childFinished(errors: [any Error]) -> Action {
        unfinishedChildren -= 1
        if !errors.isEmpty { // appending nothing still took Array's copy-on-write slow path
            childErrors.append(contentsOf: errors)
        }
        return settle()
    }

    /// What the group's execution begins with.
    struct ExecutionStart {
        let action: Action
        /// The children admitted while it waited, no longer needed: released by the caller after
        /// unlocking (a child's `deinit` is user code).
        let released: [Child]
    }

    /// The group executes: it finishes at once if it has no unfinished child.
    mutating func executionBegan() -> ExecutionStart {
        guard phase == .waiting else { return ExecutionStart(action: .none, released: []) }
        phase = .executing
        return ExecutionStart(action: settle(), released: takeChildrenBeforeExecution())
    }

    /// What a group about to finish does with its finish.
    enum HoldAction {
        /// Nothing to hold (its children have all finished): finish as usual.
        case doNotHold
        /// Hold the finish back, cancel the children (`cancel`, and whatever the queue holds)
        /// and let them drain: `childFinished` delivers it once the last one has finished.
        case drainChildren(cancel: [Child])
        /// Finished by hand while it executes: hold the finish back and interrupt the children
        /// as a cancel would (a composite or a retry stops too); `childFinished` delivers it once
        /// the last one has finished.
        case interruptChildren
        /// No child is left: deliver the held finish now, with the children's errors first;
        /// `released` are dropped after unlocking.
        case deliverHeldFinish(childErrors: [any Error], released: [Child])
    }

    /// The group is about to finish other than by its last child's finish: without executing
    /// (cancelled, or a condition failed), or by hand (`finish(with:)`, in a subclass's
    /// `execute()` before its children started, or while they run). It finishes only after its
    /// children, and with their errors, as a group that ran does.
    mutating func holdFinish() -> HoldAction {
        switch phase {
        case .waiting:
            stopsChildren = true
            guard unfinishedChildren == 0 else {
                phase = .draining
                return .drainChildren(cancel: takeChildrenBeforeExecution())
            }
            phase = .drained
            return .deliverHeldFinish(childErrors: childErrors, released: takeChildrenBeforeExecution())
        case .executing where unfinishedChildren > 0:
            stopsChildren = true
            phase = .draining
            return .interruptChildren
        case .executing, .draining, .drained, .done:
            return .doNotHold // its last child finished (the group's own finish), or held already
        }
    }

    /// What a group that finished does with its children.
    enum Finish {
        /// Nothing: it executed, and they have finished.
        case none
        /// It stopped its children (it never executed, or was finished by hand): cancel them
        /// (`cancel`, and whatever its queue holds) and let its queue drain them.
        case drainChildren(cancel: [Child])
    }

    /// The group finished.
    mutating func finished() -> Finish {
        defer { phase = .done }
        switch phase {
        case .waiting, .draining, .drained:
            stopsChildren = true
            return .drainChildren(cancel: takeChildrenBeforeExecution())
        case .executing, .done:
            return .none
        }
    }

    private mutating func takeChildrenBeforeExecution() -> [Child] {
        defer { childrenBeforeExecution = [] }
        return childrenBeforeExecution
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
