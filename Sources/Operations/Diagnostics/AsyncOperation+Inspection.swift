import Foundation

extension AsyncOperation {
    /// A picture of the operation now: its state and, while it waits, exactly what for (its
    /// unfinished dependencies, its conditions that have not answered, each category it waits
    /// for with the operation holding it and its own place in line, a suspended queue).
    ///
    /// Safe to call from any thread at any time; each part is read under the lock that guards it.
    ///
    /// ```swift
    /// print(save.snapshot())
    /// // save: waiting for categories; waits for category 'Database' (held by 'migrate'; 1st in line)
    /// ```
    public final func snapshot() -> OperationSnapshot {
        let facts = lifecycle.inspection
        let lineReason = facts.queue?.reasonForWaitingInLine(self, ticket: facts.linePlace.ticket)
        var state = Self.state(of: facts.phase)
        var reasons: [OperationSnapshot.Reason] = []
        if let lineReason {
            state = .waitingInLine
            reasons.append(lineReason)
        }
        switch facts.phase {
        case .initialized, .enqueuing, .pending:
            reasons += facts.unfinishedDependencies.map { .dependency($0.displayName) }
        case .evaluatingConditions:
            reasons += facts.unansweredConditions.map { .condition($0.name) }
        case .waitingForCategories where facts.categories.isEmpty:
            if lineReason == nil { state = .ready } // passing through on its way to Foundation
        case .waitingForCategories where !facts.holdsCategories && lineReason == nil:
            reasons += categoryReasons(place: facts.linePlace, categories: facts.categories, in: facts.queue?.engine ?? .shared)
            if let (category, holder) = facts.categoryLockGate?.awaited() {
                reasons.append(.categoryHeldElsewhere(category, holder: holder))
            }
        case .ready where lineReason == nil:
            if let queue = facts.queue, queue.isSuspended {
                reasons.append(.suspendedQueue(queue.nameInReasons))
            }
        default:
            break
        }
        return OperationSnapshot(name: displayName, state: state, isCancelled: facts.isCancelled, waitsFor: reasons)
    }

    /// The operations holding the categories this one waits for, by identity, whichever queue
    /// they are on (for the stall watch: since when each has been executing).
    func holdersOfAwaitedCategories() -> [(category: String, holder: AsyncOperation)] {
        let facts = lifecycle.inspection
        guard facts.phase == .waitingForCategories, !facts.holdsCategories, !facts.categories.isEmpty else { return [] }
        let engine = facts.queue?.engine ?? .shared
        return engine.exclusivity.standings(of: facts.linePlace, in: facts.categories).compactMap { standing in
            guard let holder = standing.holder, holder !== self else { return nil }
            return (standing.category, holder)
        }
    }

    private func categoryReasons(place: LinePlace, categories: [String], in engine: OperationsEngine) -> [OperationSnapshot.Reason] {
        engine.exclusivity.standings(of: place, in: categories).compactMap { standing in
            let holder = standing.holder.flatMap { $0 === self ? nil : $0.displayName }
            guard holder != nil || (standing.waitersAhead ?? 0) > 0 else { return nil } // free for it
            return .category(standing.category, heldBy: holder, waitersAhead: standing.waitersAhead)
        }
    }

    private static func state(of phase: OperationLifecycle.Phase) -> OperationSnapshot.State {
        switch phase {
        case .initialized: .initialized
        case .enqueuing, .pending: .waitingForDependencies
        case .evaluatingConditions: .evaluatingConditions
        case .waitingForCategories: .waitingForCategories
        case .ready: .ready
        case .executing: .executing
        case .finishing: .finishing
        case .finished: .finished
        }
    }
}
