import Foundation
import Operations
import Testing
import TestSupport

// A serial queue (contract, "Semantics clients rely on" 9): with `maxConcurrentOperationCount = 1`
// it starts the operations whose dependencies have finished in the order they were added,
// whatever their conditions or categories, also across a suspension.

@Suite("Serial queue order")
struct SerialOrderTests {
    init() {
        _ = DiagnosticsLog.shared // capture diagnostics before any test reports one
    }

    @Test(arguments: [true, false])
    func serialQueue_resumed_startsReadyOperationsInAddOrder(conditionAnswersLater: Bool) {
        // Given a suspended serial queue holding, in this order, an operation with a condition,
        // one without, one in a free category and a plain one
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.isSuspended = true
        let log = Recorder<String>()
        let answer = conditionAnswersLater ? HeldCallback<ConditionResult>() : nil
        let operations = operationsOfEveryKind(log: log, heldAnswer: answer)
        queue.addOperations(operations, waitUntilFinished: false)

        // When the queue resumes (and the condition, if held, answers a while later)
        queue.isSuspended = false
        #expect(answerAfterAChanceToGoWrong(answer)) // the condition, if held, answers now

        // Then they run in the order they were added
        #expect(waitUntilFinished(operations))
        #expect(log.all == ["A", "B", "C", "D"])
    }

    @Test(arguments: [true, false])
    func serialQueue_running_startsReadyOperationsInAddOrder(conditionAnswersLater: Bool) {
        // Given a serial queue busy with an operation
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let held = HeldOperations()
        let first = held.make("first")
        queue.addOperation(first)
        #expect(held.waitUntilStarted("first"))

        // When an operation with a condition, one without, one in a free category and a plain one
        // are added one by one, and the busy one then finishes (and the condition, if held,
        // answers a while later)
        let log = Recorder<String>()
        let answer = conditionAnswersLater ? HeldCallback<ConditionResult>() : nil
        let operations = operationsOfEveryKind(log: log, heldAnswer: answer)
        for operation in operations {
            queue.addOperation(operation)
        }
        held.finish("first")
        #expect(answerAfterAChanceToGoWrong(answer)) // the condition, if held, answers now

        // Then they run in the order they were added
        #expect(waitUntilFinished([first] + operations))
        #expect(log.all == ["A", "B", "C", "D"])
    }

    // Found by a parity probe: Foundation's serial queue starts the highest `queuePriority` among
    // the operations it holds, so operations given to it together started by priority.
    @Test(arguments: [true, false])
    func serialQueue_startsInAddOrder_whateverThePriorities(acrossASuspension: Bool) {
        // Given a serial queue, suspended or busy with an operation
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.isSuspended = acrossASuspension
        let held = HeldOperations()
        let first = held.make("first")
        queue.addOperation(first)
        if !acrossASuspension {
            #expect(held.waitUntilStarted("first"))
        }

        // When operations are added lowest priority first, with and without conditions
        let log = Recorder<String>()
        let priorities: [Operation.QueuePriority] = [.veryLow, .low, .normal, .high, .veryHigh]
        let later = priorities.enumerated().map { index, priority -> AsyncBlockOperation in
            let operation = AsyncBlockOperation { log.append("\(index)") }
            operation.queuePriority = priority
            if index % 2 == 1 {
                operation.addCondition(StubCondition.satisfied())
            }
            return operation
        }
        for operation in later {
            queue.addOperation(operation)
        }
        queue.isSuspended = false
        #expect(held.waitUntilStarted("first"))
        held.finish("first")

        // Then they start in the order they were added
        #expect(waitUntilFinished([first] + later))
        #expect(log.all == ["0", "1", "2", "3", "4"])
    }

    @Test func serialQueue_resumed_startsReadyOperationsInAddOrder_addedOneByOne() {
        // Given a suspended serial queue given the same four kinds of operations one by one
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.isSuspended = true
        let log = Recorder<String>()
        let operations = operationsOfEveryKind(log: log)
        for operation in operations {
            queue.addOperation(operation)
        }

        // When the queue resumes
        queue.isSuspended = false

        // Then they run in the order they were added
        #expect(waitUntilFinished(operations))
        #expect(log.all == ["A", "B", "C", "D"])
    }

