import Foundation
import Operations
import Testing
import TestSupport

/// `AsyncOperationQueue`: adding, dependencies, conditions, its delegate, Foundation's queue API
/// counting operations still held back, misuse, cycles and releasing finished operations.
@Suite struct AsyncOperationQueueTests {
    init() {
        _ = DiagnosticsLog.shared // capture diagnostics before any test reports one
    }

    /// Foundation's ways of adding one operation.
    enum AddMethod: String, CaseIterable, Sendable {
        case addOperation
        case addOperationsWithoutWaiting
        case addOperationsWaiting

        func add(_ operation: Operation, to queue: AsyncOperationQueue) {
            switch self {
            case .addOperation:
                queue.addOperation(operation)
            case .addOperationsWithoutWaiting:
                queue.addOperations([operation], waitUntilFinished: false)
            case .addOperationsWaiting:
                queue.addOperations([operation], waitUntilFinished: true)
            }
        }
    }

    // MARK: - Adding

    @Test(arguments: AddMethod.allCases)
    func everyAddMethod_evaluatesConditionsAndTellsObservers(method: AddMethod) {
        // Given an operation with a condition and an observer
        let log = Recorder<String>()
        let operation = ClosureOperation { operation in
            log.append("execute")
            operation.finish()
        }
        operation.addCondition(recordingCondition(log, answer: .satisfied))
        operation.addObserver(EventLogObserver(log: log))

        // When it is added
        method.add(operation, to: AsyncOperationQueue())

        // Then its condition was evaluated before it executed, and its observer heard everything
        #expect(waitUntilFinished([operation]))
        #expect(log.all == ["evaluate", "didStart", "execute", "didFinish"])
    }

    @Test(arguments: AddMethod.allCases)
    func everyAddMethod_honoursAFailingCondition(method: AddMethod) {
        // Given an operation whose condition fails
        let error = StubError()
        let log = Recorder<String>()
        let operation = ClosureOperation { operation in
            log.append("execute")
            operation.finish()
        }
        operation.addCondition(recordingCondition(log, answer: .failed(error)))
        operation.addObserver(EventLogObserver(log: log))

        // When it is added
        method.add(operation, to: AsyncOperationQueue())

        // Then it finished with the condition's error, without executing
        #expect(waitUntilFinished([operation]))
        #expect(log.all == ["evaluate", "didFinish"])
        #expect(operation.errors.asStubErrors == [error])
    }

    @Test func addOperationsWaiting_returnsAfterOperationsStillWaitingHaveFinished() {
        // Given an operation waiting for a dependency and for a condition that answers later
        let dependency = AsyncBlockOperation { finish in
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { finish(nil) }
        }
        let operation = ClosureOperation { $0.finish() }
        operation.addDependency(dependency)
        operation.addCondition(StubCondition(name: "Later") { _, completion in
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { completion(.satisfied) }
        })

        // When both are added, waiting
        AsyncOperationQueue().addOperations([operation, dependency], waitUntilFinished: true)

        // Then both had finished when the call returned
        #expect(dependency.isFinished)
        #expect(operation.isFinished)
        #expect(operation.errors.isEmpty)
    }

    @Test func addBlock_runsTheBlockAndTellsTheDelegate() {
        // Given a queue with a delegate
        let queue = AsyncOperationQueue()
        let delegate = QueueEventLog()
        queue.delegate = delegate
        let ran = Signal()

        // When a block is added
        queue.addOperation { ran.signal() }

        // Then it runs, as a plain operation the delegate heard being added
        #expect(ran.wait())
        queue.waitUntilAllOperationsAreFinished()
        #expect(delegate.events.all == ["willAdd ?"])
    }

    @Test func plainBlockOperations_runAsUsual() {
        // Given plain operations, one depending on another
        let log = Recorder<String>()
        let first = BlockOperation { log.append("first") }
        let second = BlockOperation { log.append("second") }
        second.addDependency(first)

        // When they are added, waiting
        AsyncOperationQueue().addOperations([second, first], waitUntilFinished: true)

        // Then they ran as Foundation runs them
        #expect(first.isFinished)
        #expect(second.isFinished)
        #expect(log.all == ["first", "second"])
    }

    // MARK: - Dependencies between async and plain operations

    @Test func asyncOperation_waitsForAPlainDependencyOnAnotherQueue() {
        // Given an operation whose plain dependency sits on a suspended plain queue
        let log = Recorder<String>()
        let dependency = BlockOperation { log.append("plain") }
        let holdingQueue = OperationQueue()
        holdingQueue.isSuspended = true
        holdingQueue.addOperation(dependency)
        let operation = ClosureOperation { operation in
            log.append("async")
            operation.finish()
        }
        operation.addDependency(dependency)
        let queue = AsyncOperationQueue()

        // When it is added, it waits while a later operation runs
        queue.addOperation(operation)
        let sentinel = AsyncBlockOperation {}
        queue.addOperation(sentinel)
        #expect(waitUntilFinished([sentinel]))
        #expect(log.all.isEmpty)

        // Then it runs once the dependency has
        holdingQueue.isSuspended = false
        #expect(waitUntilFinished([operation]))
        #expect(log.all == ["plain", "async"])
    }

    @Test func asyncOperation_waitsForAPlainDependencyAddedAfterIt() {
        // Given an operation whose plain dependency is added to the same queue after it
        let log = Recorder<String>()
        let dependency = BlockOperation { log.append("plain") }
        let operation = ClosureOperation { operation in
            log.append("async")
            operation.finish()
        }
        operation.addDependency(dependency)

        // When both are added
        AsyncOperationQueue().addOperations([operation, dependency], waitUntilFinished: false)

        // Then the operation runs after its dependency
        #expect(waitUntilFinished([operation, dependency]))
        #expect(log.all == ["plain", "async"])
    }

    @Test func plainOperation_waitsForAnExecutingAsyncDependency() {
        // Given a plain operation depending on an AsyncOperation that executes until released
        let log = Recorder<String>()
        let gate = HeldCallback<(any Error)?>()
        let dependency = AsyncBlockOperation { finish in
            log.append("async")
            gate.hold(finish)
        }
        let operation = BlockOperation { log.append("plain") }
        operation.addDependency(dependency)
        let queue = AsyncOperationQueue()

        // When both are added, the plain one first
        queue.addOperations([operation, dependency], waitUntilFinished: false)
        #expect(gate.waitUntilHeld())

        // Then the plain one waits (a later operation overtakes it) until the dependency finishes
        let sentinel = BlockOperation {}
        queue.addOperation(sentinel)
        #expect(waitUntilFinished([sentinel]))
        #expect(log.all == ["async"])
        gate.call(nil)
        #expect(waitUntilFinished([operation]))
        #expect(log.all == ["async", "plain"])
    }

