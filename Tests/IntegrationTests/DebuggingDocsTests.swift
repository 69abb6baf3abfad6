import Conditions
import Foundation
import Operations
import Testing
import TestSupport

// The examples of the README's "Debugging a queue" section, verbatim between the `// docs:`
// markers, so that they keep compiling and doing what the text says. The functions below stand
// for the reader's own.

private enum Database {}
private let migrationMayEnd = DispatchSemaphore(value: 0)
private func startMigration(_ done: @escaping @Sendable () -> Void) {
    DispatchQueue.global().async {
        migrationMayEnd.wait()
        done()
    }
}
private func syncLedger() throws {}
private struct MigrationFailed: Error {}

@Suite struct DebuggingDocsTests {
    @Test func debuggingExample_explainsTheWait() {
        // docs:
        let queue = AsyncOperationQueue()
        queue.name = "ledger"
        queue.stallReportThreshold = 30    // report operations that wait longer than 30 s
        queue.logger = PrintLogger()       // hear every operation's lifecycle
        // :docs
        let logged = Recorder<String>()
        queue.logger = PrintLogger { line in logged.append(line) } // the same lines, kept quiet
        // docs:

        let migrate = AsyncBlockOperation { finish in startMigration { finish(nil) } }
        migrate.name = "migrate"
        migrate.addCondition(MutuallyExclusive<Database>())
        let sync = AsyncBlockOperation { try syncLedger() }
        sync.name = "sync"
        sync.addCondition(MutuallyExclusive<Database>())
        queue.addOperations([migrate, sync], waitUntilFinished: false)

        print(queue.debugDescription)
        // :docs
        #expect(waitUntil { migrate.isExecuting && sync.snapshot().state == .waitingForCategories })
        let lines = queue.debugDescription.split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(lines.first == "AsyncOperationQueue 'ledger': running, 2 unfinished operations")
        #expect(lines.dropFirst().first == "  migrate: executing")
        #expect(lines.last?.hasPrefix("  sync: waiting for categories; waits for category '") == true)
        #expect(lines.last?.hasSuffix("Database' (held by 'migrate'; 1st in line)") == true)
        // docs:
        let facts: OperationSnapshot = sync.snapshot()   // the same, as values: facts.state, facts.waitsFor
        // :docs
        #expect(facts.state == .waitingForCategories)
        migrationMayEnd.signal()
        #expect(waitUntilFinished([migrate, sync]))
        queue.stallReportThreshold = nil
        #expect(logged.all.contains("[info] ledger: migrate: started"))
    }

    @Test func printLogger_writesOneLinePerEventFromItsMinimumLevel() throws {
        let queue = AsyncOperationQueue()
        queue.name = "ledger"
        // docs:
        queue.logger = PrintLogger(minimumLevel: .info)   // [info] ledger: migrate: started
        // :docs
        // docs:
        queue.logger = PrintLogger()                          // everything from .debug up
        queue.logger = PrintLogger(minimumLevel: .warning)    // only operations that failed
        // :docs
        let lines = Recorder<String>()
        queue.logger = PrintLogger(minimumLevel: .info) { line in lines.append(line) }
        let migrate = AsyncBlockOperation {}
        migrate.name = "migrate"
        let failing = AsyncBlockOperation { throw MigrationFailed() }
        failing.name = "failing"
        queue.addOperations([migrate, failing], waitUntilFinished: true)
        #expect(waitUntil { lines.count == 4 })
        #expect(lines.all.filter { $0.hasPrefix("[info] ledger: migrate: ") } == ["[info] ledger: migrate: started", "[info] ledger: migrate: finished"])
        #expect(lines.all.contains("[warning] ledger: failing: finished with errors: MigrationFailed()"))
        #expect(!lines.all.contains { $0.hasPrefix("[debug]") })
        #expect(PrintLogger().minimumLevel == .debug)
    }
}
