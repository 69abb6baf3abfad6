import Conditions
import Foundation
import InMemoryLogging
import IntegrationsTestSupport
import Logging
import Operations
import OperationsLogging
import Testing

/// Probes of documented behaviour of `SwiftLogOperationLogger` that `SwiftLogOperationLoggerTests`
/// does not check yet. Each probe cites the sentence it checks.
@Suite struct SwiftLogOperationLoggerProbeTests: LogRecording {
    private func event(_ handler: InMemoryLogHandler, _ name: String, _ kind: String) -> InMemoryLogHandler.Entry? {
        entries(handler, of: name).first { $0.metadata["operation.event"] == .string(kind) }
    }

    // SwiftLogOperationLogger: "`operation.produced` | for `produced`: the name of the operation it produced" and "`debug` for the way to execution (... produced)"
    @Test func producingAnOperation_isADebugRecord_namingWhatWasProduced() {
        let (logger, handler) = logger(level: .trace)
        let queue = AsyncOperationQueue()
        queue.logger = SwiftLogOperationLogger(logger: logger)
        let child = AsyncBlockOperation {}
        child.name = uniqueName("child")
        let parent = ProducingOperation(producing: child)
        parent.name = uniqueName("parent")
        queue.addOperation(parent)
        #expect(waitUntil { parent.isFinished && child.isFinished })
        #expect(waitUntil { entries(handler, of: parent.name!).last?.metadata["operation.event"] == "finished" })

        let produced = event(handler, parent.name!, "produced")
        #expect(produced?.level == .debug)
        #expect(produced?.metadata["operation.produced"] == .string(child.name!))
        #expect(produced?.message.description == "\(parent.name!): produced '\(child.name!)'")
    }

    // SwiftLogOperationLogger: "`operation.dependency_ids` | the ids of the dependencies it was added with (a chain's previous link), if any"
    @Test func aChainsLink_namesThePreviousLinksID_inEveryRecord() {
        let (logger, handler) = logger(level: .trace)
        let queue = AsyncOperationQueue()
        queue.logger = SwiftLogOperationLogger(logger: logger)
        let fetch = AsyncBlockOperation {}
        fetch.name = uniqueName("fetch")
        let parse = AsyncBlockOperation {}
        parse.name = uniqueName("parse")
        queue.addChain([fetch, parse], waitUntilFinished: true)
        #expect(waitUntil { entries(handler, of: parse.name!).last?.metadata["operation.event"] == "finished" })

        let fetchID = entries(handler, of: fetch.name!).first?.metadata["operation.id"]
        #expect(fetchID != nil)
        let parseRecords = entries(handler, of: parse.name!)
        #expect(!parseRecords.isEmpty)
        #expect(parseRecords.allSatisfy { $0.metadata["operation.dependency_ids"] == .array([fetchID!]) }, "\(parseRecords.map(\.metadata))")
        #expect(entries(handler, of: fetch.name!).allSatisfy { $0.metadata["operation.dependency_ids"] == nil })
    }

    // SwiftLogOperationLogger: "`operation.condition_failures` | for `conditions_answered`: how many failed"; "`warning` for a finish with errors"
    @Test func failedConditions_areCountedInTheirRecord_andTheFinishIsAWarning() {
        let (logger, handler) = logger(level: .debug)
        let queue = AsyncOperationQueue()
        queue.logger = SwiftLogOperationLogger(logger: logger)
        let operation = AsyncBlockOperation {}
        operation.name = uniqueName("guarded")
        operation.addCondition(BlockCondition { false })
        operation.addCondition(BlockCondition { throw TestFailure("no account") })
        operation.addCondition(BlockCondition { true })
        queue.addOperations([operation], waitUntilFinished: true)
        #expect(waitUntil { entries(handler, of: operation.name!).last?.metadata["operation.event"] == "finished" })

        let answered = event(handler, operation.name!, "conditions_answered")
        #expect(answered?.level == .debug)
        #expect(answered?.metadata["operation.condition_failures"]?.description == "2")
        #expect(answered?.message.description == "\(operation.name!): conditions answered, 2 failed")
        let finished = entries(handler, of: operation.name!).last
        #expect(finished?.level == .warning)
        if case let .array(errors)? = finished?.metadata["operation.errors"] {
            #expect(errors.count == operation.errors.count && errors.count == 2)
        } else {
            Issue.record("no operation.errors on the finish: \(String(describing: finished?.metadata))")
        }
        #expect(event(handler, operation.name!, "started") == nil)
    }

    // SwiftLogOperationLogger: "`info` for a start and a finish without errors"; the example "operation.event=started ... charge: started"
    @Test func aSuccessfulOperation_startsAndFinishesAtInfo_withPlainSentences_andNoErrorsKey() {
        let (logger, handler) = logger(level: .info)
        let queue = AsyncOperationQueue()
        queue.name = "jobs"
        queue.logger = SwiftLogOperationLogger(logger: logger)
        let charge = AsyncBlockOperation {}
        charge.name = uniqueName("charge")
        queue.addOperations([charge], waitUntilFinished: true)
        #expect(waitUntil { entries(handler, of: charge.name!).count == 2 })

        let records = entries(handler, of: charge.name!)
        #expect(records.map(\.message.description) == ["\(charge.name!): started", "\(charge.name!): finished"])
        #expect(records.map(\.level) == [.info, .info])
        #expect(records.allSatisfy { $0.metadata["operation.errors"] == nil && $0.error == nil })
        #expect(records.allSatisfy { $0.metadata["queue.name"] == "jobs" })
    }
}

/// Produces `produced` while it runs, then finishes.
private final class ProducingOperation: AsyncOperation, @unchecked Sendable { // @unchecked: `produced` is set once, in init
    private let produced: AsyncOperation

    init(producing produced: AsyncOperation) {
        self.produced = produced
        super.init()
    }

    override func execute() {
        produce(produced)
        finish()
    }
}