    // Found by a soak: a queue resumed from another thread while operations were being added
    // started some of them out of add order, when the resume's hand-off to Foundation and the
    // adding thread's raced.
    @Test func serialQueue_suspendedAndResumedFromAnotherThreadWhileAdding_startsInAddOrder() {
        // Given a serial queue, and a thread that keeps suspending and resuming it
        for round in 0..<20 {
            let queue = AsyncOperationQueue()
            queue.maxConcurrentOperationCount = 1
            let log = Recorder<Int>()
            let stop = Flag()
            let toggling = runOnOwnThread {
                var suspended = false
                while !stop.isRaised {
                    suspended.toggle()
                    queue.isSuspended = suspended
                    spin(turns: 50)
                }
                queue.isSuspended = false
            }

            // When operations of every kind are added one by one meanwhile
            let category = uniqueName("free")
            let operations = (0..<400).map { index -> Operation in
                switch index % 4 {
                case 0: return BlockOperation { log.append(index) }
                case 1: return AsyncBlockOperation { log.append(index) }
                case 2:
                    let operation = AsyncBlockOperation { log.append(index) }
                    operation.addCondition(StubCondition.satisfied())
                    return operation
                default:
                    let operation = AsyncBlockOperation { log.append(index) }
                    operation.addCondition(ExclusiveStub(category))
                    return operation
                }
            }
            for operation in operations {
                queue.addOperation(operation)
            }
            stop.raise()

            // Then they start in the order they were added
            #expect(toggling.wait())
            #expect(waitUntilFinished(operations))
            let started = log.all
            #expect(started == Array(0..<400), "round \(round): first out of order at \(started.indices.first { started[$0] != $0 } ?? -1)")
        }
    }

    // Found by a soak: an operation that waited for a category held on another queue was
    // overtaken by later operations of its own serial queue once it was granted.
    @Test func serialQueue_operationGrantedItsCategoryLate_isNotOvertakenByLaterOnes() {
        for round in 0..<20 {
            // Given a category held on another queue, and a serial queue whose first operation needs it
            let category = uniqueName("X")
            let held = HeldOperations()
            let holder = held.make("holder")
            holder.addCondition(ExclusiveStub(category))
            AsyncOperationQueue().addOperation(holder)
            #expect(held.waitUntilStarted("holder"))
            let queue = AsyncOperationQueue()
            queue.maxConcurrentOperationCount = 1
            let log = Recorder<Int>()
            let first = AsyncBlockOperation { log.append(0) }
            first.addCondition(ExclusiveStub(category))
            queue.addOperation(first)

            // When the holder finishes while later operations are being added
            let later = (1..<200).map { index -> Operation in
                index % 2 == 0 ? BlockOperation { log.append(index) } : AsyncBlockOperation { log.append(index) }
            }
            let releasing = runOnOwnThread {
                spin(turns: 200 * (round + 1))
                held.finish("holder")
            }
            for operation in later {
                queue.addOperation(operation)
            }

            // Then the first still starts first, and the others in add order
            #expect(releasing.wait())
            #expect(waitUntilFinished([first] + later))
            #expect(log.all == Array(0..<200), "round \(round)")
        }
    }

    // Found by a soak whose queues changed width under load: an operation under way when its
    // queue was briefly made concurrent lost its turn, and later operations went first once the
    // queue was serial again.
    @Test func serialQueue_madeConcurrentAndSerialAgain_whileAnOperationWaits_keepsAddOrder() {
        // Given a serial queue whose first operation waits for a category held on another queue
        let category = uniqueName("X")
        let held = HeldOperations()
        let holder = held.make("holder")
        holder.addCondition(ExclusiveStub(category))
        AsyncOperationQueue().addOperation(holder)
        #expect(held.waitUntilStarted("holder"))
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let log = Recorder<String>()
        let first = AsyncBlockOperation { log.append("first") }
        first.addCondition(ExclusiveStub(category))
        queue.addOperation(first)
        #expect(waitUntil { first.snapshot().state == .waitingForCategories })

        // When the queue is made concurrent and serial again, and more operations are added
        queue.maxConcurrentOperationCount = 2
        queue.maxConcurrentOperationCount = 1
        let later = operationsOfEveryKind(log: log)
        queue.addOperations(later, waitUntilFinished: false)
        usleep(20_000) // a chance for the later ones to go first
        held.finish("holder")

        // Then the first still starts first
        #expect(waitUntilFinished([first] + later))
        #expect(log.all == ["first", "A", "B", "C", "D"])
    }

