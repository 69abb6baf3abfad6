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
/// `heartbeatInterval` that it is alive: once it is not (ended by `pg_terminate_backend`, a
/// dropped connection, a stopped server), the operation holding the category is cancelled with
/// `CategoryLockError.lost`.
///
/// Each grant increments the category's fencing token in the table `fencingTable` (made by the
/// lock itself, safely when several processes start at once), while holding the advisory lock.
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
    /// `CategoryLockError.unavailable`, in seconds.
    public let unavailableTimeout: TimeInterval
    /// How long an operation waits while another session holds its category before it fails with
    /// `CategoryLockError.unavailable` (underlying `CategoryLockWaitTimedOut`), in seconds; `nil`,
    /// the default, waits as long as it takes.
    public let waitTimeout: TimeInterval?
    /// How often a holding session checks that it is alive, in seconds.
    public let heartbeatInterval: TimeInterval
    /// The table of fencing tokens, one row per category.
    public let fencingTable: String
    private let logger: Logger
    private let knowledge = LockedBox(Knowledge())

    private struct Knowledge {
        var tableReady = false
        var holders: [String: Int32] = [:]
    }

    /// Makes the lock for the database of `client`.
    ///
    /// - Parameters:
    ///   - client: A client that you run (`client.run()`).
    ///   - namespace: Keeps this lock's advisory-lock keys apart from other users of the database.
    ///   - unavailableTimeout: How long an acquisition tries to reach the server, in seconds.
    ///   - waitTimeout: How long an operation may wait while another session holds its category,
    ///     in seconds; `nil` waits as long as it takes.
    ///   - heartbeatInterval: How often a holding session checks that it is alive, in seconds.
    ///   - fencingTable: The table of fencing tokens: a plain identifier, made if missing.
    ///   - logger: Where the lock logs what it does, at debug level.
    public init(
        client: PostgresClient,
        namespace: String = "operations",
        unavailableTimeout: TimeInterval = 10,
        waitTimeout: TimeInterval? = nil,
        heartbeatInterval: TimeInterval = 1,
        fencingTable: String = "operations_category_fences",
        logger: Logger = Logger(label: "PostgresCategoryLock")
    ) {
        self.client = client
        self.namespace = namespace
        self.unavailableTimeout = unavailableTimeout
        self.waitTimeout = waitTimeout
        self.heartbeatInterval = heartbeatInterval
        self.fencingTable = fencingTable.filter { $0.isLetter || $0.isNumber || $0 == "_" }
        self.logger = logger
    }

    /// "postgres:" and the namespace: every lock with the same namespace is the same lock, as far as
    /// this process knows (it cannot tell two clients' databases apart).
    public var identity: String { "postgres:\(namespace)" }

    /// "PostgreSQL advisory lock (namespace N)".
    public var description: String { "PostgreSQL advisory lock (namespace \(namespace))" }

    /// The advisory-lock key of `category`: what `pg_advisory_lock` is called with.
    public func key(for category: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in "\(namespace):\(category)".utf8 {
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

    public func acquire(_ category: String, onLost: @escaping @Sendable (CategoryLockError) -> Void) async throws -> any CategoryLease {
        let session = LockSession(lock: self, category: category, key: key(for: category), onLost: onLost)
        return try await session.acquire()
    }

    // MARK: Used by a session

    func ensureFencingTable(on connection: PostgresConnection) async throws {
        guard !knowledge.withLock({ $0.tableReady }) else { return }
        // Serialized by a transaction-level advisory lock, so that processes starting at once do
        // not race in CREATE TABLE IF NOT EXISTS (which can fail on the catalog's unique index).
        _ = try await connection.query("BEGIN", logger: logger).collect()
        do {
            _ = try await connection.query("SELECT pg_advisory_xact_lock(\(key(for: "\u{0}fencing-table")))", logger: logger).collect()
            _ = try await connection.query(PostgresQuery(unsafeSQL: "CREATE TABLE IF NOT EXISTS \(fencingTable) (category text PRIMARY KEY, token bigint NOT NULL)"), logger: logger).collect()
            _ = try await connection.query("COMMIT", logger: logger).collect()
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: logger).collect()
            throw error
        }
        knowledge.withLock { $0.tableReady = true }
    }

    func nextFencingToken(for category: String, on connection: PostgresConnection) async throws -> UInt64 {
        let rows = try await connection.query(
            PostgresQuery(unsafeSQL: """
                INSERT INTO \(fencingTable) AS f (category, token) VALUES ($1, 1)
                ON CONFLICT (category) DO UPDATE SET token = f.token + 1 RETURNING token
                """, binds: { var binds = PostgresBindings(); binds.append(category); return binds }()),
            logger: logger
        ).collect()
        guard let token = try rows.first?.decode(Int64.self) else { throw PostgresLockProtocolError.noToken }
        return UInt64(token)
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

    var queryLogger: Logger { logger }
}

/// The server answered in a way the lock does not expect.
enum PostgresLockProtocolError: Error {
    case noToken
}
