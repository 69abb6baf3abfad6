import Foundation
import Operations
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Host-wide categories between real processes: several `category-lock-worker`s share categories
/// through one `FileCategoryLock` directory and log what they run to one file.
@Suite("FileCategoryLock across processes", .serialized)
struct FileCategoryLockProcessTests {
    @Test func underLoad_noTwoOperationsOfACategoryOverlap_andTokensOnlyGrow() throws {
        let directory = TemporaryDirectory("category-locks")
        defer { directory.remove() }
        let log = directory.file("shared.log")
        let operations = StressScale.current == .small ? 500 : 2_000
        let workers = try (0..<4).map { index in
            try WorkerProcess([
                "--directory", directory.file("locks"), "--log", log,
                "--categories", "a,b,c,d", "--operations", String(operations), "--queues", "3",
                "--cancel-percent", "10", "--several", "--seed", String(index + 1),
            ])
        }
        defer { workers.forEach { $0.stop() } }

        let statuses = workers.map { $0.waitForExit() }

        #expect(statuses == [0, 0, 0, 0])
        let check = SharedLogCheck(logFile: log)
        #expect(check.problems.isEmpty, "\(check.problems.prefix(10))")
        #expect(check.workersDone == 4)
        #expect(check.finishes.count == 4 * operations) // every operation finished exactly once
        #expect(check.begun > 0)
    }

    @Test func aHolderKilledWithSIGKILL_freesItsCategory_forTheNextProcess() throws {
        let directory = TemporaryDirectory("category-locks")
        defer { directory.remove() }
        let log = directory.file("shared.log")
        let locks = directory.file("locks")
        let holder = try WorkerProcess(["--directory", locks, "--log", log, "--hold", "billing"])
        defer { holder.stop() }
        #expect(waitUntil(timeout: blockingTimeout) { SharedLogCheck.lastToken(of: "billing", in: log) != nil })
        let heldToken = SharedLogCheck.lastToken(of: "billing", in: log) ?? 0

        let next = try WorkerProcess(["--directory", locks, "--log", log, "--categories", "billing", "--operations", "1"])
        defer { next.stop() }
        usleep(300_000)
        #expect(SharedLogCheck(logFile: log).workersDone == 0) // it waits for the holder
        kill(holder.pid, SIGKILL)

        #expect(next.waitForExit() == 0)
        let check = SharedLogCheck(logFile: log)
        #expect(check.workersDone == 1)
        #expect((SharedLogCheck.lastToken(of: "billing", in: log) ?? 0) > heldToken)
    }
}
