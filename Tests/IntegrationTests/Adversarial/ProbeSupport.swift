import Foundation
import Conditions
import Operations
import Testing
import TestSupport

/// A new category X, held by `holder` (`held`'s operation named `holderName`), which has started
/// on `queue` and runs until `held.finish(holderName)`. Shared by the probe suites.
func startHoldingACategory() -> (x: String, held: HeldOperations, holderName: String, holder: AsyncBlockOperation, queue: AsyncOperationQueue) {
    let x = uniqueName("X")
    let held = HeldOperations()
    let holderName = uniqueName("holder")
    let holder = held.make(holderName)
    holder.addCondition(ExclusiveCategory(x))
    let queue = AsyncOperationQueue()
    queue.addOperation(holder)
    #expect(held.waitUntilStarted(holderName))
    return (x, held, holderName, holder, queue)
}

/// A plain operation that records `label` in `started` as it starts, and blocks until `release`
/// fires. Shared by the parity probes.
func gatedOperation(_ label: String, started: Recorder<String>, release: Signal) -> BlockOperation {
    let operation = BlockOperation {
        started.append(label)
        _ = release.wait(timeout: blockingTimeout)
    }
    operation.name = label
    return operation
}

/// Makes `queue` of width 2 and takes both its slots with gated operations recording `labels`:
/// their release signals, once both started.
func takeBothSlots(of queue: OperationQueue, started: Recorder<String>, labels: (String, String) = ("blocker", "blocker")) -> (first: Signal, second: Signal) {
    queue.maxConcurrentOperationCount = 2
    let first = Signal()
    let second = Signal()
    queue.addOperation(gatedOperation(labels.0, started: started, release: first))
    queue.addOperation(gatedOperation(labels.1, started: started, release: second))
    #expect(waitUntil { started.count >= 2 })
    return (first, second)
}

/// Makes `queue` of width 2 and takes both its slots with operations of `held`: their names,
/// once both started.
func takeBothSlots(of queue: AsyncOperationQueue, with held: HeldOperations) -> (first: String, second: String) {
    queue.maxConcurrentOperationCount = 2
    let first = uniqueName("blocker")
    let second = uniqueName("blocker")
    queue.addOperations([held.make(first), held.make(second)], waitUntilFinished: false)
    #expect(held.waitUntilStarted(first) && held.waitUntilStarted(second))
    return (first, second)
}

/// `operation`, with a condition that answers `.satisfied` from another thread. Shared by the
/// parity probes.
func conditioned(_ operation: AsyncOperation) -> AsyncOperation {
    operation.addCondition(StubCondition(name: "AnswersFromAnotherThread") { _, completion in
        DispatchQueue.global().async { completion(.satisfied) }
    })
    return operation
}

/// `operation`, in a mutually exclusive category of its own. Shared by the parity probes.
func exclusive(_ operation: AsyncOperation) -> AsyncOperation {
    operation.addCondition(ExclusiveCategory(uniqueName("own")))
    return operation
}

/// What `task` ended with, or `nil` if it had not ended within `timeout`: a wait that never ends
/// fails the test instead of hanging it.
func boundedOutcome<Success: Sendable>(
    of task: Task<Success, any Error>,
    timeout: TimeInterval = generousTimeout
) async -> Result<Success, any Error>? {
    let ended = Recorder<Result<Success, any Error>>()
    Task { ended.append(await task.result) }
    guard await eventually(timeout: timeout, { ended.count > 0 }) else { return nil }
    return ended.all.first
}

/// Whether an outcome is a `CancellationError`.
func isCancellationError<Success>(_ outcome: Result<Success, any Error>) -> Bool {
    if case let .failure(error) = outcome { return error is CancellationError }
    return false
}
