import Foundation
import InMemoryTracing
import IntegrationsTestSupport
import Operations
import OperationsTracing
import Testing
import Tracing

/// Probes of documented behaviour of `TracingOperationLogger` that `TracingOperationLoggerTests`
/// does not check yet. Each probe cites the sentence it checks.
@Suite struct TracingOperationLoggerProbeTests: SpanReading {
    // TracingOperationLogger: "The span current where the operation was added (`ServiceContext.current`, read on the adding thread, in `async` and synchronous code alike) is its parent"
    @Test func anOperationAddedInAsyncCode_isAChildOfTheTasksSpan() async {
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.logger = TracingOperationLogger(tracer: tracer)
        let job = named(AsyncBlockOperation { usleep(1_000) }, "job")
        await tracer.withSpan("POST /jobs") { _ in
            try? await Task.sleep(nanoseconds: 1_000_000) // resumed wherever the pool likes
            queue.addOperation(job)
        }
        #expect(await eventually { span(tracer, job.name!) != nil })
        let request = span(tracer, "POST /jobs")
        let jobSpan = span(tracer, job.name!)
        #expect(request != nil)
        #expect(jobSpan?.parentSpanID == request?.spanID)
        #expect(jobSpan?.traceID == request?.traceID)
    }

    // TracingOperationLogger: "A group's children are children of the group's span (a retry's attempts, a cascade's steps)." / "Groups nest."
    @Test func aRetrysAttempts_areChildrenOfItsSpan_andANestedGroupsChildrenOfTheInnerGroup() {
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.logger = TracingOperationLogger(tracer: tracer)
        let attemptPrefix = uniqueName("attempt")
        let retry = named(RetryOperation(maxAttempts: 3) { attempt in
            let operation = AsyncBlockOperation { if attempt < 3 { throw TestFailure("try again") } }
            operation.name = "\(attemptPrefix)-\(attempt)"
            return operation
        }, "retry")
        let leaf = named(AsyncBlockOperation {}, "leaf")
        let inner = named(GroupOperation(operations: [leaf]), "inner")
        let outer = named(GroupOperation(operations: [inner]), "outer")
        queue.addOperations([retry, outer], waitUntilFinished: true)
        #expect(waitUntil { span(tracer, retry.name!) != nil && span(tracer, outer.name!) != nil })

        let retrySpan = span(tracer, retry.name!)
        let attempts = (1...3).map { span(tracer, "\(attemptPrefix)-\($0)") }
        #expect(attempts.allSatisfy { $0 != nil })
        #expect(attempts.allSatisfy { $0?.parentSpanID == retrySpan?.spanID }, "parents: \(attempts.map { $0?.parentSpanID ?? "none" }), retry: \(retrySpan?.spanID ?? "none")")
        #expect(attempts.prefix(2).allSatisfy { $0?.status?.code == .error })
        #expect(span(tracer, inner.name!)?.parentSpanID == span(tracer, outer.name!)?.spanID)
        #expect(span(tracer, leaf.name!)?.parentSpanID == span(tracer, inner.name!)?.spanID)
    }

    // TracingOperationLogger: "What it waited for before it started is recorded as span events with the time they happened: `waiting` (attribute `operation.waits_for`), `conditions_answered`, `categories_granted` (`operation.categories`)."; "Spans are named after the operation and carry `operation.id` and `queue.name`."
    @Test func conditionsAndCategories_areSpanEvents_andEverySpanCarriesItsOwnOperationID() {
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.name = "jobs"
        queue.logger = TracingOperationLogger(tracer: tracer)
        let category = uniqueName("account")
        let first = named(AsyncBlockOperation {}, "first")
        first.addCondition(CategoryCondition(category: category))
        let second = named(AsyncBlockOperation {}, "second")
        second.addCondition(CategoryCondition(category: category))
        queue.addOperations([first, second], waitUntilFinished: true)
        #expect(waitUntil { span(tracer, first.name!) != nil && span(tracer, second.name!) != nil })

        for operation in [first, second] {
            let events = span(tracer, operation.name!)?.events ?? []
            let granted = events.first { $0.name == "categories_granted" }
            #expect(granted?.attributes["operation.categories"]?.toSpanAttribute() == .stringArray([category]), "events: \(events.map(\.name))")
            let answered = events.first { $0.name == "conditions_answered" }
            #expect(answered?.attributes["operation.condition_failures"]?.toSpanAttribute() == .int64(0), "events: \(events.map(\.name))")
            #expect(span(tracer, operation.name!)?.attributes["queue.name"]?.toSpanAttribute() == .string("jobs"))
            #expect(span(tracer, operation.name!)?.parentSpanID == nil)
        }
        let ids = [first, second].compactMap { span(tracer, $0.name!)?.attributes["operation.id"]?.toSpanAttribute() }
        #expect(ids.count == 2 && ids[0] != ids[1])
    }