    // Found by a parity probe: an operation cancelled before it was added finished at once, even
    // on a suspended queue, where Foundation's waits for the resume.
    @Test func operationsCancelledBeforeTheirAdd_waitForTheirTurn_andFinishInAddOrderWithoutRunning() {
        // Given a suspended serial queue given many operations cancelled before they were added,
        // among operations that were not
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.isSuspended = true
        let log = Recorder<Int>()
        let count = 20_000 // finishing one lets the next on: deep, were that nested
        let operations = (0..<count).map { index -> AsyncBlockOperation in
            let operation = AsyncBlockOperation { log.append(index) }
            operation.completionBlock = { log.append(-index - 1) }
            if index % 100 != 0 {
                operation.cancel()
            }
            return operation
        }
        queue.addOperations(operations, waitUntilFinished: false)

        // Then nothing finished while the queue was suspended
        #expect(operations.allSatisfy { !$0.isFinished })

        // When it resumes
        queue.isSuspended = false

        // Then every one finished, and only those not cancelled ran, in add order
        #expect(waitUntilFinished(operations))
        #expect(log.all.filter { $0 >= 0 } == Array(stride(from: 0, to: count, by: 100)))
    }

    // Found by a race audit: dependents released by one finish were told in the order they
    // called `addDependency`, and on a serial queue the first told took the turn.
    @Test(arguments: [false, true])
    func operationsReleasedTogether_startInAddOrder_notInTheOrderTheyTookTheirDependency(inAGroup: Bool) {
        // Given a dependency running on another queue, and two operations waiting for it that
        // took it in the reverse of the order they are added in
        let held = HeldOperations()
        let dependencyName = uniqueName("dependency")
        let dependency = held.make(dependencyName)
        AsyncOperationQueue().addOperation(dependency)
        #expect(held.waitUntilStarted(dependencyName))
        let log = Recorder<String>()
        let (first, second, third) = (AsyncBlockOperation { log.append("A") }, AsyncBlockOperation { log.append("B") }, AsyncBlockOperation { log.append("C") })
        third.addDependency(dependency)
        second.addDependency(dependency)
        first.addDependency(dependency)

        // When they are added in order to a serial queue (or a serial group), and the dependency finishes
        let waited: [Operation]
        if inAGroup {
            let group = GroupOperation(operations: [first, second, third])
            group.maxConcurrentOperationCount = 1
            AsyncOperationQueue().addOperation(group)
            waited = [group]
        } else {
            let queue = AsyncOperationQueue()
            queue.maxConcurrentOperationCount = 1
            queue.addOperations([first, second, third], waitUntilFinished: false)
            waited = [first, second, third]
        }
        held.finish(dependencyName)

        // Then they run in the order they were added
        #expect(waitUntilFinished(waited))
        #expect(log.all == ["A", "B", "C"])
    }

    // A finish's dependents ask for their turn before the turn goes on, also when one of them
    // finishes as it hears of the finish (its condition fails at once), and tells its own
    // dependents while the first finish's are still being told.
    @Test func dependentOfADependentThatFinishedAtOnce_goesBeforeALaterDependentOfTheFirstFinish() {
        // Given a dependency on another queue, and a serial queue with [failing (waits for it,
        // its condition fails), follower (waits for failing), later (waits for the dependency)]
        let held = HeldOperations()
        let dependencyName = uniqueName("dependency")
        let dependency = held.make(dependencyName)
        AsyncOperationQueue().addOperation(dependency)
        #expect(held.waitUntilStarted(dependencyName))
        let log = Recorder<String>()
        let failing = AsyncBlockOperation { log.append("failing") }
        failing.addCondition(StubCondition.failing(StubError("no")))
        failing.addDependency(dependency)
        let follower = AsyncBlockOperation { log.append("follower") }
        follower.addDependency(failing)
        let later = AsyncBlockOperation { log.append("later") }
        later.addDependency(dependency)
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.addOperations([failing, follower, later], waitUntilFinished: false)

        // When the dependency finishes
        held.finish(dependencyName)

        // Then the follower, added before the later one, runs first
        #expect(waitUntilFinished([failing, follower, later]))
        #expect(log.all == ["follower", "later"])
    }

