import Conditions
import Foundation
import InMemoryLogging
import IntegrationsTestSupport
import Logging
import Operations
import OperationsLogging
import Testing

@Suite struct SwiftLogOperationLoggerTests: LogRecording {
    @Test func everyLifecycleEvent_isARecord_atItsLevel_withTheOperationsMetadata() {
        let (logger, handler) = logger(level: .debug)
        let queue = AsyncOperationQueue()
        queue.name = "jobs"
        queue.logger = SwiftLogOperationLogger(logger: logger)
        let category = uniqueName("account")
        let held = HeldOperations()
        let holder = held.make(uniqueName("holder"))
        holder.addCondition(ExclusiveCategory(category))
        let charge = AsyncBlockOperation { throw TestFailure("card declined") }
        charge.name = uniqueName("charge")
        charge.addCondition(ExclusiveCategory(category))
        queue.addOperation(holder)
        #expect(waitUntil { held.hasStarted(holder.name!) })
        queue.addOperation(charge)
        #expect(waitUntil { entries(handler, of: charge.name!).contains { $0.metadata["operation.event"] == "waiting" } })
        held.finish(holder.name!)
        #expect(waitUntil { entries(handler, of: charge.name!).last?.metadata["operation.event"] == "finished" })

        let records = entries(handler, of: charge.name!)
        #expect(records.map { $0.metadata["operation.event"] } == ["added", "conditions_answered", "waiting", "categories_granted", "started", "finished"])
        #expect(records.map(\.level) == [.debug, .debug, .debug, .debug, .info, .warning])
        let ids = Set(records.compactMap { $0.metadata["operation.id"]?.description })
        #expect(ids.count == 1)
        #expect(records.allSatisfy { $0.metadata["queue.name"] == "jobs" })
        let waiting = records.first { $0.metadata["operation.event"] == "waiting" }
        #expect(waiting?.metadata["operation.waits_for"]?.description.contains(category) == true)
        #expect(waiting?.message.description.contains("waiting for category '\(category)'") == true)
        let finished = records.last
        #expect(finished?.metadata["operation.errors"] == .array([.string("TestFailure(card declined)")]))
        #expect((finished?.error as? TestFailure) == TestFailure("card declined"))
        let granted = records.first { $0.metadata["operation.event"] == "categories_granted" }
        #expect(granted?.metadata["operation.categories"] == .array([.string(category)]))
    }

    @Test func eventsBelowTheLoggersLevel_areNotMade() {
        let (logger, handler) = logger(level: .info)
        let queue = AsyncOperationQueue()
        let adapter = SwiftLogOperationLogger(logger: logger)
        #expect(adapter.minimumLevel == .info)
        queue.logger = adapter
        let operation = AsyncBlockOperation {}
        operation.name = uniqueName("quiet")
        queue.addOperations([operation], waitUntilFinished: true)
        #expect(waitUntil { entries(handler, of: operation.name!).count == 2 })
        #expect(entries(handler, of: operation.name!).map(\.level) == [.info, .info])
    }

    @Test func aCancellation_isANotice_withItsReason_andAGroupsChildrenNameTheGroup() {
        let (logger, handler) = logger(level: .trace)
        let queue = AsyncOperationQueue()
        queue.logger = SwiftLogOperationLogger(logger: logger)
        queue.isSuspended = true
        let child = AsyncBlockOperation {}
        child.name = uniqueName("child")
        let group = GroupOperation(operations: [child])
        group.name = uniqueName("group")
        let cancelled = AsyncBlockOperation {}
        cancelled.name = uniqueName("cancelled")
        queue.addOperations([group, cancelled], waitUntilFinished: false)
        cancelled.cancel(with: TestFailure("superseded"))
        queue.isSuspended = false
        #expect(waitUntil { group.isFinished && cancelled.isFinished })
        #expect(waitUntil { entries(handler, of: child.name!).last?.metadata["operation.event"] == "finished" })

        let cancellation = entries(handler, of: cancelled.name!).first { $0.metadata["operation.event"] == "cancelled" }
        #expect(cancellation?.level == .notice)
        #expect(cancellation?.metadata["operation.errors"] == .array([.string("TestFailure(superseded)")]))
        let groupID = entries(handler, of: group.name!).first?.metadata["operation.id"]
        #expect(groupID != nil)
        #expect(entries(handler, of: child.name!).allSatisfy { $0.metadata["operation.group_id"] == groupID })
    }
}
