import Foundation
import Operations
import Testing
import TestSupport

/// `GroupOperation` reports its children as Foundation's `ProgressReporting`.
@Suite struct GroupProgressTests {
    @Test func progress_countsChildrenAdmittedAndFinished_andIsCompleteOnceTheGroupFinished() {
        let held = HeldOperations()
        let first = held.make(uniqueName("first"))
        let second = held.make(uniqueName("second"))
        let group = GroupOperation(operations: [first, second, AsyncBlockOperation {}])
        #expect(group.progress.totalUnitCount == 3)
        #expect(group.progress.completedUnitCount == 0)

        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted(first.name!) && held.waitUntilStarted(second.name!))
        #expect(waitUntil { group.progress.completedUnitCount == 1 })
        held.finish(first.name!)
        #expect(waitUntil { group.progress.completedUnitCount == 2 })
        #expect(!group.progress.isFinished)

        held.finish(second.name!)
        #expect(waitUntilFinished([group]))
        #expect(group.progress.completedUnitCount == 3)
        #expect(group.progress.fractionCompleted == 1)
    }

    @Test func childrenAddedOrProducedWhileRunning_growTheTotal() {
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        let producer = AsyncBlockOperation {}
        let group = GroupOperation(operations: [running])
        producer.addObserver(StartedObserverStub { operation in operation.produce(AsyncBlockOperation {}) })
        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted(running.name!))
        #expect(group.progress.totalUnitCount == 1)

        group.addChild(producer)
        #expect(waitUntil { group.progress.totalUnitCount == 3 }) // the producer and what it produced
        held.finish(running.name!)
        #expect(waitUntilFinished([group]))
        #expect(group.progress.completedUnitCount == 3)
        #expect(group.progress.fractionCompleted == 1)
    }

    @Test(arguments: [false, true])
    func childrenAddedTogether_areCountedBeforeAnyOfThemRuns(withConditions: Bool) {
        // The children of one add are counted in the progress together, once per add: that must
        // still happen before the first of them can run, whether it reaches Foundation with its
        // batch or, through its conditions, on its own. Two slots: the held child keeps one, so
        // the others run one after another and each reads the progress alone.
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        let group = GroupOperation(operations: [running])
        group.maxConcurrentOperationCount = 2
        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted(running.name!))

        let seen = Recorder<String>()
        let batch = (0..<20).map { index -> Operation in
            let child = AsyncBlockOperation {
                let total = group.progress.totalUnitCount
                let expected = withConditions ? index + 2 : 21 // with conditions, each goes on its own
                seen.append(total >= expected ? "counted" : "ran when the total was \(total)")
            }
            if withConditions {
                child.addCondition(StubCondition.satisfied())
            }
            return child
        }
        group.addChildren(batch)

        #expect(waitUntil { seen.count == 20 })
        held.finish(running.name!)
        #expect(waitUntilFinished([group]))
        #expect(seen.all == Array(repeating: "counted", count: 20))
        #expect(group.progress.completedUnitCount == 21)
    }

    @Test func emptyGroup_isCompleteOnceFinished() {
        let group = GroupOperation()
        AsyncOperationQueue().addOperations([group], waitUntilFinished: true)
        #expect(group.progress.fractionCompleted == 1)
        #expect(group.progress.isFinished)
    }

    @Test func aGroupSeenFinished_hasCompleteProgress_whoeverLooks() {
        // Whoever sees the group finished (here, by polling from another thread) sees its
        // progress complete: the group completes it before isFinished becomes true.
        let queue = AsyncOperationQueue()
        var incomplete = 0
        for _ in 0..<200 {
            let group = GroupOperation()
            queue.addOperation(group)
            while !group.isFinished { sched_yield() }
            if group.progress.fractionCompleted != 1 { incomplete += 1 }
        }
        #expect(incomplete == 0)
    }

    @Test func nestedGroups_reportPartialProgress_asFoundationsChildProgressDoes() {
        let held = HeldOperations()
        let slow = held.make(uniqueName("slow"))
        let inner = GroupOperation(operations: [slow, AsyncBlockOperation {}])
        let outerHeld = held.make(uniqueName("outer"))
        let outer = GroupOperation(operations: [inner, outerHeld])
        AsyncOperationQueue().addOperation(outer)
        #expect(held.waitUntilStarted(slow.name!) && held.waitUntilStarted(outerHeld.name!))

        // Inner: 1 of 2 children done, so the outer group is a quarter done (half of one of two).
        #expect(waitUntil { abs(outer.progress.fractionCompleted - 0.25) < 0.001 })
        #expect(outer.progress.completedUnitCount == 0)

        held.finish(slow.name!)
        #expect(waitUntilFinished([inner]))
        #expect(waitUntil { outer.progress.completedUnitCount == 1 })
        #expect(abs(outer.progress.fractionCompleted - 0.5) < 0.001)

        held.finish(outerHeld.name!)
        #expect(waitUntilFinished([outer]))
        #expect(outer.progress.completedUnitCount == 2)
        #expect(outer.progress.fractionCompleted == 1)
    }

    @Test func cancellingTheProgress_cancelsTheGroup() {
        let held = HeldOperations()
        let child = held.make(uniqueName("child"))
        let group = GroupOperation(operations: [child])
        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted(child.name!))

        group.progress.cancel()
        #expect(waitUntilFinished([group]))
        #expect(group.isCancelled)
        #expect(child.isCancelled)
        #expect(group.progress.fractionCompleted == 1)
    }

    /// Every composite: a plain group, a cascade, a transaction and a retry operation.
    private static func compositesWithAHeldChild(_ held: HeldOperations) -> [(name: String, composite: GroupOperation)] {
        let names = (0..<4).map { uniqueName("child\($0)") }
        return [
            (names[0], GroupOperation(operations: [held.make(names[0])])),
            (names[1], CascadeOperation { $0.add { held.make(names[1]) } }),
            (names[2], TransactionOperation { $0.add { held.make(names[2]) } }),
            (names[3], RetryOperation(maxAttempts: 1) { _ in held.make(names[3]) }),
        ]
    }

    @Test func cancellingTheGroup_cancelsItsProgress_forEveryComposite() {
        // Given every kind of composite, each running a child that waits
        let held = HeldOperations()
        let composites = Self.compositesWithAHeldChild(held)
        AsyncOperationQueue().addOperations(composites.map(\.composite), waitUntilFinished: false)
        for (name, _) in composites {
            #expect(held.waitUntilStarted(name))
        }

        // When each is cancelled
        for (_, composite) in composites {
            composite.cancel()
        }

        // Then its progress is cancelled too, and it finishes
        for (_, composite) in composites {
            #expect(waitUntil { composite.progress.isCancelled }, "\(type(of: composite))")
        }
        #expect(waitUntilFinished(composites.map(\.composite)))
    }

    @Test func cancellingTheProgress_cancelsEveryComposite() {
        let held = HeldOperations()
        let composites = Self.compositesWithAHeldChild(held)
        AsyncOperationQueue().addOperations(composites.map(\.composite), waitUntilFinished: false)
        for (name, _) in composites {
            #expect(held.waitUntilStarted(name))
        }

        for (_, composite) in composites {
            composite.progress.cancel()
        }

        #expect(waitUntilFinished(composites.map(\.composite)))
        #expect(composites.allSatisfy { $0.composite.isCancelled })
    }

    @Test func groupCancelledBeforeItStarts_hasItsProgressCancelled() {
        let group = GroupOperation(operations: [AsyncBlockOperation {}])
        group.cancel()
        #expect(waitUntil { group.progress.isCancelled })
        AsyncOperationQueue().addOperation(group)
        #expect(waitUntilFinished([group]))
    }

    // Found by a soak: nested groups whose children finish on many threads crashed (SIGSEGV, heap
    // corruption) in Foundation's Progress, which corelibs does not lock, as a child group's
    // progress rolled up into its parent's while the parent's changed on another thread.
    @Test func nestedGroupsFinishingOnManyThreads_keepTheirProgressWhole() {
        let queue = AsyncOperationQueue()
        for _ in 0..<150 {
            // Given an outer group of 16 children, half of them inner groups of 4
            let leaves = Counter()
            let children: [Operation] = (0..<16).map { index in
                guard index % 2 == 0 else { return AsyncBlockOperation { leaves.increment() } }
                return GroupOperation(operations: (0..<4).map { _ in AsyncBlockOperation { leaves.increment() } })
            }
            let outer = GroupOperation(operations: children)

            // When it runs
            queue.addOperation(outer)

            // Then every leaf ran and the progress of each group is complete
            #expect(waitUntilFinished([outer]))
            #expect(leaves.current == 8 + 8 * 4)
            #expect(outer.progress.completedUnitCount == 16)
            #expect(outer.progress.fractionCompleted == 1)
            for case let inner as GroupOperation in children {
                #expect(inner.progress.fractionCompleted == 1)
            }
        }
    }

    @Test func groupMadeWhileAProgressIsCurrent_becomesItsChild() {
        let parent = Progress(totalUnitCount: 1)
        parent.becomeCurrent(withPendingUnitCount: 1)
        let group = GroupOperation(operations: [AsyncBlockOperation {}])
        parent.resignCurrent()
        AsyncOperationQueue().addOperations([group], waitUntilFinished: true)
        #expect(waitUntil { parent.completedUnitCount == 1 })
        #expect(parent.fractionCompleted == 1)
    }
}

/// Calls `body` when the operation starts (the Observers module's `StartedObserver`).
private struct StartedObserverStub: OperationObserver {
    let body: @Sendable (AsyncOperation) -> Void

    init(_ body: @escaping @Sendable (AsyncOperation) -> Void) {
        self.body = body
    }

    func operationDidStart(_ operation: AsyncOperation) {
        body(operation)
    }
}
