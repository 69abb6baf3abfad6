import Foundation
import Operations

/// Whether an operation carrying `second` starts while one carrying `first` executes: the way
/// to check that two conditions exclude each other (`false`) or do not (`true`).
///
/// The first operation is added first and waits, while it executes, up to `patience` seconds for
/// the second to start. Give a generous `patience` when you expect an overlap (it ends as soon
/// as the second starts) and a short one when you expect none (the first then finishes when it
/// runs out, and the second starts after it). `nil` if the operations did not both finish.
///
/// ```swift
/// #expect(startsWhileAnotherExecutes(first: [ExclusiveCategory("a")],
///                                     second: [ExclusiveCategory("a")], patience: 0.3) == false)
/// ```
public func startsWhileAnotherExecutes(
    first: [any OperationCondition],
    second: [any OperationCondition],
    patience: TimeInterval
) -> Bool? {
    let queue = AsyncOperationQueue()
    queue.maxConcurrentOperationCount = 2
    let secondStarted = Signal()
    let overlapped = Recorder<Bool>()
    let firstOperation = AsyncBlockOperation { overlapped.append(secondStarted.wait(timeout: patience)) }
    let secondOperation = AsyncBlockOperation { secondStarted.signal() }
    first.forEach(firstOperation.addCondition)
    second.forEach(secondOperation.addCondition)
    queue.addOperations([firstOperation, secondOperation], waitUntilFinished: false)
    guard waitUntilFinished([firstOperation, secondOperation]) else { return nil }
    return overlapped.all.first
}