    @Test func plainOperation_waitsForAnAsyncDependencyStillEvaluatingItsCondition() {
        // Given a plain operation depending on an AsyncOperation whose condition has not answered
        let log = Recorder<String>()
        let answer = HeldCallback<ConditionResult>()
        let dependency = AsyncBlockOperation { log.append("async") }
        dependency.addCondition(StubCondition(name: "Held") { _, completion in answer.hold(completion) })
        let operation = BlockOperation { log.append("plain") }
        operation.addDependency(dependency)
        let queue = AsyncOperationQueue()

        // When both are added
        queue.addOperations([operation, dependency], waitUntilFinished: false)
        #expect(answer.waitUntilHeld())

        // Then the plain one waits until the dependency has run
        let sentinel = BlockOperation {}
        queue.addOperation(sentinel)
        #expect(waitUntilFinished([sentinel]))
        #expect(log.all.isEmpty)
        answer.call(.satisfied)
        #expect(waitUntilFinished([operation]))
        #expect(log.all == ["async", "plain"])
    }

    @Test func plainOperation_runsAfterAnAsyncDependencyThatFailedItsCondition() {
        // Given a plain operation depending on an AsyncOperation whose condition fails
        let log = Recorder<String>()
        let dependency = AsyncBlockOperation { log.append("async") }
        dependency.addCondition(StubCondition.failing(StubError()))
        let operation = BlockOperation { log.append("plain") }
        operation.addDependency(dependency)

        // When both are added
        AsyncOperationQueue().addOperations([operation, dependency], waitUntilFinished: false)

        // Then the plain one still runs, as after any finished dependency
        #expect(waitUntilFinished([operation, dependency]))
        #expect(log.all == ["plain"])
        #expect(dependency.isFailed)
    }

    // MARK: - Conditions

    @Test func conditions_areEvaluatedAfterEveryDependencyIncludingTheirOwnAndBeforeExecute() {
        // Given an operation with a dependency, and a condition that brings its own dependency;
        // both dependencies execute until released
        let log = Recorder<String>()
        let dependencyGate = HeldCallback<(any Error)?>()
        let conditionDependencyGate = HeldCallback<(any Error)?>()
        let conditionDependencyName = uniqueName("condition-dependency")
        let dependency = AsyncBlockOperation { finish in dependencyGate.hold(finish) }
        let condition = StubCondition(name: "WithDependency", dependency: { _ in
            let conditionDependency = AsyncBlockOperation { finish in conditionDependencyGate.hold(finish) }
            conditionDependency.name = conditionDependencyName
            return conditionDependency
        }) { _, completion in
            log.append("evaluate")
            completion(.satisfied)
        }
        let operation = ClosureOperation { operation in
            log.append("execute")
            operation.finish()
        }
        operation.addDependency(dependency)
        operation.addCondition(condition)
        let queue = AsyncOperationQueue()
        let delegate = QueueEventLog()
        queue.delegate = delegate

        // When it is added, the condition's dependency runs on the same queue
        queue.addOperations([operation, dependency], waitUntilFinished: false)
        #expect(dependencyGate.waitUntilHeld())
        #expect(conditionDependencyGate.waitUntilHeld())
        #expect(delegate.events(about: conditionDependencyName) == ["willAdd", "didStart"])

        // Then nothing is evaluated while either dependency runs
        dependencyGate.call(nil)
        #expect(waitUntilFinished([dependency]))
        #expect(log.all.isEmpty)
        conditionDependencyGate.call(nil)

        // And the condition is evaluated after both, before execute
        #expect(waitUntilFinished([operation]))
        #expect(log.all == ["evaluate", "execute"])
    }

    /// An operation that waits for nothing known when it is added, and whose conditions name no
    /// category, is given its turn as the queue holds it. A condition's dependency found after
    /// that gives the turn back: here the queue became serial meanwhile, and the dependency, in
    /// line behind that turn, would otherwise wait for ever.
    @Test func conditionDependencyFoundAfterTheTurnWasGiven_getsTheTurnBack() {
        let queue = AsyncOperationQueue()
        let log = Recorder<String>()
        let condition = StubCondition(name: "MakesTheQueueSerial", dependency: { _ in
            queue.maxConcurrentOperationCount = 1
            return AsyncBlockOperation { log.append("dependency") }
        }) { _, completion in
            log.append("evaluate")
            completion(.satisfied)
        }
        let operation = AsyncBlockOperation { log.append("execute") }
        operation.addCondition(condition)

        queue.addOperation(operation)

        #expect(waitUntilFinished([operation]))
        #expect(log.all == ["dependency", "evaluate", "execute"])
        #expect(operation.errors.isEmpty)
    }

    /// A condition added while its operation is being added (here by another condition's
    /// `dependency(for:)`) brings its dependency too, which runs before the conditions are
    /// evaluated.
    @Test func conditionAddedWhileItsOperationIsBeingAdded_bringsItsDependency() {
        // Given an operation whose condition adds a second one, with a dependency, as the
        // operation is added
        let log = Recorder<String>()
        let late = StubCondition(name: "Late", dependency: { _ in
            AsyncBlockOperation { log.append("late dependency") }
        }) { _, completion in
            log.append("evaluate late")
            completion(.satisfied)
        }
        let operation = AsyncBlockOperation { log.append("execute") }
        operation.addCondition(StubCondition(name: "AddsAnother", dependency: { operation in
            operation.addCondition(late)
            return nil
        }) { _, completion in completion(.satisfied) })
        let queue = AsyncOperationQueue()

        // When it is added
        queue.addOperation(operation)

        // Then the late condition's dependency runs first, then the evaluation, then the body
        #expect(waitUntilFinished([operation]))
        #expect(log.all == ["late dependency", "evaluate late", "execute"])
    }

    /// A dependency that two conditions bring, or that the user queued already, is added once:
    /// the operation waits for it, and no second add is refused (a plain `OperationQueue` would
    /// trap on one).
    @Test(arguments: [false, true])
    func conditionDependencyOnAQueueAlready_isWaitedFor_notAddedAgain(queuedByTheUser: Bool) {
        // Given two conditions that bring the same dependency, held until `gate` opens
        let log = Recorder<String>()
        let gate = Signal()
        let dependency = AsyncBlockOperation { _ = gate.wait(); log.append("dependency") }
        dependency.name = uniqueName("shared condition dependency")
        let operation = AsyncBlockOperation { log.append("execute") }
        for _ in 0..<2 {
            operation.addCondition(StubCondition.satisfied(bringing: dependency))
        }
        let queue = AsyncOperationQueue()
        if queuedByTheUser {
            queue.addOperation(dependency)
        }

        // When the operation is added
        queue.addOperation(operation)

        // Then it waits for the dependency, which runs once, and nothing is reported
        gate.signal()
        #expect(waitUntilFinished([operation, dependency]))
        #expect(log.all == ["dependency", "execute"])
        #expect(operation.errors.isEmpty, "\(operation.errors)")
        #expect(DiagnosticsLog.shared.kinds(about: dependency.name!).isEmpty)
    }