    // A README limitation until now: the turn of a plain operation ended once Foundation had it,
    // so an operation added later went to Foundation while it ran, ahead of an `AsyncOperation`
    // waiting for it. Foundation's own serial queue runs the dependent first.
    @Test(arguments: [false, true])
    func dependentOfARunningPlainOperation_goesBeforeAnOperationAddedAfterIt(foundationsQueue: Bool) {
        // Given a serial queue running a plain operation, with an operation that waits for it and
        // one added after that
        let queue = foundationsQueue ? OperationQueue() : AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let log = Recorder<String>()
        let started = Signal()
        let release = Signal()
        let plain = BlockOperation {
            started.signal()
            _ = release.wait()
            log.append("plain")
        }
        let dependent: Operation = foundationsQueue ? BlockOperation { log.append("dependent") } : AsyncBlockOperation { log.append("dependent") }
        dependent.addDependency(plain)
        let later: Operation = foundationsQueue ? BlockOperation { log.append("later") } : AsyncBlockOperation { log.append("later") }
        queue.addOperation(plain)
        #expect(started.wait())
        queue.addOperation(dependent)
        queue.addOperation(later)
        usleep(20_000) // a chance for the later one to go first

        // When the plain operation finishes
        release.signal()

        // Then the dependent, added before the later one, runs first
        #expect(waitUntilFinished([plain, dependent, later]))
        #expect(log.all == ["plain", "dependent", "later"])
    }

    // The same with a plain operation that finishes at once, many times: its turn is watched
    // before Foundation has it, so its finish cannot be missed, nor reported after the turn ended.
    @Test func dependentOfAQuickPlainOperation_goesBeforeAnOperationAddedAfterIt_everyTime() {
        for round in 0..<200 {
            // Given a serial queue given [plain, dependent of plain, later] at once
            let queue = AsyncOperationQueue()
            queue.maxConcurrentOperationCount = 1
            let log = Recorder<String>()
            let plain = BlockOperation { log.append("plain") }
            let dependent = AsyncBlockOperation { log.append("dependent") }
            dependent.addDependency(plain)
            let later = AsyncBlockOperation { log.append("later") }

            // When they run
            queue.addOperations([plain, dependent, later], waitUntilFinished: false)

            // Then in add order, the dependent before the later one
            #expect(waitUntilFinished([plain, dependent, later]))
            #expect(log.all == ["plain", "dependent", "later"], "round \(round)")
        }
    }

    // A plain operation that waits for dependencies as Foundation gets it gives the turn up: one
    // it waits for, added after it, runs first (holding the turn would wait for ever).
    @Test func plainOperationWaitingForALaterOne_givesTheTurnUp_andRunsAfterIt() {
        // Given a serial queue given [plain, which waits for later; later]
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let log = Recorder<String>()
        let later = AsyncBlockOperation { log.append("later") }
        let plain = BlockOperation { log.append("plain") }
        plain.addDependency(later)

        // When they run
        queue.addOperations([plain, later], waitUntilFinished: false)

        // Then the later one runs first, and the plain one after it
        #expect(waitUntilFinished([plain, later]), "\(queue.debugDescription)")
        #expect(log.all == ["later", "plain"])
    }

    // A plain operation that waits for dependencies as Foundation gets it waits behind a gate
    // until its turn comes again (README, Known limitations): the gate is listed among its
    // dependencies only until it has finished.
    @Test func plainOperationThatWaitedBehindAGate_listsOnlyItsOwnDependencies_onceFinished() {
        // Given a plain operation on a serial queue, waiting for an operation of another queue
        let held = HeldOperations()
        let elsewhere = held.make("elsewhere")
        let other = AsyncOperationQueue()
        other.addOperation(elsewhere)
        #expect(held.waitUntilStarted("elsewhere"))
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let plain = BlockOperation {}
        plain.addDependency(elsewhere)
        queue.addOperation(plain)

        // When the operation it waits for finishes, and it has run
        held.finish("elsewhere")
        #expect(waitUntilFinished([plain]), "\(queue.debugDescription)")

        // Then its dependencies are its own again
        #expect(waitUntil { plain.dependencies.count == 1 }, "\(plain.dependencies)")
        #expect(plain.dependencies.first === elsewhere)
    }
}
