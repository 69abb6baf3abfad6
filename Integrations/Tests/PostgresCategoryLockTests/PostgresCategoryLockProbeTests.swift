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

/// Probes of documented behaviour of `PostgresCategoryLock` that `PostgresCategoryLockTests` does
/// not check yet. Each probe cites the sentence it checks.
@Suite("PostgresCategoryLock probes", .serialized, .enabled(if: TestServer.isConfigured, "needs the server that `bash ../.ci/postgres run swift test` starts"))
struct PostgresCategoryLockProbeTests {
    private let quiet = Logger(label: "probe", factory: { _ in SwiftLogNoOpLogHandler() })

    // PostgresCategoryLock.swift: "every token is greater than every token handed out before it, for any category"
    // API.md 11: "Fencing tokens of a category strictly increase across every grant, in every process."
    @Test func tokensGrowAcrossCategories_andAcrossTwoClientsLocks_andNoTokenIsReadAfterTheFinish() async throws {
        try await TestServer.withClient { first in
            try await TestServer.withClient { second in
                let locks = [PostgresCategoryLock(client: first), PostgresCategoryLock(client: second)]
                let categories = [uniqueName("billing"), uniqueName("refunds")]
                let queue = AsyncOperationQueue()
                var tokens: [UInt64] = []
                for (lockIndex, categoryIndex) in [(0, 0), (1, 1), (0, 1), (1, 0), (0, 0)] {
                    let holder = HoldingOperation(category: categories[categoryIndex], lock: locks[lockIndex])
                    queue.addOperation(holder)
                    #expect(await eventually { holder.started.isSet })
                    holder.cancel()
                    #expect(await eventually { holder.isFinished })
                    tokens.append(holder.token ?? 0)
                    // AsyncOperation.fencingToken(for:): "while it holds `category`"
                    #expect(holder.fencingToken(for: categories[categoryIndex]) == nil)
                }
                #expect(tokens.allSatisfy { $0 >= 1 })
                #expect(zip(tokens, tokens.dropFirst()).allSatisfy { $0 < $1 }, "tokens in grant order: \(tokens)")
            }
        }
    }

