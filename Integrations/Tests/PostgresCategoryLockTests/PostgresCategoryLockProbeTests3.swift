import Conditions
import Foundation
import IntegrationsTestSupport
import Logging
import Operations
import PostgresCategoryLock
import PostgresNIO
import Testing

/// A third round of probes of `PostgresCategoryLock` under faults, against the server that
/// `.ci/postgres` starts, that the earlier suites do not check. Each probe cites the sentence it
/// checks, bounds its waits and cancels every operation it started.
@Suite(.serialized, .enabled(if: TestServer.isConfigured, "needs the server that `bash ../.ci/postgres run swift test` starts"))
struct PostgresCategoryLockProbeTests3 {
    // API.md 11: "an operation never runs without its lock"; PostgresCategoryLock.unavailableTimeout:
    // "also how long a session waiting in line may go without an answer from the server ... before
    // the operation fails the same way" (the waiting session ended by the server while another
    // session holds the category)
    @Test func aWaitingSessionEndedByTheServer_neverLetsItsOperationRunWithoutTheLock() async throws {
        try await TestServer.withClient { client in
            let lock = PostgresCategoryLock(client: client, unavailableTimeout: 5, heartbeatInterval: 0.1)
            let category = uniqueName("ledger")
            let key = lock.key(for: category)
            // Given another "host" (a session of its own) holding the category's advisory lock,
            try await client.withConnection { other in
                _ = try await other.query("SELECT pg_advisory_lock(\(key))", logger: Logger(label: "probe3")).collect()
                // and an operation of this process waiting in line for it at the server
                let waiter = HoldingOperation(category: category, lock: lock)
                let queue = AsyncOperationQueue()
                queue.addOperation(waiter)
                let waitingBackend = await firstValue {
                    let rows = try? await other.query("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid::bigint = \(Int64(UInt64(bitPattern: key) >> 32)) AND objid::bigint = \(Int64(UInt64(bitPattern: key) & 0xFFFF_FFFF))", logger: Logger(label: "probe3")).collect()
                    return try? rows?.first?.decode(Int32.self)
                }
                let backend = try #require(waitingBackend, "no session waited for the category at the server")

                // When the server ends the waiting session, and then the other host lets the category go
                _ = try await other.query("SELECT pg_terminate_backend(\(backend))", logger: Logger(label: "probe3")).collect()
                try await Task.sleep(nanoseconds: 300_000_000)
                #expect(!waiter.started.isSet, "the waiter ran while another session still held the category")
                _ = try await other.query("SELECT pg_advisory_unlock_all()", logger: Logger(label: "probe3")).collect()

                // Then the waiter either fails without running, or runs while a live session of its own holds the lock
                #expect(await eventually { waiter.started.isSet || waiter.isFinished })
                if waiter.started.isSet {
                    let holding = try await holdingBackend(of: category, lock: lock, client: client)
                    #expect(holding != nil && holding != backend, "the waiter runs; the advisory lock is held by \(String(describing: holding)), the ended session was \(backend)")
                    #expect(waiter.token != nil)
                } else {
                    #expect(!waiter.errors.isEmpty, "the waiter finished without running and without an error")
                }
                waiter.cancel()
                #expect(await eventually { waiter.isFinished })
            }
        }
    }

    /// The first non-nil value `probe` gives within the generous timeout.
    private func firstValue<Value>(_ probe: () async -> Value?) async -> Value? {
        let deadline = Date().addingTimeInterval(generousTimeout)
        while Date() < deadline {
            if let value = await probe() { return value }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        return nil
    }
}
