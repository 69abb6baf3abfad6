import Conditions
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import IntegrationsTestSupport
import Logging
import Operations
import PostgresCategoryLock
import PostgresNIO
import Testing

/// The server that `.ci/postgres` started for these tests, from its environment variables.
enum TestServer {
    static let environment = ProcessInfo.processInfo.environment
    static var isConfigured: Bool { environment["OPERATIONS_POSTGRES_PORT"] != nil }

    static func configuration(port: Int? = nil) -> PostgresClient.Configuration {
        var configuration = PostgresClient.Configuration(
            host: environment["OPERATIONS_POSTGRES_HOST"] ?? "127.0.0.1",
            port: port ?? Int(environment["OPERATIONS_POSTGRES_PORT"] ?? "5432") ?? 5432,
            username: environment["OPERATIONS_POSTGRES_USER"] ?? "postgres",
            password: nil,
            database: environment["OPERATIONS_POSTGRES_DATABASE"] ?? "postgres",
            tls: .disable
        )
        configuration.options.connectTimeout = .seconds(2)
        return configuration
    }

    /// Runs `body` with a running client of the test server (or of `port`, where nothing listens).
    static func withClient<Result>(port: Int? = nil, _ body: (PostgresClient) async throws -> Result) async throws -> Result {
        let client = PostgresClient(configuration: configuration(port: port), backgroundLogger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let run = Task { await client.run() }
        defer { run.cancel() }
        return try await body(client)
    }
}

/// An operation that records its fencing token and then waits, holding its category, until it is
/// cancelled.
final class HoldingOperation: AsyncOperation, @unchecked Sendable { // @unchecked: `token` is set once, before `started`
    let category: String
    let started = LockedFlag()
    nonisolated(unsafe) var token: UInt64?

    init(category: String, lock: some CategoryLock) {
        self.category = category
        super.init()
        addCondition(ExclusiveCategory(category, lock: lock))
    }

    override func execute() {
        token = fencingToken(for: category)
        started.set()
        DispatchQueue.global().async {
            while !self.isCancelled { usleep(1_000) }
            self.finish()
        }
    }
}

/// A flag set once, read from any thread.
final class LockedFlag: @unchecked Sendable { // @unchecked: `value` is only touched while holding `lock`
    private let lock = NSLock()
    private var value = false
    func set() { lock.lock(); value = true; lock.unlock() }
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return value }
}

/// What needs no server: a client that never runs.
@Suite struct PostgresCategoryLockKeyTests {
    @Test func oneCategorySpelledInTwoCanonicallyEqualWays_hasOneKey() {
        let lock = PostgresCategoryLock(client: PostgresClient(configuration: TestServer.configuration()))
        #expect(lock.key(for: "caf\u{E9}") == lock.key(for: "cafe\u{301}")) // one String, one category
        #expect(lock.key(for: "caf\u{E9}") != lock.key(for: "cafe"))
    }
}

