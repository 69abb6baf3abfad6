import Foundation
import InMemoryTracing
import IntegrationsTestSupport
import Operations
import OperationsTracing
import Testing
import Tracing

/// A third round of probes of documented behaviour of `TracingOperationLogger` that the earlier
/// suites do not check. Each probe cites the sentence it checks.
@Suite struct TracingOperationLoggerProbeTests3: SpanReading {
    // TracingOperationLogger: "Spans are named after the operation and carry `operation.id` and,
    // if the queue was given a name, `queue.name`."
    @Test func anOperationOnAQueueNeverGivenAName_hasASpanWithItsIDButNoQueueName() {
        // Given an unnamed queue
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.logger = TracingOperationLogger(tracer: tracer)
        let operation = named(AsyncBlockOperation {}, "anonymous")

        // When an operation runs on it
        queue.addOperation(operation)
        #expect(waitUntil { span(tracer, operation.name!) != nil })

        // Then its span carries its id but no queue name
        let made = span(tracer, operation.name!)
        #expect(made?.attributes["operation.id"] != nil)
        #expect(made?.attributes["queue.name"] == nil, "\(String(describing: made?.attributes["queue.name"]))")
    }

    // TracingOperationLogger: "a cancelled one adds a `cancelled` event whose
    // `operation.cancel_reason` says why"; Running operations in a service: "Once the grace period
    // is over, those still running are cancelled too" (with `AsyncOperationError.queueShutDown`)
    @Test func aRunningOperationCancelledByTheQueuesShutdown_endsItsSpan_withACancelledEventSayingShutdown() async {
        // Given a queue running an operation that ends only when cancelled
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.logger = TracingOperationLogger(tracer: tracer)
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        queue.addOperation(running)
        #expect(await eventually { held.hasStarted(running.name!) })

        // When the queue shuts down with no grace period
        await queue.shutDown(gracePeriod: 0 as TimeInterval)

        // Then the operation's span ended, with one cancelled event whose reason is the shutdown
        #expect(running.isCancelled && (running.errors.first as? AsyncOperationError) == .queueShutDown)
        #expect(await eventually { span(tracer, running.name!) != nil })
        let made = span(tracer, running.name!)
        let cancellations = made?.events.filter { $0.name == "cancelled" } ?? []
        #expect(cancellations.count == 1, "events: \(made?.events.map(\.name) ?? [])")
        let reason = cancellations.first?.attributes["operation.cancel_reason"]?.toSpanAttribute()
        #expect(reason == .string("\(AsyncOperationError.queueShutDown)"), "\(String(describing: reason))")
        #expect(tracer.activeSpans.allSatisfy { $0.operationName != running.name! })
    }

    // TracingOperationLogger: "An operation added with dependencies not finished yet (a chain's
    // links, say) links to their spans"; "An operation that never started (cancelled while it
    // waited) still gets a span ... unless an operation added with it as a dependency waits for
    // its span to link to" (a chain of three added at once, whose middle link is cancelled while
    // it waits)
    @Test func aChainOfThreeAddedAtOnce_linksEachToThePreviousSpan_evenOneThatNeverStarted() {
        // Given a chain first -> middle -> last added at once, first held by the test
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.logger = TracingOperationLogger(tracer: tracer)
        let held = HeldOperations()
        let first = held.make(uniqueName("first"))
        let middle = named(AsyncBlockOperation {}, "middle")
        let last = named(AsyncBlockOperation {}, "last")
        middle.addDependency(first)
        last.addDependency(middle)
        queue.addOperations([first, middle, last], waitUntilFinished: false)
        #expect(waitUntil { held.hasStarted(first.name!) })

        // When the middle link is cancelled while it waits, and the first then finishes
        middle.cancel()
        held.finish(first.name!)
        #expect(waitUntil { last.isFinished })
        #expect(waitUntil { [first, middle, last].allSatisfy { span(tracer, $0.name!) != nil } })

        // Then the middle's span (never started) links to the first's, and the last's links to the middle's
        func links(_ operation: AsyncOperation) -> [String] {
            (span(tracer, operation.name!)?.links ?? []).compactMap { $0.context.inMemorySpanContext?.spanID }
        }
        #expect(span(tracer, middle.name!)?.attributes["operation.started"]?.toSpanAttribute() == .bool(false))
        #expect(links(middle) == [span(tracer, first.name!)?.spanID ?? "first"], "\(links(middle))")
        #expect(links(last) == [span(tracer, middle.name!)?.spanID ?? "middle"], "\(links(last))")
        #expect(tracer.activeSpans.isEmpty || tracer.activeSpans.allSatisfy { ![first.name, middle.name, last.name].contains($0.operationName) })
    }
}

