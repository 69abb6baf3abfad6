/// A picture of one operation at one moment: its state and, while it waits, exactly what for.
///
/// Take one with `AsyncOperation.snapshot()` (or read a queue's with
/// `AsyncOperationQueue.snapshot()`); `AsyncOperation.debugDescription` is its `description`.
/// Each part is read consistently under the lock that guards it, so a snapshot is safe and cheap
/// to take at any time, from a debugger or a timer, while the queue runs at full speed.
///
/// ```swift
/// print(save.snapshot())
/// // save: waiting for categories; waits for category 'Database' (held by 'migrate'; 1st in line)
/// ```
public struct OperationSnapshot: Sendable, Hashable, CustomStringConvertible {
    /// Where an operation is in its life.
    public enum State: String, Sendable, Hashable, CustomStringConvertible {
        /// Not on a queue yet.
        case initialized = "not on a queue"
        /// On a queue, waiting for its dependencies to finish.
        case waitingForDependencies = "waiting for dependencies"
        /// Held in its queue's line: the queue is suspended, or serial and lets an operation added
        /// earlier go first.
        case waitingInLine = "waiting in line"
        /// Its conditions are being evaluated.
        case evaluatingConditions = "evaluating conditions"
        /// Its conditions passed; waiting for its mutually exclusive categories.
        case waitingForCategories = "waiting for categories"
        /// Cleared to run: handed to Foundation's queue, which starts it when it has a slot.
        case ready
        /// Its `execute()` runs (or ran and the operation has not finished yet).
        case executing
        /// Its errors are final; its observers are hearing that it finished.
        case finishing
        /// Finished: nothing more happens to it.
        case finished

        /// A few words, such as `waiting for categories`.
        public var description: String { rawValue }
    }

    /// One thing an operation waits for.
    public enum Reason: Sendable, Hashable, CustomStringConvertible {
        /// A dependency, by name, that has not finished.
        case dependency(String)
        /// A condition, by name, that has not answered.
        case condition(String)
        /// A mutually exclusive category: the operation holding it (`nil` if none does, but
        /// others stand ahead in line), and how many operations stand ahead of this one in the
        /// category's line (`nil` if it has not taken its place yet).
        case category(String, heldBy: String?, waitersAhead: Int?)
        /// A mutually exclusive category that a `CategoryLock` extends beyond this process: the
        /// operation is first in line here, and waits for the lock; `holder` says who holds it
        /// elsewhere, as far as the lock knows ("another process (pid 4242, file lock …)").
        case categoryHeldElsewhere(String, holder: String)
        /// Its queue (by name) is suspended.
        case suspendedQueue(String?)
        /// Its queue (by name) is serial and lets an operation added earlier go first.
        case turnOnSerialQueue(String?)
        /// It needs mutually exclusive categories, and every slot of its queue (by name) is
        /// taken: it asks for them once it could start (it holds none meanwhile).
        case freeSlot(onQueue: String?)
        /// It is a child of a group (by name) that has not started executing.
        case groupToStart(String)

        /// A phrase that completes "waits for", such as `dependency 'fetch'`.
        public var description: String {
            switch self {
            case let .dependency(name):
                return "dependency '\(name)'"
            case let .condition(name):
                return "condition '\(name)'"
            case let .category(name, holder, waitersAhead):
                var details: [String] = []
                if let holder { details.append("held by '\(holder)'") }
                if let waitersAhead { details.append("\(Self.ordinal(waitersAhead + 1)) in line") }
                return "category '\(name)'" + (details.isEmpty ? "" : " (\(details.joined(separator: "; ")))")
            case let .categoryHeldElsewhere(name, holder):
                return "category '\(name)', held by \(holder)"
            case let .suspendedQueue(name):
                return "its queue\(name.map { " '\($0)'" } ?? "") to resume (suspended)"
            case let .turnOnSerialQueue(name):
                return "its turn on serial queue\(name.map { " '\($0)'" } ?? "")"
            case let .freeSlot(name):
                return "a free slot on its queue\(name.map { " '\($0)'" } ?? "") (every slot is taken)"
            case let .groupToStart(name):
                return "its group '\(name)' to start"
            }
        }

        private static func ordinal(_ number: Int) -> String {
            let suffix: String
            switch (number % 10, number % 100) {
            case (1, let hundred) where hundred != 11: suffix = "st"
            case (2, let hundred) where hundred != 12: suffix = "nd"
            case (3, let hundred) where hundred != 13: suffix = "rd"
            default: suffix = "th"
            }
            return "\(number)\(suffix)"
        }
    }

    /// The operation's `name`, or its type's name when it has none.
    public let name: String
    /// Where the operation is in its life.
    public let state: State
    /// Whether it was cancelled.
    public let isCancelled: Bool
    /// What it waits for, empty when it waits for nothing (or has not started waiting).
    public let waitsFor: [Reason]

    /// Creates a snapshot; the framework makes these, tools and tests read them.
    public init(name: String, state: State, isCancelled: Bool, waitsFor: [Reason]) {
        self.name = name
        self.state = state
        self.isCancelled = isCancelled
        self.waitsFor = waitsFor
    }

    /// One line: the name, the state, and what it waits for.
    public var description: String {
        var line = "\(name): \(state)"
        if isCancelled { line += ", cancelled" }
        if !waitsFor.isEmpty {
            line += "; waits for " + waitsFor.map(\.description).joined(separator: ", ")
        }
        return line
    }
}
