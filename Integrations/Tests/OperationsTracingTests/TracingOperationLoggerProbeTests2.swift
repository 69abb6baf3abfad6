import Foundation
import InMemoryTracing
import IntegrationsTestSupport
import Operations
import OperationsTracing
import Testing
import Tracing

/// A second round of probes of documented behaviour of `TracingOperationLogger` that neither
/// `TracingOperationLoggerTests` nor `TracingOperationLoggerProbeTests` checks. Each probe cites
/// the sentence it checks.
@Suite struct TracingOperationLoggerProbeTests2: SpanReading {
    private func spans(_ tracer: InMemoryTracer, _ name: String) -> [FinishedInMemorySpan] {
        tracer.finishedSpans.filter { $0.operationName == name }
    }

    // TracingOperationLogger: "Makes each operation on a queue a span ..., from its start to its finish"; "What it waited for before it started is recorded as span events with the time they happened"
    @Test func aStartedOperationsSpan_beginsAtItsStart_notItsAdd_andItsWaitingEventKeepsTheEarlierTime() {
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.logger = TracingOperationLogger(tracer: tracer)
        let held = HeldOperations()
        let first = held.make(uniqueName("first"))
        let follower = named(AsyncBlockOperation {}, "follower")
        follower.addDependency(first)
        let beforeAdd = DefaultTracerClock.now.nanosecondsSinceEpoch
        queue.addOperations([first, follower], waitUntilFinished: false)
        #expect(waitUntil { held.hasStarted(first.name!) })
        usleep(20_000)
        let beforeStart = DefaultTracerClock.now.nanosecondsSinceEpoch
        held.finish(first.name!)
        #expect(waitUntil { span(tracer, follower.name!) != nil })

        guard let followerSpan = span(tracer, follower.name!) else { return }
        #expect(followerSpan.startInstant.nanosecondsSinceEpoch >= beforeStart, "the span began before its operation could start")
        #expect(followerSpan.startInstant.nanosecondsSinceEpoch <= followerSpan.endInstant.nanosecondsSinceEpoch)
        let waiting = followerSpan.events.first { $0.name == "waiting" }
        #expect(waiting != nil, "events: \(followerSpan.events.map(\.name))")
        if let waiting {
            #expect(waiting.nanosecondsSinceEpoch >= beforeAdd)
            #expect(waiting.nanosecondsSinceEpoch < beforeStart, "the waiting event carries the time it was recorded on the span, not the time it happened")
        }
    }

    // OperationLogger: "Each event comes once."; TracingOperationLogger: "An operation that never started (cancelled while it waited) still gets a span, from its add to its finish"
    @Test func anOperationCancelledWhileItWaits_getsExactlyOneSpan_withOneCancelledEvent_andNoneLeftOpen() {
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.logger = TracingOperationLogger(tracer: tracer)
        let held = HeldOperations()
        let first = held.make(uniqueName("first"))
        let waiters = (0..<5).map { index -> AsyncBlockOperation in
            let operation = named(AsyncBlockOperation {}, "waiter-\(index)")
            operation.addDependency(first)
            return operation
        }
        queue.addOperations([first] + waiters, waitUntilFinished: false)
        #expect(waitUntil { held.hasStarted(first.name!) })
        for waiter in waiters {
            waiter.cancel()
            waiter.cancel(with: TestFailure("again")) // a second cancel changes nothing
        }
        #expect(waitUntil { waiters.allSatisfy(\.isFinished) })
        held.finish(first.name!)
        #expect(waitUntil { span(tracer, first.name!) != nil && waiters.allSatisfy { span(tracer, $0.name!) != nil } })

        for waiter in waiters {
            let made = spans(tracer, waiter.name!)
            #expect(made.count == 1, "\(waiter.name!): \(made.count) spans")
            let cancellations = made.first?.events.filter { $0.name == "cancelled" } ?? []
            #expect(cancellations.count == 1, "\(waiter.name!): events \(made.first?.events.map(\.name) ?? [])")
            #expect(made.first?.events.contains { $0.name == "started" } == false)
        }
        #expect(tracer.activeSpans.isEmpty, "spans left open: \(tracer.activeSpans.map(\.operationName))")
    }

    // TracingOperationLogger: "a cancelled one adds a `cancelled` event whose `operation.cancel_reason` says why. An operation that never started ... still gets a span, from its add to its finish, with `operation.started` false." (cancelled before it was added, inside a request's span)
    @Test func anOperationCancelledBeforeItWasAdded_getsASpanUnderTheRequest_withItsCancellation() {
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.logger = TracingOperationLogger(tracer: tracer)
        let superseded = named(AsyncBlockOperation {}, "superseded")
        superseded.cancel(with: TestFailure("superseded"))
        tracer.withSpan("POST /jobs") { _ in
            queue.addOperations([superseded], waitUntilFinished: true)
        }
        #expect(waitUntil { span(tracer, superseded.name!) != nil })

        let request = span(tracer, "POST /jobs")
        let made = span(tracer, superseded.name!)
        #expect(made?.parentSpanID == request?.spanID)
        #expect(made?.attributes["operation.started"]?.toSpanAttribute() == .bool(false))
        #expect(made?.status?.code == .error)
        // The logger joins as the operation is added, after its cancellation: the queue logs the
        // `cancelled` it missed right after `added`.
        let cancellation = made?.events.first { $0.name == "cancelled" }
        #expect(cancellation?.attributes["operation.cancel_reason"]?.toSpanAttribute() == .string("TestFailure(superseded)"), "events: \(made?.events.map(\.name) ?? [])")
    }
    // TracingOperationLogger: "A group's children are children of the group's span (a retry's attempts, a cascade's steps)." (a group cancelled before it started, so that neither it nor its children ever start)
    @Test func theChildrenOfAGroupCancelledBeforeItStarted_areStillChildrenOfTheGroupsSpan() {
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.logger = TracingOperationLogger(tracer: tracer)
        queue.isSuspended = true
        let children = (0..<2).map { named(AsyncBlockOperation {}, "child-\($0)") }
        let group = named(GroupOperation(operations: children), "group")
        tracer.withSpan("POST /batches") { _ in
            queue.addOperation(group)
        }
        group.cancel()
        queue.isSuspended = false
        #expect(waitUntil { group.isFinished && children.allSatisfy(\.isFinished) })
        #expect(waitUntil { span(tracer, group.name!) != nil && children.allSatisfy { span(tracer, $0.name!) != nil } })

        let request = span(tracer, "POST /batches")
        let groupSpan = span(tracer, group.name!)
        #expect(groupSpan?.parentSpanID == request?.spanID)
        #expect(groupSpan?.attributes["operation.started"]?.toSpanAttribute() == .bool(false))
        // The group finishes after its children (API.md 7): their spans wait for the group's.
        for child in children {
            let childSpan = span(tracer, child.name!)
            #expect(childSpan?.parentSpanID == groupSpan?.spanID, "\(child.name!): parent \(String(describing: childSpan?.parentSpanID)), group \(String(describing: groupSpan?.spanID)), request \(String(describing: request?.spanID))")
        }
    }
}
