import Foundation
import Operations
import PostgresNIO

/// One acquisition of a category by a `PostgresCategoryLock`: a task that leases a connection,
/// waits in its session for the category's advisory lock, stamps the next fencing token, hands
/// out the lease, and then holds the session (checking that it is alive) until the lease is
/// released or lost. The task is never cancelled once it has a connection: a query cut short could
/// leave the lock held by a pooled connection. It watches `abandoned` instead, and every way out
/// of the session unlocks everything the session holds.
final class LockSession: Sendable {
    private let lock: PostgresCategoryLock
    private let category: String
    private let key: Int64
    private let onLost: @Sendable (CategoryLockError) -> Void
    private let state = LockedBox(State())

    private struct State {
        var waiter: CheckedContinuation<any CategoryLease, any Error>?
        /// Nobody wants the lease any more (the request was cancelled, or it failed).
        var abandoned = false
        /// The session has a connection now (the task may no longer be cancelled).
        var connected = false
        var holder: Task<Void, Never>?
        /// Gives up once `unavailableTimeout` has passed with no connection; cancelled once the
        /// request is settled.
        var timer: Task<Void, Never>?
        var released = false
        var sleeper: Task<Void, Never>?
        var lastError: (any Error)?
        var lostReported = false
    }

    init(lock: PostgresCategoryLock, category: String, key: Int64, onLost: @escaping @Sendable (CategoryLockError) -> Void) {
        self.lock = lock
        self.category = category
        self.key = key
        self.onLost = onLost
    }

