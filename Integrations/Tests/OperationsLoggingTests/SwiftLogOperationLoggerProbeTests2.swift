import Conditions
import Foundation
import InMemoryLogging
import IntegrationsTestSupport
import Logging
import Operations
import OperationsLogging
import Testing

/// A second round of probes of documented behaviour of `SwiftLogOperationLogger` that neither
/// `SwiftLogOperationLoggerTests` nor `SwiftLogOperationLoggerProbeTests` checks. Each probe
/// cites the sentence it checks.
@Suite struct SwiftLogOperationLoggerProbeTests2: LogRecording {
    private func kinds(_ handler: InMemoryLogHandler, of name: String) -> [String] {
        entries(handler, of: name).compactMap { $0.metadata["operation.event"]?.description }
    }

    // OperationLogger: "Each event comes once."; SwiftLogOperationLogger: "`notice` for a cancellation", "`operation.errors` | for `cancelled` and `finished`: its errors, described (the first is also the record's `error`)"
    @Test func anOperationCancelledWhileWaitingForACategory_logsOneCancellationAndOneFinish_andNoStart() {
        let (logger, handler) = logger(level: .trace)
        let queue = AsyncOperationQueue()
        queue.logger = SwiftLogOperationLogger(logger: logger)
        let category = uniqueName("account")
        let held = HeldOperations()
        let holder = held.make(uniqueName("holder"))
        holder.addCondition(ExclusiveCategory(category))
        let waiter = AsyncBlockOperation {}
        waiter.name = uniqueName("waiter")
        waiter.addCondition(ExclusiveCategory(category))
        queue.addOperation(holder)
        #expect(waitUntil { held.hasStarted(holder.name!) })
        queue.addOperation(waiter)
        #expect(waitUntil { kinds(handler, of: waiter.name!).contains("waiting") })
        waiter.cancel(with: TestFailure("superseded"))
        #expect(waitUntil { waiter.isFinished })
        #expect(waitUntil { kinds(handler, of: waiter.name!).last == "finished" })
        held.finish(holder.name!)
        #expect(waitUntil { holder.isFinished })
        #expect(waitUntil { kinds(handler, of: holder.name!).last == "finished" })

        let events = kinds(handler, of: waiter.name!)
        #expect(events.filter { $0 == "added" }.count == 1, "\(events)")
        #expect(events.filter { $0 == "cancelled" }.count == 1, "\(events)")
        #expect(events.filter { $0 == "finished" }.count == 1, "\(events)")
        #expect(!events.contains("started") && !events.contains("categories_granted"), "\(events)")
        let cancellation = entries(handler, of: waiter.name!).first { $0.metadata["operation.event"] == "cancelled" }
        #expect(cancellation?.level == .notice)
        #expect((cancellation?.error as? TestFailure) == TestFailure("superseded"))
        let finish = entries(handler, of: waiter.name!).last
        #expect(finish?.level == .warning)
        #expect((finish?.error as? TestFailure) == TestFailure("superseded"))
    }

    // README: "An adapter with nothing to report is not even attached: ... a swift-log `Logger` at `error` or `critical`"; OperationLogLevel.error: "the framework's own events never use it"
    @Test func aLoggerAtErrorOrCritical_asksForNoEvent_andGetsNoRecord_evenForFailuresAndCancellations() {
        for level in [Logger.Level.error, .critical] {
            let (logger, handler) = logger(level: level)
            let adapter = SwiftLogOperationLogger(logger: logger)
            #expect(adapter.minimumLevel == .error)
            let queue = AsyncOperationQueue()
            queue.logger = adapter
            let failing = AsyncBlockOperation { throw TestFailure("declined") }
            let guarded = AsyncBlockOperation {}
            guarded.addCondition(BlockCondition { false })
            let cancelled = AsyncBlockOperation {}
            cancelled.cancel(with: TestFailure("superseded"))
            queue.addOperations([failing, guarded, cancelled], waitUntilFinished: true)
            #expect([failing, guarded, cancelled].allSatisfy { $0.isFinished })
            #expect(handler.entries.isEmpty, "at \(level): \(handler.entries.map(\.message))")
        }
    }

    // SwiftLogOperationLogger: "`operation.dependency_ids` | the ids of the dependencies it was added with (a chain's previous link), if any"; OperationLogEvent.dependencyIDs: "The dependencies the operation had when it was added whose events are heard too" (a plain Foundation operation's `added` is heard)
    @Test func aLinkAfterAPlainFoundationOperation_namesThatOperationsID() {
        let (logger, handler) = logger(level: .debug)
        let queue = AsyncOperationQueue()
        queue.logger = SwiftLogOperationLogger(logger: logger)
        let fetch = BlockOperation {}
        fetch.name = uniqueName("fetch")
        let parse = AsyncBlockOperation {}
        parse.name = uniqueName("parse")
        parse.addDependency(fetch)
        queue.isSuspended = true // neither runs before both are added, the dependency first
        queue.addOperations([fetch, parse], waitUntilFinished: false)
        queue.isSuspended = false
        #expect(waitUntil { kinds(handler, of: parse.name!).last == "finished" })

        let fetchID = entries(handler, of: fetch.name!).first?.metadata["operation.id"]
        #expect(fetchID != nil, "the plain operation's `added` was not heard")
        let parseRecords = entries(handler, of: parse.name!)
        // The id the plain operation's `added` record carries is kept for it (PlainOperationRegistry).
        #expect(parseRecords.first?.metadata["operation.dependency_ids"] == fetchID.map { .array([$0]) }, "\(parseRecords.first?.metadata ?? [:])")
    }
}
