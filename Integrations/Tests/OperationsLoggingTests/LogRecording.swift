import InMemoryLogging
import Logging

/// A logger whose records stay in memory, and the records of one operation, for the suites of
/// this target.
protocol LogRecording {}

extension LogRecording {
    /// A logger labelled "jobs" at `level`, and the handler that keeps its records.
    func logger(level: Logger.Level) -> (Logger, InMemoryLogHandler) {
        var handler = InMemoryLogHandler()
        handler.logLevel = level
        let logger = Logger(label: "jobs", factory: { _ in handler })
        return (logger, handler)
    }

    /// The records of the operation named `name`.
    func entries(_ handler: InMemoryLogHandler, of name: String) -> [InMemoryLogHandler.Entry] {
        handler.entries.filter { $0.metadata["operation.name"] == .string(name) }
    }
}
