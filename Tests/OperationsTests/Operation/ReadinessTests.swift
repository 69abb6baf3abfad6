import Foundation
import Operations
import Testing
import TestSupport

// Readiness and waiting: `isReady` of an `AsyncOperation` on no queue is Foundation's readiness
// (it reflects dependencies added to it), and `addOperations(_:waitUntilFinished: true)` returns
// only once every `AsyncOperation` it added has finished, however late and from whatever thread.

@Suite("Readiness")
struct ReadinessTests {
    init() {
        _ = DiagnosticsLog.shared // capture diagnostics before any test reports one
    }

    // MARK: - isReady off any queue

    @Test func isReady_offQueue_reflectsAPlainDependency() {
        // Given an operation on no queue
        let operation = AsyncBlockOperation {}
        #expect(operation.isReady)

        // When it gets a plain dependency, it is not ready while that is unfinished
        let dependency = BlockOperation {}
        operation.addDependency(dependency)
        #expect(!operation.isReady)

        // Then it is ready once the dependency finished
        let plainQueue = OperationQueue()
        plainQueue.addOperation(dependency)
        #expect(waitUntilFinished([dependency]))
        #expect(waitUntil { operation.isReady })
    }

    @Test func isReady_offQueue_reflectsAnAsyncDependency() {
        // Given an operation on no queue, with a dependency held running on a queue
        let operation = AsyncBlockOperation {}
        let held = HeldOperations()
        let dependency = held.make("dependency")
        operation.addDependency(dependency)
        AsyncOperationQueue().addOperation(dependency)
        #expect(held.waitUntilStarted("dependency"))

        // Then it is not ready until the dependency finished
        #expect(!operation.isReady)
        held.finish("dependency")
        #expect(waitUntilFinished([dependency]))
        #expect(waitUntil { operation.isReady })
    }

    @Test func isReady_offQueue_isFalseAgainAfterAnotherDependencyIsAdded() {
        // Given an operation on no queue whose dependency finished
        let operation = AsyncBlockOperation {}
        let finished = BlockOperation {}
        finished.start()
        operation.addDependency(finished)
        #expect(waitUntil { operation.isReady })

        // When it gets another, unfinished, dependency
        operation.addDependency(BlockOperation {})

        // Then it is not ready
        #expect(!operation.isReady)
    }

    // MARK: - addOperations(_:waitUntilFinished: true)

    @Test func addOperationsWaiting_returnsOnlyAfterAnOperationFinishedLaterFromAnotherThread() {
        // Given an operation that another thread finishes a while after it started
        let gate = HeldCallback<(any Error)?>()
        let operation = AsyncBlockOperation { finish in gate.hold(finish) }
        let finisher = runOnOwnThread {
            guard gate.waitUntilHeld() else { return }
            usleep(50_000) // gives an early return the chance to show; nothing is timed
            gate.call(nil)
        }

        // When it is added, waiting (on a thread of its own, so that a hang fails the test)
        let queue = AsyncOperationQueue()
        let returned = runOnOwnThread { queue.addOperations([operation], waitUntilFinished: true) }
        let finishedWhenReturned = Recorder<Bool>()
        let checked = runOnOwnThread {
            guard returned.wait() else { return }
            finishedWhenReturned.append(operation.isFinished)
        }

        // Then the call returned only once the operation had finished
        #expect(checked.wait())
        #expect(finishedWhenReturned.all == [true])
        #expect(finisher.wait())
    }

    @Test func addOperationsWaiting_returnsOnlyAfterOperationsHeldBackByConditionsFinished() {
        // Given an operation whose condition answers a while later, from another thread, one that
        // waits for it, and one in a category held on another queue until then
        let answer = HeldCallback<ConditionResult>()
        let conditional = AsyncBlockOperation {}
        conditional.addCondition(StubCondition(name: "AnswersLater") { _, completion in answer.hold(completion) })
        let dependent = AsyncBlockOperation {}
        dependent.addDependency(conditional)
        let category = uniqueName("category")
        let held = HeldOperations()
        let holder = held.make("holder")
        holder.addCondition(StubCondition(name: "Holder", categories: [category]) { _, completion in completion(.satisfied) })
        AsyncOperationQueue().addOperation(holder)
        #expect(held.waitUntilStarted("holder"))
        let exclusive = AsyncBlockOperation {}
        exclusive.addCondition(StubCondition(name: "Exclusive", categories: [category]) { _, completion in completion(.satisfied) })
        let all = [conditional, dependent, exclusive]
        let finisher = runOnOwnThread {
            guard answer.waitUntilHeld() else { return }
            usleep(50_000) // gives an early return the chance to show; nothing is timed
            answer.call(.satisfied)
            held.finish("holder")
        }

        // When they are added, waiting (on a thread of its own, so that a hang fails the test)
        let queue = AsyncOperationQueue()
        let returned = runOnOwnThread { queue.addOperations(all, waitUntilFinished: true) }
        let finishedWhenReturned = Recorder<[Bool]>()
        let checked = runOnOwnThread {
            guard returned.wait() else { return }
            finishedWhenReturned.append(all.map(\.isFinished))
        }

        // Then the call returned only once every one of them had finished
        #expect(checked.wait())
        #expect(finishedWhenReturned.all == [[true, true, true]])
        #expect(finisher.wait())
        #expect(all.allSatisfy { $0.errors.isEmpty })
    }

