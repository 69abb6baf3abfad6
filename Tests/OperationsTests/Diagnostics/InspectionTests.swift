import Foundation
import Operations
import Testing
import TestSupport

/// `snapshot()` and `debugDescription`: every waiting operation says what it waits for.
@Suite struct InspectionTests {
    @Test func operationWaitingForADependency_namesIt() {
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let dependency = held.make(uniqueName("fetch"))
        let waiting = AsyncBlockOperation {}
        waiting.name = uniqueName("save")
        waiting.addDependency(dependency)
        queue.addOperations([waiting, dependency], waitUntilFinished: false)
        #expect(held.waitUntilStarted(dependency.name!))

        let snapshot = waiting.snapshot()
        #expect(snapshot.state == .waitingForDependencies)
        #expect(snapshot.waitsFor == [.dependency(dependency.name!)])
        #expect(waiting.debugDescription == "\(waiting.name!): waiting for dependencies; waits for dependency '\(dependency.name!)'")

        held.finish(dependency.name!)
        #expect(waitUntilFinished([waiting]))
        #expect(waiting.snapshot().state == .finished)
        #expect(waiting.snapshot().waitsFor.isEmpty)
    }

    @Test func operationOnNoQueue_namesItsUnfinishedDependencies() {
        let dependency = BlockOperation {}
        dependency.name = uniqueName("plain")
        let operation = AsyncOperation()
        operation.addDependency(dependency)
        #expect(operation.snapshot() == OperationSnapshot(name: "AsyncOperation", state: .initialized, isCancelled: false, waitsFor: [.dependency(dependency.name!)]))
    }

    @Test func operationEvaluatingConditions_namesThoseThatHaveNotAnswered() {
        let queue = AsyncOperationQueue()
        let answer = HeldCallback<ConditionResult>()
        let operation = AsyncBlockOperation {}
        operation.name = uniqueName("upload")
        operation.addCondition(StubCondition.satisfied(name: "Reachable"))
        operation.addCondition(StubCondition(name: "LoggedIn") { _, completion in answer.hold(completion) })
        queue.addOperation(operation)
        #expect(answer.waitUntilHeld())

        let snapshot = operation.snapshot()
        #expect(snapshot.state == .evaluatingConditions)
        #expect(snapshot.waitsFor == [.condition("LoggedIn")])
        #expect(operation.debugDescription.contains("waits for condition 'LoggedIn'"))

        answer.call(.satisfied)
        #expect(waitUntilFinished([operation]))
    }

    @Test func operationWaitingForACategory_namesItsHolder_andItsPlaceInLine() {
        let category = uniqueName("Database")
        let held = HeldOperations()
        let holder = held.make(uniqueName("migrate"))
        holder.addCondition(ExclusiveStub(category))
        let first = AsyncBlockOperation {}
        first.name = uniqueName("sync")
        first.addCondition(ExclusiveStub(category))
        let second = AsyncBlockOperation {}
        second.name = uniqueName("backup")
        second.addCondition(ExclusiveStub(category))
        let queue = AsyncOperationQueue()
        let otherQueue = AsyncOperationQueue()
        queue.addOperation(holder)
        #expect(held.waitUntilStarted(holder.name!))
        otherQueue.addOperation(first)
        otherQueue.addOperation(second)
        #expect(waitUntil { second.snapshot().state == .waitingForCategories })

        #expect(first.snapshot().waitsFor == [.category(category, heldBy: holder.name!, waitersAhead: 0)])
        #expect(second.snapshot().waitsFor == [.category(category, heldBy: holder.name!, waitersAhead: 1)])
        #expect(first.debugDescription == "\(first.name!): waiting for categories; waits for category '\(category)' (held by '\(holder.name!)'; 1st in line)")
        #expect(second.debugDescription.hasSuffix("(held by '\(holder.name!)'; 2nd in line)"))
        #expect(holder.snapshot().state == .executing)

        held.finish(holder.name!)
        #expect(waitUntilFinished([first, second]))
    }