    /// A condition added while its operation waits brings its dependency before the condition is
    /// evaluated, even when the operation's last dependency finishes as the condition's code
    /// runs. (The operation went on to evaluate it before the dependency was attached.)
    @Test func conditionAddedWhileItsOperationWaits_isEvaluatedAfterItsDependency_evenIfTheLastOtherFinishesMeanwhile() {
        // Given an operation waiting for a first one, which holds on until `gate` opens
        let queue = AsyncOperationQueue()
        let log = Recorder<String>()
        let gate = Signal()
        let first = AsyncBlockOperation { _ = gate.wait(); log.append("first") }
        let operation = AsyncBlockOperation { log.append("execute") }
        operation.addDependency(first)
        queue.addOperations([first, operation], waitUntilFinished: false)

        // When a condition is added whose code lets the first one finish before it brings its
        // dependency
        let dependency = AsyncBlockOperation { log.append("dependency") }
        operation.addCondition(StubCondition(name: "Late", dependency: { _ in
            gate.signal()
            // Until the operation has heard of the finish (its unfinished dependencies are
            // empty), not merely until `first` is finished, which comes a moment earlier.
            _ = waitUntilFinished([first])
            _ = waitUntil { operation.snapshot().waitsFor.isEmpty }
            return dependency
        }) { _, completion in
            log.append("evaluate")
            completion(.satisfied)
        })

        // Then the dependency runs first, then the evaluation, then the body
        #expect(waitUntilFinished([operation]))
        #expect(log.all == ["first", "dependency", "evaluate", "execute"])
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    /// An operation finished from elsewhere while it is being added (here by a logger hearing
    /// `.added`, before the queue holds it) is not left behind: the queue lists it no more, and
    /// keeps no turn for it, so a queue made serial afterwards still runs what comes next.
    @Test(arguments: [OperationQueue.defaultMaxConcurrentOperationCount, 1])
    func operationFinishedWhileBeingAdded_isNotLeftInTheQueue(width: Int) {
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = width
        let finishedEarly = AsyncBlockOperation { Issue.record("it finished before it could execute") }
        finishedEarly.name = uniqueName("finished-early")
        finishedEarly.addCondition(StubCondition.satisfied())
        let name = finishedEarly.name
        queue.logger = ClosureLogger { event in
            if event.kind == .added && event.operationName == name {
                finishedEarly.finish()
            }
        }

        queue.addOperation(finishedEarly)

        #expect(waitUntilFinished([finishedEarly]))
        #expect(waitUntil { queue.allOperationCount == 0 })
        #expect(!queue.allOperations.contains { $0 === finishedEarly })
        queue.maxConcurrentOperationCount = 1
        let next = AsyncBlockOperation {}
        next.addCondition(StubCondition.satisfied())
        queue.addOperation(next)
        #expect(waitUntilFinished([next]))
    }

    @Test func failingConditions_preventExecutionWithOneErrorPerFailedCondition() {
        // Given an operation with two failing conditions and a satisfied one
        let first = StubError("first")
        let second = StubError("second")
        let executed = Counter()
        let observer = EventLogObserver()
        let operation = ClosureOperation { operation in
            executed.increment()
            operation.finish()
        }
        operation.addCondition(StubCondition.failing(first, name: "First"))
        operation.addCondition(StubCondition.satisfied())
        operation.addCondition(StubCondition.failing(second, name: "Second"))
        operation.addObserver(observer)

        // When it is added
        AsyncOperationQueue().addOperation(operation)

        // Then it never executes and finishes with one error per failed condition, as observers hear
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 0)
        #expect(labels(operation.errors) == ["first", "second"])
        #expect(observer.log.all == ["didFinish"])
        #expect(observer.finishedErrors.all.map(labels) == [["first", "second"]])
    }

    @Test func conditionsSatisfiedByConstruction_areAnsweredWithoutBeingEvaluated() {
        // Given an operation with a condition satisfied by construction (as the package's
        // exclusivity conditions are) beside one that must be evaluated, and another with only it
        let evaluated = Counter()
        let executed = Counter()
        let mixed = AsyncBlockOperation { executed.increment() }
        mixed.addCondition(CountingCategoryCondition(category: uniqueName("byConstruction"), evaluated: evaluated))
        mixed.addCondition(StubCondition.satisfied())
        let alone = AsyncBlockOperation { executed.increment() }
        alone.addCondition(CountingCategoryCondition(category: uniqueName("byConstruction"), evaluated: evaluated))

        // When they are added
        AsyncOperationQueue().addOperations([mixed, alone], waitUntilFinished: true)

        // Then both execute, and the queue never called that condition's evaluate
        #expect(executed.current == 2)
        #expect(evaluated.current == 0)
        #expect(mixed.errors.isEmpty && alone.errors.isEmpty)
    }

    @Test func conditionsAnsweringLaterFromAnotherThread_areAwaited() {
        // Given an operation with two conditions that answer when the test says
        let log = Recorder<String>()
        let firstAnswer = HeldCallback<ConditionResult>()
        let secondAnswer = HeldCallback<ConditionResult>()
        let operation = ClosureOperation { operation in
            log.append("execute")
            operation.finish()
        }
        operation.addCondition(StubCondition(name: "First") { _, completion in firstAnswer.hold(completion) })
        operation.addCondition(StubCondition(name: "Second") { _, completion in secondAnswer.hold(completion) })

        // When it is added and the conditions answer one after the other, from other threads
        AsyncOperationQueue().addOperation(operation)
        #expect(firstAnswer.waitUntilHeld())
        #expect(secondAnswer.waitUntilHeld())
        let answered = Signal()
        DispatchQueue.global().async {
            secondAnswer.call(.satisfied)
            answered.signal()
        }
        #expect(answered.wait())
        #expect(log.all.isEmpty)
        DispatchQueue.global().async { firstAnswer.call(.satisfied) }

        // Then it executes once both have answered
        #expect(waitUntilFinished([operation]))
        #expect(log.all == ["execute"])
        #expect(operation.errors.isEmpty)
    }