@Suite("PostgresCategoryLock", .serialized, .enabled(if: TestServer.isConfigured, "needs the server that `bash ../.ci/postgres run swift test` starts"))
struct PostgresCategoryLockTests {
    @Test func aGrantCarriesAToken_andTheNextGrantAGreaterOne() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client)
            let category = uniqueName("billing")
            let first = HoldingOperation(category: category, lock: lock)
            let queue = AsyncOperationQueue()
            queue.addOperation(first)
            #expect(await eventually { first.started.isSet })
            first.cancel()
            let second = HoldingOperation(category: category, lock: lock)
            queue.addOperation(second)
            #expect(await eventually { second.started.isSet })
            second.cancel()
            #expect(await eventually { second.isFinished })
            // Tokens come from one sequence shared by every category: greater, not consecutive.
            #expect((first.token ?? 0) >= 1)
            #expect((second.token ?? 0) > (first.token ?? .max))
        }
    }

    @Test func aFencingSequenceDroppedWhileTheLockRuns_isMadeAgain_andTheNextTokenStillOutranks() async throws {
        try await TestServer.withClient { client in
            let sequence = "dropped_tokens_\(UUID().uuidString.prefix(8).lowercased())"
            let lock = PostgresCategoryLock(client: client, fencingSequence: sequence)
            let (holder, queue) = await startHolder(of: uniqueName("billing"), lock: lock)
            holder.cancel()
            #expect(await eventually { holder.isFinished })

            _ = try await client.query(PostgresQuery(unsafeSQL: "DROP SEQUENCE \(sequence)"), logger: Logger(label: "test")).collect()

            await expectTheNextGrantOutranks(holder, on: queue, lock: lock)
            _ = try await client.query(PostgresQuery(unsafeSQL: "DROP SEQUENCE IF EXISTS \(sequence)"), logger: Logger(label: "test")).collect()
        }
    }

    @Test func aCategoryHeldByAnotherSession_isWaitedFor_andNamedInTheSnapshot() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client)
            let category = uniqueName("billing")
            // Another "host": a session of its own holding the category's advisory lock.
            try await client.withConnection { other in
                _ = try await other.query("SELECT pg_advisory_lock(\(lock.key(for: category)))", logger: Logger(label: "test")).collect()
                let waiting = HoldingOperation(category: category, lock: lock)
                AsyncOperationQueue().addOperation(waiting)
                #expect(await eventually { waiting.debugDescription.contains("held by another PostgreSQL session (pid") })
                #expect(!waiting.started.isSet)
                _ = try await other.query("SELECT pg_advisory_unlock_all()", logger: Logger(label: "test")).collect()
                #expect(await eventually { waiting.started.isSet })
                waiting.cancel()
                #expect(await eventually { waiting.isFinished })
            }
        }
    }

    @Test func aSessionEndedByTheServer_cancelsItsHolderWithLost_andTheNextTokenIsGreater() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client, heartbeatInterval: 0.1)
            let category = uniqueName("billing")
            let (holder, queue) = await startHolder(of: category, lock: lock)

            let backend = try #require(try await holdingBackend(of: category, lock: lock, client: client))
            _ = try await client.query("SELECT pg_terminate_backend(\(backend))", logger: Logger(label: "test")).collect()

            #expect(await eventually { holder.isFinished })
            expectCancelledWithLost(holder, category: category)
            await expectTheNextGrantOutranks(holder, on: queue, lock: lock)
        }
    }

    @Test func aSessionThatStopsAnswering_losesItsLease_withinTheHeartbeatTimeout() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client, heartbeatInterval: 0.1)
            let category = uniqueName("billing")
            let (holder, queue) = await startHolder(of: category, lock: lock)

            // A network gone silent, played by the holder's server process stopped with SIGSTOP:
            // its heartbeat gets no answer, and nothing closes the connection.
            let backend = try #require(try await holdingBackend(of: category, lock: lock, client: client))
            #expect(kill(backend, SIGSTOP) == 0)
            defer { kill(backend, SIGCONT) }

            #expect(await eventually { holder.isFinished })
            expectCancelledWithLost(holder, category: category)
            kill(backend, SIGCONT)
            await expectTheNextGrantOutranks(holder, on: queue, lock: lock)
        }
    }

    @Test func aHeartbeatAnsweredInTime_keepsTheLease_whileEveryThreadOfTheConcurrencyPoolIsBlocked() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client, heartbeatInterval: 0.5) // timeout 2 s
            let category = uniqueName("billing")
            let (holder, _) = await startHolder(of: category, lock: lock)

            // Code elsewhere in the process blocks every thread of Swift's concurrency pool for
            // longer than the heartbeat timeout, while the server goes on answering.
            #expect(blockEveryConcurrencyThread(forSeconds: 3))

            try await Task.sleep(nanoseconds: 1_000_000_000) // the heartbeats the blocking held up
            #expect(!holder.isCancelled && !holder.isFinished, "the lease was lost: \(holder.errors)")
            #expect(holder.fencingToken(for: category) == holder.token)
            holder.cancel()
            #expect(await eventually { holder.isFinished })
        }
    }

    @Test func aWaitingSessionTheServerFallsSilentTo_failsUnavailable_andItsConnectionIsClosed() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client, unavailableTimeout: 1)
            let category = uniqueName("billing")
            let key = UInt64(bitPattern: lock.key(for: category))
            try await client.withConnection { other in
                _ = try await other.query("SELECT pg_advisory_lock(\(lock.key(for: category)))", logger: Logger(label: "test")).collect()
                let waiting = HoldingOperation(category: category, lock: lock)
                AsyncOperationQueue().addOperation(waiting)

                // The waiting session's server process stops (a network gone silent): the lock
                // statement in flight never returns, and never fails.
                var backend: Int32?
                #expect(await eventuallyAsync {
                    let rows = try? await other.query("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid::bigint = \(Int64(key >> 32)) AND objid::bigint = \(Int64(key & 0xFFFF_FFFF))", logger: Logger(label: "test")).collect()
                    backend = try? rows?.first?.decode(Int32.self)
                    return backend != nil
                })
                let stopped = try #require(backend)
                #expect(kill(stopped, SIGSTOP) == 0)
                defer { kill(stopped, SIGCONT) }

                #expect(await eventually { waiting.isFinished })
                #expect(!waiting.started.isSet)
                guard case .unavailable? = waiting.errors.first as? CategoryLockError else {
                    Issue.record("expected CategoryLockError.unavailable, got \(waiting.errors)")
                    return
                }

                // Its connection was closed rather than kept by the pool: once the server process
                // runs again, it sees the client gone and exits.
                kill(stopped, SIGCONT)
                #expect(await eventuallyAsync {
                    let rows = try? await other.query("SELECT count(*) FROM pg_stat_activity WHERE pid = \(stopped)", logger: Logger(label: "test")).collect()
                    return (try? rows?.first?.decode(Int64.self)) == 0
                })
                _ = try await other.query("SELECT pg_advisory_unlock_all()", logger: Logger(label: "test")).collect()
            }
        }
    }

    @Test func anUnreachableServer_failsTheOperationAfterTheLocksTimeout_andNeverRunsIt() async throws {
        try await TestServer.withClient(port: 1) { client in
            let lock = PostgresCategoryLock(client: client, unavailableTimeout: 1)
            let operation = HoldingOperation(category: uniqueName("billing"), lock: lock)
            let unrelated = AsyncBlockOperation { }
            unrelated.addCondition(ExclusiveCategory(uniqueName("local")))
            let queue = AsyncOperationQueue()
            queue.addOperations([operation, unrelated], waitUntilFinished: false)
            #expect(await eventually { unrelated.isFinished })
            #expect(await eventually { operation.isFinished })
            #expect(!operation.started.isSet)
            guard case .unavailable? = operation.errors.first as? CategoryLockError else {
                Issue.record("expected CategoryLockError.unavailable, got \(operation.errors)")
                return
            }
        }
    }

    @Test func aServerStoppedMidRun_cancelsItsHolderWithLost_andNothingRunsUntilItIsBack() async throws {
        let server = try ThrowawayPostgres()
        defer { server.remove() }
        try await TestServer.withClient(port: server.port) { client in
            let lock = PostgresCategoryLock(client: client, unavailableTimeout: 60, heartbeatInterval: 0.1)
            let category = uniqueName("billing")
            let holder = HoldingOperation(category: category, lock: lock)
            let queue = AsyncOperationQueue()
            queue.addOperation(holder)
            #expect(await eventually { holder.started.isSet })

            try server.stop()
            #expect(await eventually { holder.isFinished })
            expectCancelledWithLost(holder, category: category)

            // While the server is down the next operation waits and never runs without its lock.
            let next = HoldingOperation(category: category, lock: lock)
            queue.addOperation(next)
            try await Task.sleep(nanoseconds: 500_000_000)
            #expect(!next.started.isSet)
            #expect(!next.isFinished)

            try server.start()
            #expect(await eventually { next.started.isSet })
            #expect((next.token ?? 0) > (holder.token ?? .max))
            next.cancel()
            #expect(await eventually { next.isFinished })
        }
    }

    @Test func cancellingAWaitingOperation_withdrawsItsRequest() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client)
            let category = uniqueName("billing")
            try await client.withConnection { other in
                _ = try await other.query("SELECT pg_advisory_lock(\(lock.key(for: category)))", logger: Logger(label: "test")).collect()
                let waiting = HoldingOperation(category: category, lock: lock)
                AsyncOperationQueue().addOperation(waiting)
                #expect(await eventually { waiting.debugDescription.contains("PostgreSQL session") })
                waiting.cancel()
                #expect(await eventually { waiting.isFinished })
                // Its session stops waiting: no session but this one waits for the key.
                let key = lock.key(for: category)
                #expect(await eventuallyAsync {
                    let rows = try? await other.query("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid::bigint = \(Int64(UInt64(bitPattern: key) & 0xFFFF_FFFF))", logger: Logger(label: "test")).collect()
                    return (try? rows?.first?.decode(Int64.self)) == 0
                })
                _ = try await other.query("SELECT pg_advisory_unlock_all()", logger: Logger(label: "test")).collect()
            }
        }
    }
}

