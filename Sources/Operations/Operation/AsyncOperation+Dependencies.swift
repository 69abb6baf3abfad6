import Foundation

extension AsyncOperation {
    // MARK: - Waiting

    /// Arranges to hear when `operation`, already counted as unfinished, finishes.
    func startWaiting(for operation: Operation) {
        let id = ObjectIdentifier(operation)
        if let dependency = operation as? AsyncOperation {
            if !dependency.addDependent(self) {
                dependencyDidFinish(id)
            }
        } else if operation.isFinished {
            dependencyDidFinish(id)
        } else {
            let watcher = DependencyWatcher.watch(operation) { [weak self] in
                self?.dependencyDidFinish(id)
            }
            lifecycle.withLock { $0.watch(id, with: watcher) }
        }
    }

    /// Registers `dependent` to be told when this operation finishes; `false` if it already has.
    func addDependent(_ dependent: any FinishWatcher) -> Bool {
        lifecycle.withLock { $0.addDependent(dependent) }
    }

    func dependencyDidFinish(_ id: ObjectIdentifier) {
        switch lifecycle.withLock({ $0.dependencyFinished(id) }) {
        case .none:
            break
        case .announceReady:
            announceReadiness()
        case let .advance(action):
            advance(action)
        }
    }

    func notifyDependents(_ dependents: [WeakFinishWatcher]) {
        let id = ObjectIdentifier(self)
        Trampoline.run {
            for dependent in dependents {
                dependent.object?.dependencyDidFinish(id)
            }
        }
    }

    // MARK: - Cycles

    func recordCycle(through dependency: Operation) {
        let name = dependency.displayName
        lifecycle.withLock { $0.recordCycle(through: name) }
        OperationDiagnostics.report(.dependencyCycle, self, "depending on '\(name)' closes a dependency cycle; the operation will finish with an error instead of waiting forever")
    }

    /// Whether `self` can be reached from `dependency` through unfinished dependencies.
    ///
    /// Only an operation that others already wait for can close a cycle, so the common case
    /// (building a chain of `AsyncOperation`s front to back) costs one check. Plain Foundation
    /// operations that wait for this one are invisible to it, so a plain dependency is always
    /// searched.
    func dependencyWouldCloseCycle(_ dependency: Operation, searchingEveryDependency: Bool = false) -> Bool {
        let hasDependents = lifecycle.withLock { state in
            state.dependents.contains { $0.object != nil }
        }
        guard searchingEveryDependency || hasDependents || !(dependency is AsyncOperation) else { return false }
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
