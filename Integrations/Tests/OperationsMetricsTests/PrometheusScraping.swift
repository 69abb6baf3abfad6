import Operations
import OperationsMetrics
import Prometheus

/// Queues whose metrics go to a `PrometheusCollectorRegistry`, and reading what it exports, for
/// the suites of this target.
protocol PrometheusScraping {}

extension PrometheusScraping {
    /// The value of the sample named `name` with `labels` in Prometheus' text, if present.
    func sample(_ text: String, _ name: String, _ labels: String) -> Double? {
        let prefix = "\(name){\(labels)} "
        return text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Double($0.dropFirst(prefix.count)) }
    }

    /// Everything `registry` exports, in Prometheus' text format.
    func scrape(_ registry: PrometheusCollectorRegistry) -> String {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    /// A queue named `name` whose `MetricsOperationLogger` reports to `registry`, and its name.
    func meteredQueue(_ name: String, reportingTo registry: PrometheusCollectorRegistry) -> (AsyncOperationQueue, String) {
        let queue = AsyncOperationQueue()
        queue.name = name
        queue.logger = MetricsOperationLogger(factory: PrometheusMetricsFactory(registry: registry))
        return (queue, name)
    }
}
