import Foundation
import Operations
import Testing
import TestSupport

/// `stallReportThreshold`: operations that wait too long are reported, once, with why.
@Suite struct StallReportTests {
    @Test func operationWaitingTooLongForACategory_isReportedOnce_withItsHolder() {
        let log = DiagnosticsLog.shared
        let category = uniqueName("Database")
        let held = HeldOperations()
        let holder = held.make(uniqueName("migrate"))
        holder.addCondition(ExclusiveStub(category))
        let waiter = AsyncBlockOperation {}
        waiter.name = uniqueName("sync")
        waiter.addCondition(ExclusiveStub(category))
        let queue = AsyncOperationQueue()
        queue.stallReportThreshold = 0.2
        #expect(queue.stallReportThreshold == 0.2)
        queue.addOperation(holder)
        #expect(held.waitUntilStarted(holder.name!))
        queue.addOperation(waiter)

        #expect(waitUntil { !log.diagnostics(about: waiter.name!).isEmpty })
        let report = log.diagnostics(about: waiter.name!)[0]
        #expect(report.kind == .stalled)
        #expect(report.message.contains("waits for category '\(category)' (held by '\(holder.name!)'; 1st in line)"))
        #expect(report.message.contains("'\(holder.name!)' has been executing for"))
        #expect(log.kinds(about: holder.name!).isEmpty) // executing is not waiting

        // Looked at again and again while it keeps waiting (a chance to go wrong): still one report.
        Thread.sleep(forTimeInterval: 0.5)
        #expect(log.kinds(about: waiter.name!) == [.stalled])
        held.finish(holder.name!)
        #expect(waitUntilFinished([waiter]))
        queue.stallReportThreshold = nil
        #expect(queue.stallReportThreshold == nil)
    }

    @Test func holderOnAnotherQueue_isFoundByIdentity_withHowLongItHasBeenExecuting() {
        // Given the holder of a category on one queue, and an operation waiting for the category on
        // another queue, the watched one
        let log = DiagnosticsLog.shared
        let category = uniqueName("Database")
        let held = HeldOperations()
        let holderName = uniqueName("migrate")
        let holder = held.make(holderName)
        holder.addCondition(ExclusiveStub(category))
        AsyncOperationQueue().addOperation(holder)
        #expect(held.waitUntilStarted(holderName))
        let waiter = AsyncBlockOperation {}
        waiter.name = uniqueName("sync")
        waiter.addCondition(ExclusiveStub(category))
        let watched = AsyncOperationQueue()
        watched.stallReportThreshold = 0.3

        // When the waiter has waited past the threshold
        watched.addOperations([waiter], waitUntilFinished: false)

        // Then its report says how long the holder (the one on the other queue) has executed
        #expect(waitUntil { !log.diagnostics(about: waiter.name!).isEmpty })
        let report = log.diagnostics(about: waiter.name!)[0]
        #expect(report.message.contains("'\(holderName)' has been executing for"))
        held.finish(holderName)
        #expect(waitUntilFinished([waiter]))
        watched.stallReportThreshold = nil
    }

    @Test func aGroupsChildren_areWatched_withTheThresholdOfTheQueueTheGroupStartsOn() {
        // Given the holder of a category, and a group whose child waits for it, on a watched queue
        let log = DiagnosticsLog.shared
        let category = uniqueName("Database")
        let held = HeldOperations()
        let holderName = uniqueName("migrate")
        let holder = held.make(holderName)
        holder.addCondition(ExclusiveStub(category))
        AsyncOperationQueue().addOperation(holder)
        #expect(held.waitUntilStarted(holderName))
        let child = AsyncBlockOperation {}
        child.name = uniqueName("child")
        child.addCondition(ExclusiveStub(category))
        let group = GroupOperation(operations: [child])
        let watched = AsyncOperationQueue()
        watched.stallReportThreshold = 0.3

        // When the child has waited past the threshold
        watched.addOperation(group)

        // Then the child is reported, naming the holder
        #expect(waitUntil { !log.diagnostics(about: child.name!).isEmpty })
        let report = log.diagnostics(about: child.name!)[0]
        #expect(report.kind == .stalled)
        #expect(report.message.contains(holderName))
        held.finish(holderName)
        #expect(waitUntilFinished([group]))
        watched.stallReportThreshold = nil
    }

    @Test func queueWithoutAThreshold_reportsNothing() {
        let queue = AsyncOperationQueue()
        #expect(queue.stallReportThreshold == nil)
    }
}
