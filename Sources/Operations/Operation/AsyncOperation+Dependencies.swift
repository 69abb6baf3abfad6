import Foundation

extension AsyncOperation {
    // MARK: - Waiting

    /// Arranges to hear when `operation`, already counted as unfinished, finishes.
    func startWaiting(for operation: Operation) {
        let id = ObjectIdentifier(operation)
        if let dependency = operation as? AsyncOperation {
            if dependency.addDependent(self) == .alreadyFinished {
                dependencyDidFinish(id)
            }
        } else if operation.isFinished {
            dependencyDidFinish(id)
        } else {
            let watcher = engine.dependencyWatcher.watch(operation) { [weak self] in
                self?.dependencyDidFinish(id)
            }
            lifecycle.watch(id, with: watcher)
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

    /// Whether `self` can be reached from `dependency` through unfinished dependencies.
    ///
    /// Only an operation that others already wait for can close a cycle, so the common case
    /// (building a chain of `AsyncOperation`s front to back) searches nothing: `hasLiveDependents`
    /// comes with the step that added the dependency. Plain Foundation operations that wait for
    /// this one are invisible to it, so a plain dependency is always searched; so is every
    /// dependency when `hasLiveDependents` is not known (`true`).
    func dependencyWouldCloseCycle(_ dependency: Operation, hasLiveDependents: Bool = true) -> Bool {
        guard hasLiveDependents || !(dependency is AsyncOperation) else { return false }
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
