import Foundation
import IntegrationsTestSupport
import Logging
import Operations
import OperationsLogging
import OperationsMetrics
import OperationsServiceLifecycle
import OperationsTracing
import Prometheus
import ServiceLifecycle
import Testing
import Tracing

// The examples of the article "Running operations in a service", of Integrations/README.md and of
// the adapters' `///` comments, verbatim between the `// docs:` markers (the core package's
// ReadmeSnippetsTests checks that they are), so that they keep compiling; each runs where that is
// quick. The values below stand for the reader's own.

private let logger = Logger(label: "docs", factory: { _ in SwiftLogNoOpLogHandler() })

/// Stands for the reader's HTTP server.
private struct Server: Service {
    func run() async throws {
        try? await gracefulShutdown()
    }
}

private let server = Server()

@Suite struct DocumentationSnippetsTests {
    @Test func shuttingDown() async {
        let queue = AsyncOperationQueue()
        queue.addOperation(AsyncBlockOperation {})
        // docs:
        await queue.shutDown(gracePeriod: 10)
        // :docs
        #expect(queue.isShutDown)
    }

    @Test func aServiceGroup() async throws {
        // docs:
        let queue = AsyncOperationQueue()
        let group = ServiceGroup(
            services: [server, OperationQueueService(queue)],   // the server stops after the queue has drained
            gracefulShutdownSignals: [.sigterm],
            logger: logger
        )
        // :docs
        let run = Task {
            // docs:
            try await group.run()
            // :docs
        }
        try await Task.sleep(nanoseconds: 10_000_000)
        await group.triggerGracefulShutdown()
        try await run.value
        #expect(queue.isShutDown)
    }

    @Test func logs() {
        let queue = AsyncOperationQueue()
        // docs:
        var logger = Logger(label: "jobs")
        logger.logLevel = .info
        queue.logger = SwiftLogOperationLogger(logger: logger)
        // :docs
        #expect(queue.logger?.minimumLevel == .info)
    }

    @Test func metrics() {
        let queue = AsyncOperationQueue()
        // docs:
        let registry = PrometheusCollectorRegistry()
        queue.logger = MetricsOperationLogger(factory: PrometheusMetricsFactory(registry: registry))
        // :docs
        queue.addOperations([AsyncBlockOperation {}], waitUntilFinished: true)
        var text: [UInt8] = []
        registry.emit(into: &text)
        #expect(String(decoding: text, as: UTF8.self).contains("operations_added_total"))
    }

    @Test func traces() {
        let queue = AsyncOperationQueue()
        let job = AsyncBlockOperation {}
        // docs:
        queue.logger = TracingOperationLogger(tracer: InstrumentationSystem.tracer)

        withSpan("POST /jobs") { _ in
            queue.addOperation(job)      // job's span is a child of "POST /jobs"
        }
        // :docs
        #expect(waitUntil { job.isFinished })
    }
}
