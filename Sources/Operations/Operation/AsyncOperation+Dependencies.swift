import Foundation

extension AsyncOperation {
    // MARK: - Waiting

    /// What waiting for a dependency learned of where it leads.
    enum Reach {
        /// It is, or waits (directly or not) for, an operation that is not an `AsyncOperation`,
        /// unfinished when it began waiting: a cycle could run through it unseen.
        case plainOperation
        /// Only `AsyncOperation`s, or it finished.
        case asyncOperationsOnly
    }

    /// Arranges to hear when `operation`, already counted as unfinished, finishes; whether it
    /// reaches a plain operation (if so, this one does too, and its dependents hear of it).
    @discardableResult
    func startWaiting(for operation: Operation) -> Reach {
        let id = ObjectIdentifier(operation)
        if let dependency = operation as? AsyncOperation {
            switch dependency.addDependent(self) {
            case .alreadyFinished:
                dependencyDidFinish(id)
                return .asyncOperationsOnly
            case .willTell(reachingPlainOperation: false):
                return .asyncOperationsOnly
            case .willTell(reachingPlainOperation: true):
                tellReachOfPlainOperation(lifecycle.reachPlainOperation())
                return .plainOperation
            }
        } else if operation.isFinished {
            dependencyDidFinish(id)
            return .asyncOperationsOnly
        } else {
            let watcher = engine.dependencyWatcher.watch(operation) { [weak self] in
                self?.dependencyDidFinish(id)
            }
            tellReachOfPlainOperation(lifecycle.watch(id, with: watcher))
            return .plainOperation
        }
    }

    /// Tells `dependents`, and theirs in turn, that they reach a plain operation now (through
    /// this one): one at a time, not recursively, as a chain of them may be long.
    private func tellReachOfPlainOperation(_ dependents: SmallArray<WeakFinishWatcher>) {
        guard !dependents.isEmpty else { return }
        var toTell = Array(dependents)
        while let next = toTell.popLast() {
            guard let dependent = next.object as? AsyncOperation else { continue } // a listener reaches nothing
            toTell.append(contentsOf: dependent.lifecycle.reachPlainOperation())
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
        // The context form: nothing is allocated unless the call has to be queued.
        Trampoline.run(with: (dependents, ObjectIdentifier(self))) { dependents, id in
            for index in dependents.indices {
                dependents[index].object?.dependencyDidFinish(id)
            }
        }
    }

    // MARK: - Cycles

    /// `dependency` closes a dependency cycle; `forgetting` is its identity if it was just
    /// counted as unfinished.
    func recordCycle(through dependency: Operation, forgetting id: ObjectIdentifier? = nil) {
        let name = dependency.displayName
        let action = lifecycle.recordCycle(through: name, forgetting: id)
        OperationDiagnostics.report(.dependencyCycle, self, "depending on '\(name)' closes a dependency cycle; the operation will finish with an error instead of waiting forever")
        advance(action)
    }

    /// Waits for `operation`, just added as a dependency and counted as unfinished, unless it
    /// leads back to this one: then the operation finishes with
    /// `AsyncOperationError.dependencyCycle` instead of waiting forever. Whether it waits.
    ///
    /// The graph behind `operation` is searched only where a cycle can close. An `AsyncOperation`
    /// that waits for this one is its live dependent (`hasLiveDependents`, read in the step that
    /// added `operation`); with none, a cycle can only close through a plain operation that
    /// waits for this one, unseen, which `operation` must then reach (`Reach`). So a chain of
    /// `AsyncOperation`s built front to back searches nothing.
    @discardableResult
    func waitForNewDependency(_ operation: Operation, hasLiveDependents: Bool) -> Bool {
        if hasLiveDependents || !(operation is AsyncOperation) {
            guard dependencyWouldCloseCycle(operation) else {
                startWaiting(for: operation)
                return true
            }
        } else if startWaiting(for: operation) == .asyncOperationsOnly || !dependencyWouldCloseCycle(operation) {
            return true
        }
        recordCycle(through: operation, forgetting: ObjectIdentifier(operation))
        return false
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