/// Blocks every thread of Swift's concurrency pool for `seconds`, as code that waits
/// synchronously inside tasks does: one fewer blocker than cores, and the caller, which waits
/// for them on a thread of the pool too. Whether every blocker ended within a minute.
func blockEveryConcurrencyThread(forSeconds seconds: UInt32) -> Bool {
    let blockers = DispatchGroup()
    for _ in 0..<max(1, ProcessInfo.processInfo.activeProcessorCount - 1) {
        blockers.enter()
        Task.detached {
            usleep(seconds * 1_000_000)
            blockers.leave()
        }
    }
    return blockers.wait(timeout: .now() + 60) == .success
}

/// A `HoldingOperation` of `category`, started on a queue of its own and holding the category.
func startHolder(of category: String, lock: PostgresCategoryLock, sourceLocation: SourceLocation = #_sourceLocation) async -> (HoldingOperation, AsyncOperationQueue) {
    let holder = HoldingOperation(category: category, lock: lock)
    let queue = AsyncOperationQueue()
    queue.addOperation(holder)
    #expect(await eventually { holder.started.isSet }, sourceLocation: sourceLocation)
    return (holder, queue)
}

/// The server process ID of the session that holds `category`'s advisory lock, if one does.
func holdingBackend(of category: String, lock: PostgresCategoryLock, client: PostgresClient) async throws -> Int32? {
    let key = UInt64(bitPattern: lock.key(for: category))
    let rows = try await client.query("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid::bigint = \(Int64(key >> 32)) AND objid::bigint = \(Int64(key & 0xFFFF_FFFF))", logger: Logger(label: "test")).collect()
    return try rows.first?.decode(Int32.self)
}

