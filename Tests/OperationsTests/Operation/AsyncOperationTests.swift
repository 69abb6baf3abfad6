import Foundation
import Operations
import Testing
import TestSupport

/// `AsyncOperation`: finishing, cancelling, errors, observers, producing, starting by hand,
/// Foundation's flags, dependencies and late configuration.
@Suite struct AsyncOperationTests {
    init() {
        _ = DiagnosticsLog.shared // capture diagnostics before any test reports one
    }

    // MARK: - Executing and finishing

    @Test func overriddenExecute_finishesWhenFinishIsCalledFromAnotherThread() {
        // Given an operation whose execute() leaves finishing to someone else
        let finishLater = HeldCallback<Void>()
        let operation = ClosureOperation { operation in
            finishLater.hold { _ in operation.finish() }
        }

        // When it executes
        AsyncOperationQueue().addOperation(operation)
        #expect(finishLater.waitUntilHeld())

        // Then it keeps executing until finish is called, here from another thread
        #expect(operation.isExecuting)
        #expect(!operation.isFinished)
        DispatchQueue.global().async { finishLater.call(()) }
        #expect(waitUntilFinished([operation]))
        #expect(!operation.isExecuting)
        #expect(operation.errors.isEmpty)
        finishLater.drop()
    }

    @Test func defaultExecute_callsMainThenFinishes() {
        // Given a subclass that only overrides main()
        let log = Recorder<String>()
        let operation = MainOverridingOperation(log: log)
        operation.addObserver(EventLogObserver(log: log))

        // When it runs
        AsyncOperationQueue().addOperation(operation)

        // Then main() ran once, between start and finish
        #expect(waitUntilFinished([operation]))
        #expect(log.all == ["didStart", "main", "didFinish"])
        #expect(operation.errors.isEmpty)
    }

    @Test func finishTwice_firstCallWinsAndLaterCallsAreReported() {
        // Given an operation that finishes three times
        let name = uniqueName("finish-twice")
        let first = StubError("first")
        let observer = EventLogObserver()
        let operation = ClosureOperation(name: name) { operation in
            operation.finish(with: first)
            operation.finish(with: StubError("second"))
            operation.finish()
        }
        operation.addObserver(observer)

        // When it runs, and is finished once more from outside
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntilFinished([operation]))
        operation.finish(with: StubError("late"))

