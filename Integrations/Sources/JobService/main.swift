import Foundation
import Hummingbird
import Logging
import Operations
import OperationsLogging
import OperationsMetrics
import OperationsServiceLifecycle
import OperationsTracing
import Prometheus
import ServiceLifecycle
import Tracing

// job-service: a small HTTP job service on one AsyncOperationQueue, with swift-log logs,
// Prometheus metrics, traces (when a tracer is bootstrapped) and a graceful drain on SIGTERM.
// See Integrations/README.md.

let options: Options
do {
    options = try Options(parsing: Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("job-service: \(error)\n\(Options.usage)\n".utf8))
    exit(64)
}
guard let logLevel = Logger.Level(rawValue: options.logLevel) else {
    FileHandle.standardError.write(Data("job-service: unknown log level '\(options.logLevel)'\n\(Options.usage)\n".utf8))
    exit(64)
}

var logger = Logger(label: "job-service")
logger.logLevel = logLevel

// docs:
let registry = PrometheusCollectorRegistry()
let queue = AsyncOperationQueue()
queue.name = "jobs"
var loggers: [any OperationLogger] = [
    SwiftLogOperationLogger(logger: logger),                                   // logs
    MetricsOperationLogger(factory: PrometheusMetricsFactory(registry: registry)), // metrics, served at /metrics
]
if !(InstrumentationSystem.tracer is NoOpTracer) {
    loggers.append(TracingOperationLogger(tracer: InstrumentationSystem.tracer)) // traces, when a tracer is bootstrapped
}
queue.logger = MultiplexOperationLogger(loggers)
// :docs

// POST answers 503 from the moment a SIGTERM arrives, before the service group has relayed it
// to the queue's service (which then shuts the queue down).
let terminating = SignalFlag()
let service = JobService(queue: queue, store: JobStore(), registry: registry, jobTimeout: options.jobTimeoutSeconds, terminating: terminating.isRaised)
let app = Application(
    router: service.router(),
    configuration: .init(address: .hostname(options.host, port: options.port), serverName: "job-service"),
    onServerRunning: { channel in
        SignalFlag.hearSignalsImmediately() // the service group's own signal handling is set up by now
        let port = channel.localAddress?.port ?? options.port
        FileHandle.standardOutput.write(Data("job-service listening on \(options.host):\(port)\n".utf8))
    },
    logger: logger
)

// On SIGTERM the group shuts its services down in reverse order: first the queue (new jobs are
// refused with 503 from that moment; running jobs may finish; waiting ones are cancelled), while
// the server still answers GET; then, after a short linger so that clients can read the final
// states, the server. Everything fits in the grace period.
let grace = options.graceSeconds
let linger = min(options.lingerSeconds ?? min(1.0, grace * 0.1), grace * 0.5)
let queueGrace = max(0, grace - linger - min(1.0, grace * 0.1))
var configuration = ServiceGroupConfiguration(
    services: [
        .init(service: app),
        .init(service: DrainThenLinger(drain: OperationQueueService(queue, gracePeriod: .seconds(queueGrace)), linger: .seconds(linger))),
    ],
    gracefulShutdownSignals: [.sigterm, .sigint],
    logger: logger
)
configuration.maximumGracefulShutdownDuration = .seconds(grace)
do {
    try await ServiceGroup(configuration: configuration).run()
    logger.info("job-service stopped")
} catch {
    logger.error("job-service stopped: \(error)")
    exit(1)
}
