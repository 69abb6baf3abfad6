import Foundation
import Operations

/// An error tests hand to operations and conditions, and compare afterwards.
public struct StubError: Error, Equatable, Sendable, CustomStringConvertible {
    public let label: String

    public init(_ label: String = uniqueName("error")) {
        self.label = label
    }

    public var description: String { "StubError(\(label))" }
}

extension Array where Element == any Error {
    /// Each error as a `StubError`, `nil` for any other kind: compare with `==`.
    public var asStubErrors: [StubError?] { map { $0 as? StubError } }

    /// Each error as an `AsyncOperationError`, `nil` for any other kind: compare with `==`.
    public var asOperationErrors: [AsyncOperationError?] { map { $0 as? AsyncOperationError } }
}

/// Holds a callback (a continuation, a condition's completion) until the test calls it.
///
/// ```swift
/// let gate = HeldCallback<(any Error)?>()
/// let operation = AsyncBlockOperation { finish in gate.hold(finish) }
/// queue.addOperation(operation)
/// #expect(gate.waitUntilHeld())
/// gate.call(nil) // the operation finishes now
/// ```
public final class HeldCallback<Argument>: @unchecked Sendable {
    // @unchecked Sendable: `callback` and `holdCount` are only touched while holding `lock`.
    private let lock = NSLock()
    private var callback: (@Sendable (Argument) -> Void)?
    private var holdCount = 0

    public init() {}

    /// Keeps `callback` until `call(_:)` or `drop()`.
    public func hold(_ callback: @escaping @Sendable (Argument) -> Void) {
        lock.lock()
        defer { lock.unlock() }
        self.callback = callback
        holdCount += 1
    }

    /// How many times a callback was handed to `hold(_:)`.
    public var timesHeld: Int {
        lock.lock()
        defer { lock.unlock() }
        return holdCount
    }

    /// Waits until a callback is held; `false` if `timeout` passed first.
    public func waitUntilHeld(timeout: TimeInterval = generousTimeout) -> Bool {
        waitUntil(timeout: timeout) { timesHeld > 0 }
    }

    /// Calls the held callback (it stays held, so it can be called again). `false` if none is held.
    @discardableResult
    public func call(_ argument: Argument) -> Bool {
        lock.lock()
        let callback = self.callback
        lock.unlock()
        guard let callback else { return false }
        callback(argument)
        return true
    }

    /// Lets go of the held callback without calling it.
    public func drop() {
        lock.lock()
        defer { lock.unlock() }
        callback = nil
    }
}

/// An observer that writes what it hears into a log shared with the test, so that the order of
/// observer calls and of the test's own events (such as "execute") can be checked together.
public final class EventLogObserver: OperationObserver {
    /// "didStart", "didCancel", "didProduce" and "didFinish", in the order they came.
    public let log: Recorder<String>
    /// The `errors` each `operationDidFinish` call carried.
    public let finishedErrors = Recorder<[any Error]>()
    /// The operations each `operation(_:didProduce:)` call carried.
    public let produced = Recorder<Operation>()

    public init(log: Recorder<String> = Recorder()) {
        self.log = log
    }

    public func operationDidStart(_ operation: AsyncOperation) {
        log.append("didStart")
    }

    public func operationDidCancel(_ operation: AsyncOperation) {
        log.append("didCancel")
    }

    public func operation(_ operation: AsyncOperation, didProduce newOperation: Operation) {
        produced.append(newOperation)
        log.append("didProduce")
    }

    public func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        finishedErrors.append(errors)
        log.append("didFinish")
    }
}

/// A condition whose answer, dependency and categories a test chooses.
///
/// ```swift
/// operation.addCondition(StubCondition.failing(StubError("no")))
/// operation.addCondition(StubCondition(name: "later") { _, completion in
///     DispatchQueue.global().async { completion(.satisfied) }
/// })
/// ```
public struct StubCondition: OperationCondition {
    public let name: String
    public let mutuallyExclusiveCategories: Set<String>
    private let makeDependency: @Sendable (AsyncOperation) -> Operation?
    private let answer: @Sendable (AsyncOperation, @escaping @Sendable (ConditionResult) -> Void) -> Void

    public init(
        name: String = "StubCondition",
        categories: Set<String> = [],
        dependency: @escaping @Sendable (AsyncOperation) -> Operation? = { _ in nil },
        evaluate: @escaping @Sendable (AsyncOperation, @escaping @Sendable (ConditionResult) -> Void) -> Void
    ) {
        self.name = name
        self.mutuallyExclusiveCategories = categories
        self.makeDependency = dependency
        self.answer = evaluate
    }