    @Test func isReady_offQueue_reflectsAPlainDependencyStartedByHand() {
        // Given an operation on no queue with an unfinished plain dependency
        let operation = AsyncBlockOperation {}
        let dependency = BlockOperation {}
        operation.addDependency(dependency)
        #expect(!operation.isReady)

        // When the dependency is started by hand, then the operation is ready
        dependency.start()
        #expect(waitUntil { operation.isReady })
    }

    @Test func isReady_offQueue_isTrueAgainWhenTheUnfinishedDependencyIsRemoved() {
        // Given an operation on no queue with an unfinished plain dependency
        let operation = AsyncBlockOperation {}
        let dependency = BlockOperation {}
        operation.addDependency(dependency)
        #expect(!operation.isReady)

        // When the dependency is removed, then the operation is ready
        operation.removeDependency(dependency)
        #expect(waitUntil { operation.isReady })
    }

    @Test func asyncOperationOnAPlainQueue_waitsForItsPlainDependency() {
        // Given an operation with a plain dependency, on a plain Foundation queue that only
        // knows readiness from `isReady`
        let log = Recorder<String>()
        let dependency = BlockOperation { log.append("dependency") }
        let operation = AsyncBlockOperation { log.append("operation") }
        operation.addDependency(dependency)
        let queue = OperationQueue()

        // When the operation is added before its dependency
        queue.addOperation(operation)
        queue.addOperation(dependency)

        // Then it runs after it
        #expect(waitUntilFinished([operation, dependency]))
        #expect(log.all == ["dependency", "operation"])
    }

    @Test func addOperationsWaiting_returnsOnlyAfterAnOperationWhoseConditionFailsLater() {
        // Given an operation whose condition fails a while later, from another thread, so that it
        // finishes without Foundation's queue ever having it
        let answer = HeldCallback<ConditionResult>()
        let operation = AsyncBlockOperation {}
        operation.addCondition(StubCondition(name: "FailsLater") { _, completion in answer.hold(completion) })
        let finisher = runOnOwnThread {
            guard answer.waitUntilHeld() else { return }
            usleep(50_000) // gives an early return the chance to show; nothing is timed
            answer.call(.failed(StubError("no")))
        }

        // When it is added, waiting (on a thread of its own, so that a hang fails the test)
        let queue = AsyncOperationQueue()
        let returned = runOnOwnThread { queue.addOperations([operation], waitUntilFinished: true) }
        let finishedWhenReturned = Recorder<Bool>()
        let checked = runOnOwnThread {
            guard returned.wait() else { return }
            finishedWhenReturned.append(operation.isFinished)
        }

        // Then the call returned only once it had finished
        #expect(checked.wait())
        #expect(finishedWhenReturned.all == [true])
        #expect(finisher.wait())
    }

    @Test func addOperationsWaiting_returnsOnlyAfterAGroupFinished() {
        // Given a group whose child another thread finishes a while after it started
        let gate = HeldCallback<(any Error)?>()
        let child = AsyncBlockOperation { finish in gate.hold(finish) }
        let group = GroupOperation(operations: [child])
        let finisher = runOnOwnThread {
            guard gate.waitUntilHeld() else { return }
            usleep(50_000) // gives an early return the chance to show; nothing is timed
            gate.call(nil)
        }

        // When it is added, waiting (on a thread of its own, so that a hang fails the test)
        let queue = AsyncOperationQueue()
        let returned = runOnOwnThread { queue.addOperations([group], waitUntilFinished: true) }
        let finishedWhenReturned = Recorder<Bool>()
        let checked = runOnOwnThread {
            guard returned.wait() else { return }
            finishedWhenReturned.append(group.isFinished)
        }

        // Then the call returned only once it had finished
        #expect(checked.wait())
        #expect(finishedWhenReturned.all == [true])
        #expect(finisher.wait())
    }

    @Test func addOperationsWaiting_returnsOnlyAfterASubclassFinishedLaterFromAnotherThread() {
        // Given a subclass that finishes itself later, from another thread
        let operation = ClosureOperation { operation in
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { operation.finish() }
        }

        // When it is added, waiting (on a thread of its own, so that a hang fails the test)
        let queue = AsyncOperationQueue()
        let returned = runOnOwnThread { queue.addOperations([operation], waitUntilFinished: true) }
        let finishedWhenReturned = Recorder<Bool>()
        let checked = runOnOwnThread {
            guard returned.wait() else { return }
            finishedWhenReturned.append(operation.isFinished)
        }

        // Then the call returned only once it had finished
        #expect(checked.wait())
        #expect(finishedWhenReturned.all == [true])
    }
}
