import Foundation

extension AsyncOperation {
    // MARK: - Waiting

    /// Arranges to hear when `operation`, already counted as unfinished, finishes. Returns the
    /// plain operations it reaches, or once reached (itself, if it is one; `nil` if it finished):
    /// this one reaches them too, and its dependents hear of it before this returns.
    @discardableResult
    func startWaiting(for operation: Operation) -> PlainReach? {
        let id = ObjectIdentifier(operation)
        if let dependency = operation as? AsyncOperation {
            switch dependency.addDependent(self) {
            case .alreadyFinished:
                dependencyDidFinish(id)
                return nil
            case let .willTell(reached):
                if let reached {
                    widenReach(by: reached)
                }
                return reached
            }
        } else if operation.isFinished {
            dependencyDidFinish(id)
            return nil
        } else {
            let watcher = engine.dependencyWatcher.watch(operation) { [weak self] in
                self?.dependencyDidFinish(id)
            }
            if case let .stop(unneeded) = lifecycle.watch(id, with: watcher) {
                DependencyWatcher.stop(unneeded)
            }
            let reached = PlainReach(operation)
            widenReach(by: reached)
            return reached
        }
    }

    /// Widens what this operation reaches by `reached`, and tells its dependents, and theirs in
    /// turn, what each reaches now: one at a time, not recursively, as a chain may be long. Each
    /// passes on its whole reach, not only what was added, so a reach that turned unbounded
    /// makes its dependents' unbounded too.
    private func widenReach(by reached: PlainReach) {
        guard let first = lifecycle.widenReach(by: reached) else { return }
        var toTell = [first]
        while let widening = toTell.popLast() {
            for watcher in widening.dependents {
                guard let dependent = watcher.object as? AsyncOperation else { continue } // a listener reaches nothing
                if let next = dependent.lifecycle.widenReach(by: widening.reach) {
                    toTell.append(next)
                }
            }
        }
    }

    /// Registers `dependent` to be told when this operation finishes.
    func addDependent(_ dependent: any FinishWatcher) -> OperationLifecycle.Watching {
        lifecycle.addDependent(dependent)
    }

    func dependencyDidFinish(_ id: ObjectIdentifier) {
        perform(lifecycle.dependencyFinished(id))
    }

    func perform(_ action: OperationLifecycle.DependencyAction) {
        switch action {
        case .none:
            break
        case .announceReady:
            announceReadiness()
        case let .advance(action):
            advance(action)
        }
    }

    func notifyDependents(_ dependents: SmallArray<WeakFinishWatcher>) {
        if dependents.count > 1 {
            return notifyDependentsTogether(dependents)
        }
        // The context form: nothing is allocated unless the call has to be queued.
        Trampoline.run(with: (dependents, ObjectIdentifier(self))) { dependents, id in
            for index in dependents.indices {
                dependents[index].object?.dependencyDidFinish(id)
            }
        }
    }

    /// Dependents released together are told highest priority first, so that a slot freed by
    /// this finish goes to the one Foundation would start first; those on a serial queue in the
    /// order they were added to it (their tickets), since the first one told takes its turn, and
    /// it starts them in add order whatever their priority. (Out of line: a chain's one dependent
    /// is told without reading priorities or copying the list.)
    @inline(never)
    private func notifyDependentsTogether(_ dependents: SmallArray<WeakFinishWatcher>) {
        let ranked = dependents.array.enumerated().map { offset, watcher in
            (rank: Self.notificationRank(of: watcher.object), offset: offset, watcher: watcher)
        }
        let ordered = SmallArray(ranked.sorted { ($0.rank.slot, $0.rank.ticket, $0.offset) < ($1.rank.slot, $1.rank.ticket, $1.offset) }.map(\.watcher))
        Trampoline.run(with: (ordered, ObjectIdentifier(self))) { dependents, id in
            for index in dependents.indices {
                dependents[index].object?.dependencyDidFinish(id)
            }
        }
    }

    /// Where a dependent released with others is told: by slot priority; on a serial queue (or
    /// not on a queue of ours) at normal priority, then by its ticket there. A listener for a
    /// gated plain operation stands where that operation's ticket puts it; any other listener at
    /// normal priority with ticket 0, before every serial queue's dependents.
    private static func notificationRank(of watcher: (any FinishWatcher)?) -> (slot: UInt64, ticket: UInt64) {
        if let listener = watcher as? FinishListener {
            return (SlotLine.rank(of: .normal), listener.serialQueueTicket ?? 0)
        }
        guard let dependent = watcher as? AsyncOperation, let queue = dependent.lifecycle.queue else { return (SlotLine.rank(of: .normal), 0) }
        guard queue.maxConcurrentOperationCount == 1 else {
            return (SlotLine.rank(of: AsyncOperationQueue.slotPriority(of: dependent)), 0)
        }
        return (SlotLine.rank(of: .normal), dependent.lifecycle.ticket)
    }

