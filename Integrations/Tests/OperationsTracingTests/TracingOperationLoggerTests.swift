import Foundation
import InMemoryTracing
import IntegrationsTestSupport
import Operations
import OperationsTracing
import Testing
import Tracing

@Suite struct TracingOperationLoggerTests: SpanReading {
    @Test func anOperationsSpan_isAChildOfTheSpanCurrentWhereItWasAdded() {
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.name = "jobs"
        queue.logger = TracingOperationLogger(tracer: tracer)
        let job = named(AsyncBlockOperation { usleep(1_000) }, "job")
        tracer.withSpan("POST /jobs") { _ in
            queue.addOperation(job) // runs later, on another thread
        }
        #expect(waitUntil { span(tracer, job.name!) != nil })

        let request = span(tracer, "POST /jobs")
        let jobSpan = span(tracer, job.name!)
        #expect(jobSpan?.parentSpanID == request?.spanID)
        #expect(jobSpan?.traceID == request?.traceID)
        #expect(jobSpan?.attributes["queue.name"]?.toSpanAttribute() == .string("jobs"))
        #expect(jobSpan?.status == nil)
    }

    @Test func aGroupsChildren_areChildrenOfItsSpan_andAChainsLinksFollowOneAnother() {
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.logger = TracingOperationLogger(tracer: tracer)
        let first = named(AsyncBlockOperation {}, "first")
        let second = named(AsyncBlockOperation {}, "second")
        let group = named(GroupOperation(operations: [first, second]), "group")
        let fetch = named(AsyncBlockOperation {}, "fetch")
        let parse = named(AsyncBlockOperation {}, "parse")
        queue.addOperations([group], waitUntilFinished: true)
        queue.addChain([fetch, parse], waitUntilFinished: true)
        #expect(waitUntil { span(tracer, parse.name!) != nil && span(tracer, group.name!) != nil })

        let groupSpan = span(tracer, group.name!)
        #expect(span(tracer, first.name!)?.parentSpanID == groupSpan?.spanID)
        #expect(span(tracer, second.name!)?.parentSpanID == groupSpan?.spanID)
        let links = span(tracer, parse.name!)?.links ?? []
        #expect(links.count == 1)
        #expect(links.first?.context.inMemorySpanContext?.spanID == span(tracer, fetch.name!)?.spanID)
    }

    @Test func childrenThatNeverStarted_areUnderTheirGroupsSpan_nestedOrWhileTheGroupWaitsToRun() {
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.logger = TracingOperationLogger(tracer: tracer)
        queue.isSuspended = true
        // Nested: neither group nor its child group nor the grandchild ever starts.
        let grandchild = named(AsyncBlockOperation {}, "grandchild")
        let inner = named(GroupOperation(operations: [grandchild]), "inner")
        let cancelledGroup = named(GroupOperation(operations: [inner]), "cancelled-group")
        // Alone: one child is cancelled before its group runs; the group runs afterwards.
        let dropped = named(AsyncBlockOperation {}, "dropped")
        let kept = named(AsyncBlockOperation {}, "kept")
        let runningGroup = named(GroupOperation(operations: [dropped, kept]), "running-group")
        queue.addOperations([cancelledGroup, runningGroup], waitUntilFinished: false)
        cancelledGroup.cancel()
        dropped.cancel()
        queue.isSuspended = false
        #expect(waitUntil { [cancelledGroup, runningGroup].allSatisfy { span(tracer, $0.name!) != nil } })
        #expect(waitUntil { [grandchild, inner, dropped, kept].allSatisfy { span(tracer, $0.name!) != nil } })

        #expect(span(tracer, inner.name!)?.parentSpanID == span(tracer, cancelledGroup.name!)?.spanID)
        #expect(span(tracer, grandchild.name!)?.parentSpanID == span(tracer, inner.name!)?.spanID)
        #expect(span(tracer, grandchild.name!)?.attributes["operation.started"]?.toSpanAttribute() == .bool(false))
        let running = span(tracer, runningGroup.name!)
        #expect(running?.attributes["operation.started"] == nil) // it ran
        #expect(span(tracer, dropped.name!)?.parentSpanID == running?.spanID)
        #expect(span(tracer, dropped.name!)?.attributes["operation.started"]?.toSpanAttribute() == .bool(false))
        #expect(span(tracer, kept.name!)?.parentSpanID == running?.spanID)
    }

