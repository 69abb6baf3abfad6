import Operations

/// An `OperationLogger` that hands every event to a closure, on the thread that makes it.
///
/// ```swift
/// queue.logger = ClosureLogger { event in events.append(event.kind) }
/// ```
public struct ClosureLogger: OperationLogger {
    let body: @Sendable (OperationLogEvent) -> Void

    public init(_ body: @escaping @Sendable (OperationLogEvent) -> Void) {
        self.body = body
    }

    public func log(_ event: OperationLogEvent) {
        body(event)
    }
}