    // MARK: - Cycles

    /// `dependency` closes a dependency cycle; `wasCounted` if it was just counted as
    /// unfinished (the operation itself never is).
    func recordCycle(through dependency: Operation, wasCounted: Bool = false) {
        let name = dependency.displayName
        switch lifecycle.recordCycle(through: ObjectIdentifier(dependency), name: name, wasCounted: wasCounted) {
        case .dependencyRemoved:
            break // removed on another thread meanwhile: no cycle is left
        case let .recorded(action):
            reportCycle(closedBy: name)
            advance(action)
        }
    }

    private func reportCycle(closedBy name: String) {
        OperationDiagnostics.report(.dependencyCycle, self, "depending on '\(name)' closes a dependency cycle; the operation will finish with an error instead of waiting forever")
    }

    /// `addDependency(self)`: a cycle, reported, and the operation finishes with an error when
    /// queued; once it no longer takes dependencies, ignored as any late dependency is.
    func addDependencyOnItself() {
        let name = displayName
        switch lifecycle.addSelfDependency(ObjectIdentifier(self), name: name) {
        case .alreadyThere:
            break
        case .tooLate:
            OperationDiagnostics.report(.configuredTooLate, self, "addDependency(_:) was called after the operation stopped waiting for dependencies; '\(name)' (the operation itself) was ignored")
        case let .cycleRecorded(action):
            reportCycle(closedBy: name)
            advance(action)
        }
    }

    /// Waits for `operation`, just added as a dependency and counted as unfinished, unless it
    /// leads back to this one: then the operation finishes with
    /// `AsyncOperationError.dependencyCycle` instead of waiting forever. Whether it waits.
    ///
    /// The wait and what it reaches are published before the search: of two adds on two threads
    /// that close a cycle together, and that both search, the one that searches last sees the
    /// other's. An add that read no live dependent reads them again once its wait is published:
    /// of two operations that nothing waits for, each made to depend on the other at the same
    /// moment, the one that reads last sees the other waiting for it, and searches.
    ///
    /// Where no cycle can close, nothing is searched. With a live dependent (an operation or a
    /// listener waiting for this one: `dependents`, read in the step that added `operation`),
    /// the whole graph behind `operation` is. With none, a cycle can only close through a plain
    /// operation that waits for this one, unseen, which `operation` must reach (`PlainReach`):
    /// the search starts from those. So a chain of `AsyncOperation`s built front to back searches nothing, or only
    /// what lies behind the plain operation its head waits for.
    ///
    /// A reach only grows (a dependency removed, or finished, leaves what it reached), so a hit
    /// from the plain operations reached is confirmed by a search from `operation` itself.
    @discardableResult
    func waitForNewDependency(_ operation: Operation, dependents: SmallArray<WeakFinishWatcher>) -> Bool {
        let reached = startWaiting(for: operation)
        let closesCycle = if Self.anyIsLive(dependents) || Self.anyIsLive(lifecycle.dependents) {
            dependencyWouldCloseCycle(operation)
        } else {
            reached?.leadsBack(to: self, from: operation) == true && dependencyWouldCloseCycle(operation)
        }
        guard closesCycle else { return true }
        recordCycle(through: operation, wasCounted: true)
        return false
    }

    /// Whether any of `dependents` is alive, read outside the lock: a load may be left holding
    /// the last reference to a dependent, whose `deinit` must not run under a lock.
    private static func anyIsLive(_ dependents: SmallArray<WeakFinishWatcher>) -> Bool {
        !dependents.isEmpty && dependents.contains { $0.object != nil } // the first test spares a chain's links the iteration
    }

    /// Whether `self` can be reached from `dependency` through unfinished dependencies: a search
    /// through the whole graph behind `dependency`.
    func dependencyWouldCloseCycle(_ dependency: Operation) -> Bool {
        var visited: Set<ObjectIdentifier> = []
        var stack: [Operation] = [dependency]
        while let next = stack.popLast() {
            if next === self { return true }
            guard visited.insert(ObjectIdentifier(next)).inserted, !next.isFinished else { continue }
            stack.append(contentsOf: next.dependencies)
        }
        return false
    }
}