        // Then the first call won, observers heard one finish, and each extra call was reported
        #expect(operation.errors.asStubErrors == [first])
        #expect(observer.log.all == ["didStart", "didFinish"])
        #expect(observer.finishedErrors.all.map(\.asStubErrors) == [[first]])
        #expect(DiagnosticsLog.shared.kinds(about: name, onceThereAre: 3) == [.finishedTwice, .finishedTwice, .finishedTwice])
    }

    @Test func concurrentFinishes_oneWinsAndTheOthersAreReported() {
        // Given an executing operation
        let name = uniqueName("concurrent-finish")
        let finishLater = HeldCallback<Void>()
        let observer = EventLogObserver()
        let operation = ClosureOperation(name: name) { operation in
            finishLater.hold { _ in operation.finish() }
        }
        operation.addObserver(observer)
        AsyncOperationQueue().addOperation(operation)
        #expect(finishLater.waitUntilHeld())

        // When eight threads finish it at once, each with its own error
        DispatchQueue.concurrentPerform(iterations: 8) { index in
            operation.finish(with: StubError("finish \(index)"))
        }

        // Then exactly one error was kept, observers heard one finish, and seven calls were reported
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.count == 1)
        #expect(observer.log.all == ["didStart", "didFinish"])
        #expect(observer.finishedErrors.all.map(\.count) == [1])
        #expect(DiagnosticsLog.shared.kinds(about: name) == Array(repeating: .finishedTwice, count: 7))
        finishLater.drop()
    }

    @Test func cancelRacingFinish_observersHearFinishOnceAndLast() {
        let queue = AsyncOperationQueue()
        for _ in 0..<100 {
            // Given an executing operation
            let finishLater = HeldCallback<Void>()
            let observer = EventLogObserver()
            let operation = ClosureOperation { operation in
                finishLater.hold { _ in operation.finish(with: StubError("finish")) }
            }
            operation.addObserver(observer)
            queue.addOperation(operation)
            #expect(finishLater.waitUntilHeld())

            // When it is cancelled on one thread while it finishes on another
            let finished = Signal()
            DispatchQueue.global().async {
                finishLater.call(())
                finished.signal()
            }
            operation.cancel(with: StubError("cancel"))
            #expect(finished.wait())

            // Then observers heard finish exactly once, last, with the errors it ended with
            #expect(waitUntilFinished([operation]))
            let log = observer.log.all
            #expect(log == ["didStart", "didCancel", "didFinish"] || log == ["didStart", "didFinish"])
            #expect(observer.finishedErrors.all.map(\.asStubErrors) == [operation.errors.asStubErrors])
            finishLater.drop()
        }
    }

    @Test func finishTwiceAfterCancel_isNotReported() {
        // Given an operation that is cancelled while executing and then finishes twice
        let name = uniqueName("cancelled-finish-twice")
        let operation = ClosureOperation(name: name) { operation in
            operation.cancel()
            operation.finish()
            operation.finish(with: StubError())
        }

        // When it runs
        AsyncOperationQueue().addOperation(operation)

        // Then the extra finish changes nothing and is not reported
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.isEmpty)
        #expect(DiagnosticsLog.shared.kinds(about: name).isEmpty)
    }

    @Test func finishWithError_makesOperationFailed() {
        // Given an operation that finishes with an error
        let error = StubError()
        let operation = ClosureOperation { $0.finish(with: error) }

        // When it runs
        AsyncOperationQueue().addOperation(operation)

        // Then it is failed, with that error
        #expect(waitUntilFinished([operation]))
        #expect(operation.isFailed)
        #expect(operation.errors.asStubErrors == [error])
    }

    @Test func finishWithoutError_leavesOperationNotFailed() {
        let operation = ClosureOperation { $0.finish() }

        AsyncOperationQueue().addOperation(operation)

        #expect(waitUntilFinished([operation]))
        #expect(!operation.isFailed)
        #expect(operation.errors.isEmpty)
    }

    // MARK: - Cancelling

    @Test func cancelBeforeEnqueue_finishesWithoutExecuting() {
        // Given an operation cancelled with an error before it is on a queue
        let executed = Counter()
        let error = StubError()
        let observer = EventLogObserver()
        let operation = ClosureOperation { operation in
            executed.increment()
            operation.finish()
        }
        operation.addObserver(observer)
        operation.cancel(with: error)

        // When it is added to a queue
        AsyncOperationQueue().addOperation(operation)

        // Then it finishes without executing, with the error
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 0)
        #expect(operation.isCancelled)
        #expect(operation.errors.asStubErrors == [error])
        #expect(observer.log.all == ["didCancel", "didFinish"])
        #expect(observer.finishedErrors.all.map(\.asStubErrors) == [[error]])
    }

    @Test func cancelWhileWaitingForDependency_finishesWithoutExecuting() {
        // Given an operation on a queue, waiting for a dependency that does not finish yet
        let gate = HeldCallback<(any Error)?>()
        let dependency = AsyncBlockOperation { finish in gate.hold(finish) }
        let executed = Counter()
        let operation = ClosureOperation { operation in
            executed.increment()
            operation.finish()
        }
        operation.addDependency(dependency)
        AsyncOperationQueue().addOperations([dependency, operation], waitUntilFinished: false)
        #expect(gate.waitUntilHeld())

        // When it is cancelled with an error
        let error = StubError()
        operation.cancel(with: error)

        // Then it finishes without waiting for the dependency and without executing
        #expect(waitUntilFinished([operation]))
        #expect(!dependency.isFinished)
        #expect(operation.isCancelled)
        #expect(operation.errors.asStubErrors == [error])
        gate.call(nil)
        #expect(waitUntilFinished([dependency]))
        #expect(executed.current == 0)
    }

    @Test func cancelOnSuspendedQueue_finishesWithoutExecutingOnceResumed() {
        // Given an operation handed to a suspended queue
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        let executed = Counter()
        let operation = ClosureOperation { operation in
            executed.increment()
            operation.finish()
        }
        queue.addOperation(operation)

        // When it is cancelled before the queue starts it, and the queue resumes
        let error = StubError()
        operation.cancel(with: error)
        queue.isSuspended = false

        // Then it finishes without executing, with the error
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 0)
        #expect(operation.errors.asStubErrors == [error])
    }

    @Test func cancelDuringExecution_isCooperativeForSubclasses() {
        // Given a subclass that executes until it is told to finish, and then reports whether it
        // noticed the cancellation
        let stoppedEarly = StubError("stopped early")
        let finishLater = HeldCallback<Void>()
        let operation = ClosureOperation { operation in
            finishLater.hold { _ in operation.finish(with: operation.isCancelled ? stoppedEarly : nil) }
        }
        AsyncOperationQueue().addOperation(operation)
        #expect(finishLater.waitUntilHeld())

        // When it is cancelled while executing
        let cancellation = StubError("cancelled")
        operation.cancel(with: cancellation)

        // Then it is cancelled but keeps executing: execute() decides when to finish
        #expect(operation.isCancelled)
        #expect(operation.isExecuting)
        #expect(!operation.isFinished)
        finishLater.call(())
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.asStubErrors == [cancellation, stoppedEarly])
        finishLater.drop()
    }

    @Test func cancelAfterFinishing_changesNothing() {
        let observer = EventLogObserver()
        let operation = ClosureOperation { $0.finish() }
        operation.addObserver(observer)
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntilFinished([operation]))

        operation.cancel(with: StubError())

        #expect(!operation.isCancelled)
        #expect(operation.errors.isEmpty)
        #expect(observer.log.all == ["didStart", "didFinish"])
    }

    // MARK: - Observers

    @Test func observers_hearStartOnceBeforeExecuteAndFinishOnceLastWithFinalErrors() {
        // Given an operation with two observers sharing a log with execute()
        let log = Recorder<String>()
        let error = StubError()
        let first = EventLogObserver(log: log)
        let second = EventLogObserver()
        let operation = ClosureOperation { operation in
            log.append("execute")
            operation.finish(with: error)
        }
        operation.addObserver(first)
        operation.addObserver(second)

        // When it runs
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntilFinished([operation]))

        // Then each observer heard start once before execute, and finish once, last, with the errors
        #expect(log.all == ["didStart", "execute", "didFinish"])
        #expect(second.log.all == ["didStart", "didFinish"])
        #expect(first.finishedErrors.all.map(\.asStubErrors) == [[error]])
        #expect(second.finishedErrors.all.map(\.asStubErrors) == [[error]])
    }

    @Test func observers_hearFinishWithErrorsFromCancelAndFinish() {
        // Given an executing operation
        let finishLater = HeldCallback<Void>()
        let finishError = StubError("finish")
        let observer = EventLogObserver()
        let operation = ClosureOperation { operation in
            finishLater.hold { _ in operation.finish(with: finishError) }
        }
        operation.addObserver(observer)
        AsyncOperationQueue().addOperation(operation)
        #expect(finishLater.waitUntilHeld())

        // When it is cancelled with an error, then finishes with another
        let cancelError = StubError("cancel")
        operation.cancel(with: cancelError)
        finishLater.call(())

        // Then operationDidFinish carries both, as final as `errors`
        #expect(waitUntilFinished([operation]))
        #expect(observer.finishedErrors.all.map(\.asStubErrors) == [[cancelError, finishError]])
        #expect(operation.errors.asStubErrors == [cancelError, finishError])
        finishLater.drop()
    }

    @Test func severalCancels_tellObserversOnce() {
        // Given an executing operation
        let log = Recorder<String>()
        let finishLater = HeldCallback<Void>()
        let operation = ClosureOperation { operation in
            log.append("execute")
            finishLater.hold { _ in operation.finish() }
        }
        operation.addObserver(EventLogObserver(log: log))
        AsyncOperationQueue().addOperation(operation)
        #expect(finishLater.waitUntilHeld())

        // When it is cancelled several times, then finishes
        let error = StubError()
        operation.cancel()
        operation.cancel(with: error)
        operation.cancel()
        finishLater.call(())

        // Then observers heard one cancel; the error of a later cancel is still kept
        #expect(waitUntilFinished([operation]))
        #expect(log.all == ["didStart", "execute", "didCancel", "didFinish"])
        #expect(operation.errors.asStubErrors == [error])
        finishLater.drop()
    }

    @Test func concurrentCancels_tellObserversOnceAndFinishOnce() {
        // Given an operation waiting on its queue for a dependency
        let gate = HeldCallback<(any Error)?>()
        let dependency = AsyncBlockOperation { finish in gate.hold(finish) }
        let observer = EventLogObserver()
        let operation = ClosureOperation { $0.finish() }
        operation.addObserver(observer)
        operation.addDependency(dependency)
        AsyncOperationQueue().addOperations([dependency, operation], waitUntilFinished: false)
        #expect(gate.waitUntilHeld())

        // When many threads cancel it at once
        DispatchQueue.concurrentPerform(iterations: 8) { _ in operation.cancel() }

        // Then observers heard one cancel and one finish, and it never started
        #expect(waitUntilFinished([operation]))
        #expect(observer.log.all == ["didCancel", "didFinish"])
        gate.call(nil)
        #expect(waitUntilFinished([dependency]))
    }

    // MARK: - Producing

    @Test func produce_addsOperationToSameQueueAndTellsObservers() {
        // Given an operation that produces another while it executes
        let queue = AsyncOperationQueue()
        let delegate = QueueEventLog()
        queue.delegate = delegate
        let producedName = uniqueName("produced")
        let ran = Counter()
        let produced = AsyncBlockOperation { ran.increment() }
        produced.name = producedName
        let observer = EventLogObserver()
        let operation = ClosureOperation { operation in
            operation.produce(produced)
            operation.finish()
        }
        operation.addObserver(observer)

        // When it runs
        queue.addOperation(operation)

        // Then the produced operation ran on the same queue, and observers heard of it
        #expect(waitUntilFinished([operation, produced]))
        #expect(ran.current == 1)
        #expect(waitUntil { delegate.events(about: producedName) == ["willAdd", "didStart", "didFinish"] })
        #expect(observer.log.all == ["didStart", "didProduce", "didFinish"])
        #expect(observer.produced.all.count == 1)
        #expect(observer.produced.all.first === produced)
        withExtendedLifetime(delegate) {}
    }

    @Test func produceOffQueue_reportsDiagnosticAndStillRunsProducedOperation() {
        // Given an operation that is on no queue
        let name = uniqueName("orphan")
        let observer = EventLogObserver()
        let operation = ClosureOperation(name: name) { $0.finish() }
        operation.addObserver(observer)
        let ran = Counter()
        let produced = AsyncBlockOperation { ran.increment() }

        // When it produces an operation
        operation.produce(produced)

        // Then that is reported, and the produced operation still runs
        #expect(waitUntilFinished([produced]))
        #expect(ran.current == 1)
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.producedWithoutQueue])
        #expect(observer.log.all == ["didProduce"])
        #expect(observer.produced.all.first === produced)
    }

    // MARK: - Starting by hand

    @Test func startByHandWithoutQueue_evaluatesConditionsThenExecutes() {
        // Given an operation on no queue, with a condition and an observer
        let log = Recorder<String>()
        let operation = ClosureOperation { operation in
            log.append("execute")
            operation.finish()
        }
        operation.addCondition(StubCondition(name: "Recorded") { _, completion in
            log.append("evaluate")
            completion(.satisfied)
        })
        operation.addObserver(EventLogObserver(log: log))

        // When it is started by hand
        operation.start()

        // Then it evaluates its condition, then executes
        #expect(waitUntilFinished([operation]))
        #expect(log.all == ["evaluate", "didStart", "execute", "didFinish"])
        #expect(operation.errors.isEmpty)
    }

    @Test func startByHandWithFailingCondition_finishesWithoutExecuting() {
        // Given an operation on no queue whose condition fails
        let executed = Counter()
        let error = StubError()
        let operation = ClosureOperation { operation in
            executed.increment()
            operation.finish()
        }
        operation.addCondition(StubCondition.failing(error))

        // When it is started by hand
        operation.start()

        // Then it finishes with the condition's error, without executing
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 0)
        #expect(operation.errors.asStubErrors == [error])
    }

    @Test func startByHandBeforeDependenciesFinished_failsWithoutExecuting() {
        // Given an operation on no queue with a dependency that has not run
        let name = uniqueName("started-early")
        let executed = Counter()
        let operation = ClosureOperation(name: name) { operation in
            executed.increment()
            operation.finish()
        }
        operation.addDependency(AsyncBlockOperation {})

        // When it is started by hand
        operation.start()

        // Then it finishes with startedBeforeDependenciesFinished, without executing
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 0)
        #expect(operation.errors.asOperationErrors == [.startedBeforeDependenciesFinished(operation: name)])
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.startedOutOfTurn])
    }

    @Test func startByHandWhileAQueueManagesIt_isReportedAndIgnored() {
        // Given an operation waiting on a queue for its dependency
        let name = uniqueName("started-out-of-turn")
        let gate = HeldCallback<(any Error)?>()
        let dependency = AsyncBlockOperation { finish in gate.hold(finish) }
        let executed = Counter()
        let operation = ClosureOperation(name: name) { operation in
            executed.increment()
            operation.finish()
        }
        operation.addDependency(dependency)
        AsyncOperationQueue().addOperations([dependency, operation], waitUntilFinished: false)
        #expect(gate.waitUntilHeld())

        // When it is started by hand
        operation.start()

        // Then that is reported and ignored: it still waits, and executes once after its dependency
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.startedOutOfTurn])
        #expect(!operation.isFinished)
        #expect(executed.current == 0)
        gate.call(nil)
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 1)
        #expect(operation.errors.isEmpty)
    }

    // MARK: - Foundation's flags

    @Test func flags_followTheLifecycleOnAQueue() {
        // Given a new operation with a dependency that waits for the test
        let gate = HeldCallback<(any Error)?>()
        let dependency = AsyncBlockOperation { finish in gate.hold(finish) }
        let flagsInExecute = Recorder<[Bool]>()
        let operation = ClosureOperation { operation in
            flagsInExecute.append([operation.isReady, operation.isExecuting, operation.isFinished])
            operation.finish()
        }
        #expect(operation.isReady)
        #expect(!operation.isExecuting)
        #expect(!operation.isFinished)

        // When it waits on a queue for its dependency
        operation.addDependency(dependency)
        AsyncOperationQueue().addOperations([dependency, operation], waitUntilFinished: false)
        #expect(gate.waitUntilHeld())

        // Then it is neither ready nor executing
        #expect(!operation.isReady)
        #expect(!operation.isExecuting)
        #expect(!operation.isFinished)

        // When the dependency finishes, it is ready and executing in execute(), then finished
        gate.call(nil)
        #expect(waitUntilFinished([operation]))
        #expect(flagsInExecute.all == [[true, true, false]])
        #expect(operation.isReady)
        #expect(!operation.isExecuting)
        #expect(operation.isFinished)
    }

    @Test func readinessOffQueue_followsDependencies() {
        // Given an operation on no queue with an unfinished dependency
        let dependency = AsyncBlockOperation {}
        let operation = ClosureOperation { $0.finish() }
        operation.addDependency(dependency)
        #expect(!operation.isReady)

        // When the dependency finishes
        AsyncOperationQueue().addOperation(dependency)
        #expect(waitUntilFinished([dependency]))

        // Then the operation becomes ready
        #expect(waitUntil { operation.isReady })
    }

    @Test func cancelledOperationWithUnfinishedDependency_isReady() {
        let operation = ClosureOperation { $0.finish() }
        operation.addDependency(AsyncBlockOperation {})

        operation.cancel()

        #expect(operation.isReady)
        #expect(!operation.isFinished)
    }

    // MARK: - Dependencies and late configuration

    @Test func dependencies_listedInOrderUntilFinishedThenEmpty() {
        // Given an operation with two dependencies
        let first = AsyncBlockOperation {}
        let second = BlockOperation {}
        let operation = ClosureOperation { $0.finish() }
        operation.addDependency(first)
        operation.addDependency(second)
        operation.addDependency(first)
        #expect(operation.dependencies.count == 2)
        #expect(operation.dependencies.first === first)
        #expect(operation.dependencies.last === second)

        // When everything runs
        AsyncOperationQueue().addOperations([operation, second, first], waitUntilFinished: false)

        // Then the finished operation no longer lists its dependencies
        #expect(waitUntilFinished([operation]))
        #expect(first.isFinished)
        #expect(second.isFinished)
        #expect(operation.dependencies.isEmpty)
    }

    @Test func addDependencyWhileWaiting_isAlsoAwaited() {
        // Given an operation waiting on a queue for a first dependency
        let log = Recorder<String>()
        let firstGate = HeldCallback<(any Error)?>()
        let secondGate = HeldCallback<(any Error)?>()
        let first = AsyncBlockOperation { finish in firstGate.hold(finish) }
        let second = AsyncBlockOperation { finish in secondGate.hold(finish) }
        let operation = ClosureOperation { operation in
            log.append("execute")
            operation.finish()
        }
        operation.addDependency(first)
        let queue = AsyncOperationQueue()
        queue.addOperations([first, operation], waitUntilFinished: false)
        #expect(firstGate.waitUntilHeld())

        // When it gets a second dependency, and the first finishes
        operation.addDependency(second)
        queue.addOperation(second)
        #expect(secondGate.waitUntilHeld())
        firstGate.call(nil)
        #expect(waitUntilFinished([first]))

        // Then it still waits for the second
        #expect(log.all.isEmpty)
        secondGate.call(nil)
        #expect(waitUntilFinished([operation]))
        #expect(log.all == ["execute"])
    }

    @Test func addConditionWhileWaiting_isEvaluatedWithItsDependency() {
        // Given an operation waiting on a queue for a dependency
        let log = Recorder<String>()
        let gate = HeldCallback<(any Error)?>()
        let dependency = AsyncBlockOperation { finish in gate.hold(finish) }
        let operation = ClosureOperation { operation in
            log.append("execute")
            operation.finish()
        }
        operation.addDependency(dependency)
        let queue = AsyncOperationQueue()
        queue.addOperations([dependency, operation], waitUntilFinished: false)
        #expect(gate.waitUntilHeld())

        // When it gets a condition that brings its own dependency, and the first dependency finishes
        operation.addCondition(StubCondition(name: "Late", dependency: { _ in
            AsyncBlockOperation { log.append("condition dependency") }
        }) { _, completion in
            log.append("evaluate")
            completion(.satisfied)
        })
        gate.call(nil)

        // Then the condition's dependency runs, then the condition is evaluated, then it executes
        #expect(waitUntilFinished([operation]))
        #expect(log.all == ["condition dependency", "evaluate", "execute"])
    }

    @Test func configuringWhileExecuting_isReportedAndIgnored() {
        // Given an operation that adds a dependency and a failing condition while it executes
        let name = uniqueName("late-config")
        let lateDependency = AsyncBlockOperation {}
        let operation = ClosureOperation(name: name) { operation in
            operation.addDependency(lateDependency)
            operation.addCondition(StubCondition.failing(StubError()))
            operation.finish()
        }

        // When it runs
        AsyncOperationQueue().addOperation(operation)

        // Then both were reported as too late and had no effect
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.isEmpty)
        #expect(!lateDependency.isFinished)
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.configuredTooLate, .configuredTooLate])
    }

    @Test func configuringWhileConditionsAreEvaluated_isReportedAndIgnored() {
        // Given a condition that adds a dependency and a failing condition while it is evaluated
        let name = uniqueName("config-in-evaluation")
        let lateDependency = AsyncBlockOperation {}
        let executed = Counter()
        let operation = ClosureOperation(name: name) { operation in
            executed.increment()
            operation.finish()
        }
        operation.addCondition(StubCondition(name: "Reconfiguring") { operation, completion in
            operation.addDependency(lateDependency)
            operation.addCondition(StubCondition.failing(StubError()))
            completion(.satisfied)
        })

        // When it runs
        AsyncOperationQueue().addOperation(operation)

        // Then it executes as if nothing had been added, and both additions were reported
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 1)
        #expect(operation.errors.isEmpty)
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.configuredTooLate, .configuredTooLate])
    }

    @Test func configuringAfterFinishing_isReportedAndIgnored() {
        // Given a finished operation
        let name = uniqueName("config-after-finish")
        let operation = ClosureOperation(name: name) { $0.finish() }
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntilFinished([operation]))

        // When a dependency, a condition and an observer are added
        operation.addDependency(AsyncBlockOperation {})
        operation.addCondition(StubCondition.failing(StubError()))
        let observer = EventLogObserver()
        operation.addObserver(observer)

        // Then each was reported as too late and ignored
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.configuredTooLate, .configuredTooLate, .configuredTooLate])
        #expect(operation.dependencies.isEmpty)
        #expect(operation.errors.isEmpty)
        #expect(observer.log.all.isEmpty)
    }

    // MARK: - On a plain Foundation queue

    @Test func onPlainQueue_runsAfterAsyncOperationDependency() {
        // Given an operation on a plain queue whose AsyncOperation dependency sits on a held queue
        let log = Recorder<String>()
        let dependency = AsyncBlockOperation { log.append("dependency") }
        let operation = ClosureOperation { operation in
            log.append("operation")
            operation.finish()
        }
        operation.addDependency(dependency)
        runOnPlainQueue(operation, after: dependency, log: log)
    }

    @Test func onPlainQueue_runsAfterBlockOperationDependency() {
        // Given an operation on a plain queue whose BlockOperation dependency sits on a held queue
        let log = Recorder<String>()
        let dependency = BlockOperation { log.append("dependency") }
        let operation = ClosureOperation { operation in
            log.append("operation")
            operation.finish()
        }
        operation.addDependency(dependency)
        runOnPlainQueue(operation, after: dependency, log: log)
    }

    @Test func onPlainQueue_evaluatesConditions() {
        // Given an operation whose condition fails
        let error = StubError()
        let executed = Counter()
        let operation = ClosureOperation { operation in
            executed.increment()
            operation.finish()
        }
        operation.addCondition(StubCondition.failing(error))

        // When a plain queue runs it
        OperationQueue().addOperation(operation)

        // Then it finishes with the condition's error, without executing
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 0)
        #expect(operation.errors.asStubErrors == [error])
    }

    @Test func onPlainQueue_cancelWhileWaitingForDependency_finishesWithoutExecuting() {
        // Given an operation on a plain queue, waiting for a dependency on a suspended queue
        let dependency = BlockOperation {}
        let dependencyQueue = OperationQueue()
        dependencyQueue.isSuspended = true
        dependencyQueue.addOperation(dependency)
        let executed = Counter()
        let operation = ClosureOperation { operation in
            executed.increment()
            operation.finish()
        }
        operation.addDependency(dependency)
        OperationQueue().addOperation(operation)

        // When it is cancelled
        operation.cancel()

        // Then it finishes without executing, and without waiting for the dependency
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 0)
        #expect(!dependency.isFinished)
        dependencyQueue.isSuspended = false
        #expect(waitUntilFinished([dependency]))
    }

    @Test func onPlainQueue_produceAddsToThatQueue() {
        // Given an operation on a plain queue that produces another while it executes
        let plainQueue = OperationQueue()
        let ranOnPlainQueue = Recorder<Bool>()
        let produced = BlockOperation { ranOnPlainQueue.append(OperationQueue.current === plainQueue) }
        let name = uniqueName("produces-on-plain-queue")
        let operation = ClosureOperation(name: name) { operation in
            operation.produce(produced)
            operation.finish()
        }

        // When it runs
        plainQueue.addOperation(operation)

        // Then the produced operation ran on the same plain queue, and nothing was reported
        #expect(waitUntilFinished([operation, produced]))
        #expect(ranOnPlainQueue.all == [true])
        #expect(DiagnosticsLog.shared.kinds(about: name).isEmpty)
    }

    /// Two conditions that bring one dependency, on an operation a plain queue starts: the
    /// dependency goes to that queue once (Foundation traps on a second add of an operation it
    /// has not started yet).
    @Test(arguments: [false, true])
    func onPlainQueue_aDependencyTwoConditionsBring_isAddedOnce(plainDependency: Bool) {
        // Given an operation with two conditions that bring the same dependency
        let log = Recorder<String>()
        let dependency = loggedDependency(plain: plainDependency, log: log)
        let operation = AsyncBlockOperation { log.append("operation") }
        for _ in 0..<2 {
            operation.addCondition(StubCondition.satisfied(bringing: dependency))
        }

        // When a plain queue runs it
        let plainQueue = OperationQueue()
        plainQueue.addOperation(operation)

        // Then the dependency runs once, on that queue, before the operation
        #expect(waitUntilFinished([operation, dependency]))
        #expect(log.all == ["dependency", "operation"])
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    /// A condition added while the operation waits, bringing the dependency an earlier condition
    /// brought, on an operation a plain queue started: that queue holds the dependency and has
    /// not started it (it waits for a blocker), so it cannot be told apart from an unused one,
    /// and a second add would make Foundation trap. The operation remembers what its conditions
    /// brought, and leaves it there.
    @Test(arguments: [false, true])
    func onPlainQueue_aConditionAddedWhileWaiting_bringingAnEarlierOnesDependency_leavesIt(plainDependency: Bool) {
        // Given an operation a plain queue started, waiting for a dependency its condition
        // brought, which that queue holds but cannot start yet
        let log = Recorder<String>()
        let (operation, dependency, blocker, plainQueue) = waitingOnPlainQueueForAHeldDependency(plainDependency: plainDependency, log: log)

        // When a condition bringing the same dependency is added, and the blocker finishes
        operation.addCondition(StubCondition.satisfied(bringing: dependency))
        plainQueue.addOperation(blocker)

        // Then the dependency runs once, before the operation, and nothing is reported
        #expect(waitUntilFinished([operation, dependency]))
        #expect(log.all == ["dependency", "operation"])
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    /// A condition whose `dependency(for:)` adds another condition bringing the same dependency,
    /// on an operation a plain queue starts: the condition added during the add is attached
    /// before the add ends, and leaves the dependency as the first attached it.
    @Test(arguments: [false, true])
    func onPlainQueue_aConditionAddedDuringTheAdd_bringingTheSameDependency_leavesIt(plainDependency: Bool) {
        // Given an operation whose condition, as it brings a dependency, adds a second condition
        // that brings it too; the dependency waits for a blocker, so the plain queue holds it
        // unstarted when the second condition brings it
        let log = Recorder<String>()
        let (dependency, blocker) = blockedLoggedDependency(plain: plainDependency, log: log)
        let operation = AsyncBlockOperation { log.append("operation") }
        operation.addCondition(StubCondition(name: "AddsASecond", dependency: { operation in
            operation.addCondition(StubCondition.satisfied(bringing: dependency))
            return dependency
        }) { _, completion in completion(.satisfied) })

        // When a plain queue runs it, and then the blocker
        runOnPlainQueue(operation, thenUnblocking: blocker)

        // Then the dependency runs once, before the operation
        #expect(waitUntilFinished([operation, dependency]))
        #expect(log.all == ["dependency", "operation"])
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    /// A condition added while the operation waits, which cancels the operation as it brings
    /// the dependency an earlier condition brought: the operation finishes before that
    /// dependency is attached, and still leaves it where the plain queue holds it (a second add
    /// would make Foundation trap).
    @Test(arguments: [false, true])
    func onPlainQueue_aConditionThatCancelsAsItBringsAnEarlierOnesDependency_leavesIt(plainDependency: Bool) {
        // Given an operation a plain queue started, waiting for a dependency its condition
        // brought, which that queue holds but cannot start yet
        let log = Recorder<String>()
        let (operation, dependency, blocker, plainQueue) = waitingOnPlainQueueForAHeldDependency(plainDependency: plainDependency, log: log)

        // When a condition is added that cancels the operation, then brings the same dependency
        operation.addCondition(StubCondition(name: "Cancels", dependency: { operation in
            operation.cancel()
            return dependency
        }) { _, completion in completion(.satisfied) })
        plainQueue.addOperation(blocker)

        // Then the operation finishes cancelled, and the dependency runs once
        #expect(waitUntilFinished([operation, dependency]))
        #expect(operation.isCancelled)
        #expect(log.all == ["dependency"])
    }

    /// A condition that finishes the operation during its add before anything was brought, then
    /// brings a dependency, which a second condition brings too: what the first brought after the
    /// finish is still recorded, so the second leaves it where the plain queue holds it.
    @Test(arguments: [false, true])
    func onPlainQueue_aConditionThatFinishesDuringTheAddThenBrings_leavesItToTheNext(plainDependency: Bool) {
        // Given an operation whose first condition finishes it, then brings a dependency that
        // waits for a blocker, and whose second condition brings the same dependency
        let log = Recorder<String>()
        let (dependency, blocker) = blockedLoggedDependency(plain: plainDependency, log: log)
        let operation = AsyncBlockOperation { log.append("operation") }
        operation.addCondition(StubCondition(name: "Finishes", dependency: { operation in
            operation.finish()
            return dependency
        }) { _, completion in completion(.satisfied) })
        operation.addCondition(StubCondition.satisfied(bringing: dependency))

        // When a plain queue runs it, and then the blocker
        runOnPlainQueue(operation, thenUnblocking: blocker)

        // Then the operation finishes without executing, and the dependency runs once
        #expect(waitUntilFinished([operation, dependency]))
        #expect(log.all == ["dependency"])
    }

    /// A condition that finishes the operation during its add, as it brings the dependency an
    /// earlier condition brought: the operation finishes before that dependency is attached, and
    /// still leaves it where the plain queue holds it.
    @Test(arguments: [false, true])
    func onPlainQueue_aConditionThatFinishesDuringTheAdd_bringingAnEarlierOnesDependency_leavesIt(plainDependency: Bool) {
        // Given an operation whose second condition finishes it, then brings the dependency the
        // first brought, which waits for a blocker
        let log = Recorder<String>()
        let (dependency, blocker) = blockedLoggedDependency(plain: plainDependency, log: log)
        let operation = AsyncBlockOperation { log.append("operation") }
        operation.addCondition(StubCondition.satisfied(bringing: dependency))
        operation.addCondition(StubCondition(name: "Finishes", dependency: { operation in
            operation.finish()
            return dependency
        }) { _, completion in completion(.satisfied) })

        // When a plain queue runs it, and then the blocker
        runOnPlainQueue(operation, thenUnblocking: blocker)

        // Then the operation finishes without executing, and the dependency runs once
        #expect(waitUntilFinished([operation, dependency]))
        #expect(log.all == ["dependency"])
    }

    /// A dependency that logs "dependency" as it runs: a `BlockOperation`, or an
    /// `AsyncBlockOperation` if `plain` is false.
    private func loggedDependency(plain: Bool, log: Recorder<String>) -> Operation {
        plain ? BlockOperation { log.append("dependency") } : AsyncBlockOperation { log.append("dependency") }
    }

    /// A logged dependency (`loggedDependency(plain:log:)`) that waits for `blocker`, on no queue yet.
    private func blockedLoggedDependency(plain: Bool, log: Recorder<String>) -> (dependency: Operation, blocker: BlockOperation) {
        let blocker = BlockOperation {}
        let dependency = loggedDependency(plain: plain, log: log)
        dependency.addDependency(blocker)
        return (dependency, blocker)
    }

    /// Adds `operation` to a new plain queue, then `blocker` after it.
    private func runOnPlainQueue(_ operation: AsyncOperation, thenUnblocking blocker: BlockOperation) {
        let plainQueue = OperationQueue()
        plainQueue.addOperation(operation)
        plainQueue.addOperation(blocker)
    }

    /// An operation that logs "operation", started by a plain queue and waiting for a dependency
    /// (logging "dependency") that its condition brought, which that queue holds but cannot
    /// start until `blocker`, not yet on any queue, finishes.
    private func waitingOnPlainQueueForAHeldDependency(plainDependency: Bool, log: Recorder<String>)
        -> (operation: AsyncBlockOperation, dependency: Operation, blocker: BlockOperation, plainQueue: OperationQueue) {
        let (dependency, blocker) = blockedLoggedDependency(plain: plainDependency, log: log)
        let operation = AsyncBlockOperation { log.append("operation") }
        operation.addCondition(StubCondition.satisfied(bringing: dependency))
        let plainQueue = OperationQueue()
        plainQueue.addOperation(operation)
        #expect(waitUntil { operation.snapshot().state == .waitingForDependencies })
        return (operation, dependency, blocker, plainQueue)
    }

    /// Adds `operation` to a serial plain queue, followed by a sentinel that can only run first if
    /// `operation` waits; then lets `dependency` run, and checks `operation` ran after it.
    private func runOnPlainQueue(_ operation: AsyncOperation, after dependency: Operation, log: Recorder<String>) {
        let plainQueue = OperationQueue()
        plainQueue.maxConcurrentOperationCount = 1
        let dependencyQueue = OperationQueue()
        dependencyQueue.isSuspended = true
        dependencyQueue.addOperation(dependency)
        let sentinel = BlockOperation {}

        // When the operation is added to the plain queue before a sentinel
        plainQueue.addOperations([operation, sentinel], waitUntilFinished: false)

        // Then it waits (the sentinel overtakes it) until its dependency finishes, and runs after it
        #expect(waitUntilFinished([sentinel]))
        #expect(log.all.isEmpty)
        dependencyQueue.isSuspended = false
        #expect(waitUntilFinished([operation]))
        #expect(log.all == ["dependency", "operation"])
        #expect(operation.errors.isEmpty)
    }
}

/// A subclass that overrides only `main()`, as a synchronous operation would.
private final class MainOverridingOperation: AsyncOperation, @unchecked Sendable {
    // @unchecked Sendable: `log` is thread-safe and immutable; the rest is `AsyncOperation`'s.
    private let log: Recorder<String>

    init(log: Recorder<String>) {
        self.log = log
        super.init()
    }

    override func main() {
        log.append("main")
    }
}