    /// Answers `.satisfied` at once.
    public static func satisfied(name: String = "Satisfied") -> StubCondition {
        StubCondition(name: name) { _, completion in completion(.satisfied) }
    }

    /// Brings `dependency` (the same operation each time it is asked), and answers `.satisfied`
    /// at once.
    public static func satisfied(bringing dependency: Operation, name: String = "BringsADependency") -> StubCondition {
        StubCondition(name: name, dependency: { _ in dependency }) { _, completion in completion(.satisfied) }
    }

    /// Answers `.failed(error)` at once.
    public static func failing(_ error: any Error, name: String = "Failing") -> StubCondition {
        StubCondition(name: name) { _, completion in completion(.failed(error)) }
    }

    public func dependency(for operation: AsyncOperation) -> Operation? {
        makeDependency(operation)
    }

    public func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        answer(operation, completion)
    }
}

/// An `AsyncOperation` subclass whose `execute()` runs a closure; the closure must call
/// `finish(with:)` on the operation it is given, now or later.
public final class ClosureOperation: AsyncOperation, @unchecked Sendable {
    // @unchecked Sendable: `body` is immutable; the rest is `AsyncOperation`'s.
    private let body: @Sendable (ClosureOperation) -> Void

    public init(name: String? = nil, _ body: @escaping @Sendable (ClosureOperation) -> Void) {
        self.body = body
        super.init()
        self.name = name
    }

    public override func execute() {
        body(self)
    }
}

/// A `ResultOperation` whose `execute()` runs a closure; the closure must finish the operation it
/// is given (`finish(producing:)`, `finish(with:)`), now or later.
///
/// ```swift
/// let operation = ClosureResultOperation<Int> { operation in
///     operation.cancel()
///     operation.finish(producing: 7)   // cancelled, and produced its output anyway
/// }
/// ```
public final class ClosureResultOperation<Output: Sendable>: ResultOperation<Output>, @unchecked Sendable {
    // @unchecked Sendable: `body` is immutable; the rest is `ResultOperation`'s.
    private let body: @Sendable (ClosureResultOperation<Output>) -> Void

    public init(name: String? = nil, _ body: @escaping @Sendable (ClosureResultOperation<Output>) -> Void) {
        self.body = body
        super.init()
        self.name = name
    }

    public override func execute() {
        body(self)
    }
}

/// A queue delegate that writes what it hears into a log: "willAdd <name>", "didStart <name>"
/// and "didFinish <name>", where `<name>` is the operation's `name` (or "?").
public final class QueueEventLog: AsyncOperationQueueDelegate {
    public let events = Recorder<String>()
    /// The `errors` each `didFinish` call carried, with the operation's name.
    public let finishedErrors = Recorder<(name: String, errors: [any Error])>()

    public init() {}

    public func operationQueue(_ queue: AsyncOperationQueue, willAdd operation: Operation) {
        events.append("willAdd \(operation.name ?? "?")")
    }

    public func operationQueue(_ queue: AsyncOperationQueue, didStart operation: AsyncOperation) {
        events.append("didStart \(operation.name ?? "?")")
    }

    public func operationQueue(_ queue: AsyncOperationQueue, didFinish operation: AsyncOperation, errors: [any Error]) {
        finishedErrors.append((operation.name ?? "?", errors))
        events.append("didFinish \(operation.name ?? "?")")
    }

    /// The events about the operation named `name`, without the name.
    public func events(about name: String) -> [String] {
        events.all.compactMap { event in
            event.hasSuffix(" \(name)") ? String(event.dropLast(name.count + 1)) : nil
        }
    }
}

/// A queue delegate that runs `willAdd` for each operation being added, on the adding thread,
/// in the middle of the add: to make something happen while an add is under way.
public final class WillAddHook: AsyncOperationQueueDelegate {
    private let willAdd: @Sendable (Operation) -> Void

    public init(_ willAdd: @escaping @Sendable (Operation) -> Void) {
        self.willAdd = willAdd
    }

    public func operationQueue(_ queue: AsyncOperationQueue, willAdd operation: Operation) {
        willAdd(operation)
    }
}

/// A condition that only claims mutually exclusive categories and is satisfied at once (the
/// Conditions module's `ExclusiveCategory`, for test targets that do not import it).
///
/// ```swift
/// operation.addCondition(ExclusiveStub("Database"))
/// ```
public struct ExclusiveStub: OperationCondition {
    public let mutuallyExclusiveCategories: Set<String>

    public init(_ categories: String...) {
        mutuallyExclusiveCategories = Set(categories)
    }

    public init(_ categories: [String]) {
        mutuallyExclusiveCategories = Set(categories)
    }

    public func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(.satisfied)
    }
}