    @Test func operationsOnASuspendedQueue_sayTheQueueIsSuspended() {
        let queue = AsyncOperationQueue()
        queue.name = uniqueName("sync")
        queue.isSuspended = true
        let conditioned = AsyncBlockOperation {}
        conditioned.name = uniqueName("conditioned")
        conditioned.addCondition(StubCondition.satisfied())
        let plain = BlockOperation {}
        plain.name = uniqueName("plain")
        queue.addOperations([conditioned, plain], waitUntilFinished: false)

        #expect(conditioned.snapshot() == OperationSnapshot(name: conditioned.name!, state: .waitingInLine, isCancelled: false, waitsFor: [.suspendedQueue(queue.name)]))
        let snapshot = queue.snapshot()
        #expect(snapshot.isSuspended)
        #expect(snapshot.operations.map(\.name) == [conditioned.name!, plain.name!])
        #expect(snapshot.operations.allSatisfy { $0.waitsFor == [.suspendedQueue(queue.name)] })
        let lines = queue.debugDescription.split(separator: "\n").map(String.init)
        #expect(lines == [
            "AsyncOperationQueue '\(queue.name!)': suspended, 2 unfinished operations",
            "  \(conditioned.name!): waiting in line; waits for its queue '\(queue.name!)' to resume (suspended)",
            "  \(plain.name!): waiting in line; waits for its queue '\(queue.name!)' to resume (suspended)",
        ])

        queue.isSuspended = false
        #expect(waitUntilFinished([conditioned, plain]))
        #expect(waitUntil { queue.snapshot().operations.isEmpty })
    }

    /// The example in `QueueSnapshot`'s documentation, printed as it shows it.
    @Test func aSuspendedQueuesSnapshot_readsAsItsDocumentationShows() {
        let queue = AsyncOperationQueue()
        queue.name = "sync"
        queue.isSuspended = true
        let migrate = AsyncBlockOperation {}
        migrate.name = "migrate"
        let save = AsyncBlockOperation {}
        save.name = "save"
        save.addDependency(migrate)
        queue.addOperations([migrate, save], waitUntilFinished: false)

        #expect(queue.snapshot().description == """
            AsyncOperationQueue 'sync': suspended, 2 unfinished operations
              migrate: waiting in line; waits for its queue 'sync' to resume (suspended)
              save: waiting for dependencies; waits for dependency 'migrate'
            """)
        queue.isSuspended = false
        #expect(waitUntilFinished([migrate, save]))
    }

    @Test func childOfAGroupThatHasNotStarted_saysItWaitsForItsGroup() {
        let child = AsyncBlockOperation {}
        child.name = uniqueName("child")
        let group = GroupOperation(operations: [child])
        group.name = uniqueName("group")
        #expect(child.snapshot() == OperationSnapshot(name: child.name!, state: .waitingInLine, isCancelled: false, waitsFor: [.groupToStart(group.name!)]))
        #expect(child.debugDescription.hasSuffix("waits for its group '\(group.name!)' to start"))
        AsyncOperationQueue().addOperations([group], waitUntilFinished: true)
        #expect(child.isFinished)
    }

    @Test func operationOnASerialQueue_waitsForItsTurn() {
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let held = HeldOperations()
        let running = held.make(uniqueName("running"))
        running.addCondition(StubCondition.satisfied())
        let next = AsyncBlockOperation {}
        next.name = uniqueName("next")
        next.addCondition(StubCondition.satisfied())
        queue.addOperation(running)
        #expect(held.waitUntilStarted(running.name!))
        queue.addOperation(next)
        // `running` keeps the turn until it has finished (and let its dependents go, who may
        // have been added before `next`): `next` waits in line for it.
        #expect(next.snapshot() == OperationSnapshot(name: next.name!, state: .waitingInLine, isCancelled: false, waitsFor: [.turnOnSerialQueue(queue.name)]))
        held.finish(running.name!)
        #expect(waitUntilFinished([next]))
    }

    @Test func snapshotsTakenWhileTheQueueRunsAtFullSpeed_neverCrashOrDeadlock() {
        let queue = AsyncOperationQueue()
        let category = uniqueName("Hot")
        let operations = (0..<3_000).map { index -> AsyncBlockOperation in
            let operation = AsyncBlockOperation {}
            operation.name = "op\(index)"
            if index % 3 == 0 { operation.addCondition(ExclusiveStub(category)) }
            if index % 5 == 0 { operation.addCondition(StubCondition.satisfied()) }
            return operation
        }
        for (index, operation) in operations.enumerated() where index % 7 == 6 {
            operation.addDependency(operations[index - 1])
        }
        let stop = Counter()
        let snapshotter = runOnOwnThread {
            var taken = 0
            while stop.current == 0 || taken < 10 {
                let snapshot = queue.snapshot()
                _ = snapshot.description
                if let operation = snapshot.operations.first { _ = operation.waitsFor }
                _ = operations[taken % operations.count].debugDescription
                taken += 1
            }
        }
        queue.addOperations(operations, waitUntilFinished: false)
        #expect(waitUntilFinished(operations))
        stop.increment()
        #expect(snapshotter.wait())
        #expect(queue.snapshot().operations.isEmpty || waitUntil { queue.snapshot().operations.isEmpty })
    }
}
