import Foundation
import Operations
import Testing
import TestSupport

@Suite("Mutual exclusion: where a waiting operation started by hand executes")
struct GrantedByAnotherFinishTests {
    // An operation started by hand that waits for a category is granted it by the holder's
    // finish; it must not execute inside that finish, which would hold the holder's dependents
    // (and anything waiting for them) until it returns.
    @Test func operationStartedByHand_grantedItsCategoryByAHoldersFinish_executesOutsideThatFinish() {
        let x = uniqueName("x")
        let held = HeldOperations()
        let holderName = uniqueName("holder")
        let holder = held.make(holderName)
        holder.addCondition(ExclusiveStub(x))
        let dependent = AsyncBlockOperation {}
        dependent.addDependency(holder)
        let queue = AsyncOperationQueue()
        queue.addOperations([holder, dependent], waitUntilFinished: false)
        #expect(held.waitUntilStarted(holderName))
        let sawTheDependentFinish = Flag()
        let byHand = AsyncBlockOperation {
            if waitUntil(timeout: 3, { dependent.isFinished }) { sawTheDependentFinish.raise() }
        }
        byHand.addCondition(ExclusiveStub(x))
        byHand.start() // waits for x

        held.finish(holderName)

        #expect(waitUntilFinished([byHand, dependent]))
        #expect(sawTheDependentFinish.isRaised)
    }
}
