import Foundation
import Logging
import Operations
import PostgresNIO

/// Extends categories to every process of a cluster that shares one PostgreSQL database, through
/// PostgreSQL's session-level advisory locks.
///
/// Each granted category holds one connection of the client, in a session that holds the advisory
/// lock of the category; the server ends the lock when that session ends, so a holder that dies
/// or loses its connection never keeps a category. While it holds, the session checks every
/// `heartbeatInterval` that the server still answers, within `heartbeatTimeout`: once it does
/// not (the session ended by `pg_terminate_backend`, a dropped connection, a stopped server, a
/// network that went silent), the operation holding the category is cancelled with
/// `CategoryLockError.lost`. Behind a network that may go silent, also let the server end idle
/// sessions it cannot reach (`tcp_keepalives_idle` and friends), so that it frees their locks.
///
/// Each grant takes its fencing token from the sequence `fencingSequence` (made by the lock
/// itself, safely when several processes start at once) in the same statement that acquires the
/// advisory lock, after the lock is held: every token is greater than every token handed out
/// before it, for any category, so tokens grow strictly per category but are not consecutive.
/// The sequence's name is resolved through each session's `search_path`: every process sharing
/// the categories must reach the same sequence (qualify it with a schema if theirs differ). The
/// lock makes it starting at the server's clock, in microseconds since 1970: if it is dropped
/// while locks use it, the lock makes it again, starting above every token handed out before (as
/// long as fewer tokens were drawn than microseconds passed since it was made, and the server's
/// clock did not go back by more than that). To move it, create the new one starting above the
/// last token (`setval`).
///
/// ```swift
/// let client = PostgresClient(configuration: configuration)   // run it: await client.run()
/// let clusterWide = PostgresCategoryLock(client: client)
/// billing.addCondition(ExclusiveCategory("billing", lock: clusterWide))
/// ```
///
/// You create the client and run it (`await client.run()`, in a task that lives as long as the
/// lock is used); the lock only uses it. Give the client enough connections for the categories held
/// at once, plus one.
public final class PostgresCategoryLock: AsyncCategoryLock {
    /// The client whose connections hold the locks.
    public let client: PostgresClient
    /// Separates the advisory-lock keys of this lock's categories from those of other users of
    /// the database: a category's key is a 64-bit hash of the namespace and its name.
    public let namespace: String
    /// How long an acquisition keeps trying to reach the server before the operation fails with
    /// `CategoryLockError.unavailable`, in seconds; also how long a session waiting in line may
    /// go without an answer from the server (which answers it several times a second) before
    /// the operation fails the same way. A process too busy to run its tasks (code blocking the
    /// threads of Swift's concurrency pool, say) cannot ask the server meanwhile: a timer that
    /// finds the silence only once it could run again looks again shortly (a few times) before
    /// the operation fails.
    public let unavailableTimeout: TimeInterval
    /// How long an operation waits while another session holds its category before it fails with
    /// `CategoryLockError.unavailable` (underlying `CategoryLockWaitTimedOut`), in seconds; `nil`,
    /// the default, waits as long as it takes.
    public let waitTimeout: TimeInterval?
    /// How often a holding session checks that the server still answers, in seconds.
    public let heartbeatInterval: TimeInterval
    /// How long a heartbeat waits for the server's answer before the lease counts as lost, in
    /// seconds: three heartbeat intervals, and at least two seconds. The answer and this deadline
    /// are weighed on the connection's event loop, as they happen, so an answer in time counts
    /// even while Swift's concurrency pool is kept busy.
    public var heartbeatTimeout: TimeInterval { max(2, 3 * heartbeatInterval) }
    /// The sequence that fencing tokens are drawn from, shared by every category.
    public let fencingSequence: String
    private let logger: Logger
    private let knowledge = LockedBox(Knowledge())

    private struct Knowledge {
        var sequenceReady = false
        var holders: [String: Int32] = [:]
    }

