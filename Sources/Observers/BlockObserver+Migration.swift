import Foundation
import Operations

// PSOperations' spellings of `BlockObserver`, kept as deprecated forwards with fix-its. See the
// "Migrating from PSOperations or ProcedureKit" article of the Operations module.

extension BlockObserver {
    /// PSOperations' `BlockObserver(startHandler:cancelHandler:produceHandler:finishHandler:)`:
    /// the same closures under the labels `didStart:`, `didCancel:`, `didProduce:` and
    /// `didFinish:`.
    @available(*, deprecated, renamed: "init(didStart:didCancel:didProduce:didFinish:)")
    @_disfavoredOverload
    public init(
        startHandler: (@Sendable (AsyncOperation) -> Void)? = nil,
        cancelHandler: (@Sendable (AsyncOperation) -> Void)? = nil,
        produceHandler: (@Sendable (AsyncOperation, Foundation.Operation) -> Void)? = nil,
        finishHandler: (@Sendable (AsyncOperation, [any Error]) -> Void)? = nil
    ) {
        self.init(didStart: startHandler, didCancel: cancelHandler, didProduce: produceHandler, didFinish: finishHandler)
    }

    /// PSOperations' `BlockObserver { operation, errors in ... }`, whose trailing closure was the
    /// finish handler. Here a trailing closure would be `didStart:`; say `didFinish:`.
    @available(*, deprecated, message: "a trailing closure is no longer the finish handler: write BlockObserver(didFinish: { operation, errors in ... }) or FinishedObserver { operation, errors in ... }")
    @_disfavoredOverload
    public init(_ finishHandler: @escaping @Sendable (AsyncOperation, [any Error]) -> Void) {
        self.init(didFinish: finishHandler)
    }
}
