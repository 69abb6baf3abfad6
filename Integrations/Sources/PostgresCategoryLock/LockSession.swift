import Foundation
import Operations
import PostgresNIO

/// One acquisition of a category by a `PostgresCategoryLock`: a task that leases a connection,
/// waits in its session for the category's advisory lock, draws the next fencing token, hands
/// out the lease, and then holds the session (checking that it answers) until the lease is
/// released or lost. The rules are `LockSessionState`'s; this performs them. The task is never
/// cancelled once it has a connection: a query cut short could leave the lock held by a pooled
/// connection. It watches the state instead, and every way out of the session unlocks everything
/// the session holds, or closes the connection if even that fails.
final class LockSession: Sendable {
    private let lock: PostgresCategoryLock
    private let category: String
    private let key: Int64
    private let onLost: @Sendable (CategoryLockError) -> Void
    private let state = LockedBox(LockSessionState())
    /// The connection the session runs on, while it has one: closed if the server falls silent.
    private let connection = LockedBox<PostgresConnection?>(nil)

    init(lock: PostgresCategoryLock, category: String, key: Int64, onLost: @escaping @Sendable (CategoryLockError) -> Void) {
        self.lock = lock
        self.category = category
        self.key = key
        self.onLost = onLost
    }

    func acquire() async throws -> any CategoryLease {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { waiter in
                switch state.withLock({ $0.wait(with: waiter) }) {
                case let .fail(waiter, error):
                    waiter.resume(throwing: error)
                case .start:
                    let holder = Task.detached { await self.run() }
                    let timeout = lock.unavailableTimeout
                    let timer = Task.detached { [weak self] in
                        var delay = timeout
                        while true {
                            let pause = UInt64(max(0.01, delay) * 1_000_000_000)
                            let due = DispatchTime.now().uptimeNanoseconds + pause
                            try? await Task.sleep(nanoseconds: pause)
                            guard !Task.isCancelled, let next = self?.timerFired(due: due) else { return }
                            delay = next
                        }
                    }
                    state.withLock { $0.started(holder: holder, timer: timer) }.forEach { $0.cancel() }
                }
            }
        } onCancel: {
            self.abandon(with: CancellationError())
        }
    }

    // MARK: The session

    private func run() async {
        while !state.withLock({ $0.isAbandoned }) {
            do {
                try await lock.client.withConnection { connection in
                    try await self.session(on: connection)
                }
                return
            } catch let error as CategoryLockError {
                abandon(with: error)
                return
            } catch {
                // Not reached, the connection dropped before the grant, or the server refused a
                // query: try again, until failures have lasted the lock's timeout.
                if let error = error as? PSQLError, error.serverInfo?[.sqlState] == "42P01" {
                    lock.forgetFencingSequence() // dropped while we ran: make it again
                }
                let now = DispatchTime.now().uptimeNanoseconds
                switch state.withLock({ $0.attemptFailed(error, now: now, unavailableTimeout: lock.unavailableTimeout) }) {
                case .stop:
                    return
                case let .giveUp(error):
                    abandon(with: CategoryLockError.unavailable(category: category, underlying: error))
                    return
                case .retry:
                    try? await Task.sleep(nanoseconds: 200_000_000)
                }
            }
        }
    }

    private func session(on connection: PostgresConnection) async throws {
        self.connection.withLock { $0 = connection }
        defer { self.connection.withLock { $0 = nil } }
        guard state.withLock({ $0.connected(now: DispatchTime.now().uptimeNanoseconds) }) else { return }
        do {
            try await lock.ensureFencingSequence(on: connection)
            serverAnswered() // it may have waited for another process making the sequence
            guard let token = try await waitForLock(on: connection) else {
                await unlockEverything(on: connection)
                return
            }
            switch state.withLock({ $0.granted() }) {
            case .unlock:
                await unlockEverything(on: connection)
                return
            case let .resume(waiter, timer):
                timer?.cancel()
                lock.forgetHolder(of: category)
                waiter.resume(returning: PostgresLease(fencingToken: token, session: self))
            }
            // A session the server ends (or a connection that drops) closes the channel at once.
            connection.closeFuture.whenComplete { [weak self] _ in self?.leaseLost() }
        } catch {
            if Self.endsTheSession(error) {
                try? await connection.close() // the server ended it, and freed its locks with it; not pooled again
            } else {
                await unlockEverything(on: connection)
            }
            throw error
        }
        await holdUntilReleased(on: connection)
        await unlockEverything(on: connection)
    }

    /// Whether `error` says the session is over: the server ended it (a fatal error, such as
    /// `pg_terminate_backend`'s) or the connection closed. Its advisory locks went with it, and a
    /// statement sent on it may never be answered.
    private static func endsTheSession(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError else { return false }
        if error.code == .serverClosedConnection || error.code == .clientClosedConnection || error.code == .connectionError { return true }
        let severity = error.serverInfo?[.severity]
        return severity == "FATAL" || severity == "PANIC"
    }

    /// Waits in the session for the category's advisory lock, and draws the grant's fencing token
    /// once it is held: the token, or `nil` if the request was abandoned meanwhile. Each try is one
    /// blocking statement that the server wakes the moment the holder lets go, cut short after
    /// 50 ms the first time (then the holder is looked up, for the snapshot) and every 200 ms after
    /// that, so that an abandoned request stops soon. A try cut short just as the lock was granted
    /// leaves it held (twice, after the next try): only `pg_advisory_unlock_all()` frees it, which
    /// is why every way out of the session calls it.
    private func waitForLock(on connection: PostgresConnection) async throws -> UInt64? {
        let began = DispatchTime.now().uptimeNanoseconds
        var tries = 0
        while true {
            if state.withLock({ $0.isAbandoned }) { return nil }
            if let waitTimeout = lock.waitTimeout, seconds(since: began) >= waitTimeout {
                throw CategoryLockError.unavailable(category: category, underlying: CategoryLockWaitTimedOut(category: category, after: waitTimeout))
            }
            do {
                let token = try await lock.lockAndDrawToken(key: key, waitingAtMost: tries == 0 ? 50 : 200, on: connection)
                serverAnswered()
                return token
            } catch let error as PSQLError where error.serverInfo?[.sqlState] == "55P03" {
                serverAnswered()
                if tries % 10 == 0 {
                    await lock.noteHolder(of: category, key: key, on: connection)
                    serverAnswered()
                }
                tries += 1
            }
        }
    }

    private func serverAnswered() {
        let now = DispatchTime.now().uptimeNanoseconds
        state.withLock { $0.serverAnswered(now: now) }
    }

    /// Holds the session until the lease is released, checking every heartbeat that the server
    /// still answers, within `heartbeatTimeout`; reports the lease lost, and closes the
    /// connection, if it does not.
    private func holdUntilReleased(on connection: PostgresConnection) async {
        let interval = UInt64(max(0.01, lock.heartbeatInterval) * 1_000_000_000)
        while true {
            let sleeper = Task { _ = try? await Task.sleep(nanoseconds: interval) }
            guard state.withLock({ $0.pausing(with: sleeper) }) else {
                sleeper.cancel()
                return
            }
            await sleeper.value
            guard state.withLock({ $0.isHeld }) else { return }
            guard await succeeds("SELECT 1", on: connection, within: lock.heartbeatTimeout) else {
                leaseLost()
                try? await connection.close()
                return
            }
        }
    }

    /// Whether `statement` succeeds on `connection` within `seconds`. A statement that hangs (a
    /// silent network partition can hold it for many minutes, a connection the server dropped
    /// may never answer) is not waited for. The answer and the deadline both arrive on the
    /// connection's event loop, which takes them in the order they happen: an answer in time
    /// counts as one even while Swift's concurrency pool is kept busy (by code that blocks its
    /// threads), where two tasks racing for it could let the deadline win.
    private func succeeds(_ statement: PostgresQuery, on connection: PostgresConnection, within seconds: TimeInterval) async -> Bool {
        let answer = FirstAnswer()
        return await withCheckedContinuation { continuation in
            answer.onFirst { continuation.resume(returning: $0) }
            let deadline = connection.eventLoop.scheduleTask(in: .nanoseconds(Int64(max(0.1, seconds) * 1_000_000_000))) {
                answer.give(false)
            }
            let query: EventLoopFuture<PostgresQueryResult> = connection.query(statement, logger: lock.queryLogger)
            query.whenComplete { result in
                deadline.cancel()
                if case .success = result {
                    answer.give(true)
                } else {
                    answer.give(false)
                }
            }
        }
    }

    /// The session ended, or stopped answering, while the lease was out: its holder hears it, once.
    private func leaseLost() {
        guard case let .report(sleeper) = state.withLock({ $0.lost() }) else { return }
        sleeper?.cancel()
        onLost(.lost(category: category))
    }

    /// Frees every advisory lock of the session; closes the connection if that fails, or is not
    /// answered within `heartbeatTimeout` (a connection the server dropped may never answer), so
    /// that no pooled connection keeps a category.
    private func unlockEverything(on connection: PostgresConnection) async {
        if await !succeeds("SELECT pg_advisory_unlock_all()", on: connection, within: lock.heartbeatTimeout) {
            try? await connection.close() // the server frees the session's locks as it ends; not pooled again
        }
    }

    // MARK: Giving up and releasing

    /// Nobody wants the lease any more: the waiter hears `error`; a task that has no connection
    /// yet is cancelled (one that has one stops by itself, unlocking).
    private func abandon(with error: any Error) {
        perform(state.withLock { $0.abandon(with: error) })
    }

    /// The unavailability timer, due at `due` (uptime nanoseconds), went off: the seconds until
    /// it should look again, or `nil` once there is nothing more to watch (or it gave up).
    private func timerFired(due: UInt64) -> Double? {
        let now = DispatchTime.now().uptimeNanoseconds
        let lateBy = now > due ? Double(now - due) / 1_000_000_000 : 0
        let timeout = lock.unavailableTimeout
        let action = state.withLock { state in
            state.timerFired(now: now, lateBy: lateBy, unavailableTimeout: timeout) { [category] last in
                CategoryLockError.unavailable(category: category, underlying: last ?? PostgresUnreachable(after: timeout))
            }
        }
        switch action {
        case .stop:
            return nil
        case let .checkAgain(after: seconds):
            return seconds
        case let .giveUp(abandoned):
            perform(abandoned)
            return nil
        case let .giveUpAndCloseConnection(abandoned):
            perform(abandoned)
            if let connection = connection.withLock({ $0 }) {
                Task.detached { try? await connection.close() } // the statement in flight then fails, and the session ends
            }
            return nil
        }
    }

    private func perform(_ action: LockSessionState.AbandonAction) {
        guard case let .fail(waiter, error, tasks) = action else { return }
        tasks.forEach { $0.cancel() }
        waiter.resume(throwing: error)
    }

    func release() {
        state.withLock { $0.released() }?.cancel()
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

    deinit {
        session.release() // a lease dropped without release still frees its category
    }
}

/// The server could not be reached, or stopped answering a session waiting in line, for the
/// lock's timeout, and the client gave no error.
public struct PostgresUnreachable: Error, CustomStringConvertible {
    /// The lock's `unavailableTimeout`, in seconds.
    public let after: TimeInterval

    /// "the PostgreSQL server could not be reached, or did not answer, for N s".
    public var description: String { "the PostgreSQL server could not be reached, or did not answer, for \(after) s" }
}
