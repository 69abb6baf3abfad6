/// Who an operation is, in the events a logger hears: a number given to it when it joins a queue
/// that has a logger, unique in the process and never reused.
///
/// Events of one operation carry the same `OperationID`, so a log aggregator can follow one
/// operation's life, and a metrics or tracing adapter can pair its start with its finish. Its
/// group's and its dependencies' events carry theirs, so spans can be parented and linked.
/// Operations on queues without a logger are given none: they cost nothing.
public struct OperationID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The number, counting from 1 in the order operations joined a logging queue.
    public let rawValue: UInt64

    /// Wraps `rawValue`; the framework makes these, loggers and tests read them.
    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    /// Whether `lhs` was given before `rhs`.
    public static func < (lhs: OperationID, rhs: OperationID) -> Bool {
        lhs.rawValue < rhs.rawValue
    }

    /// The number, such as `42`.
    public var description: String { String(rawValue) }

    private static let counter = Locked<UInt64>.make(0)

    /// A new identity.
    static func next() -> OperationID {
        OperationID(rawValue: counter.withLock { value in
            value += 1
            return value
        })
    }
}
