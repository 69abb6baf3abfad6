import Foundation

/// A ready-made `OperationLogger`: one line per event, on standard error, for events at or above
/// a minimum level.
///
/// ```swift
/// queue.logger = PrintLogger()                          // everything from .debug up
/// queue.logger = PrintLogger(minimumLevel: .warning)    // only operations that failed
/// // [info] ledger: migrate: started
/// // [warning] ledger: sync: finished with errors: the operation did not finish within 30 s of starting
/// ```
///
/// Each line is the event's level in brackets, its queue's name (when the queue was given one)
/// and the event's `description`. Lines are written whole, from whatever thread the event
/// happened on.
/// To send them somewhere else (a file, a test's buffer), pass `write`; to adapt your logging
/// library, write your own `OperationLogger` in a few lines instead.
public struct PrintLogger: OperationLogger {
    /// Events below this level are not even made.
    public let minimumLevel: OperationLogLevel
    private let write: @Sendable (String) -> Void

    /// Creates a logger that writes each event at or above `minimumLevel` (by default `.debug`:
    /// everything but `.trace`) as one line to standard error.
    public init(minimumLevel: OperationLogLevel = .debug) {
        self.init(minimumLevel: minimumLevel, write: Self.writeToStandardError)
    }

    /// Creates a logger that hands each line (without its line break) to `write`, on the thread
    /// where the event happened.
    public init(minimumLevel: OperationLogLevel = .debug, write: @escaping @Sendable (String) -> Void) {
        self.minimumLevel = minimumLevel
        self.write = write
    }

    /// Writes the event's line.
    public func log(_ event: OperationLogEvent) {
        write(Self.line(for: event))
    }

    /// The line for `event`: `[info] ledger: migrate: started`.
    public static func line(for event: OperationLogEvent) -> String {
        let queue = event.queueName.map { "\($0): " } ?? ""
        return "[\(event.level)] \(queue)\(event.description)"
    }

    private static let writeToStandardError: @Sendable (String) -> Void = { line in
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}
