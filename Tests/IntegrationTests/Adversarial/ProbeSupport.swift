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
