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

/// A second round of probes of documented behaviour of `PostgresCategoryLock` that neither
/// `PostgresCategoryLockTests` nor `PostgresCategoryLockProbeTests` checks. Each probe cites the
/// sentence it checks. Every wait is bounded (`eventually`, `eventuallyAsync`); every client is
/// run by `TestServer.withClient`, which cancels it when the probe ends.
@Suite("PostgresCategoryLock probes, round 2", .serialized, .enabled(if: TestServer.isConfigured, "needs the server that `bash ../.ci/postgres run swift test` starts"))
struct PostgresCategoryLockProbeTests2 {
    private let quiet = Logger(label: "probe2", factory: { _ in SwiftLogNoOpLogHandler() })

    // API.md 10: "A suspended queue evaluates no condition, takes no category and starts nothing." (with a cluster-wide category: no session asks PostgreSQL for it)
    @Test func aSuspendedQueue_asksThePostgresLockNothing_untilItIsResumed() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client)
            let category = uniqueName("billing")
            let queue = AsyncOperationQueue()
            queue.isSuspended = true
            let operation = HoldingOperation(category: category, lock: lock)
            queue.addOperation(operation)
            try await Task.sleep(nanoseconds: 700_000_000) // time enough to connect and ask, were it asking
            #expect(!operation.started.isSet)
            #expect(try await advisoryLocks(of: category, lock: lock, client: client) == 0, "a session asked for the category of an operation on a suspended queue")

            queue.isSuspended = false
            #expect(await eventually { operation.started.isSet })
            #expect(try await advisoryLocks(of: category, lock: lock, client: client) == 1)
            operation.cancel()
            #expect(await eventually { operation.isFinished })
        }
    }

    // PostgresCategoryLock.unavailableTimeout: "also how long a session waiting in line may go without an answer from the server (which answers it several times a second)" — so waiting in line longer than it, with the server answering, is no failure
    @Test func waitingInLineLongerThanTheUnavailableTimeout_whileTheServerAnswers_doesNotFail() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client, unavailableTimeout: 1)
            let category = uniqueName("billing")
            let waiting = HoldingOperation(category: category, lock: lock)
            try await client.withConnection { other in
                _ = try await other.query("SELECT pg_advisory_lock(\(lock.key(for: category)))", logger: quiet).collect()
                AsyncOperationQueue().addOperation(waiting)
                #expect(await eventually { waiting.debugDescription.contains("PostgreSQL session") })
                try await Task.sleep(nanoseconds: 3_000_000_000) // three unavailable timeouts in line
                #expect(!waiting.isFinished, "gave up waiting in line: \(waiting.errors)")
                _ = try await other.query("SELECT pg_advisory_unlock_all()", logger: quiet).collect()
            }
            #expect(await eventually { waiting.started.isSet || waiting.isFinished })
            #expect(waiting.started.isSet, "never ran: \(waiting.errors)")
            #expect((waiting.token ?? 0) >= 1)
            waiting.cancel()
            #expect(await eventually { waiting.isFinished })
            #expect(!waiting.errors.contains { $0 is CategoryLockError })
        }
    }

    // PostgresCategoryLock.acquire: "Cancelling the calling task withdraws the request." with API.md 2 "Cancelling or failing an operation frees its categories." — it frees what it held, and nothing it did not hold
    @Test func cancellingAnOperationThatHoldsOneCategoryAndWaitsForAnother_freesWhatItHeld_andNothingElse() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client)
            let first = uniqueName("a") // asked first: categories are asked for sorted by name
            let second = uniqueName("b")
            try await client.withConnection { other in
                let otherPID = try await other.query("SELECT pg_backend_pid()", logger: quiet).collect().first?.decode(Int32.self)
                _ = try await other.query("SELECT pg_advisory_lock(\(lock.key(for: second)))", logger: quiet).collect()
                let operation = HoldingOperation(category: first, lock: lock)
                operation.addCondition(ExclusiveCategory(second, lock: lock))
                AsyncOperationQueue().addOperation(operation)
                #expect(await eventuallyAsync { ((try? await holdingBackend(of: first, lock: lock, client: client)) ?? nil) != nil })
                #expect(await eventually { operation.debugDescription.contains(second) })

                operation.cancel()
                #expect(await eventually { operation.isFinished })
                #expect(!operation.started.isSet)
                // What it held is free again...
                #expect(await eventuallyAsync { ((try? await holdingBackend(of: first, lock: lock, client: client)) ?? nil) == nil })
                // ...what it did not hold is still the other session's, and nobody waits for it.
                #expect(try await holdingBackend(of: second, lock: lock, client: client) == otherPID)
                #expect(await eventuallyAsync { ((try? await advisoryLocks(of: second, lock: lock, client: client, granted: false)) ?? -1) == 0 })

                let next = HoldingOperation(category: first, lock: lock)
                AsyncOperationQueue().addOperation(next)
                #expect(await eventually { next.started.isSet })
                next.cancel()
                #expect(await eventually { next.isFinished })
                _ = try await other.query("SELECT pg_advisory_unlock_all()", logger: quiet).collect()
            }
        }
    }

    // PostgresCategoryLock: "While it holds, the session checks every `heartbeatInterval` that the server still answers, within `heartbeatTimeout`: once it does not ..., the operation holding the category is cancelled" — a server that answers keeps the lease however long it is held
    @Test func aHolderThatOutlivesSeveralHeartbeatTimeouts_keepsItsLease_whileTheServerAnswers() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client, heartbeatInterval: 0.5)
            #expect(lock.heartbeatTimeout == 2)
            let category = uniqueName("billing")
            let (holder, _) = await startHolder(of: category, lock: lock)
            let backend = try await holdingBackend(of: category, lock: lock, client: client)
            #expect(backend != nil)
            try await Task.sleep(nanoseconds: 5_000_000_000) // ten heartbeats, two and a half timeouts
            #expect(!holder.isCancelled && !holder.isFinished, "the lease was lost: \(holder.errors)")
            #expect(holder.fencingToken(for: category) == holder.token)
            #expect(try await holdingBackend(of: category, lock: lock, client: client) == backend)
            holder.cancel()
            #expect(await eventually { holder.isFinished })
            #expect(!holder.errors.contains { $0 is CategoryLockError }, "\(holder.errors)")
            #expect(await eventuallyAsync { ((try? await advisoryLocks(of: category, lock: lock, client: client)) ?? -1) == 0 })
        }
    }

    // API.md 11: "A category's name means the same category whatever reaches it"; MutuallyExclusive: "the category named after `Category` (its full type name)", init(lock:): "extended beyond this process by `lock`"
    @Test func mutuallyExclusiveThroughPostgres_locksItsTypesFullName_andExcludesThePlainCategoryOfThatName() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client)
            let name = String(reflecting: ProbeLedger.self)
            let holder = TokenRecordingOperation(categories: [name], holdUntilCancelled: true)
            holder.addCondition(MutuallyExclusive<ProbeLedger>(lock: lock))
            AsyncOperationQueue().addOperation(holder)
            #expect(await eventually { holder.started.isSet })
            #expect(holder.tokens[name] != nil, "no token for '\(name)': \(holder.tokens)")
            let ledgerHolder = try await holdingBackend(of: name, lock: lock, client: client)
            #expect(ledgerHolder != nil, "no session holds the advisory lock of '\(name)'")

            let held = HeldOperations()
            let plain = held.make(uniqueName("plain"))
            plain.addCondition(ExclusiveCategory(name))
            AsyncOperationQueue().addOperation(plain)
            try await Task.sleep(nanoseconds: 500_000_000)
            #expect(!held.hasStarted(plain.name!), "the plain category ran beside its cluster-wide holder")
            holder.cancel()
            #expect(await eventually { holder.isFinished })
            #expect(await eventually { held.hasStarted(plain.name!) })
            held.finish(plain.name!)
            #expect(await eventually { plain.isFinished })
        }
    }

    // AsyncOperation.fencingToken(for:): "while it holds `category`"; API.md 2: "Operations that share a mutually exclusive category never execute at the same time" — a holder that lost its lease but still runs
    @Test func aHolderThatLostItsLeaseButStillRuns_hasNoToken_andNothingOfItsCategoryRunsBesideIt() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client, heartbeatInterval: 0.1)
            let category = uniqueName("billing")
            let holder = TokenRecordingOperation(categories: [category], holdUntilCancelled: true, lingersAfterCancel: true)
            holder.addCondition(ExclusiveCategory(category, lock: lock))
            defer { holder.letFinish() }
            AsyncOperationQueue().addOperation(holder)
            #expect(await eventually { holder.started.isSet })
            #expect(holder.fencingToken(for: category) == holder.tokens[category])

            let backend = try #require(try await holdingBackend(of: category, lock: lock, client: client))
            _ = try await client.query("SELECT pg_terminate_backend(\(backend))", logger: quiet).collect()
            #expect(await eventually { holder.isCancelled })
            #expect(!holder.isFinished)
            #expect(holder.fencingToken(for: category) == nil, "a lost lease's token is still handed out")

            let held = HeldOperations()
            let plain = held.make(uniqueName("plain"))
            plain.addCondition(ExclusiveCategory(category))
            let clusterWide = HoldingOperation(category: category, lock: lock)
            AsyncOperationQueue().addOperation(plain)
            AsyncOperationQueue().addOperation(clusterWide)
            try await Task.sleep(nanoseconds: 700_000_000)
            #expect(!held.hasStarted(plain.name!), "a plain operation of the category ran beside the holder that still runs")
            #expect(!clusterWide.started.isSet, "a cluster-wide operation of the category ran beside the holder that still runs")

            holder.letFinish()
            #expect(await eventually { holder.isFinished })
            #expect(holder.errors.contains { error in
                if case let .lost(lost)? = error as? CategoryLockError { return lost == category }
                return false
            }, "\(holder.errors)")
            #expect(await eventually { held.hasStarted(plain.name!) || clusterWide.started.isSet })
            if held.hasStarted(plain.name!) {
                #expect(!clusterWide.started.isSet)
                held.finish(plain.name!)
                #expect(await eventually { clusterWide.started.isSet })
            } else {
                #expect(!held.hasStarted(plain.name!))
                clusterWide.cancel()
                #expect(await eventually { held.hasStarted(plain.name!) })
                held.finish(plain.name!)
            }
            clusterWide.cancel()
            #expect(await eventually { clusterWide.isFinished && plain.isFinished })
        }
    }

    // API.md 12: "After `shutDown` begins, nothing new runs on that queue; running operations may finish within the grace period, then are cancelled; every operation that was on the queue finishes exactly once; the call returns when the queue is empty." — with operations holding and waiting in line for cluster-wide categories
    @Test func shuttingDownAQueue_cancelsAnOperationWaitingInLineAtTheServer_withdrawsItsRequest_andFreesWhatTheRunningOneHeld() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client)
            let heldCategory = uniqueName("held")
            let busyCategory = uniqueName("busy")
            let queue = AsyncOperationQueue()
            let running = TokenRecordingOperation(categories: [heldCategory], holdUntilCancelled: true)
            running.addCondition(ExclusiveCategory(heldCategory, lock: lock))
            queue.addOperation(running)
            #expect(await eventually { running.started.isSet })
            try await client.withConnection { other in
                _ = try await other.query("SELECT pg_advisory_lock(\(lock.key(for: busyCategory)))", logger: quiet).collect()
                let waiting = HoldingOperation(category: busyCategory, lock: lock)
                queue.addOperation(waiting)
                #expect(await eventually { waiting.debugDescription.contains("PostgreSQL session") })

                let shutDown = Task { await queue.shutDown(gracePeriod: 0.3) }
                let returned = await eventually { queue.allOperationCount == 0 }
                await shutDown.value
                #expect(returned)
                #expect(waiting.isFinished && !waiting.started.isSet)
                #expect((waiting.errors.first as? AsyncOperationError) == .queueShutDown, "\(waiting.errors)")
                #expect(running.isFinished && running.isCancelled)
                // The request in line is withdrawn, the running operation's category freed.
                #expect(await eventuallyAsync { ((try? await advisoryLocks(of: busyCategory, lock: lock, client: client, granted: false)) ?? -1) == 0 })
                #expect(await eventuallyAsync { ((try? await advisoryLocks(of: heldCategory, lock: lock, client: client)) ?? -1) == 0 })
                _ = try await other.query("SELECT pg_advisory_unlock_all()", logger: quiet).collect()
            }
        }
    }

    // API.md 2: "Within a category, operations that are otherwise free to run ... are granted it in the order they were added"; API.md 11: "Fencing tokens of a category strictly increase across every grant" — operations of this process in line behind another host
    @Test func operationsInLineBehindAnotherHost_areGrantedInTheOrderTheyWereAdded_withGrowingTokens() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client)
            let category = uniqueName("billing")
            let order = LockedValue<[Int]>([])
            let operations = (0..<4).map { index in
                TokenRecordingOperation(categories: [category], onStart: { order.withLock { $0.append(index) } })
            }
            operations.forEach { $0.addCondition(ExclusiveCategory(category, lock: lock)) }
            try await client.withConnection { other in
                _ = try await other.query("SELECT pg_advisory_lock(\(lock.key(for: category)))", logger: quiet).collect()
                for operation in operations {
                    AsyncOperationQueue().addOperation(operation) // a queue each
                    try await Task.sleep(nanoseconds: 20_000_000)
                }
                #expect(await eventually { operations[0].debugDescription.contains("PostgreSQL session") })
                try await Task.sleep(nanoseconds: 300_000_000)
                #expect(order.withLock { $0 }.isEmpty)
                _ = try await other.query("SELECT pg_advisory_unlock_all()", logger: quiet).collect()
            }
            #expect(await eventually { operations.allSatisfy(\.isFinished) })
            #expect(order.withLock { $0 } == [0, 1, 2, 3])
            let tokens = operations.map { $0.tokens[category] ?? 0 }
            #expect(zip(tokens, tokens.dropFirst()).allSatisfy { $0 < $1 } && tokens.allSatisfy { $0 > 0 }, "tokens: \(tokens)")
        }
    }

    /// How many advisory locks of `category`'s key the server has, granted (or, with `granted`
    /// false, waited for; nil: both).
    private func advisoryLocks(of category: String, lock: PostgresCategoryLock, client: PostgresClient, granted: Bool? = true) async throws -> Int64 {
        let key = UInt64(bitPattern: lock.key(for: category))
        let grantedClause = granted.map { $0 ? " AND granted" : " AND NOT granted" } ?? ""
        let rows = try await client.query(
            PostgresQuery(unsafeSQL: "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = \(Int64(key >> 32)) AND objid::bigint = \(Int64(key & 0xFFFF_FFFF)) AND objsubid = 1\(grantedClause)"),
            logger: quiet
        ).collect()
        return try rows.first?.decode(Int64.self) ?? -1
    }
}

