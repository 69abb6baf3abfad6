import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// Adversarial probes of the documented contract around observers and timeouts, conditions,
// cancellation and finishing, suspension and Foundation parity, and "seeing inside" (snapshots,
// stall reports, the logging hook, diagnostics). Sources: /work/shared/API.md, README.md, the
// DocC articles, the `///` comments of public symbols, and Foundation's documentation where the
// queue claims parity. Each test quotes the sentence it checks. Every wait is bounded; no test
// asserts on wall-clock speed; nothing is left running.

@Suite struct ObservationProbeTests {
    // MARK: - Observers

    // ObserversAndTimeouts.md: "an observer added once the operation's finish has begun is
    // reported (`.configuredTooLate`) and ignored. An operation cancelled before it executed
    // begins finishing as it is cancelled, so an observer added from `operationDidCancel` is too
    // late for it." API.md 4: "`operationDidFinish` exactly once, last".
    @Test
    func observerAddedWhileAWaitingOperationsCancellationIsHeard_isTooLate() {
        // Given an operation waiting on a queue for a dependency that runs until told, whose
        // observer, as it hears the cancellation, adds another observer
        let held = HeldOperations()
        let dependencyName = uniqueName("dependency")
        let dependency = held.make(dependencyName)
        let name = uniqueName("cancelled-while-waiting")
        let operation = AsyncBlockOperation {}
        operation.name = name
        operation.addDependency(dependency)
        let cancellation = StubError("cancelled")
        let finishedWhenAdded = Recorder<Bool>()
        let lateObserverHeard = Recorder<[StubError?]>()
        operation.addObserver(CancelledObserver { operation in
            finishedWhenAdded.append(operation.isFinished)
            operation.addObserver(FinishedObserver { _, errors in lateObserverHeard.append(errors.asStubErrors) })
        })
        AsyncOperationQueue().addOperations([dependency, operation], waitUntilFinished: false)
        #expect(held.waitUntilStarted(dependencyName))

        // When it is cancelled
        operation.cancel(with: cancellation)

        // Then the observer added as the finish began is reported and hears nothing, though
        // the operation had not finished yet
        #expect(waitUntilFinished([operation]))
        #expect(finishedWhenAdded.all == [false])
        #expect(lateObserverHeard.all.isEmpty)
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.configuredTooLate])
        #expect(operation.errors.asStubErrors == [cancellation])
        held.finish(dependencyName)
        #expect(waitUntilFinished([dependency]))
    }

    // OperationObserver: "`operation(_:didProduce:)` once per produced operation; and
    // `operationDidFinish` exactly once, last, with `errors` already final." AsyncOperation.finish:
    // "call it ... from any thread".
    @Test
    func finishFromAnotherThreadWhileDidProduceIsHeard_isHeardOnlyAfterIt() {
        // Given a running operation that produces an operation, whose observer holds the
        // didProduce notification until told
        let log = Recorder<String>()
        let produceHeard = Signal()
        let letProduceEnd = Signal()
        let produced = AsyncBlockOperation {}
        let operation = ClosureOperation(name: uniqueName("producer")) { operation in
            operation.produce(produced)
        }
        operation.addObserver(BlockObserver(
            didStart: { _ in log.append("didStart") },
            didProduce: { _, _ in
                log.append("didProduce")
                produceHeard.signal()
                _ = letProduceEnd.wait()
                log.append("didProduce returned")
            },
            didFinish: { _, _ in log.append("didFinish") }
        ))
        AsyncOperationQueue().addOperation(operation)
        #expect(produceHeard.wait(timeout: generousTimeout))

        // When another thread finishes it while didProduce is still being heard
        operation.finish()
        Thread.sleep(forTimeInterval: 0.05) // a chance for a wrong finish to be delivered now
        let finishedMeanwhile = operation.isFinished
        letProduceEnd.signal()

        // Then the finish is heard after didProduce returned, once, last
        #expect(waitUntilFinished([operation, produced]))
        #expect(!finishedMeanwhile)
        #expect(log.all == ["didStart", "didProduce", "didProduce returned", "didFinish"])
        #expect(operation.errors.isEmpty)
    }

    // MARK: - Timeouts

    // TimeoutObserver: "Cancels an operation with `AsyncOperationError.timedOut` if it has not
    // finished `timeout` seconds after it started." AsyncOperation.start(): "Called by hand (or by
    // a plain `OperationQueue`), the operation evaluates its conditions and waits for its
    // categories itself, then executes."
    @Test
    func timeoutObserver_cancelsAnOperationStartedByHand() {
        // Given an operation on no queue whose continuation is never called, with a short timeout
        let events = EventLogObserver()
        let operation = AsyncBlockOperation { _ in }
        operation.addObserver(TimeoutObserver(timeout: 0.2))
        operation.addObserver(events)

        // When it is started by hand
        operation.start()

        // Then the timeout cancels it, and its observers heard start, cancel and finish once each
        #expect(waitUntilFinished([operation]))
        #expect(operation.isCancelled)
        #expect(operation.errors.asOperationErrors == [.timedOut(after: 0.2)])
        #expect(events.log.all == ["didStart", "didCancel", "didFinish"])
    }

    // TimeoutObserver: "The timer starts when the operation starts executing (time spent waiting
    // for dependencies, conditions or categories does not count)".
    @Test
    func timeSpentEvaluatingConditions_doesNotCountTowardsTheTimeout() {
        // Given an operation with a short timeout, whose condition answers only when told
        let answer = HeldCallback<ConditionResult>()
        let executed = Counter()
        let operation = AsyncBlockOperation { _ = executed.increment() }
        operation.addCondition(StubCondition(name: "Slow") { _, completion in answer.hold(completion) })
        operation.addObserver(TimeoutObserver(timeout: 0.3))
        AsyncOperationQueue().addOperation(operation)
        #expect(answer.waitUntilHeld())

        // When the condition answers after longer than the timeout
        Thread.sleep(forTimeInterval: 0.6)
        answer.call(.satisfied)

        // Then the operation runs as it would without a timeout
        #expect(waitUntilFinished([operation]))
        #expect(!operation.isCancelled)
        #expect(operation.errors.isEmpty, "\(operation.errors)")
        #expect(executed.current == 1)
    }

    // MARK: - Cancelling and finishing

    // AsyncBlockOperation: "Cancelling the operation while its continuation is pending finishes it
    // at once; a later call of the continuation is ignored." API.md 5: "an `AsyncBlockOperation`
    // whose continuation has not been called yet finishes at once; a late continuation call is
    // ignored."
    @Test
    func continuationCalledAfterACancelThatCameWhileTheBlockRan_isIgnored() {
        // Given a continuation block that is running and has not called its continuation
        let inBlock = Signal()
        let proceed = Signal()
        let cancellation = StubError("cancelled")
        let late = StubError("late")
        let finishedWith = Recorder<[StubError?]>()
        let operation = AsyncBlockOperation { finish in
            inBlock.signal()
            _ = proceed.wait()
            finish(late)
        }
        operation.addObserver(FinishedObserver { _, errors in finishedWith.append(errors.asStubErrors) })
        AsyncOperationQueue().addOperation(operation)
        let blockRunning = inBlock.wait(timeout: generousTimeout)
        #expect(blockRunning)

        // When it is cancelled, and only then calls its continuation with an error
        operation.cancel(with: cancellation)
        proceed.signal()

        // Then the late call is ignored: the operation finished with the cancellation's error only
        #expect(waitUntilFinished([operation]))
        #expect(operation.isCancelled)
        #expect(operation.errors.asStubErrors == [cancellation], "the late continuation's error was kept")
        #expect(finishedWith.all == [[cancellation]])
    }

    // API.md 3: "`finish(with:)` is idempotent: the first call wins, later calls change nothing and
    // never crash." AsyncOperation.finish(with:): "The first call wins; later calls change nothing
    // (and, unless the operation was cancelled, report a `.finishedTwice` diagnostic ...)".
    @Test
    func finishCalledTwiceOnAnOperationWaitingOnASuspendedQueue_firstCallWins() {
        // Given an operation without conditions waiting in a suspended queue's line
        let queue = AsyncOperationQueue()
        queue.name = uniqueName("suspended")
        queue.isSuspended = true
        let name = uniqueName("finished-twice-while-waiting")
        let executed = Counter()
        let operation = AsyncBlockOperation { _ = executed.increment() }
        operation.name = name
        queue.addOperation(operation)
        #expect(operation.snapshot().state == .waitingInLine)

        // When it is finished twice, with two errors, and the queue resumes
        let first = StubError("first")
        let second = StubError("second")
        operation.finish(with: first)
        operation.finish(with: second)
        queue.isSuspended = false

        // Then the first call won: one error, the second call reported, nothing executed
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.asStubErrors == [first], "the second finish(with:) changed the errors")
        #expect(executed.current == 0)
        #expect(DiagnosticsLog.shared.kinds(about: name, onceThereAre: 1).contains(.finishedTwice))
    }

    // AsyncOperation.finish(with:): "The first call wins; later calls change nothing."
    // cancel(with:): "After the operation finished, nothing changes."
    @Test
    func cancelAfterAFinishOfAnOperationWaitingOnASuspendedQueue_changesNothing() {
        // Given an operation without conditions waiting in a suspended queue's line, finished
        let queue = AsyncOperationQueue()
        queue.name = uniqueName("suspended")
        queue.isSuspended = true
        let events = EventLogObserver()
        let operation = AsyncBlockOperation {}
        operation.addObserver(events)
        queue.addOperation(operation)
        let finishError = StubError("finish")
        operation.finish(with: finishError)

        // When it is cancelled with an error, and the queue resumes
        operation.cancel(with: StubError("cancel"))
        queue.isSuspended = false

        // Then the finish stands alone: its error only, no cancel heard
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.asStubErrors == [finishError], "the cancel after the finish added its error")
        #expect(!operation.isCancelled)
        #expect(events.log.all == ["didFinish"])
    }

    // MARK: - Suspension and Foundation parity

    // AsyncOperationQueue: "`isSuspended` and `maxConcurrentOperationCount` behave as Foundation
    // documents them." Foundation, `maxConcurrentOperationCount`: "The maximum number of queued
    // operations that can run at the same time."
    @Test
    func narrowingMaxConcurrentOperationCount_keepsANewOperationBackUntilTheRunningOnesFit() {
        // Given a queue two wide, running two operations
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 2
        let held = HeldOperations()
        let prefix = uniqueName("narrowed")
        let (aName, bName, cName) = ("\(prefix)-a", "\(prefix)-b", "\(prefix)-c")
        let a = held.make(aName)
        let b = held.make(bName)
        queue.addOperations([a, b], waitUntilFinished: false)
        #expect(held.waitUntilStarted(aName))
        #expect(held.waitUntilStarted(bName))

        // When it is made serial, an operation in a free category of its own is added, and one
        // of the two running ones finishes
        queue.maxConcurrentOperationCount = 1
        let c = held.make(cName)
        c.addCondition(ExclusiveCategory(uniqueName("own")))
        queue.addOperation(c)
        held.finish(aName)
        #expect(waitUntilFinished([a]))
        Thread.sleep(forTimeInterval: 0.1) // a chance for a wrong queue to start it now

        // Then it starts only once the other has finished too
        #expect(held.startCount(cName) == 0, "two operations ran at once on a serial queue")
        held.finish(bName)
        #expect(held.waitUntilStarted(cName))
        held.finish(cName)
        #expect(waitUntilFinished([b, c]))
    }

    // MARK: - Conditions

    // API.md 1: "If any condition fails, `execute()` is never called; the operation finishes with
    // one error per failed condition, and its observers see `operationDidFinish` with those
    // errors."
    @Test
    func failedConditionsOfEveryKind_giveOneErrorEach_andObserversHearThem() {
        // Given an operation with five failing conditions of different kinds and three satisfied
        let thrown = StubError("thrown")
        let silent = StubError("silent")
        let later = StubError("later")
        let executed = Counter()
        let started = Counter()
        let finishedWith = Recorder<Int>()
        let operation = AsyncBlockOperation { _ = executed.increment() }
        operation.addCondition(BlockCondition { false })
        operation.addCondition(BlockCondition { true })
        operation.addCondition(BlockCondition { () throws -> Bool in throw thrown })
        operation.addCondition(ExclusiveCategory(uniqueName("own")))
        operation.addCondition(NegatedCondition(StubCondition.satisfied(name: "Inner")))
        operation.addCondition(NegatedCondition(BlockCondition { false }))
        operation.addCondition(SilentCondition(StubCondition.failing(silent, name: "FailsSilently")))
        operation.addCondition(StubCondition(name: "FailsLater") { _, completion in
            DispatchQueue.global().async { completion(.failed(later)) }
        })
        operation.addObserver(StartedObserver { _ in _ = started.increment() })
        operation.addObserver(FinishedObserver { _, errors in finishedWith.append(errors.count) })

        // When it is added
        AsyncOperationQueue().addOperation(operation)

        // Then it finished without executing, with exactly one error per failed condition
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 0 && started.current == 0)
        let errors = operation.errors
        #expect(errors.count == 5, "\(errors)")
        let conditionErrors = errors.compactMap { $0 as? ConditionError }
        #expect(conditionErrors.count == 2)
        #expect(conditionErrors.contains(.blockConditionFailed))
        #expect(conditionErrors.contains(.negatedConditionSatisfied("Inner")))
        #expect(Set(errors.compactMap { ($0 as? StubError)?.label }) == ["thrown", "silent", "later"])
        #expect(finishedWith.all == [5])
    }

    // API.md 1: "Conditions are evaluated after all of the operation's dependencies (those a
    // condition produced included) have finished". NoFailedDependencies: "Fails if any of the
    // operation's dependencies finished with errors."
    @Test
    func noFailedDependencies_seesTheFailureOfADependencyAConditionBrought() {
        // Given an operation with a condition that brings a dependency which fails, and
        // NoFailedDependencies
        let dependencyName = uniqueName("brought")
        let dependency = AsyncBlockOperation { throw StubError("dependency failed") }
        dependency.name = dependencyName
        let executed = Counter()
        let operation = AsyncBlockOperation { _ = executed.increment() }
        operation.addCondition(StubCondition.satisfied(bringing: dependency))
        operation.addCondition(NoFailedDependencies())

        // When it is added
        AsyncOperationQueue().addOperation(operation)

        // Then the brought dependency ran first, and its failure failed the operation
        #expect(waitUntilFinished([operation, dependency]))
        #expect(dependency.isFailed)
        #expect(executed.current == 0)
        #expect(operation.errors.compactMap { $0 as? ConditionError } == [.dependenciesFailed([dependencyName])], "\(operation.errors)")
        #expect(operation.errors.count == 1)
    }

    // NegatedCondition: "The inner condition's dependency is kept; its mutually exclusive
    // categories are not (a negated exclusion makes no sense). Fails with
    // `ConditionError.negatedConditionSatisfied`."
    @Test
    func negatedCondition_runsTheInnerConditionsDependencyFirst_thenFailsWhenTheInnerIsSatisfied() {
        // Given an operation whose negated condition's inner condition brings a dependency
        let order = Recorder<String>()
        let dependency = AsyncBlockOperation { order.append("dependency") }
        let inner = StubCondition(name: "Inner", dependency: { _ in dependency }) { _, completion in
            order.append("inner evaluated")
            completion(.satisfied)
        }
        let executed = Counter()
        let operation = AsyncBlockOperation { _ = executed.increment() }
        operation.addCondition(NegatedCondition(inner))

        // When it is added
        AsyncOperationQueue().addOperation(operation)

        // Then the dependency ran before the inner condition was evaluated, and the operation failed
        #expect(waitUntilFinished([operation, dependency]))
        #expect(order.all == ["dependency", "inner evaluated"])
        #expect(executed.current == 0)
        #expect(operation.errors.compactMap { $0 as? ConditionError } == [.negatedConditionSatisfied("Inner")])
    }

    // SilentCondition: "Evaluates a condition without producing its dependency." ... "Keeps the
    // inner condition's name, categories and evaluation." ConditionsAndMutualExclusion.md:
    // "`SilentCondition(condition)` | the wrapped condition is satisfied; the dependency it would
    // add is not".
    @Test
    func silentCondition_keepsTheInnerCategory_withoutBringingItsDependency() {
        // Given a category X held by a running operation, and an operation whose silent
        // condition's inner condition needs X and would bring a dependency
        let (x, held, holderName, holder, queue) = startHoldingACategory()
        let dependencyRan = Counter()
        let dependency = AsyncBlockOperation { _ = dependencyRan.increment() }
        let inner = StubCondition(name: "Inner", categories: [x], dependency: { _ in dependency }) { _, completion in
            completion(.satisfied)
        }
        let executed = Counter()
        let waiter = AsyncBlockOperation { _ = executed.increment() }
        waiter.addCondition(SilentCondition(inner))

        // When it is added
        queue.addOperation(waiter)

        // Then it waits for X, held by the holder, and runs once X is free, without the dependency
        #expect(waitUntil { Self.waits(waiter.snapshot(), forCategory: x, heldBy: holderName) }, "\(waiter.snapshot())")
        #expect(executed.current == 0)
        held.finish(holderName)
        #expect(waitUntilFinished([holder, waiter]))
        #expect(executed.current == 1)
        #expect(waiter.errors.isEmpty, "\(waiter.errors)")
        #expect(dependencyRan.current == 0 && !dependency.isFinished)
    }

    // MARK: - Seeing inside

    // API.md, "Seeing inside": "`AsyncOperation.debugDescription` says, while the operation waits,
    // exactly what for: ... each category it waits for with the name of the operation holding it".
    // AsyncOperation.start(): "Called by hand ..., the operation evaluates its conditions and
    // waits for its categories itself, then executes."
    @Test
    func snapshotOfAnOperationStartedByHand_namesTheHolderOfTheCategoryItWaitsFor() {
        // Given a category X held by an operation running on a queue
        let (x, held, holderName, holder, queue) = startHoldingACategory()
        let executed = Counter()
        let visitor = AsyncBlockOperation { _ = executed.increment() }
        visitor.name = uniqueName("by-hand")
        visitor.addCondition(ExclusiveCategory(x))

        // When an operation needing X is started by hand
        visitor.start()

        // Then its snapshot and debugDescription name X and its holder; it runs once X is free
        let snapshot = visitor.snapshot()
        #expect(snapshot.state == .waitingForCategories)
        let namesTheHolder = Self.waits(snapshot, forCategory: x, heldBy: holderName)
        #expect(namesTheHolder, "\(snapshot)")
        #expect(visitor.debugDescription.contains("category '\(x)' (held by '\(holderName)'"), "\(visitor.debugDescription)")
        #expect(executed.current == 0)
        held.finish(holderName)
        #expect(waitUntilFinished([holder, visitor]))
        #expect(executed.current == 1)
        #expect(visitor.errors.isEmpty)
        withExtendedLifetime(queue) {}
    }

    // API.md, "Seeing inside": "`AsyncOperationQueue.debugDescription` lists every unfinished
    // operation (held ones included) with the same explanation and whether the queue is suspended."
    @Test
    func debugDescriptionOfASuspendedQueue_listsEveryHeldOperation_withItsOwnExplanation() {
        // Given a suspended queue holding a plain operation, an operation without conditions and one
        // with a condition
        let queue = AsyncOperationQueue()
        queue.name = uniqueName("inspected")
        queue.isSuspended = true
        let plain = BlockOperation {}
        plain.name = uniqueName("plain")
        let simple = AsyncBlockOperation {}
        simple.name = uniqueName("simple")
        let conditional = AsyncBlockOperation {}
        conditional.name = uniqueName("conditional")
        conditional.addCondition(StubCondition.satisfied(name: "Satisfied"))
        queue.addOperations([plain, simple, conditional], waitUntilFinished: false)

        // When the queue describes itself
        let lines = queue.debugDescription.components(separatedBy: "\n")

        // Then it says it is suspended, and lists each operation, in add order, as it describes
        // itself (the plain one with its queue's suspension)
        #expect(lines.count == 4, "\(lines)")
        #expect(lines.first?.contains("suspended") == true, "\(lines)")
        if lines.count == 4 {
            #expect(lines[1].hasPrefix("  \(plain.name!): "), "\(lines)")
            #expect(lines[1].contains("to resume (suspended)"), "\(lines)")
            #expect(lines[2] == "  \(simple.debugDescription)")
            #expect(lines[3] == "  \(conditional.debugDescription)")
        }
        #expect(simple.debugDescription.contains("to resume (suspended)"), "\(simple.debugDescription)")
        #expect(conditional.debugDescription.contains("to resume (suspended)"), "\(conditional.debugDescription)")
        queue.isSuspended = false
        #expect(waitUntilFinished([plain, simple, conditional]))
    }

    // DebuggingAQueue.md: "``AsyncOperationQueue/stallReportThreshold`` (off by default) reports
    // each operation that has waited, not executed, longer than the threshold, once, as a
    // `.stalled` diagnostic to ``OperationDiagnostics/handler``, with the explanation above".
    // OperationDiagnostic.queueNames: "the queue the operation is on".
    @Test
    func stallWatch_reportsAnOperationWaitingOnASuspendedQueueOnce_namingTheQueue() {
        // Given a watched, suspended queue
        let queue = AsyncOperationQueue()
        let queueName = uniqueName("stalled-queue")
        queue.name = queueName
        queue.isSuspended = true
        queue.stallReportThreshold = 0.1
        let name = uniqueName("parked")
        let operation = AsyncBlockOperation {}
        operation.name = name

        // When an operation waits on it past the threshold
        queue.addOperation(operation)
        let kinds = DiagnosticsLog.shared.kinds(about: name, onceThereAre: 1)

        // Then it is reported once, naming the queue and saying that it is suspended
        #expect(kinds == [.stalled])
        Thread.sleep(forTimeInterval: 0.4) // looked at again and again: a second report would come now
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.stalled])
        let report = DiagnosticsLog.shared.diagnostics(about: name).first
        #expect(report?.queueNames == [queueName], "\(String(describing: report))")
        #expect(report?.message.contains("'\(queueName)' to resume (suspended)") == true, "\(String(describing: report))")
        queue.stallReportThreshold = nil
        queue.isSuspended = false
        #expect(waitUntilFinished([operation]))
    }

    // OperationLogEvent.Kind.waiting: "Started waiting, for what the reasons say (dependencies,
    // conditions, categories, a suspended queue, its turn on a serial queue)." DebuggingAQueue.md:
    // "`logger` (off by default) hears each operation's lifecycle with a level: added, waiting and
    // for what, ...".
    @Test
    func logger_hearsAnOperationWithoutConditionsWaitForItsTurnOnASerialQueue() {
        // Given a logging serial queue: an operation whose condition answers only when told, then
        // an operation without conditions, which waits for its turn
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.name = uniqueName("serial-logged")
        queue.maxConcurrentOperationCount = 1
        queue.logger = logger
        let answer = HeldCallback<ConditionResult>()
        let first = AsyncBlockOperation {}
        first.name = uniqueName("first")
        first.addCondition(StubCondition(name: "AnswersLater") { _, completion in answer.hold(completion) })
        let secondName = uniqueName("second")
        let second = AsyncBlockOperation {}
        second.name = secondName
        queue.addOperations([first, second], waitUntilFinished: false)
        #expect(answer.waitUntilHeld())
        #expect(second.snapshot().waitsFor == [.turnOnSerialQueue(queue.name)])

        // When the first one's condition answers, and both run
        #expect(answerAfterAChanceToGoWrong(answer))
        #expect(waitUntilFinished([first, second]))
        #expect(waitUntil { logger.kinds(of: secondName).last == .finished(errors: []) })

        // Then the logger heard the second one wait for its turn
        let kinds = logger.kinds(of: secondName)
        let heardTheWait = kinds.contains { kind in
            if case let .waiting(reasons) = kind { return reasons.contains(.turnOnSerialQueue(queue.name)) }
            return false
        }
        #expect(heardTheWait, "\(kinds)")
    }

    // OperationLogEvent.dependencyIDs: "The dependencies the operation had when it was added whose
    // events are heard too, such as the link before it in a chain: its work follows theirs. Read
    // as the operation is added: a dependency added to a logging queue after it (later in the
    // same batch, say) is not named."
    @Test
    func logEvents_nameADependencyAddedInTheSameBatchBeforeTheOperation_only() throws {
        // Given a logging queue, and an operation that depends on another
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let (upstream, downstream) = dependentPair("upstream", "downstream")
        let (upstreamName, downstreamName) = (upstream.name!, downstream.name!)

        // and, on a second logging queue, the same pair added the other way round
        let (reversedUpstream, reversedDownstream) = dependentPair("upstream-after", "downstream-first")
        let reversedDownstreamName = reversedDownstream.name!
        let reversedQueue = AsyncOperationQueue()
        reversedQueue.logger = logger

        // When each pair is added in one batch
        queue.addOperations([upstream, downstream], waitUntilFinished: false)
        reversedQueue.addOperations([reversedDownstream, reversedUpstream], waitUntilFinished: false)
        #expect(waitUntilFinished([upstream, downstream, reversedUpstream, reversedDownstream]))
        #expect(waitUntil { logger.kinds(of: downstreamName).last == .finished(errors: []) })
        #expect(waitUntil { logger.kinds(of: reversedDownstreamName).last == .finished(errors: []) })

        // Then the dependent added after its dependency names it in every event; the one added
        // before it names none
        let upstreamID = try #require(logger.events(of: upstreamName).first?.operationID)
        let downstreamEvents = logger.events(of: downstreamName)
        #expect(!downstreamEvents.isEmpty)
        #expect(downstreamEvents.allSatisfy { $0.dependencyIDs == [upstreamID] }, "\(downstreamEvents.map(\.dependencyIDs))")
        #expect(logger.events(of: reversedDownstreamName).allSatisfy { $0.dependencyIDs.isEmpty })
    }

    // MARK: - Helpers

    /// Two operations on no queue, named uniquely from the two labels, the second depending on the first.
    private func dependentPair(_ upstreamLabel: String, _ downstreamLabel: String) -> (upstream: AsyncBlockOperation, downstream: AsyncBlockOperation) {
        let upstream = AsyncBlockOperation {}
        upstream.name = uniqueName(upstreamLabel)
        let downstream = AsyncBlockOperation {}
        downstream.name = uniqueName(downstreamLabel)
        downstream.addDependency(upstream)
        return (upstream, downstream)
    }

    /// Whether `snapshot` says it waits for `category`, held by the operation named `holder`.
    private static func waits(_ snapshot: OperationSnapshot, forCategory category: String, heldBy holder: String) -> Bool {
        snapshot.waitsFor.contains { reason in
            if case let .category(name, heldBy, _) = reason {
                return name == category && heldBy == holder
            }
            return false
        }
    }

}
