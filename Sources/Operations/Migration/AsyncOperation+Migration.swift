import Foundation

// The spellings of Advanced NSOperations (PSOperations) and ProcedureKit, kept as deprecated
// forwards so that code being moved over compiles first and is renamed with the fix-its after.
// See the "Migrating from PSOperations or ProcedureKit" article.

extension AsyncOperation {
    /// PSOperations' `finishWithError(_:)`.
    @available(*, deprecated, renamed: "finish(with:)")
    public final func finishWithError(_ error: (any Error)?) {
        finish(with: error)
    }

    /// PSOperations' `cancelWithError(_:)`.
    @available(*, deprecated, renamed: "cancel(with:)")
    public final func cancelWithError(_ error: any Error) {
        cancel(with: error)
    }

    /// PSOperations' `produceOperation(_:)`.
    @available(*, deprecated, renamed: "produce(_:)")
    public final func produceOperation(_ operation: Operation) {
        produce(operation)
    }

    /// ProcedureKit's `add(condition:)`.
    @available(*, deprecated, renamed: "addCondition(_:)")
    public final func add(condition: any OperationCondition) {
        addCondition(condition)
    }

    /// ProcedureKit's `add(observer:)`.
    @available(*, deprecated, renamed: "addObserver(_:)")
    public final func add(observer: any OperationObserver) {
        addObserver(observer)
    }

    /// ProcedureKit's `add(dependency:)`.
    @available(*, deprecated, renamed: "addDependency(_:)")
    public final func add(dependency: Operation) {
        addDependency(dependency)
    }
}

extension AsyncBlockOperation {
    /// PSOperations' `BlockOperation { continuation in ... }`, whose continuation took no
    /// argument. Ours takes the error the work failed with, or `nil`: write `finish(nil)`.
    @available(*, deprecated, message: "the continuation now takes the error the work failed with, or nil: call finish(nil) on success and finish(error) on failure")
    @_disfavoredOverload
    public convenience init(_ block: @escaping @Sendable (_ finish: @escaping @Sendable () -> Void) -> Void, file: StaticString = #fileID, line: UInt = #line) {
        self.init({ (finish: @escaping Continuation) in block { finish(nil) } }, file: file, line: line)
    }
}

extension GroupOperation {
    /// PSOperations' `GroupOperation(operations: a, b, c)`.
    @available(*, deprecated, message: "pass an array: GroupOperation(operations: [a, b, c])")
    @_disfavoredOverload
    public convenience init(operations: Operation...) {
        self.init(operations: operations)
    }

    /// PSOperations' `addOperation(_:)` on a group.
    @available(*, deprecated, renamed: "addChild(_:)")
    public final func addOperation(_ operation: Operation) {
        addChild(operation)
    }

    /// ProcedureKit's `add(child:)`.
    @available(*, deprecated, renamed: "addChild(_:)")
    public final func add(child: Operation) {
        addChild(child)
    }

    /// ProcedureKit's `add(children:)`.
    @available(*, deprecated, renamed: "addChildren(_:)")
    public final func add(children: [Operation]) {
        addChildren(children)
    }
}

extension AsyncOperationQueue {
    /// ProcedureKit's `add(operation:)`.
    @available(*, deprecated, renamed: "addOperation(_:)")
    public final func add(operation: Operation) {
        addOperation(operation)
    }

    /// ProcedureKit's `add(operations:)`.
    @available(*, deprecated, message: "use addOperations(_:waitUntilFinished: false)")
    public final func add(operations: [Operation]) {
        addOperations(operations, waitUntilFinished: false)
    }
}

/// PSOperations' name for `ConditionResult`.
@available(*, deprecated, renamed: "ConditionResult")
public typealias OperationConditionResult = ConditionResult

/// PSOperations' name for `AsyncOperationQueueDelegate` (whose methods are named differently:
/// see the migration article).
@available(*, deprecated, renamed: "AsyncOperationQueueDelegate")
public typealias OperationQueueDelegate = AsyncOperationQueueDelegate