/// A category type for `MutuallyExclusive`.
private enum ProbeLedger {}

/// An operation that records its fencing token for each of `categories` as it starts (and calls
/// `onStart`), then finishes, or (with `holdUntilCancelled`) waits until it
/// is cancelled — and, with `lingersAfterCancel`, then until `letFinish()` (at most 30 s).
private final class TokenRecordingOperation: AsyncOperation, @unchecked Sendable { // @unchecked: its state is behind its own locks
    private let categories: [String]
    private let holdUntilCancelled: Bool
    private let lingersAfterCancel: Bool
    private let onStart: @Sendable () -> Void
    private let recorded = LockedValue<[String: UInt64]>([:])
    private let allowed = LockedValue(false)
    let started = LockedFlag()

    init(categories: [String], holdUntilCancelled: Bool = false, lingersAfterCancel: Bool = false, onStart: @escaping @Sendable () -> Void = {}) {
        self.categories = categories
        self.holdUntilCancelled = holdUntilCancelled
        self.lingersAfterCancel = lingersAfterCancel
        self.onStart = onStart
        super.init()
    }

    var tokens: [String: UInt64] { recorded.withLock { $0 } }

    func letFinish() { allowed.withLock { $0 = true } }

    override func execute() {
        var tokens: [String: UInt64] = [:]
        for category in categories {
            tokens[category] = fencingToken(for: category)
        }
        recorded.withLock { $0 = tokens }
        onStart()
        started.set()
        guard holdUntilCancelled else {
            finish()
            return
        }
        DispatchQueue.global().async {
            let deadline = Date().addingTimeInterval(generousTimeout)
            while !self.isCancelled { usleep(1_000) }
            while self.lingersAfterCancel && !self.allowed.withLock({ $0 }) && Date() < deadline { usleep(1_000) }
            self.finish()
        }
    }
}