    // API.md 11: "`ExclusiveCategory("x")` and `ExclusiveCategory("x", lock: L)` exclude each other in one process"
    @Test func aPlainCategory_andTheSameCategoryThroughPostgres_excludeEachOther_bothWays() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client)
            let category = uniqueName("billing")
            let held = HeldOperations()

            // A plain holder first: the Postgres operation waits for it.
            let plain = held.make(uniqueName("plain"))
            plain.addCondition(ExclusiveCategory(category))
            AsyncOperationQueue().addOperation(plain)
            #expect(await eventually { held.hasStarted(plain.name!) })
            let clusterWide = HoldingOperation(category: category, lock: lock)
            AsyncOperationQueue().addOperation(clusterWide)
            try await Task.sleep(nanoseconds: 500_000_000)
            #expect(!clusterWide.started.isSet)
            held.finish(plain.name!)
            #expect(await eventually { clusterWide.started.isSet })

            // The Postgres holder now: a plain operation waits for it.
            let second = held.make(uniqueName("plain-second"))
            second.addCondition(ExclusiveCategory(category))
            AsyncOperationQueue().addOperation(second)
            try await Task.sleep(nanoseconds: 500_000_000)
            #expect(!held.hasStarted(second.name!))
            clusterWide.cancel()
            #expect(await eventually { clusterWide.isFinished })
            #expect(await eventually { held.hasStarted(second.name!) })
            held.finish(second.name!)
            #expect(await eventually { second.isFinished })
        }
    }

    // PostgresCategoryLock.waitTimeout: "How long an operation waits while another session holds its category before it fails with `CategoryLockError.unavailable` (underlying `CategoryLockWaitTimedOut`)"
    @Test func aWaitTimeout_failsTheOperationUnavailable_withoutRunningIt_andLeavesNoRequestBehind() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client, waitTimeout: 0.5)
            let category = uniqueName("billing")
            let key = lock.key(for: category)
            try await client.withConnection { other in
                _ = try await other.query("SELECT pg_advisory_lock(\(key))", logger: quiet).collect()
                let waiting = HoldingOperation(category: category, lock: lock)
                AsyncOperationQueue().addOperation(waiting)
                #expect(await eventually { waiting.isFinished })
                #expect(!waiting.started.isSet)
                if case let .unavailable(failed, underlying)? = waiting.errors.first as? CategoryLockError {
                    #expect(failed == category)
                    #expect(underlying is CategoryLockWaitTimedOut, "underlying: \(underlying)")
                } else {
                    Issue.record("expected CategoryLockError.unavailable, got \(waiting.errors)")
                }
                // No session of the lock is left waiting for, or holding, the key.
                #expect(await eventuallyAsync {
                    let rows = try? await other.query("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid <> pg_backend_pid() AND objid::bigint = \(Int64(UInt64(bitPattern: key) & 0xFFFF_FFFF))", logger: quiet).collect()
                    return (try? rows?.first?.decode(Int64.self)) == 0
                })
                _ = try await other.query("SELECT pg_advisory_unlock_all()", logger: quiet).collect()
            }
            // The category is free again for the next operation.
            let next = HoldingOperation(category: category, lock: lock)
            AsyncOperationQueue().addOperation(next)
            #expect(await eventually { next.started.isSet })
            next.cancel()
            #expect(await eventually { next.isFinished })
        }
    }

    // PostgresCategoryLock.unavailableTimeout: "How long an acquisition keeps trying to reach the server before the operation fails with `CategoryLockError.unavailable`"
    @Test func aServerThatAcceptsButNeverAnswers_failsTheOperationUnavailable_andBlocksNothingElse() async throws {
        let silent = try LoopbackSocket(listening: true) // accepts, never answers
        defer { silent.close() }
        try await TestServer.withClient(port: silent.port) { client in
            let lock = PostgresCategoryLock(client: client, unavailableTimeout: 1)
            let operation = HoldingOperation(category: uniqueName("billing"), lock: lock)
            let unrelated = AsyncBlockOperation {}
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

    // PostgresCategoryLock.acquire: "Cancelling the calling task withdraws the request." (here before any connection came)
    @Test func cancellingAnOperationWhileTheServerCannotBeReached_finishesItWithoutRunningIt() async throws {
        try await TestServer.withClient(port: 1) { client in
            let lock = PostgresCategoryLock(client: client, unavailableTimeout: 600)
            let operation = HoldingOperation(category: uniqueName("billing"), lock: lock)
            AsyncOperationQueue().addOperation(operation)
            #expect(await eventually { operation.debugDescription.contains("PostgreSQL") })
            try await Task.sleep(nanoseconds: 300_000_000)
            operation.cancel()
            #expect(await eventually { operation.isFinished })
            #expect(!operation.started.isSet)
            #expect(operation.isCancelled)
        }
    }

    // API.md 11: "an operation never runs without its lock" (a lease lost while the operation still waits for its next category)
    @Test func aLeaseLostWhileTheOperationWaitsForItsNextCategory_failsItWithLost_andItNeverRuns() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client, heartbeatInterval: 0.1)
            let first = uniqueName("a") // asked first: categories are asked for sorted by name
            let second = uniqueName("b")
            try await client.withConnection { other in
                _ = try await other.query("SELECT pg_advisory_lock(\(lock.key(for: second)))", logger: quiet).collect()
                let operation = HoldingOperation(category: first, lock: lock)
                operation.addCondition(ExclusiveCategory(second, lock: lock))
                AsyncOperationQueue().addOperation(operation)
                #expect(await eventuallyAsync { ((try? await holdingBackend(of: first, lock: lock, client: client)) ?? nil) != nil })
                #expect(await eventually { operation.debugDescription.contains(second) })
                let backend = try #require(try await holdingBackend(of: first, lock: lock, client: client))
                _ = try await client.query("SELECT pg_terminate_backend(\(backend))", logger: quiet).collect()
                try await Task.sleep(nanoseconds: 1_000_000_000)
                _ = try await other.query("SELECT pg_advisory_unlock_all()", logger: quiet).collect()

                #expect(await eventually { operation.isFinished })
                #expect(!operation.started.isSet, "it ran without the lock of '\(first)'")
                #expect(operation.errors.contains { error in
                    if case let .lost(category)? = error as? CategoryLockError { return category == first }
                    return false
                }, "expected CategoryLockError.lost(\(first)), got \(operation.errors)")
            }
            // Both categories are free afterwards.
            #expect(await eventuallyAsync { ((try? await holdingBackend(of: second, lock: lock, client: client)) ?? nil) == nil })
        }
    }

    // API.md 2: "Cancelling or failing an operation frees its categories." with API.md 11: "A lock lost while its holder runs cancels the holder with `CategoryLockError.lost`"
    @Test func aLeaseLostWhileRunning_cancelsTheHolder_andFreesItsOtherCategoryToo() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client, heartbeatInterval: 0.1)
            let first = uniqueName("a")
            let second = uniqueName("b")
            let holder = HoldingOperation(category: first, lock: lock)
            holder.addCondition(ExclusiveCategory(second, lock: lock))
            let queue = AsyncOperationQueue()
            queue.addOperation(holder)
            #expect(await eventually { holder.started.isSet })
            #expect(((try? await holdingBackend(of: second, lock: lock, client: client)) ?? nil) != nil)

            let backend = try #require(try await holdingBackend(of: first, lock: lock, client: client))
            _ = try await client.query("SELECT pg_terminate_backend(\(backend))", logger: quiet).collect()
            #expect(await eventually { holder.isFinished })
            expectCancelledWithLost(holder, category: first)

            #expect(await eventuallyAsync { ((try? await holdingBackend(of: second, lock: lock, client: client)) ?? nil) == nil })
            let next = HoldingOperation(category: second, lock: lock)
            queue.addOperation(next)
            #expect(await eventually { next.started.isSet })
            #expect((next.token ?? 0) > (holder.token ?? .max))
            next.cancel()
            #expect(await eventually { next.isFinished })
        }
    }

    // PostgresCategoryLock.unavailableTimeout: "How long an acquisition keeps trying to reach the server before the operation fails with `CategoryLockError.unavailable`" (the server stopped while the operation waits in line)
    @Test func aServerStoppedWhileAnOperationWaitsForAHeldCategory_failsItUnavailable_withinBounds() async throws {
        let server = try ThrowawayPostgres()
        defer { server.remove() }
        try await TestServer.withClient(port: server.port) { client in
            let lock = PostgresCategoryLock(client: client, unavailableTimeout: 1, heartbeatInterval: 0.1)
            let category = uniqueName("billing")
            let waiting = HoldingOperation(category: category, lock: lock)
            try await client.withConnection { other in
                _ = try await other.query("SELECT pg_advisory_lock(\(lock.key(for: category)))", logger: quiet).collect()
                AsyncOperationQueue().addOperation(waiting)
                #expect(await eventually { waiting.debugDescription.contains("PostgreSQL session") })
                try await Task.sleep(nanoseconds: 2_000_000_000) // longer than unavailableTimeout, waiting in line
                try server.stop()
                // A lock statement in flight as the server stops may never return (no error, no
                // answer): the server's silence bounds the wait then.
                let finished = await eventually(timeout: 15) { waiting.isFinished }
                #expect(finished, "still waiting 15 s after the server stopped: \(waiting.debugDescription)")
            }
            #expect(!waiting.started.isSet)
            guard waiting.isFinished else {
                waiting.cancel() // clean up: the request is withdrawn
                #expect(await eventually { waiting.isFinished })
                return
            }
            guard case .unavailable? = waiting.errors.first as? CategoryLockError else {
                Issue.record("expected CategoryLockError.unavailable, got \(waiting.errors)")
                return
            }
        }
    }

    // PostgresCategoryLock: "Each grant takes its fencing token from the sequence `fencingSequence` (made by the lock itself ...)"; init: "a name, or a schema and a name separated by a dot ... (other characters are dropped; what is left empty falls back to the default)"
    @Test func aSchemaQualifiedFencingSequence_isMadeAndDrawnFrom_andOddNamesAreSanitized() async throws {
        try await TestServer.withClient { client in
            let name = "public.probe_tokens_\(UUID().uuidString.prefix(8).lowercased())"
            let lock = PostgresCategoryLock(client: client, fencingSequence: name)
            #expect(lock.fencingSequence == name)
            let holder = HoldingOperation(category: uniqueName("billing"), lock: lock)
            AsyncOperationQueue().addOperation(holder)
            #expect(await eventually { holder.started.isSet })
            holder.cancel()
            #expect(await eventually { holder.isFinished })
            let rows = try await client.query(PostgresQuery(unsafeSQL: "SELECT last_value FROM \(name)"), logger: quiet).collect()
            #expect(try rows.first?.decode(Int64.self) == Int64(holder.token ?? 0))
            _ = try await client.query(PostgresQuery(unsafeSQL: "DROP SEQUENCE IF EXISTS \(name)"), logger: quiet).collect()

            #expect(PostgresCategoryLock(client: client, fencingSequence: "my-seq; DROP").fencingSequence == "myseqDROP")
            #expect(PostgresCategoryLock(client: client, fencingSequence: "!!!").fencingSequence == "operations_category_fencing_tokens")
            #expect(PostgresCategoryLock(client: client, fencingSequence: "a.b.c").fencingSequence == "operations_category_fencing_tokens")
        }
    }

    // PostgresCategoryLock.identity: "Two locks that differ in either are different locks, and one category named with both fails clearly."
    @Test func oneCategoryNamedWithTwoNamespaces_failsTheSecondOperationWithAConflict_withoutRunningIt() async throws {
        try await TestServer.withClient { client in
            let billing = PostgresCategoryLock(client: client, namespace: "probe-billing")
            let refunds = PostgresCategoryLock(client: client, namespace: "probe-refunds")
            #expect(billing.identity != refunds.identity)
            let category = uniqueName("shared")
            let holder = HoldingOperation(category: category, lock: billing)
            AsyncOperationQueue().addOperation(holder)
            #expect(await eventually { holder.started.isSet })
            let other = HoldingOperation(category: category, lock: refunds)
            AsyncOperationQueue().addOperation(other)
            #expect(await eventually { other.isFinished })
            #expect(!other.started.isSet)
            guard case .categoryLockConflict? = other.errors.first as? AsyncOperationError else {
                Issue.record("expected AsyncOperationError.categoryLockConflict, got \(other.errors)")
                holder.cancel()
                return
            }
            holder.cancel()
            #expect(await eventually { holder.isFinished })
        }
    }
}
