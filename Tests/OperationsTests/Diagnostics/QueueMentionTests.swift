import Foundation
@testable import Operations
import Testing
import TestSupport

/// What an operation remembers of its queue: enough to name it in a late message, without keeping
/// it alive and without a weak reference to it.
@Suite struct QueueMentionTests {
    @Test func aFinishedOperation_keepsNoQueueAlive_yetALateCallNamesTheQueueAsItIsNamedNow() async {
        let operation = AsyncBlockOperation {}
        operation.name = uniqueName("late")
        let queueReference = WeakBox<AsyncOperationQueue>()
        do {
            let queue = AsyncOperationQueue()
            queue.name = "first name"
            queueReference.object = queue
            queue.addOperation(operation)
            #expect(waitUntilFinished([operation]))
            queue.name = "imports"
        }
        #expect(await eventually { queueReference.object == nil }) // Foundation lets go of it soon after

        operation.finish()

        let report = DiagnosticsLog.shared.diagnostics(about: operation.name!).first
        #expect(report?.kind == .finishedTwice)
        #expect(report?.queueNames == ["imports"])
    }

    @Test func aGroupsQueue_isNamedAfterItsGroup_andAnUnnamedQueueByFoundationsDefaultName() {
        let group = GroupOperation(operations: [])
        group.name = "sync"
        let childQueue = AsyncOperationQueue()
        childQueue.attach(to: group)
        #expect(childQueue.mention.displayName == "children of sync")

        let unnamed = AsyncOperationQueue()
        #expect(unnamed.mention.displayName == unnamed.name ?? "AsyncOperationQueue")
    }

    /// A queue without any name is called after its type: the subclass's, spelled out only when
    /// a message needs it.
    @Test func aQueueWithoutAName_isCalledAfterItsType() {
        // @unchecked Sendable: no state of its own; the queue's state is behind its lock.
        final class ImportQueue: AsyncOperationQueue, @unchecked Sendable {}
        #expect(QueueMention(name: nil, type: ImportQueue.self).displayName == "ImportQueue")
        #expect(QueueMention(name: "imports", type: ImportQueue.self).displayName == "imports")
    }

    @Test func aPlainQueue_isNamedAsItWasWhenItStartedTheOperation() {
        let plain = OperationQueue()
        plain.name = "plain"
        let operation = AsyncBlockOperation {}
        operation.name = uniqueName("on a plain queue")
        plain.addOperation(operation)
        plain.waitUntilAllOperationsAreFinished()
        plain.name = "renamed later"

        operation.finish()

        let report = DiagnosticsLog.shared.diagnostics(about: operation.name!).first
        #expect(report?.queueNames == ["plain"])
    }

    @Test func aChildOfAGroupThatIsGone_isNamedAfterTheGroupsType() async {
        let child = AsyncBlockOperation {}
        child.name = uniqueName("child")
        let groupReference = WeakBox<GroupOperation>()
        do {
            let group = GroupOperation(operations: [child])
            groupReference.object = group
            AsyncOperationQueue().addOperation(group)
            #expect(waitUntilFinished([group]))
        }
        #expect(await eventually { groupReference.object == nil })

        child.finish()

        let report = DiagnosticsLog.shared.diagnostics(about: child.name!).first
        #expect(report?.queueNames == ["children of GroupOperation"])
    }
}