    @Test func waiting_isRecordedAsEvents_aFailureRecordsItsErrors_andACancellationItsReason() {
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.logger = TracingOperationLogger(tracer: tracer)
        let held = HeldOperations()
        let first = held.make(uniqueName("first"))
        let failing = named(AsyncBlockOperation { throw TestFailure("disk full") }, "failing")
        failing.addDependency(first)
        let cancelled = named(AsyncBlockOperation {}, "cancelled")
        cancelled.addDependency(first)
        queue.addOperations([first, failing, cancelled], waitUntilFinished: false)
        #expect(waitUntil { held.hasStarted(first.name!) })
        cancelled.cancel(with: TestFailure("superseded"))
        held.finish(first.name!)
        #expect(waitUntil { span(tracer, failing.name!) != nil && span(tracer, cancelled.name!) != nil })

        let failed = span(tracer, failing.name!)
        #expect(failed?.events.map(\.name).contains("waiting") == true)
        #expect(failed?.errors.compactMap { $0.error as? TestFailure } == [TestFailure("disk full")])
        #expect(failed?.status?.code == .error)
        let cancelledSpan = span(tracer, cancelled.name!)
        let cancellation = cancelledSpan?.events.first { $0.name == "cancelled" }
        #expect(cancellation?.attributes["operation.cancel_reason"]?.toSpanAttribute() == .string("TestFailure(superseded)"))
        #expect(cancelledSpan?.attributes["operation.started"]?.toSpanAttribute() == .bool(false))
    }

    /// One thread can deliver a child's `.finished` after another delivered the group's (the
    /// child's finish let the group finish): the child's span is under the group's all the same,
    /// whether the group ran or was cancelled before it could.
    @Test(arguments: [true, false])
    func aChildsFinishHeardAfterItsGroups_isUnderTheGroupsSpan(groupStarted: Bool) {
        let tracer = InMemoryTracer()
        let logger = TracingOperationLogger(tracer: tracer)
        let (group, child, sibling) = (uniqueName("group"), uniqueName("late-child"), uniqueName("sibling"))
        let (groupID, childID, siblingID) = (OperationID(rawValue: 1), OperationID(rawValue: 2), OperationID(rawValue: 3))
        func event(_ name: String, _ kind: OperationLogEvent.Kind, _ id: OperationID, in group: OperationID? = nil) -> OperationLogEvent {
            OperationLogEvent(operationName: name, queueName: nil, kind: kind, operationID: id, groupID: group)
        }
        tracer.withSpan("request") { _ in
            logger.log(event(group, .added, groupID))
            logger.log(event(child, .added, childID, in: groupID))
            logger.log(event(sibling, .added, siblingID, in: groupID))
        }
        if groupStarted {
            logger.log(event(group, .started, groupID))
        }

        logger.log(event(sibling, .finished(errors: []), siblingID, in: groupID))
        logger.log(event(group, .finished(errors: []), groupID))
        logger.log(event(child, .finished(errors: []), childID, in: groupID))

        let groupSpan = span(tracer, group)
        #expect(groupSpan != nil)
        #expect(span(tracer, child)?.parentSpanID == groupSpan?.spanID)
        #expect(span(tracer, sibling)?.parentSpanID == groupSpan?.spanID)
        #expect(span(tracer, child)?.attributes["operation.started"]?.toSpanAttribute() == .bool(false))
    }
}