    // TracingOperationLogger: "A failed operation records each of its errors and sets the span's status to error"; "An operation that never started ... still gets a span, from its add to its finish, with `operation.started` false."
    @Test func anOperationWhoseConditionsFail_getsASpan_fromAddToFinish_withEachErrorAndAnErrorStatus() {
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.logger = TracingOperationLogger(tracer: tracer)
        let guarded = named(AsyncBlockOperation {}, "guarded")
        guarded.addCondition(FailingCondition(reason: "no account"))
        guarded.addCondition(FailingCondition(reason: "no card"))
        queue.addOperations([guarded], waitUntilFinished: true)
        #expect(waitUntil { span(tracer, guarded.name!) != nil })

        let guardedSpan = span(tracer, guarded.name!)
        #expect(guarded.errors.count == 2)
        #expect(guardedSpan?.errors.count == 2, "recorded: \(guardedSpan?.errors.map { "\($0.error)" } ?? [])")
        #expect(guardedSpan?.status?.code == .error)
        #expect(guardedSpan?.attributes["operation.started"]?.toSpanAttribute() == .bool(false))
        if let guardedSpan {
            #expect(guardedSpan.startInstant.nanosecondsSinceEpoch <= guardedSpan.endInstant.nanosecondsSinceEpoch)
        }
    }

    // TracingOperationLogger: "An operation added with dependencies (a chain's links, say) links to their spans, so a trace shows that its work follows theirs." (a dependency running at the add)
    @Test func anOperationAddedWithARunningDependency_linksToItsSpan() {
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.logger = TracingOperationLogger(tracer: tracer)
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        queue.addOperation(running)
        #expect(waitUntil { held.hasStarted(running.name!) })
        let follower = named(AsyncBlockOperation {}, "follower")
        follower.addDependency(running)
        queue.addOperation(follower)
        held.finish(running.name!)
        #expect(waitUntil { span(tracer, follower.name!) != nil && span(tracer, running.name!) != nil })

        let linked = (span(tracer, follower.name!)?.links ?? []).compactMap { $0.context.inMemorySpanContext?.spanID }
        #expect(linked == [span(tracer, running.name!)?.spanID ?? "running"], "links: \(linked)")
    }

    // TracingOperationLogger: "A dependency that had finished before the add is not linked: its span has ended, and the logger keeps no ended spans"
    @Test func anOperationAddedWithAFinishedDependency_isNotLinked_andStillGetsItsSpan() {
        let tracer = InMemoryTracer()
        let queue = AsyncOperationQueue()
        queue.logger = TracingOperationLogger(tracer: tracer)
        let done = named(AsyncBlockOperation {}, "done")
        queue.addOperations([done], waitUntilFinished: true)
        #expect(waitUntil { span(tracer, done.name!) != nil })
        let follower = named(AsyncBlockOperation {}, "follower")
        follower.addDependency(done)
        queue.addOperations([follower], waitUntilFinished: true)
        #expect(waitUntil { span(tracer, follower.name!) != nil })

        let linked = (span(tracer, follower.name!)?.links ?? []).compactMap { $0.context.inMemorySpanContext?.spanID }
        #expect(linked.isEmpty, "links: \(linked)")
    }
}

/// A condition that is always satisfied and makes its operation mutually exclusive in `category`.
private struct CategoryCondition: OperationCondition {
    let category: String
    var mutuallyExclusiveCategories: Set<String> { [category] }
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(.satisfied)
    }
}

/// A condition that always fails with `TestFailure(reason)`.
private struct FailingCondition: OperationCondition {
    let reason: String
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(.failed(TestFailure(reason)))
    }
}
