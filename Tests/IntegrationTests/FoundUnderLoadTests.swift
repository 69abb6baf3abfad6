import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// Contract violations the randomized runs in StressUnderLoadTests.swift ran into, each pinned down
// as a small test of the contract (API.md), kept as regression tests now that the engine is fixed.

@Suite("Found under load")
struct FoundUnderLoadTests {
    // API.md, semantics 7: "A GroupOperation finishes only after every child ... has finished".
    @Test
    func groupCancelledBeforeItStarts_finishesAfterItsChildren() {
        // Given a group waiting for a dependency, whose children and itself log their finish
        let order = Recorder<String>()
        let children = (0..<3).map { _ in Self.child(loggingTo: order) }
        let group = GroupOperation(operations: children)
        group.addObserver(FinishedObserver { _, _ in order.append("group") })
        let release = HeldCallback<(any Error)?>()
        let blocker = AsyncBlockOperation { finish in release.hold(finish) }
        group.addDependency(blocker)
        AsyncOperationQueue().addOperations([blocker, group], waitUntilFinished: false)
        #expect(release.waitUntilHeld())

        // When the group is cancelled before it starts
        group.cancel()
        release.call(nil)

        // Then it finishes after its children
        #expect(waitUntilFinished(children + [group]))
        #expect(order.all == ["child", "child", "child", "group"])
    }

    // API.md, semantics 1 and 7: a failed condition finishes the group without executing, and a
    // group finishes only after every child has finished.
    @Test
    func groupWhoseConditionFails_finishesAfterItsChildren() {
        // Given a group with a failing condition, whose children and itself log their finish
        let order = Recorder<String>()
        let children = (0..<3).map { _ in Self.child(loggingTo: order) }
        let group = GroupOperation(operations: children)
        group.addCondition(BlockCondition { false })
        group.addObserver(FinishedObserver { _, _ in order.append("group") })

        // When it runs
        AsyncOperationQueue().addOperation(group)

        // Then it finishes after its children, none of which executed
        #expect(waitUntilFinished(children + [group]))
        #expect(order.all == ["child", "child", "child", "group"])
    }

    // API.md, semantics 5 and 6: an AsyncBlockOperation whose continuation has not been called
    // finishes at once when cancelled, and one with a timeout cannot block its queue.
    @Test
    func blockOperationCancelledAsItBeginsExecuting_finishes() {
        // Given operations that never call their continuation, each with a timeout, each cancelled
        // from a spinning thread a few hundred loop turns after its execute() is entered (a
        // sleeping thread wakes up too late to hit the window)
        var random = SplitMix64(seed: 0x5EED_CA9C)
        var operations: [AsyncOperation] = []
        for _ in 0..<400 {
            let executing = Flag()
            let operation = ExecuteAnnouncingOperation(announce: executing.raise) { _ in }
            operation.addObserver(TimeoutObserver(timeout: 0.05))
            let extraTurns = Int.random(in: 0...300, using: &random)
            let cancelled = runOnOwnThread {
                let deadline = Date().addingTimeInterval(generousTimeout)
                while !executing.isRaised {
                    if Date() > deadline { return }
                }
                spin(turns: extraTurns)
                operation.cancel()
            }

            // When it runs
            AsyncOperationQueue().addOperation(operation)
            #expect(cancelled.wait())
            operations.append(operation)
        }

        // Then every one of them finishes
        _ = waitUntilFinished(operations)
        let stuck = operations.filter { !$0.isFinished }
        let stuckCount = stuck.count
        #expect(stuckCount == 0, "\(stuck.count) of \(operations.count) operations never finished; cancelled: \(stuck.filter(\.isCancelled).count), still executing: \(stuck.filter(\.isExecuting).count)")
    }

    // API.md, semantics 2 and 7: "Overlapping categories never deadlock"; "Children may be added
    // while the group runs". Also semantics 2: "within a category they start in the order they were
    // added", which here can only be kept by waiting forever.
    @Test
    func childAddedToARunningGroup_behindAnOperationWaitingForTheGroupsCategory_runs() {
        // Given a running group holding category A (its first child keeps it running)
        let a = uniqueName("categoryA")
        let b = uniqueName("categoryB")
        let queue = AsyncOperationQueue()
        let release = HeldCallback<(any Error)?>()
        let first = AsyncBlockOperation { finish in release.hold(finish) }
        let group = GroupOperation(operations: [first])
        group.addCondition(ExclusiveCategory(a))
        queue.addOperation(group)
        #expect(release.waitUntilHeld())
        // and an operation needing A and B, which waits for the group
        let both = AsyncBlockOperation {}
        both.addCondition(ExclusiveCategory(a))
        both.addCondition(ExclusiveCategory(b))
        queue.addOperation(both)
        usleep(50_000) // let it take its place in line

        // When the group gets a child needing B, and its first child finishes
        let late = AsyncBlockOperation {}
        late.addCondition(ExclusiveCategory(b))
        group.addChild(late)
        release.call(nil)

        // Then everything finishes
        let finished = waitUntilFinished([group, both, late], timeout: 5)
        #expect(finished)
        if !finished { group.cancel() } // let the rest of the suite go on
    }

    private static func child(loggingTo order: Recorder<String>) -> AsyncBlockOperation {
        let child = AsyncBlockOperation {}
        child.addObserver(FinishedObserver { _, _ in order.append("child") })
        return child
    }
}
