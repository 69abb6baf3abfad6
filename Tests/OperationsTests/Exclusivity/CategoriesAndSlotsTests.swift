import Conditions
import Foundation
import Operations
import Testing
import TestSupport

// A category and a queue's slots (contract, "Semantics clients rely on" 2): an operation is never
// granted a category while it cannot take a slot on its queue, so categories needed by children of
// groups that hold a queue's slots never deadlock.

@Suite("Categories and slots")
struct CategoriesAndSlotsTests {
    @Test(arguments: [1, 2])
    func groupChildNeedingACategory_isNotShutOutByALaterOperationWaitingForTheGroupsSlot(width: Int) {
        // Given groups filling every slot of a queue, each with a child that needs category X once
        // a slow sibling has finished
        let x = uniqueName("X")
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = width
        let siblingsStarted = Counter()
        let release = Signal()
        let groups = (0..<width).map { _ in
            let slowSibling = AsyncBlockOperation {
                siblingsStarted.increment()
                _ = release.wait()
            }
            let child = AsyncBlockOperation {}
            child.addCondition(ExclusiveCategory(x))
            child.addDependency(slowSibling)
            return GroupOperation(operations: [slowSibling, child])
        }
        queue.addOperations(groups, waitUntilFinished: false)
        #expect(waitUntil { siblingsStarted.current == width })

        // When a later operation of the same queue needs X while the groups hold every slot
        let later = AsyncBlockOperation {}
        later.addCondition(ExclusiveCategory(x))
        queue.addOperation(later)
        usleep(20_000) // a chance to take X before the children ask for it
        for _ in 0..<width { release.signal() }

        // Then every child gets X and every group finishes, then the later operation runs
        #expect(waitUntilFinished(groups + [later]))
    }

    @Test func operationWaitingForASlot_holdsNoCategory() {
        // Given a serial queue busy with an operation
        let x = uniqueName("X")
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let held = HeldOperations()
        let busy = held.make("busy")
        queue.addOperation(busy)
        #expect(held.waitUntilStarted("busy"))

        // When an operation needing X is added to it, and another one needing X to another queue
        let waiting = AsyncBlockOperation {}
        waiting.addCondition(ExclusiveCategory(x))
        queue.addOperation(waiting)
        let elsewhere = AsyncBlockOperation {}
        elsewhere.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(elsewhere)

        // Then the one on the free queue runs while the first still waits for its slot
        #expect(waitUntilFinished([elsewhere]))
        #expect(!waiting.isFinished)
        held.finish("busy")
        #expect(waitUntilFinished([busy, waiting]))
    }
}