/// `holder` lost its lease: it finished cancelled, with `CategoryLockError.lost(category)`.
func expectCancelledWithLost(_ holder: HoldingOperation, category: String, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(holder.isCancelled, sourceLocation: sourceLocation)
    #expect(holder.errors.contains { error in
        if case let .lost(lostCategory)? = error as? CategoryLockError { return lostCategory == category }
        return false
    }, "expected CategoryLockError.lost(\(category)), got \(holder.errors)", sourceLocation: sourceLocation)
}

/// The next operation of `holder`'s category gets it, with a greater fencing token.
func expectTheNextGrantOutranks(_ holder: HoldingOperation, on queue: AsyncOperationQueue, lock: PostgresCategoryLock, sourceLocation: SourceLocation = #_sourceLocation) async {
    let next = HoldingOperation(category: holder.category, lock: lock)
    queue.addOperation(next)
    #expect(await eventually { next.started.isSet }, sourceLocation: sourceLocation)
    #expect((next.token ?? 0) > (holder.token ?? .max), sourceLocation: sourceLocation)
    next.cancel()
    #expect(await eventually { next.isFinished }, sourceLocation: sourceLocation)
}

/// Waits until the async `condition` holds; `false` if `timeout` passed first.
func eventuallyAsync(timeout: TimeInterval = generousTimeout, _ condition: () async -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while await !condition() {
        if Date() > deadline { return false }
        try? await Task.sleep(nanoseconds: 20_000_000)
    }
    return true
}

@Suite("PostgresCategoryLock across processes", .serialized, .enabled(if: TestServer.isConfigured, "needs the server that `bash ../.ci/postgres run swift test` starts"))
struct PostgresCategoryLockProcessTests {
    @Test func twoHostsUnderLoad_neverOverlapInACategory_andTokensOnlyGrow() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(uniqueName("pg-locks"))
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let log = directory.appendingPathComponent("shared.log").path
        let prefix = uniqueName("load")
        let workers = try (0..<2).map { index in
            try ChildProcess("postgres-lock-worker", [
                "--log", log, "--categories", "\(prefix)-a,\(prefix)-b,\(prefix)-c,\(prefix)-d", "--operations", "2000",
                "--queues", "3", "--cancel-percent", "10", "--hold-microseconds", "200", "--several", "--seed", String(index + 1),
            ])
        }
        defer { workers.forEach { $0.stop() } }
        var statuses: [Int32?] = []
        for worker in workers { statuses.append(await worker.waitForExit()) }

        #expect(statuses == [0, 0])
        let check = SharedLogCheck(logFile: log)
        #expect(check.problems.isEmpty, "\(check.problems.prefix(10))")
        #expect(check.workersDone == 2)
        #expect(check.finishes.count == 4_000)
        #expect(check.begun > 0)
    }

    @Test func aHostKilledWithSIGKILL_freesItsCategory() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(uniqueName("pg-locks"))
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let log = directory.appendingPathComponent("shared.log").path
        let category = uniqueName("billing")
        let holder = try ChildProcess("postgres-lock-worker", ["--log", log, "--hold", category])
        defer { holder.stop() }
        #expect(await eventually(timeout: 120) { SharedLogCheck(logFile: log).lastToken[category] != nil })
        let heldToken = SharedLogCheck(logFile: log).lastToken[category] ?? 0

        let next = try ChildProcess("postgres-lock-worker", ["--log", log, "--categories", category, "--operations", "1"])
        defer { next.stop() }
        try await Task.sleep(nanoseconds: 2_000_000_000) // it connects and waits for the holder meanwhile
        // The holder's category is free from this line on; a begin before it overlapped the
        // holder, unless the holder logged first that it lost its lease (a heartbeat unanswered
        // for `heartbeatTimeout` on a loaded machine: documented).
        appendToSharedLog("end \(holder.pid) \(category):\(heldToken) holder-\(holder.pid)", at: log)
        holder.stop()

        #expect(await next.waitForExit(timeout: 120) == 0)
        let check = SharedLogCheck(logFile: log)
        #expect(check.problems.isEmpty, "\(check.problems.prefix(5))")
        #expect(check.workersDone == 1)
        #expect((check.lastToken[category] ?? 0) > heldToken)
    }
}