    @Test func conditionFailingLaterFromAnotherThread_preventsExecution() {
        // Given an operation with a condition that answers when the test says
        let executed = Counter()
        let answer = HeldCallback<ConditionResult>()
        let operation = ClosureOperation { operation in
            executed.increment()
            operation.finish()
        }
        operation.addCondition(StubCondition(name: "Later") { _, completion in answer.hold(completion) })
        AsyncOperationQueue().addOperation(operation)
        #expect(answer.waitUntilHeld())

        // When it fails, from another thread
        let error = StubError()
        DispatchQueue.global().async { answer.call(.failed(error)) }

        // Then the operation finishes with its error, without executing
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 0)
        #expect(operation.errors.asStubErrors == [error])
    }

    @Test func conditionDroppingItsCompletion_failsTheOperationAndIsReported() {
        // Given a condition that lets go of its completion without calling it
        let name = uniqueName("dropped-completion")
        let executed = Counter()
        let operation = ClosureOperation(name: name) { operation in
            executed.increment()
            operation.finish()
        }
        operation.addCondition(StubCondition(name: "Forgetful") { _, _ in })

        // When the operation is added
        AsyncOperationQueue().addOperation(operation)

        // Then it fails with conditionNeverAnswered, and that is reported
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 0)
        #expect(operation.errors.asOperationErrors == [.conditionNeverAnswered(condition: "Forgetful")])
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.conditionNeverAnswered])
    }

    @Test func conditionDroppingItsCompletionLater_failsTheOperationAndIsReported() {
        // Given a condition that keeps its completion for a while, then lets go of it
        let name = uniqueName("dropped-later")
        let answer = HeldCallback<ConditionResult>()
        let operation = ClosureOperation(name: name) { $0.finish() }
        operation.addCondition(StubCondition(name: "Forgetful") { _, completion in answer.hold(completion) })
        AsyncOperationQueue().addOperation(operation)
        #expect(answer.waitUntilHeld())

        // When it lets go, on another thread
        DispatchQueue.global().async { answer.drop() }

        // Then the operation fails with conditionNeverAnswered, and that is reported
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.asOperationErrors == [.conditionNeverAnswered(condition: "Forgetful")])
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.conditionNeverAnswered])
    }

    @Test func conditionNeverAnswering_failsWithConditionTimedOut() {
        // Given a queue with a short condition timeout, and a condition that keeps its completion
        let name = uniqueName("silent-condition")
        let queue = AsyncOperationQueue()
        queue.conditionEvaluationTimeout = 0.2
        let answer = HeldCallback<ConditionResult>()
        let executed = Counter()
        let operation = ClosureOperation(name: name) { operation in
            executed.increment()
            operation.finish()
        }
        operation.addCondition(StubCondition.satisfied(name: "Prompt"))
        operation.addCondition(StubCondition(name: "Silent") { _, completion in answer.hold(completion) })

        // When the operation is added and the condition does not answer
        queue.addOperation(operation)

        // Then it fails with conditionTimedOut for the silent condition only, and that is reported
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 0)
        #expect(operation.errors.asOperationErrors == [.conditionTimedOut(condition: "Silent", after: 0.2)])
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.conditionTimedOut])

        // And a late answer changes nothing
        answer.call(.satisfied)
        answer.drop()
        #expect(executed.current == 0)
        #expect(operation.errors.count == 1)
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.conditionTimedOut])
    }

    @Test func conditionEvaluationTimeout_defaultsToSixtySeconds() {
        #expect(AsyncOperationQueue().conditionEvaluationTimeout == 60)
        #expect(AsyncOperationQueue.defaultConditionEvaluationTimeout == 60)
    }

    // MARK: - Delegate

    @Test func delegate_hearsAddsStartsAndFinishesWithErrors() {
        // Given a queue with a delegate, an operation that succeeds, one whose condition fails,
        // and a plain one
        let queue = AsyncOperationQueue()
        let delegate = QueueEventLog()
        queue.delegate = delegate
        let error = StubError()
        let names = (succeeding: uniqueName("succeeding"), failing: uniqueName("failing"), plain: uniqueName("plain"))
        let succeeding = AsyncBlockOperation {}
        succeeding.name = names.succeeding
        let failing = AsyncBlockOperation {}
        failing.name = names.failing
        failing.addCondition(StubCondition.failing(error))
        let plain = BlockOperation {}
        plain.name = names.plain

        // When they run
        queue.addOperations([succeeding, failing, plain], waitUntilFinished: true)

        // Then the delegate heard each add, each start of an execution, and each finish with its
        // errors (the finish perhaps a moment after the wait ended: an operation counts as
        // finished one step before its queue tells the delegate, and a wait that begins in
        // between ends at once)
        #expect(waitUntil { delegate.events(about: names.succeeding).count == 3 && delegate.events(about: names.failing).count == 2 })
        #expect(delegate.events(about: names.succeeding) == ["willAdd", "didStart", "didFinish"])
        #expect(delegate.events(about: names.failing) == ["willAdd", "didFinish"])
        #expect(delegate.events(about: names.plain) == ["willAdd"])
        let finishes = delegate.finishedErrors.all
        #expect(finishes.filter { $0.name == names.succeeding }.map { $0.errors.count } == [0])
        #expect(finishes.filter { $0.name == names.failing }.map { $0.errors.asStubErrors } == [[error]])
    }

    @Test func delegate_isHeldWeakly() {
        // Given a queue whose delegate nobody else holds
        let queue = AsyncOperationQueue()
        var delegate: QueueEventLog? = QueueEventLog()
        queue.delegate = delegate
        let probe = WeakProbe(delegate!)

        // When the last reference goes
        delegate = nil

        // Then the delegate is released
        #expect(probe.isReleased())
        #expect(queue.delegate == nil)
    }

    // MARK: - Foundation's queue API

    @Test func suspendedQueue_startsNothingUntilResumed() throws {
        // Given a suspended queue
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        #expect(queue.isSuspended)
        let started = Recorder<String>()
        let evaluated = Counter()
        let plain = BlockOperation { started.append("plain") }
        let simple = AsyncBlockOperation { started.append("simple") }
        let conditional = AsyncBlockOperation { started.append("conditional") }
        conditional.addCondition(StubCondition(name: "Counted") { _, completion in
            evaluated.increment()
            completion(.satisfied)
        })
        let exclusive = AsyncBlockOperation { started.append("exclusive") }
        exclusive.addCondition(StubCondition(name: "Exclusive", categories: [uniqueName("category")]) { _, completion in
            evaluated.increment()
            completion(.satisfied)
        })
        let dependent = AsyncBlockOperation { started.append("dependent") }
        dependent.addDependency(simple)
        let all: [Operation] = [plain, simple, conditional, exclusive, dependent]

        // When operations of every kind are added
        queue.addOperations(all, waitUntilFinished: false)

        // Then none starts, no condition is evaluated, and all stay on the queue
        Thread.sleep(forTimeInterval: 0.1) // a chance to go wrong; nothing is timed
        #expect(started.all.isEmpty)
        #expect(evaluated.current == 0)
        #expect(queue.allOperationCount == all.count)

        // When the queue resumes, all run, the dependent one after its dependency
        queue.isSuspended = false
        #expect(!queue.isSuspended)
        #expect(waitUntilFinished(all))
        #expect(Set(started.all) == ["plain", "simple", "conditional", "exclusive", "dependent"])
        #expect(evaluated.current == 2)
        let order = started.all
        let simpleIndex = try #require(order.firstIndex(of: "simple"))
        let dependentIndex = try #require(order.firstIndex(of: "dependent"))
        #expect(simpleIndex < dependentIndex)
    }

    @Test func maxConcurrentOperationCountOne_runsOneOperationAtATime() {
        // Given a serial queue, and operations that execute for a while, some behind conditions
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let probe = ConcurrencyProbe()
        let operations = (0..<8).map { index -> AsyncBlockOperation in
            let operation = AsyncBlockOperation { finish in
                probe.enter("queue")
                DispatchQueue.global().asyncAfter(deadline: .now() + 0.01) {
                    probe.leave("queue")
                    finish(nil)
                }
            }
            if index.isMultiple(of: 2) {
                operation.addCondition(StubCondition(name: "Later") { _, completion in
                    DispatchQueue.global().async { completion(.satisfied) }
                })
            }
            return operation
        }

        // When they run
        queue.addOperations(operations, waitUntilFinished: false)

        // Then never two at once
        #expect(waitUntilFinished(operations))
        #expect(probe.maximum("queue") == 1)
    }

    @Test func waitUntilAllOperationsAreFinished_waitsForOperationsStillWaiting() {
        // Given a dependency that executes until released, an operation waiting for it, and an
        // operation waiting for a condition
        let dependencyGate = HeldCallback<(any Error)?>()
        let answer = HeldCallback<ConditionResult>()
        let dependency = AsyncBlockOperation { finish in dependencyGate.hold(finish) }
        let dependent = AsyncBlockOperation {}
        dependent.addDependency(dependency)
        let conditional = AsyncBlockOperation {}
        conditional.addCondition(StubCondition(name: "Held") { _, completion in answer.hold(completion) })
        let queue = AsyncOperationQueue()
        queue.addOperations([dependency, dependent, conditional], waitUntilFinished: false)
        #expect(dependencyGate.waitUntilHeld())
        #expect(answer.waitUntilHeld())

        // When another thread waits for the queue
        let returned = Signal()
        let allFinishedOnReturn = Recorder<Bool>()
        DispatchQueue.global().async {
            queue.waitUntilAllOperationsAreFinished()
            allFinishedOnReturn.append([dependency, dependent, conditional].allSatisfy(\.isFinished))
            returned.signal()
        }

        // Then it returns only once the operations still waiting have finished
        dependencyGate.call(nil)
        #expect(waitUntilFinished([dependent]))
        #expect(!returned.wait(timeout: 0.1))
        answer.call(.satisfied)
        #expect(returned.wait())
        #expect(allFinishedOnReturn.all == [true])
    }

    @Test func waitUntilAllOperationsAreFinished_letsFinishedOperationsGo_whileItWaits() {
        // Given a queue with two operations that execute until released
        let firstGate = HeldCallback<(any Error)?>()
        let secondGate = HeldCallback<(any Error)?>()
        let queue = AsyncOperationQueue()
        let firstReference = WeakBox<AsyncBlockOperation>()
        do {
            let first = AsyncBlockOperation { finish in firstGate.hold(finish) }
            let second = AsyncBlockOperation { finish in secondGate.hold(finish) }
            firstReference.object = first
            queue.addOperations([first, second], waitUntilFinished: false)
        }
        #expect(firstGate.waitUntilHeld())
        #expect(secondGate.waitUntilHeld())

        // When another thread waits for the queue, and the first operation finishes meanwhile
        let returned = Signal()
        DispatchQueue.global().async {
            queue.waitUntilAllOperationsAreFinished()
            returned.signal()
        }
        #expect(!returned.wait(timeout: 0.1)) // gives the waiter time to start waiting
        firstGate.call(nil)

        // Then the first operation is freed while the wait goes on (the wait holds no references)
        #expect(waitUntil { firstReference.object == nil })
        #expect(!returned.wait(timeout: 0.1))
        secondGate.call(nil)
        #expect(returned.wait())
    }

    @Test func cancelAllOperations_cancelsWaitingOperationsToo() {
        // Given an executing operation, an operation waiting for it, and one waiting for a condition
        let gate = HeldCallback<(any Error)?>()
        let answer = HeldCallback<ConditionResult>()
        let executed = Recorder<String>()
        let executing = AsyncBlockOperation { finish in
            executed.append("executing")
            gate.hold(finish)
        }
        let dependent = AsyncBlockOperation { executed.append("dependent") }
        dependent.addDependency(executing)
        let conditional = AsyncBlockOperation { executed.append("conditional") }
        conditional.addCondition(StubCondition(name: "Held") { _, completion in answer.hold(completion) })
        let queue = AsyncOperationQueue()
        queue.addOperations([executing, dependent, conditional], waitUntilFinished: false)
        #expect(gate.waitUntilHeld())
        #expect(answer.waitUntilHeld())

        // When all operations are cancelled
        queue.cancelAllOperations()

        // Then all are cancelled and finish; the waiting ones without executing
        #expect(waitUntilFinished([executing, dependent, conditional]))
        #expect(executing.isCancelled)
        #expect(dependent.isCancelled)
        #expect(conditional.isCancelled)
        #expect(executed.all == ["executing"])
        #expect(waitUntil { queue.allOperationCount == 0 })
        answer.drop()
    }

    // Found by a race audit: an operation whose add was in flight (its condition's
    // `dependency(for:)` running) was in neither list `cancelAllOperations()` reads, and ran;
    // a group cancelled meanwhile thus ran a child it had admitted.
    @Test(arguments: [false, true])
    func cancelAllOperations_cancelsTheOperationsOfAnAddInFlight(throughAGroup: Bool) {
        // Given an operation being added on another thread, its add held in flight by its
        // condition's dependency(for:), to a queue (or a running group)
        let entered = Signal()
        let mayGoOn = Signal()
        let executed = Flag()
        let late = AsyncBlockOperation { executed.raise() }
        late.addCondition(StubCondition(name: "HoldsTheAdd", dependency: { _ in
            entered.signal()
            _ = mayGoOn.wait(timeout: generousTimeout)
            return nil
        }) { _, completion in completion(.satisfied) })
        let held = HeldOperations()
        let group = GroupOperation(operations: [held.make("first child")])
        let queue = AsyncOperationQueue()
        if throughAGroup {
            queue.addOperation(group)
            #expect(held.waitUntilStarted("first child"))
            Thread.detachNewThread { group.addChild(late) }
        } else {
            Thread.detachNewThread { queue.addOperation(late) }
        }
        #expect(entered.wait(timeout: generousTimeout))

        // When every operation of the queue is cancelled (the group is cancelled) meanwhile
        if throughAGroup {
            group.cancel()
        } else {
            queue.cancelAllOperations()
        }
        mayGoOn.signal()

        // Then the operation being added finishes cancelled, without executing
        #expect(waitUntilFinished([late]))
        #expect(late.isCancelled && !executed.isRaised)
        if throughAGroup {
            #expect(waitUntilFinished([group]))
        }
    }

    @Test func cancelAllOperationsOnASuspendedQueue_finishesEverythingWithoutExecuting() {
        // Given a suspended queue holding an operation waiting for a condition, one waiting for it,
        // and one handed to Foundation
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        let executed = Recorder<String>()
        let evaluated = Counter()
        let conditional = AsyncBlockOperation { executed.append("conditional") }
        conditional.addCondition(StubCondition(name: "Counted") { _, completion in
            evaluated.increment()
            completion(.satisfied)
        })
        let dependent = AsyncBlockOperation { executed.append("dependent") }
        dependent.addDependency(conditional)
        let simple = AsyncBlockOperation { executed.append("simple") }
        queue.addOperations([conditional, dependent, simple], waitUntilFinished: false)

        // When all are cancelled, then the queue resumes
        queue.cancelAllOperations()
        #expect(waitUntilFinished([conditional, dependent]))
        queue.isSuspended = false

        // Then all finish, cancelled, and nothing was evaluated or executed
        #expect(waitUntilFinished([conditional, dependent, simple]))
        #expect(executed.all.isEmpty)
        #expect(evaluated.current == 0)
        #expect(waitUntil { queue.allOperationCount == 0 })
    }

    @Test
    func cancelAllOperations_cancelsAPlainOperationWaitingForAnAsyncOne() {
        // Given a plain operation waiting for an AsyncBlockOperation whose continuation is pending
        let gate = HeldCallback<(any Error)?>()
        let executing = AsyncBlockOperation { finish in gate.hold(finish) }
        let ran = Counter()
        let plainDependent = BlockOperation { ran.increment() }
        plainDependent.addDependency(executing)
        let queue = AsyncOperationQueue()
        queue.addOperations([executing, plainDependent], waitUntilFinished: false)
        #expect(gate.waitUntilHeld())

        // When all operations are cancelled
        queue.cancelAllOperations()

        // Then the plain one is cancelled too, and its block never runs
        #expect(waitUntilFinished([executing, plainDependent]))
        #expect(executing.isCancelled)
        #expect(plainDependent.isCancelled)
        #expect(ran.current == 0)
    }

    @Test func allOperations_includeOperationsWaitingForADependencyOrACondition() {
        // Given an executing operation, one waiting for it and one waiting for a condition
        let gate = HeldCallback<(any Error)?>()
        let answer = HeldCallback<ConditionResult>()
        let executing = AsyncBlockOperation { finish in gate.hold(finish) }
        let dependent = AsyncBlockOperation {}
        dependent.addDependency(executing)
        let conditional = AsyncBlockOperation {}
        conditional.addCondition(StubCondition(name: "Held") { _, completion in answer.hold(completion) })
        let queue = AsyncOperationQueue()

        // When they are on the queue
        queue.addOperations([executing, dependent, conditional], waitUntilFinished: false)
        #expect(gate.waitUntilHeld())
        #expect(answer.waitUntilHeld())

        // Then all three are counted and listed
        #expect(queue.allOperationCount == 3)
        #expect(Set(queue.allOperations.map(ObjectIdentifier.init)) == Set([executing, dependent, conditional].map(ObjectIdentifier.init)))

        // And none once they have finished
        gate.call(nil)
        answer.call(.satisfied)
        #expect(waitUntilFinished([executing, dependent, conditional]))
        #expect(waitUntil { queue.allOperationCount == 0 })
        #expect(queue.allOperations.isEmpty)
    }

    @Test
    func allOperations_listsOperationsInTheOrderTheyWereAdded() {
        // Given an executing operation, then one waiting for it, then one waiting for a condition
        let gate = HeldCallback<(any Error)?>()
        let answer = HeldCallback<ConditionResult>()
        let executing = AsyncBlockOperation { finish in gate.hold(finish) }
        let dependent = AsyncBlockOperation {}
        dependent.addDependency(executing)
        let conditional = AsyncBlockOperation {}
        conditional.addCondition(StubCondition(name: "Held") { _, completion in answer.hold(completion) })
        let queue = AsyncOperationQueue()
        queue.addOperations([executing, dependent, conditional], waitUntilFinished: false)
        #expect(gate.waitUntilHeld())
        #expect(answer.waitUntilHeld())

        // When the queue lists them
        let listed = queue.allOperations

        // Then they come in the order they were added, as Foundation's `operations` do
        #expect(listed.map(ObjectIdentifier.init) == [executing, dependent, conditional].map(ObjectIdentifier.init))
        gate.call(nil)
        answer.call(.satisfied)
        #expect(waitUntilFinished([executing, dependent, conditional]))
    }

    // MARK: - Misuse

    @Test func addingAnExecutingOperationAgain_isReportedAndItRunsOnce() {
        // Given an operation executing on a queue
        let name = uniqueName("added-twice")
        let gate = HeldCallback<(any Error)?>()
        let ran = Counter()
        let operation = AsyncBlockOperation { finish in
            ran.increment()
            gate.hold(finish)
        }
        operation.name = name
        let queue = AsyncOperationQueue()
        queue.addOperation(operation)
        #expect(gate.waitUntilHeld())

        // When it is added again, to the same queue and to another
        queue.addOperation(operation)
        AsyncOperationQueue().addOperations([operation], waitUntilFinished: false)

        // Then each add is reported, and it runs once
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.addedTwice, .addedTwice])
        gate.call(nil)
        #expect(waitUntilFinished([operation]))
        queue.waitUntilAllOperationsAreFinished()
        #expect(ran.current == 1)
        #expect(operation.errors.isEmpty)
    }

    @Test func addingAWaitingOperationAgain_isReportedAndItRunsOnce() {
        // Given an operation waiting on a queue for its dependency
        let name = uniqueName("added-twice-waiting")
        let gate = HeldCallback<(any Error)?>()
        let dependency = AsyncBlockOperation { finish in gate.hold(finish) }
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.name = name
        operation.addDependency(dependency)
        let queue = AsyncOperationQueue()
        queue.addOperations([dependency, operation], waitUntilFinished: false)
        #expect(gate.waitUntilHeld())

        // When it is added again
        queue.addOperation(operation)

        // Then the add is reported, and it runs once, after its dependency
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.addedTwice])
        gate.call(nil)
        #expect(waitUntilFinished([operation]))
        queue.waitUntilAllOperationsAreFinished()
        #expect(ran.current == 1)
    }

    @Test
    func addingAWaitingPlainOperationAgain_isReportedInsteadOfCrashing() {
        // Given a plain operation waiting on a suspended queue
        let name = uniqueName("plain-added-twice")
        let ran = Counter()
        let operation = BlockOperation { ran.increment() }
        operation.name = name
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        queue.addOperation(operation)

        // When it is added again
        queue.addOperation(operation)

        // Then the add is reported, and it runs once when the queue resumes
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.addedTwice])
        queue.isSuspended = false
        #expect(waitUntilFinished([operation]))
        queue.waitUntilAllOperationsAreFinished()
        #expect(ran.current == 1)
    }

    @Test func addingAFinishedAsyncOperation_isReportedAndIgnored() {
        // Given a finished operation
        let name = uniqueName("added-after-finishing")
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.name = name
        let queue = AsyncOperationQueue()
        queue.addOperations([operation], waitUntilFinished: true)

        // When it is added again
        queue.addOperation(operation)

        // Then the add is reported and nothing runs again
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.addedAfterFinishing])
        queue.waitUntilAllOperationsAreFinished()
        #expect(ran.current == 1)
        #expect(queue.allOperationCount == 0)
    }

    @Test func addingAFinishedPlainOperation_isReportedAndIgnored() {
        // Given a finished plain operation
        let name = uniqueName("plain-added-after-finishing")
        let ran = Counter()
        let operation = BlockOperation { ran.increment() }
        operation.name = name
        let queue = AsyncOperationQueue()
        queue.addOperations([operation], waitUntilFinished: true)

        // When it is added again
        queue.addOperation(operation)

        // Then the add is reported and nothing runs again
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.addedAfterFinishing])
        queue.waitUntilAllOperationsAreFinished()
        #expect(ran.current == 1)
    }

    // MARK: - Dependency cycles

    @Test func twoOperationCycle_failsTheOperationThatClosedItAndTheOtherRuns() {
        // Given a depends on b, and b then depends on a
        let operations = RecordingOperations("cycle")
        let a = operations.make("a")
        let b = operations.make("b")
        a.addDependency(b)
        b.addDependency(a)

        // When both are added
        AsyncOperationQueue().addOperations([a, b], waitUntilFinished: false)

        // Then b, which closed the cycle, fails without executing, and a runs after it
        #expect(waitUntilFinished([a, b]))
        #expect(b.errors.asOperationErrors == [.dependencyCycle(operation: operations.name("b"), dependency: operations.name("a"))])
        #expect(a.errors.isEmpty)
        #expect(operations.executed.all == ["a"])
        #expect(DiagnosticsLog.shared.kinds(about: operations.name("b")) == [.dependencyCycle])
        #expect(DiagnosticsLog.shared.kinds(about: operations.name("a")).isEmpty)
    }

    @Test func threeOperationCycle_failsTheOperationThatClosedItAndTheRestRunInOrder() {
        // Given a depends on b, b on c, and c then on a
        let operations = RecordingOperations("cycle")
        let a = operations.make("a")
        let b = operations.make("b")
        let c = operations.make("c")
        a.addDependency(b)
        b.addDependency(c)
        c.addDependency(a)

        // When all are added
        AsyncOperationQueue().addOperations([a, b, c], waitUntilFinished: false)

        // Then c fails without executing, and b then a run
        #expect(waitUntilFinished([a, b, c]))
        #expect(c.errors.asOperationErrors == [.dependencyCycle(operation: operations.name("c"), dependency: operations.name("a"))])
        #expect(operations.executed.all == ["b", "a"])
        #expect(DiagnosticsLog.shared.kinds(about: operations.name("c")) == [.dependencyCycle])
    }

    /// A cycle closed through a plain operation, by an operation no `AsyncOperation` waits for:
    /// the plain operation waiting for it is invisible to it, so it learns from its dependency
    /// that a plain operation lies behind it, directly or (`throughAnother`) through an
    /// `AsyncOperation` that came to depend on the plain one after its dependency depended on it.
    @Test(arguments: [false, true])
    func cycleThroughAPlainOperation_failsTheOperationThatClosedIt(throughAnother: Bool) {
        // Given d depends on the plain p (or on e, which then depends on p), and p on a
        let operations = RecordingOperations("cycle")
        let a = operations.make("a")
        let d = operations.make("d")
        let e = operations.make("e")
        let p = operations.makePlain("p")
        if throughAnother {
            d.addDependency(e)
            e.addDependency(p)
        } else {
            d.addDependency(p)
        }
        p.addDependency(a)

        // When a then depends on d, closing the cycle, and all are added
        a.addDependency(d)
        let added: [Operation] = throughAnother ? [a, d, e, p] : [a, d, p]
        AsyncOperationQueue().addOperations(added, waitUntilFinished: false)

        // Then a fails without executing instead of waiting forever, and the rest runs after it
        #expect(waitUntilFinished(added), "a silent hang: \(operations.executed.all) executed")
        #expect(a.errors.asOperationErrors == [.dependencyCycle(operation: operations.name("a"), dependency: operations.name("d"))])
        #expect(operations.executed.all == (throughAnother ? ["p", "e", "d"] : ["p", "d"]))
        #expect(DiagnosticsLog.shared.kinds(about: operations.name("a")) == [.dependencyCycle])
    }

    /// A plain dependency removed leaves what it reached in the operation's reach (a reach only
    /// grows): a way back through it that no longer exists is not mistaken for a cycle.
    @Test func aPlainDependencyRemoved_isNotMistakenForACycle() {
        // Given d, which depended on the plain p and no longer does, and p, which depends on s
        let operations = RecordingOperations("removed")
        let p = operations.makePlain("p")
        let d = operations.make("d")
        let s = operations.make("s")
        d.addDependency(p)
        d.removeDependency(p)
        p.addDependency(s)

        // When s comes to depend on d, and all are added
        s.addDependency(d)
        AsyncOperationQueue().addOperations([p, d, s], waitUntilFinished: false)

        // Then no cycle is reported, and each runs after what it waits for
        #expect(waitUntilFinished([p, d, s]), "a hang: \(operations.executed.all) executed")
        #expect(s.errors.isEmpty, "\(s.errors)")
        #expect(operations.executed.all == ["d", "s", "p"])
        #expect(DiagnosticsLog.shared.kinds(about: operations.name("s")).isEmpty)
    }

    @Test func diamond_isNotMistakenForACycle() {
        // Given a depends on b and c, which both depend on d
        let operations = RecordingOperations("diamond")
        let a = operations.make("a")
        let b = operations.make("b")
        let c = operations.make("c")
        let d = operations.make("d")
        a.addDependency(b)
        a.addDependency(c)
        b.addDependency(d)
        c.addDependency(d)

        // When all are added
        AsyncOperationQueue().addOperations([a, b, c, d], waitUntilFinished: false)

        // Then all run, d first and a last, and nothing is reported
        #expect(waitUntilFinished([a, b, c, d]))
        let order = operations.executed.all
        #expect(order.first == "d")
        #expect(order.last == "a")
        #expect(order.count == 4)
        #expect([a, b, c, d].allSatisfy { $0.errors.isEmpty })
        #expect(["a", "b", "c", "d"].allSatisfy { DiagnosticsLog.shared.kinds(about: operations.name($0)).isEmpty })
    }

    @Test func selfDependency_isReportedAndFailsTheOperation() {
        // Given an operation that depends on itself
        let name = uniqueName("self-dependent")
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.name = name
        operation.addDependency(operation)

        // When it is added
        AsyncOperationQueue().addOperation(operation)

        // Then it fails with dependencyCycle instead of waiting forever
        #expect(waitUntilFinished([operation]))
        #expect(ran.current == 0)
        #expect(operation.errors.asOperationErrors == [.dependencyCycle(operation: name, dependency: name)])
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.dependencyCycle])
    }

    @Test func selfDependency_addedWhileExecuting_isTooLate_andChangesNothing() {
        // Given an executing operation
        let held = HeldOperations()
        let name = uniqueName("executing")
        let operation = held.make(name)
        AsyncOperationQueue().addOperation(operation)
        #expect(held.waitUntilStarted(name))

        // When it is made to depend on itself
        operation.addDependency(operation)

        // Then that is reported as too late, not as a cycle, and it finishes as it would have
        held.finish(name)
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.isEmpty)
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.configuredTooLate])
        #expect(DiagnosticsLog.shared.diagnostics(about: name).first?.message.contains("the operation itself") == true)
    }

    @Test func cycleClosedByAnOperationAlreadyWaiting_failsItOnceItStopsWaiting() {
        // Given a waits on a queue for a gated dependency, and b depends on a
        let operations = RecordingOperations("cycle")
        let gate = HeldCallback<(any Error)?>()
        let dependency = AsyncBlockOperation { finish in gate.hold(finish) }
        let a = operations.make("a")
        let b = operations.make("b")
        a.addDependency(dependency)
        let queue = AsyncOperationQueue()
        queue.addOperations([dependency, a], waitUntilFinished: false)
        #expect(gate.waitUntilHeld())
        b.addDependency(a)

        // When a then depends on b, closing the cycle, and b is added
        a.addDependency(b)
        queue.addOperation(b)
        gate.call(nil)

        // Then a fails without executing, and b runs after it
        #expect(waitUntilFinished([a, b]))
        #expect(a.errors.asOperationErrors == [.dependencyCycle(operation: operations.name("a"), dependency: operations.name("b"))])
        #expect(operations.executed.all == ["b"])
        #expect(DiagnosticsLog.shared.kinds(about: operations.name("a")) == [.dependencyCycle])
    }

    @Test
    func cycleThroughAPlainOperation_isReportedAndBroken() {
        // Given a plain operation that depends on a, and a that then depends on it
        let operations = RecordingOperations("cycle")
        let a = operations.make("a")
        let plain = operations.makePlain("plain")
        plain.addDependency(a)
        a.addDependency(plain)

        // When both are added
        let queue = AsyncOperationQueue()
        queue.addOperations([a, plain], waitUntilFinished: false)

        // Then a, which closed the cycle, is reported and fails, and the plain one runs after it
        #expect(waitUntilFinished([a, plain], timeout: 5))
        #expect(DiagnosticsLog.shared.kinds(about: operations.name("a")) == [.dependencyCycle])
        #expect(a.errors.asOperationErrors == [.dependencyCycle(operation: operations.name("a"), dependency: operations.name("plain"))])
        #expect(operations.executed.all == ["plain"])
        if !a.isFinished { queue.cancelAllOperations() }
    }

    // MARK: - Releasing

    enum Ending: String, CaseIterable, Sendable {
        case succeeds
        case failsItsCondition
        case isCancelledWhileWaiting
    }

    @Test(arguments: Ending.allCases)
    func finishedOperation_isReleasedWithWhatItOwns(ending: Ending) {
        // Given an operation with an observer, a condition with its own dependency, and an async
        // and a plain dependency, none of them referenced by the test
        let queue = AsyncOperationQueue()
        let probes = addOperationOwningEverything(to: queue, ending: ending)

        // When the queue has finished everything
        queue.waitUntilAllOperationsAreFinished()

        // Then the operation and everything it owned were released
        for (what, probe) in probes {
            #expect(probe.isReleased(), "\(what) was not released")
        }
    }

    @Test func operationsInACycle_areReleasedAfterFinishing() {
        // Given two operations in a dependency cycle, not referenced by the test
        let queue = AsyncOperationQueue()
        let probes: [WeakProbe<AnyObject>] = {
            let a = AsyncBlockOperation {}
            let b = AsyncBlockOperation {}
            a.addDependency(b)
            b.addDependency(a)
            queue.addOperations([a, b], waitUntilFinished: false)
            return [WeakProbe<AnyObject>(a), WeakProbe<AnyObject>(b)]
        }()

        // When the queue has finished them
        queue.waitUntilAllOperationsAreFinished()

        // Then both were released
        #expect(probes.allSatisfy { $0.isReleased() })
    }

    /// Adds an operation that owns one of everything, ending as `ending` says; returns a probe
    /// for each object, and keeps no reference.
    private func addOperationOwningEverything(
        to queue: AsyncOperationQueue,
        ending: Ending
    ) -> [(String, WeakProbe<AnyObject>)] {
        let answer = HeldCallback<ConditionResult>()
        let observer = EventLogObserver()
        let conditionDependency = AsyncBlockOperation {}
        let condition = ReferenceCondition(dependency: conditionDependency) { completion in
            switch ending {
            case .succeeds: completion(.satisfied)
            case .failsItsCondition: completion(.failed(StubError()))
            case .isCancelledWhileWaiting: answer.hold(completion)
            }
        }
        let asyncDependency = AsyncBlockOperation {}
        let plainDependency = BlockOperation {}
        let operation = AsyncBlockOperation {}
        operation.addObserver(observer)
        operation.addCondition(condition)
        operation.addDependency(asyncDependency)
        operation.addDependency(plainDependency)
        queue.addOperations([operation, asyncDependency, plainDependency], waitUntilFinished: false)
        if ending == .isCancelledWhileWaiting {
            #expect(answer.waitUntilHeld())
            operation.cancel()
            answer.drop()
        }
        return [
            ("operation", WeakProbe<AnyObject>(operation)),
            ("observer", WeakProbe<AnyObject>(observer)),
            ("condition", WeakProbe<AnyObject>(condition)),
            ("condition's dependency", WeakProbe<AnyObject>(conditionDependency)),
            ("async dependency", WeakProbe<AnyObject>(asyncDependency)),
            ("plain dependency", WeakProbe<AnyObject>(plainDependency)),
        ]
    }

    // MARK: - Helpers

    /// A condition that writes "evaluate" into `log`, then answers `answer`.
    private func recordingCondition(_ log: Recorder<String>, answer: ConditionResult) -> StubCondition {
        StubCondition(name: "Recording") { _, completion in
            log.append("evaluate")
            completion(answer)
        }
    }

    /// The labels of `errors`, which must all be `StubError`s, sorted.
    private func labels(_ errors: [any Error]) -> [String] {
        errors.map { ($0 as? StubError)?.label ?? "\($0)" }.sorted()
    }

    // Found by a soak (a use-after-free in swift-corelibs-foundation that users reach through
    // the queue): a cancelled plain operation released before its dependency finished was freed
    // while the dependency still pointed at it.
    @Test func cancelledPlainOperation_isKeptAliveUntilItsDependencyFinished() {
        // Given a plain operation waiting for one that runs until told, both on a queue
        let held = HeldOperations()
        let dependency = held.make(uniqueName("dependency"))
        var plain: BlockOperation? = BlockOperation {}
        plain!.addDependency(dependency)
        let queue = AsyncOperationQueue()
        queue.addOperations([dependency, plain!], waitUntilFinished: false)
        #expect(held.waitUntilStarted(dependency.name!))
        let probe = WeakProbe(plain!)

        // When the plain one is cancelled, finishes, and nothing else holds it
        plain!.cancel()
        #expect(waitUntil { plain!.isFinished })
        plain = nil

        // Then it stays alive while its dependency runs, and is released once it finished
        #expect(!probe.isReleased(timeout: 0.2))
        held.finish(dependency.name!)
        #expect(waitUntilFinished([dependency]))
        #expect(probe.isReleased())
    }
}

/// A condition that is an object, so that a test can check it is released.
private final class ReferenceCondition: OperationCondition {
    private let conditionDependency: Operation
    private let answer: @Sendable (@escaping @Sendable (ConditionResult) -> Void) -> Void

    init(dependency: Operation, answer: @escaping @Sendable (@escaping @Sendable (ConditionResult) -> Void) -> Void) {
        self.conditionDependency = dependency
        self.answer = answer
    }

    func dependency(for operation: AsyncOperation) -> Operation? {
        conditionDependency
    }

    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        answer(completion)
    }
}

/// A category condition the queue answers by itself; counts any call to `evaluate` it gets anyway.
private struct CountingCategoryCondition: SatisfiedByConstruction {
    let category: String
    let evaluated: Counter

    var mutuallyExclusiveCategories: Set<String> { [category] }

    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        evaluated.increment()
        completion(.satisfied)
    }
}
