import Foundation

/// One operation's categories held beyond its process: acquires their leases once the operation
/// holds the categories within the process, gives them back with the categories, and cancels the
/// operation if a lease is lost. The rules are `CategoryLockGateState`'s; this performs them.
final class CategoryLockGate: Sendable {
    /// The categories that have a lock, sorted by name: every process asks in this order. Each
    /// name is in canonical composition (`CategoryName`), as the locks are asked for it.
    let locks: [(category: String, lock: any CategoryLock)]
    private let bindings: CategoryLockBindings
    /// Where the operation holds its categories within the process.
    private let exclusivity: ExclusivityController
    private let state = Locked<CategoryLockGateState>.make(CategoryLockGateState())

    private init(locks: [(category: String, lock: any CategoryLock)], engine: OperationsEngine) {
        self.locks = locks
        self.bindings = engine.categoryLockBindings
        self.exclusivity = engine.exclusivity
    }

    enum Making {
        case gate(CategoryLockGate)
        /// `category` is named with two different locks (by these conditions, or by these and
        /// other operations in the process).
        case conflict(category: String)
    }

    /// The gate for the locks that `conditions` name, or `nil` if they name none (the common
    /// case, checked without allocating).
    static func make(for conditions: [any OperationCondition], engine: OperationsEngine) -> Making? {
        var locks: [String: any CategoryLock] = [:]
        for index in conditions.indices { // by index: each condition is read in place, not copied out
            guard let lock = conditions[index].categoryLock else { continue }
            for category in conditions[index].mutuallyExclusiveCategories {
                if let named = locks[category], named.identity != lock.identity {
                    return .conflict(category: category)
                }
                locks[category] = lock
            }
        }
        guard !locks.isEmpty else { return nil }
        // Every lock hears one spelling of a name (NFC), whichever the conditions used.
        let sorted = locks.sorted { $0.key < $1.key }.map { (category: CategoryName.canonical($0.key), lock: $0.value) }
        if let conflict = engine.categoryLockBindings.bind(sorted) {
            return .conflict(category: conflict)
        }
        return .gate(CategoryLockGate(locks: sorted, engine: engine))
    }

    // MARK: Acquiring

    /// `operation` holds its categories within the process: acquire the leases, then let it go on
    /// (`AsyncOperation.categoryLocksAcquired()`).
    func begin(for operation: AsyncOperation) {
        switch state.withLock({ $0.begin() }) {
        case .none:
            break
        case .giveBackLocally:
            operation.categoryLocksAcquired(grantedBy: exclusivity)
        case let .acquire(round):
            acquire(from: 0, holding: [:], round: round, for: operation)
        }
    }

    /// Asks for the lease of `locks[index]`, then the next, holding `leases`; the last one lets
    /// the operation go on.
    private func acquire(from index: Int, holding leases: [String: any CategoryLease], round: UInt64, for operation: AsyncOperation) {
        guard index < locks.count else {
            perform(state.withLock { $0.acquired(leases, round: round) }, for: operation)
            return
        }
        let (category, lock) = locks[index]
        let request = CategoryLockRequest(category: category)
        guard case .ask = state.withLock({ $0.nowAcquiring(category, with: request, round: round) }) else {
            leases.values.forEach { $0.release() }
            perform(state.withLock { $0.failed(CancellationError(), round: round) }, for: operation)
            return
        }
        lock.acquire(request, onLost: { [weak self, weak operation] _ in
            guard let self, let operation else { return }
            self.leaseLost(category, round: round, of: operation)
        }, completion: { result in
            switch result {
            case let .success(lease):
                var held = leases
                held[category] = lease
                self.acquire(from: index + 1, holding: held, round: round, for: operation)
            case let .failure(error):
                leases.values.forEach { $0.release() }
                self.perform(self.state.withLock { $0.failed(Self.reported(error, for: category), round: round) }, for: operation)
            }
        })
        reportWaitingUnlessAnswered(category, round: round, of: operation)
    }

    /// How long a lock may take to answer before the operation's logger hears that it waits for
    /// it: longer than a lock server's round trip, so that only a real wait is reported.
    static let waitReportDelay: DispatchTimeInterval = .milliseconds(100)

    /// Tells the operation's logger, if it has one, what the operation waits for once the lock
    /// has not answered `category` for `waitReportDelay`.
    private func reportWaitingUnlessAnswered(_ category: String, round: UInt64, of operation: AsyncOperation) {
        guard operation.logBinding != nil else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.waitReportDelay) { [weak self, weak operation] in
            guard let self, let operation else { return }
            if case .reportWaiting = self.state.withLock({ $0.waitChecked(category, round: round) }) {
                operation.logWaiting()
            }
        }
    }

    /// What the operation fails with: a lock's own error as it is, anything else as `unavailable`.
    private static func reported(_ error: any Error, for category: String) -> any Error {
        switch error {
        case is CategoryLockError, is CancellationError: error
        default: CategoryLockError.unavailable(category: category, underlying: error)
        }
    }

    private func perform(_ action: CategoryLockGateState.OutcomeAction, for operation: AsyncOperation) {
        switch action {
        case .proceed:
            operation.categoryLocksAcquired(grantedBy: exclusivity)
        case let .release(leases):
            leases.forEach { $0.release() }
        case let .releaseAndGiveBackLocally(leases):
            leases.forEach { $0.release() }
            operation.categoryLocksAcquired(grantedBy: exclusivity) // finished: its categories go straight back
        case let .fail(error):
            operation.finish(with: error)
            operation.categoryLocksAcquired(grantedBy: exclusivity) // finishing: its categories go back with the finish
        case let .releaseAndFail(leases, error):
            leases.forEach { $0.release() }
            perform(.fail(error), for: operation)
        }
    }

    private func leaseLost(_ category: String, round: UInt64, of operation: AsyncOperation) {
        switch state.withLock({ $0.lost(category, round: round) }) {
        case .none:
            break
        case let .cancel(error):
            operation.cancel(with: error)
        case let .endRound(request):
            request?.cancel()
        }
    }

    // MARK: Stopping and releasing

    /// The operation finished: stops a round under way, gives back the leases held, and unbinds
    /// its categories from their locks.
    func operationFinished() {
        perform(state.withLock { $0.finished() })
        bindings.unbind(locks.map(\.category))
    }

    /// Its queue was suspended while it waits in line: `true` if it was waiting for a lock (it
    /// holds its categories within the process, and must give them back), `false` otherwise.
    func queueSuspended() -> Bool {
        guard case let .cancel(request) = state.withLock({ $0.suspended() }) else { return false }
        request?.cancel()
        return true
    }

    /// The operation gives its categories back without finishing: the leases go back too.
    func releaseHeld() {
        perform(state.withLock { $0.releaseHeld() })
    }

    private func perform(_ action: CategoryLockGateState.StopAction) {
        switch action {
        case .none:
            break
        case let .cancel(request):
            request?.cancel()
        case let .release(leases):
            leases.forEach { $0.release() }
        }
    }

    // MARK: Reading

    /// The fencing token of `category`, while the operation holds its lease.
    func fencingToken(for category: String) -> UInt64? {
        state.withLock { $0.fencingToken(for: category) }
    }

    /// The category it waits for beyond the process now, and who holds it as far as its lock knows.
    func awaited() -> (category: String, holder: String)? {
        guard let category = state.withLock({ $0.awaitedCategory }),
              let lock = locks.first(where: { $0.category == category })?.lock else { return nil }
        return (category, lock.holder(of: category) ?? "another process (\(lock))")
    }
}
