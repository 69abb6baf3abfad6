import Foundation
import InMemoryTracing
import IntegrationsTestSupport

/// Finding finished spans, and naming operations uniquely, for the suites of this target.
protocol SpanReading {}

extension SpanReading {
    /// The finished span named `name`, if there is one.
    func span(_ tracer: InMemoryTracer, _ name: String) -> FinishedInMemorySpan? {
        tracer.finishedSpans.first { $0.operationName == name }
    }

    /// `operation`, named uniquely after `prefix`.
    func named<Operation: Foundation.Operation>(_ operation: Operation, _ prefix: String) -> Operation {
        operation.name = uniqueName(prefix)
        return operation
    }
}