    /// Makes the lock for the database of `client`.
    ///
    /// - Parameters:
    ///   - client: A client that you run (`client.run()`).
    ///   - namespace: Keeps this lock's advisory-lock keys apart from other users of the database.
    ///   - unavailableTimeout: How long an acquisition tries to reach the server, or waits in line
    ///     without an answer from it, in seconds.
    ///   - waitTimeout: How long an operation may wait while another session holds its category,
    ///     in seconds; `nil` waits as long as it takes.
    ///   - heartbeatInterval: How often a holding session checks that the server still answers, in
    ///     seconds.
    ///   - fencingSequence: The sequence of fencing tokens, made if missing: a name, or a schema and
    ///     a name separated by a dot, of letters, digits and underscores (other characters are
    ///     dropped). What is left falls back to the default if it is not one of those two shapes:
    ///     empty, more than one dot, or an empty part (`"seq."`).
    ///   - logger: Where the lock logs what it does, at debug level.
    public init(
        client: PostgresClient,
        namespace: String = "operations",
        unavailableTimeout: TimeInterval = 10,
        waitTimeout: TimeInterval? = nil,
        heartbeatInterval: TimeInterval = 1,
        fencingSequence: String = "operations_category_fencing_tokens",
        logger: Logger = Logger(label: "PostgresCategoryLock")
    ) {
        self.client = client
        self.namespace = namespace
        self.unavailableTimeout = unavailableTimeout
        self.waitTimeout = waitTimeout
        self.heartbeatInterval = heartbeatInterval
        let sanitized = fencingSequence.filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == ".") }
        let parts = sanitized.split(separator: ".", omittingEmptySubsequences: false)
        let valid = (1...2).contains(parts.count) && parts.allSatisfy { !$0.isEmpty }
        self.fencingSequence = valid ? sanitized : "operations_category_fencing_tokens"
        self.logger = logger
    }

    /// "postgres:", the namespace and the fencing sequence: every lock with the same namespace and
    /// sequence is the same lock, as far as this process knows (it cannot tell two clients'
    /// databases apart). Two locks that differ in either are different locks, and one category
    /// named with both fails clearly.
    public var identity: String { "postgres:\(namespace):\(fencingSequence)" }

    /// "PostgreSQL advisory lock (namespace N)".
    public var description: String { "PostgreSQL advisory lock (namespace \(namespace))" }

    /// The advisory-lock key of `category`: what `pg_advisory_lock` is called with. Spellings
    /// Swift holds equal (`"caf\u{E9}"` and `"cafe\u{301}"`) have one key: the name is hashed in
    /// canonical composition (NFC).
    public func key(for category: String) -> Int64 {
        // (The engine hands every lock the NFC spelling already; a direct caller may not.)
        let canonical = "\(namespace):\(category)".precomposedStringWithCanonicalMapping
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in canonical.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }

    /// "another PostgreSQL session (pid N)", with the server process ID of the session that held
    /// it when this process last looked.
    public func holder(of category: String) -> String? {
        let pid = knowledge.withLock { $0.holders[category] }
        return "another PostgreSQL session\(pid.map { " (pid \($0))" } ?? "")"
    }

    /// Waits in a session of its own for the advisory lock of `category` and returns its lease,
    /// with the next fencing token; `onLost` hears if the session ends while the lease is out.
    /// Cancelling the calling task withdraws the request.
    public func acquire(_ category: String, onLost: @escaping @Sendable (CategoryLockError) -> Void) async throws -> any CategoryLease {
        let session = LockSession(lock: self, category: category, key: key(for: category), onLost: onLost)
        return try await session.acquire()
    }

    // MARK: Used by a session

    func ensureFencingSequence(on connection: PostgresConnection) async throws {
        guard !knowledge.withLock({ $0.sequenceReady }) else { return }
        // A role that may use the sequence but not create objects finds it made already.
        if try await fencingSequenceExists(on: connection) {
            knowledge.withLock { $0.sequenceReady = true }
            return
        }
        // Serialized by a transaction-level advisory lock, so that processes starting at once do
        // not race in CREATE SEQUENCE IF NOT EXISTS (which can fail on the catalog's unique index),
        // and only the one that makes it sets where it starts.
        _ = try await connection.query("BEGIN", logger: logger).collect()
        do {
            _ = try await connection.query("SELECT pg_advisory_xact_lock(\(key(for: "\u{0}fencing-sequence")))", logger: logger).collect()
            if try await !fencingSequenceExists(on: connection) {
                try await makeFencingSequence(on: connection)
            }
            _ = try await connection.query("COMMIT", logger: logger).collect()
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: logger).collect()
            throw error
        }
        knowledge.withLock { $0.sequenceReady = true }
    }

    private func fencingSequenceExists(on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query(PostgresQuery(unsafeSQL: "SELECT to_regclass('\(fencingSequence)') IS NOT NULL"), logger: logger).collect()
        return try rows.first?.decode(Bool.self) == true
    }

    /// Makes the sequence, in the caller's transaction, starting at the server's clock in
    /// microseconds: one made again after a drop starts above the tokens of the one before, which
    /// counted up by one a grant from its own start. Never moves a sequence back (one made by
    /// someone else meanwhile keeps its tokens).
    private func makeFencingSequence(on connection: PostgresConnection) async throws {
        _ = try await connection.query(PostgresQuery(unsafeSQL: "CREATE SEQUENCE IF NOT EXISTS \(fencingSequence) AS bigint"), logger: logger).collect()
        _ = try await connection.query(PostgresQuery(unsafeSQL: """
            SELECT setval('\(fencingSequence)', GREATEST((SELECT last_value FROM \(fencingSequence)),
                                                      floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint))
            """), logger: logger).collect()
    }

    /// Waits at most `milliseconds` for the advisory lock `key`, then, once it is held, draws the
    /// next fencing token, in one statement (one round trip). The lock timeout is set for this
    /// statement only (`set_config(..., true)`), so the pooled connection keeps its own. Throws the
    /// server's lock-timeout error (SQLSTATE 55P03) if the lock stays held elsewhere.
    func lockAndDrawToken(key: Int64, waitingAtMost milliseconds: Int, on connection: PostgresConnection) async throws -> UInt64 {
        let rows = try await connection.query(
            PostgresQuery(unsafeSQL: """
                WITH settings AS MATERIALIZED (SELECT set_config('lock_timeout', '\(max(1, milliseconds))ms', true) AS lock_timeout),
                     granted AS MATERIALIZED (SELECT pg_advisory_lock(\(key)) FROM settings)
                SELECT nextval('\(fencingSequence)') FROM granted
                """),
            logger: logger
        ).collect()
        guard let drawn = try rows.first?.decode(Int64.self), let token = UInt64(exactly: drawn), token > 0 else {
            throw PostgresLockProtocolError.noToken(sequence: fencingSequence)
        }
        return token
    }

    func noteHolder(of category: String, key: Int64, on connection: PostgresConnection) async {
        let classID = Int64(UInt64(bitPattern: key) >> 32)
        let objectID = Int64(UInt64(bitPattern: key) & 0xFFFF_FFFF)
        let rows = try? await connection.query(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid::bigint = \(classID) AND objid::bigint = \(objectID) AND objsubid = 1",
            logger: logger
        ).collect()
        let pid = try? rows?.first?.decode(Int32.self)
        knowledge.withLock { $0.holders[category] = pid }
    }

    /// The sequence went missing (dropped while the lock ran): the next session makes it again.
    func forgetFencingSequence() {
        knowledge.withLock { $0.sequenceReady = false }
    }

    /// `category` is held here now: who held it before is no longer news.
    func forgetHolder(of category: String) {
        knowledge.withLock { $0.holders[category] = nil }
    }

    var queryLogger: Logger { logger }
}

/// The server answered in a way the lock does not expect.
enum PostgresLockProtocolError: Error, CustomStringConvertible {
    /// The sequence gave no token, or one below 1 (it was made by hand with other settings).
    case noToken(sequence: String)

    var description: String {
        switch self {
        case let .noToken(sequence): "the sequence \(sequence) gave no fencing token above 0: it must count up from 1 or above, without cycling"
        }
    }
}
