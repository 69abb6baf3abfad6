import Conditions
import Foundation
import Operations
import Testing
import TestSupport

// The examples of "Exclusion across processes and hosts", of the README's section on it and of
// the `///` comments of the category locks, verbatim between the `// docs:` markers. The values
// below stand for the reader's own.

/// A ledger that turns away writes with a fencing token older than the newest it has seen.
final class FencedLedger: Ledger, @unchecked Sendable { // @unchecked: `newestToken` is only touched while holding `lock`
    private let lock = NSLock()
    private var newestToken: UInt64 = 0
    let charges = Counter()

    struct StaleHolder: Error {}

    func chargeDueInvoices(fencingToken: UInt64) throws {
        lock.lock()
        defer { lock.unlock() }
        guard fencingToken > newestToken else { throw StaleHolder() }
        newestToken = fencingToken
        charges.increment()
    }
}

// docs:
protocol Ledger: Sendable {
    func chargeDueInvoices(fencingToken: UInt64) throws
}

final class NightlyBillingRun: AsyncOperation, @unchecked Sendable {
    private let ledger: Ledger

    init(ledger: Ledger, lock: some CategoryLock) {
        self.ledger = ledger
        super.init()
        name = "nightly billing"
        addCondition(ExclusiveCategory("billing", lock: lock))
    }

    override func execute() {
        guard let token = fencingToken(for: "billing") else {
            finish(with: CategoryLockError.lost(category: "billing"))
            return
        }
        do {
            try ledger.chargeDueInvoices(fencingToken: token)
            finish()
        } catch {
            finish(with: error)
        }
    }
}
// :docs

/// One instance of the service, as the article starts it.
private func startInstance(ledger: Ledger) throws -> AsyncOperationQueue {
    // docs:
    let lock = try FileCategoryLock(directory: URL(fileURLWithPath: "/tmp/billing-locks"))
    let queue = AsyncOperationQueue()
    queue.addOperation(NightlyBillingRun(ledger: ledger, lock: lock))
    // :docs
    return queue
}

@Suite("Category lock docs", .serialized)
struct CategoryLockDocsTests {
    @Test func theHostWideExample_runsBillingUnderItsLock() throws {
        defer { try? FileManager.default.removeItem(atPath: "/tmp/billing-locks") }
        let billing = AsyncBlockOperation { }
        // docs:
        let hostWide = try FileCategoryLock(directory: URL(fileURLWithPath: "/tmp/billing-locks"))
        billing.addCondition(ExclusiveCategory("billing", lock: hostWide))
        // :docs
        AsyncOperationQueue().addOperations([billing], waitUntilFinished: true)
        #expect(billing.errors.isEmpty)
    }

    @Test func theFileLockExample_runsTheNightlyRunUnderItsLock() throws {
        defer { try? FileManager.default.removeItem(atPath: "/tmp/billing-locks") }
        let nightlyRun = AsyncBlockOperation { }
        // docs:
        let hostWide = try FileCategoryLock(directory: URL(fileURLWithPath: "/tmp/billing-locks"))
        nightlyRun.addCondition(ExclusiveCategory("billing", lock: hostWide))
        // :docs
        AsyncOperationQueue().addOperations([nightlyRun], waitUntilFinished: true)
        #expect(nightlyRun.errors.isEmpty)
    }

    @Test func theMutuallyExclusiveExample_runsUnderItsLock() throws {
        defer { try? FileManager.default.removeItem(atPath: "/tmp/billing-locks") }
        let nightlyRun = AsyncBlockOperation { }
        // docs:
        enum Billing {}
        let hostWide = try FileCategoryLock(directory: URL(fileURLWithPath: "/tmp/billing-locks"))
        nightlyRun.addCondition(MutuallyExclusive<Billing>(lock: hostWide))
        // :docs
        AsyncOperationQueue().addOperations([nightlyRun], waitUntilFinished: true)
        #expect(nightlyRun.errors.isEmpty)
    }

    @Test func theFencingTokenExample_readsTheTokenWhileHeld() throws {
        defer { try? FileManager.default.removeItem(atPath: "/tmp/billing-locks") }
        let tokens = Recorder<UInt64?>()
        let lock = try FileCategoryLock(directory: URL(fileURLWithPath: "/tmp/billing-locks"))
        let holder = AsyncBlockOperation { }
        holder.addCondition(ExclusiveCategory("billing", lock: lock))
        let operation = holder
        holder.addObserver(StartedProbe { _ in
            // docs:
            let token = operation.fencingToken(for: "billing")
            // :docs
            tokens.append(token)
        })
        AsyncOperationQueue().addOperations([holder], waitUntilFinished: true)
        #expect(tokens.all.count == 1 && tokens.all.first??.description != nil)
    }

    @Test func oneBillingJobAcrossThreeInstances_chargesEachRunOnce() throws {
        defer { try? FileManager.default.removeItem(atPath: "/tmp/billing-locks") }
        let ledger = FencedLedger()
        let runs = try (0..<3).map { _ in try startInstance(ledger: ledger) }
        for queue in runs { queue.waitUntilAllOperationsAreFinished() }
        #expect(ledger.charges.current == 3) // one at a time, each with a greater token
    }
}

/// Hears `operationDidStart`, when the operation holds its categories.
private struct StartedProbe: OperationObserver {
    let didStart: @Sendable (AsyncOperation) -> Void
    init(_ didStart: @escaping @Sendable (AsyncOperation) -> Void) { self.didStart = didStart }
    func operationDidStart(_ operation: AsyncOperation) { didStart(operation) }
}
