import Operations

/// An `OperationLogger` that keeps every event it hears, to be read by operation name.
public struct RecordingLogger: OperationLogger {
    /// Every event heard, in the order heard.
    public let events = Recorder<OperationLogEvent>()
    /// Events below this level are not made (`.trace`, everything, unless a test sets it).
    public var minimumLevel: OperationLogLevel = .trace

    public init() {}

    public func log(_ event: OperationLogEvent) {
        events.append(event)
    }

    /// The events about the operation named `name`, in order.
    public func events(of name: String) -> [OperationLogEvent] {
        events.all.filter { $0.operationName == name }
    }

    /// The kinds of the events about the operation named `name`, in order.
    public func kinds(of name: String) -> [OperationLogEvent.Kind] {
        events(of: name).map(\.kind)
    }

    /// The identity the events about the operation named `name` carry.
    public func id(of name: String) -> OperationID? {
        events(of: name).first?.operationID
    }
}