    func acquire() async throws -> any CategoryLease {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                state.withLock { $0.waiter = continuation }
                let holder = Task.detached { await self.run() }
                let cancelAtOnce = state.withLock { state -> Bool in
                    state.holder = holder
                    return state.abandoned && !state.connected
                }
                if cancelAtOnce { holder.cancel() }
                let timeout = lock.unavailableTimeout
                let timer = Task.detached { [weak self] in
                    try? await Task.sleep(nanoseconds: UInt64(max(0, timeout) * 1_000_000_000))
                    self?.giveUpIfNeverConnected()
                }
                let settled = state.withLock { state -> Bool in
                    state.timer = timer
                    return state.waiter == nil
                }
                if settled { timer.cancel() }
            }
        } onCancel: {
            self.abandon(with: CancellationError())
        }
    }

    // MARK: The session

    private func run() async {
        var lastSuccess = DispatchTime.now().uptimeNanoseconds
        while !isAbandoned {
            do {
                try await lock.client.withConnection { connection in
                    try await self.session(on: connection)
                }
                return
            } catch let error as CategoryLockError {
                abandon(with: error)
                return
            } catch {
                // Not reached, or the connection dropped before the grant: try again, up to the
                // lock's timeout since things last worked.
                state.withLock { $0.lastError = error; $0.connected = false }
                if isGranted { return } // lost after the grant: reported by the heartbeat
                if seconds(since: lastSuccess) >= lock.unavailableTimeout {
                    abandon(with: CategoryLockError.unavailable(category: category, underlying: error))
                    return
                }
                try? await Task.sleep(nanoseconds: 200_000_000)
            }
            lastSuccess = DispatchTime.now().uptimeNanoseconds
        }
    }

    private func session(on connection: PostgresConnection) async throws {
        guard markConnected() else { return }
        do {
            try await lock.ensureFencingSequence(on: connection)
            guard let token = try await waitForLock(on: connection) else {
                try? await unlockEverything(on: connection)
                return
            }
            guard deliver(PostgresLease(fencingToken: token, session: self)) else {
                try? await unlockEverything(on: connection)
                return
            }
            // A session the server ends (or a connection that drops) closes the channel at once.
            connection.closeFuture.whenComplete { _ in self.reportLostUnlessReleased() }
        } catch {
            try? await unlockEverything(on: connection)
            throw error
        }
        await holdUntilReleased(on: connection)
        try? await unlockEverything(on: connection)
    }

    /// Waits in the session for the category's advisory lock, and draws the grant's fencing token
    /// once it is held: the token, or `nil` if the request was abandoned meanwhile. Each try is one
    /// blocking statement that the server wakes the moment the holder lets go, cut short after
    /// 50 ms the first time (then the holder is looked up, for the snapshot) and every 200 ms after
    /// that, so that an abandoned request stops soon.
    private func waitForLock(on connection: PostgresConnection) async throws -> UInt64? {
        let began = DispatchTime.now().uptimeNanoseconds
        var tries = 0
        while true {
            if isAbandoned { return nil }
            if let waitTimeout = lock.waitTimeout, seconds(since: began) >= waitTimeout {
                throw CategoryLockError.unavailable(category: category, underlying: CategoryLockWaitTimedOut(category: category, after: waitTimeout))
            }
            do {
                return try await lock.lockAndDrawToken(key: key, waitingAtMost: tries == 0 ? 50 : 200, on: connection)
            } catch let error as PSQLError where error.serverInfo?[.sqlState] == "55P03" {
                if tries % 10 == 0 { await lock.noteHolder(of: category, key: key, on: connection) }
                tries += 1
            }
        }
    }

    /// Holds the session until the lease is released, checking every heartbeat that it is alive;
    /// reports the lease lost if it is not.
    private func holdUntilReleased(on connection: PostgresConnection) async {
        let interval = UInt64(max(0.01, lock.heartbeatInterval) * 1_000_000_000)
        while true {
            let sleeper = Task { _ = try? await Task.sleep(nanoseconds: interval) }
            let keepHolding = state.withLock { state -> Bool in
                guard !state.released else { return false }
                state.sleeper = sleeper
                return true
            }
            guard keepHolding else {
                sleeper.cancel()
                return
            }
            await sleeper.value
            if isReleased { return }
            do {
                _ = try await connection.query("SELECT 1", logger: lock.queryLogger).collect()
            } catch {
                reportLostUnlessReleased()
                return
            }
        }
    }

    /// The session ended while the lease was held: the operation holding it hears it, once.
    private func reportLostUnlessReleased() {
        let report = state.withLock { state -> Bool in
            guard !state.released, !state.lostReported else { return false }
            state.lostReported = true
            return true
        }
        if report { onLost(.lost(category: category)) }
    }

    private func unlockEverything(on connection: PostgresConnection) async throws {
        _ = try await connection.query("SELECT pg_advisory_unlock_all()", logger: lock.queryLogger).collect()
    }

    // MARK: State

    private var isAbandoned: Bool { state.withLock { $0.abandoned } }
    private var isReleased: Bool { state.withLock { $0.released } }
    private var isGranted: Bool { state.withLock { $0.waiter == nil && !$0.abandoned } }

    private func markConnected() -> Bool {
        state.withLock { state in
            guard !state.abandoned else { return false }
            state.connected = true
            return true
        }
    }

    /// Hands the lease to the waiter: `false` if nobody waits any more.
    private func deliver(_ lease: PostgresLease) -> Bool {
        let (waiter, timer) = state.withLock { state -> (CheckedContinuation<any CategoryLease, any Error>?, Task<Void, Never>?) in
            defer { state.waiter = nil; state.timer = nil }
            return (state.abandoned ? nil : state.waiter, state.timer)
        }
        timer?.cancel()
        guard let waiter else { return false }
        waiter.resume(returning: lease)
        return true
    }

    /// Nobody wants the lease any more: the waiter hears `error`; a task that has no connection
    /// yet is cancelled (one that has one stops by itself, unlocking).
    private func abandon(with error: any Error) {
        let (waiter, holder, timer) = state.withLock { state -> (CheckedContinuation<any CategoryLease, any Error>?, Task<Void, Never>?, Task<Void, Never>?) in
            guard state.waiter != nil else { return (nil, nil, nil) }
            state.abandoned = true
            defer { state.waiter = nil; state.timer = nil }
            return (state.waiter, state.connected ? nil : state.holder, state.timer)
        }
        timer?.cancel()
        waiter?.resume(throwing: error)
        holder?.cancel()
    }

    private func giveUpIfNeverConnected() {
        let neverConnected = state.withLock { $0.waiter != nil && !$0.connected }
        guard neverConnected else { return }
        let underlying: any Error = state.withLock { $0.lastError } ?? PostgresUnreachable(after: lock.unavailableTimeout)
        abandon(with: CategoryLockError.unavailable(category: category, underlying: underlying))
    }

    func release() {
        let sleeper = state.withLock { state -> Task<Void, Never>? in
            state.released = true
            defer { state.sleeper = nil }
            return state.sleeper
        }
        sleeper?.cancel()
    }

    private func seconds(since start: UInt64) -> TimeInterval {
        TimeInterval(DispatchTime.now().uptimeNanoseconds &- start) / 1_000_000_000
    }
}

/// A category held by a session: released, the session unlocks and returns its connection.
final class PostgresLease: CategoryLease {
    let fencingToken: UInt64
    private let session: LockSession

    init(fencingToken: UInt64, session: LockSession) {
        self.fencingToken = fencingToken
        self.session = session
    }

    func release() {
        session.release()
    }
}

/// The server could not be reached within the lock's timeout, and the client gave no error.
public struct PostgresUnreachable: Error, CustomStringConvertible {
    /// The lock's `unavailableTimeout`, in seconds.
    public let after: TimeInterval

    public var description: String { "no connection to the PostgreSQL server within \(after) s" }
}

/// A value reached only while holding its lock.
final class LockedBox<Value>: @unchecked Sendable { // @unchecked: `value` is only touched while holding `lock`
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
