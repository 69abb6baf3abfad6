import Conditions
import Foundation
import Operations
import Testing
import TestSupport

// Round 12 of the adversarial probes: "seeing inside" and its neighbours. The logging hook
// (OperationLogger, the order, fields and levels of OperationLogEvent, minimumLevel filtering,
// PrintLogger's lines and its write closure, MultiplexOperationLogger), snapshots and
// debugDescriptions (what an operation waits for: dependencies, conditions, categories with
// their holders on other queues, in groups, a suspended queue, a free slot, a group to start),
// the stall watch (what it reports and for whom), OperationDiagnostics (the handler,
// resetHandler, the kinds reported and the operation and queues they name) and addChain (order,
// a cancelled link, waiting, snapshots of its links). Sources: /work/shared/API.md, README.md,
// the DocC articles (DebuggingAQueue.md) and the `///` comments of public symbols; each probe
// quotes the sentence it checks. Every wait is bounded, nothing asserts on wall-clock speed,
// and a short sleep appears only to show that something does not happen. The process-wide
// diagnostics handler is replaced only in a child process of the test binary; loggers are
// per queue.
//
// FOUND: the stall watch reports a holder that has been executing since before the watch was set
//        with an exact time counted from the look that first saw an operation wait for it, not
//        "at least" (stallReport_forAHolderExecutingSinceBeforeTheWatchWasSet_saysAtLeast_
//        alsoForAWaiterThatCameLater).
// FOUND: the stall watch forgets a holder's executing time at the first look where no operation of
//        its queue waits for it, and times it afresh, as exact, for the next waiter
//        (stallReport_forASecondWaiterOnTheSameHolder_timesTheHolderFromWhenTheWatchFirstSawItExecute).
// FOUND: along a chain, a link after one that failed both by its own condition and by its upstream
//        gets upstreamFailed naming that link, not the first that failed
//        (chainWhoseSecondLinkAlsoHasAFailingConditionOfItsOwn_namesTheFirstLinkToTheThird).
// FOUND: a serial group's child says it waits for its turn on serial queue 'GroupOperation
//        children', the same for every group, where messages call that queue "children of <group>"
//        (snapshotOfASerialGroupsSecondChild_saysItWaitsForItsTurn_namingTheQueueAfterTheGroup).

/// Whether `kind` is a `.waiting` event.
private func isWaiting(_ kind: OperationLogEvent.Kind) -> Bool {
    if case .waiting = kind { return true }
    return false
}

/// The reasons of the `.waiting` events among `kinds`, in order.
private func waitingReasons(_ kinds: [OperationLogEvent.Kind]) -> [[OperationSnapshot.Reason]] {
    kinds.compactMap { kind in
        if case let .waiting(reasons) = kind { return reasons }
        return nil
    }
}

/// A `RecordingLogger` that hears events from `minimumLevel` up.
private func recordingLogger(from minimumLevel: OperationLogLevel) -> RecordingLogger {
    var logger = RecordingLogger()
    logger.minimumLevel = minimumLevel
    return logger
}

/// A queue named uniquely after `label`.
private func namedQueue(_ label: String) -> AsyncOperationQueue {
    let queue = AsyncOperationQueue()
    queue.name = uniqueName(label)
    return queue
}

/// An `AsyncBlockOperation` named `name` that does nothing, or throws `error` if given.
private func quickOperation(_ name: String, throwing error: (any Error)? = nil) -> AsyncBlockOperation {
    let operation = AsyncBlockOperation {
        if let error { throw error }
    }
    operation.name = name
    return operation
}

/// A logger that writes "`tag`:`kind name`" into a log shared with other loggers, from its own
/// minimum level: to see which logger heard what, in which order.
private struct TaggedLogger: OperationLogger {
    let tag: String
    let minimumLevel: OperationLogLevel
    let log: Recorder<String>

    func log(_ event: OperationLogEvent) {
        log.append("\(tag):\(event.kind.name)")
    }
}

@Suite struct SeeingInsideProbeTests {
    // MARK: - The logging hook: order and fields

    // DebuggingAQueue.md: "`logger` (off by default) hears each operation's lifecycle with a
    // level: added, waiting and for what, conditions answered, categories granted, started,
    // cancelled, produced, finished with errors." OperationLogEvent.operationID: "the same in
    // every event of its life". queueName: "The name given to the queue the operation was added to".
    @Test
    func logger_hearsAConditionedExclusiveOperation_added_conditionsPassed_granted_started_finished_inThatOrder() {
        // Given a named logging queue, and an operation with a passing condition and a category
        let logger = RecordingLogger()
        let queue = namedQueue("logged")
        queue.logger = logger
        let x = uniqueName("X")
        let name = uniqueName("ordered")
        let operation = quickOperation(name)
        operation.addCondition(StubCondition.satisfied(name: "Passes"))
        operation.addCondition(ExclusiveCategory(x))

        // When it runs
        queue.addOperation(operation)
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { logger.kinds(of: name).last == .finished(errors: []) })

        // Then the logger heard its way to execution in order, each event once, all with one
        // identity and the queue's name
        let kinds = logger.kinds(of: name).filter { !isWaiting($0) }
        #expect(kinds == [.added, .conditionsAnswered(failures: 0), .categoriesGranted([x]), .started, .finished(errors: [])], "\(kinds)")
        let events = logger.events(of: name)
        #expect(Set(events.map(\.operationID)).count == 1)
        #expect(events.allSatisfy { $0.queueName == queue.name }, "\(events.map(\.queueName))")
        #expect(events.allSatisfy { !$0.isFoundationOperation && $0.groupID == nil })
    }

    // OperationLogEvent.errors: "for `.cancelled`, those it had when it was cancelled (the reason
    // it was given, if any)"; "for `.finished`, the operation's final errors". OperationLogLevel:
    // "notice: Cancelled", "warning: Finished with errors". API.md 5: cancelled before it
    // starts, "it finishes without executing, with that error".
    @Test
    func logger_hearsAnOperationCancelledWithAReasonWhileItWaits_cancelledWithIt_thenFinishedWithIt_neverStarted() {
        // Given a logging queue, and an operation waiting there for a dependency that runs until told
        let logger = RecordingLogger()
        let queue = namedQueue("cancel-logged")
        queue.logger = logger
        let held = HeldOperations()
        let dependencyName = uniqueName("dependency")
        let dependency = held.make(dependencyName)
        let name = uniqueName("cancelled-waiting")
        let operation = quickOperation(name)
        operation.addDependency(dependency)
        queue.addOperations([dependency, operation], waitUntilFinished: false)
        #expect(held.waitUntilStarted(dependencyName))

        // When it is cancelled with a reason
        let reason = StubError("no longer wanted")
        operation.cancel(with: reason)
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { logger.kinds(of: name).last == .finished(errors: ["\(reason)"]) }, "\(logger.kinds(of: name))")

        // Then it was heard added, cancelled with the reason, finished with it; never started
        let events = logger.events(of: name).filter { !isWaiting($0.kind) }
        #expect(events.map(\.kind) == [.added, .cancelled, .finished(errors: ["\(reason)"])], "\(events.map(\.kind))")
        #expect(events.map(\.level) == [.debug, .notice, .warning])
        #expect(events.dropFirst().map { $0.errors.asStubErrors } == [[reason], [reason]])
        held.finish(dependencyName)
        #expect(waitUntilFinished([dependency]))
    }

    // LogEventOrder: "An operation's first event is `.added`: an event made before it ... is kept
    // and heard right after it, and after the cancellation the logger joined too late to hear,
    // if there was one." OperationLogger: "Each event comes once."
    @Test
    func logger_hearsAnOperationCancelledBeforeItWasAdded_addedFirst_thenCancelled_thenFinished() {
        // Given an operation cancelled while on no queue, and a logging queue
        let logger = RecordingLogger()
        let queue = namedQueue("late-logged")
        queue.logger = logger
        let name = uniqueName("cancelled-first")
        let operation = quickOperation(name)
        operation.cancel()

        // When it is added
        queue.addOperation(operation)
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { logger.kinds(of: name).last == .finished(errors: []) }, "\(logger.kinds(of: name))")

        // Then the logger heard it added first, then the cancellation, then the finish, once each
        #expect(logger.kinds(of: name).filter { !isWaiting($0) } == [.added, .cancelled, .finished(errors: [])])
    }

    // OperationLogger.minimumLevel: "Events below this level are not even made."
    // OperationLogLevel: "debug: The way to execution: added, waiting, conditions answered,
    // categories granted, produced"; "info: Started, and finished without errors."
    @Test
    func loggerFromInfo_isNeverHandedAnEventOfTheWayToExecution_andHearsTheStartAndTheFinish() {
        // Given a queue logging from .info up, and an operation with a dependency, a condition
        // and a category
        let logger = recordingLogger(from: .info)
        let queue = namedQueue("info-logged")
        queue.logger = logger
        let dependencyName = uniqueName("dependency")
        let dependency = quickOperation(dependencyName)
        let name = uniqueName("info-only")
        let operation = quickOperation(name)
        operation.addDependency(dependency)
        operation.addCondition(StubCondition.satisfied(name: "Passes"))
        operation.addCondition(ExclusiveCategory(uniqueName("X")))

        // When both run
        queue.addOperations([dependency, operation], waitUntilFinished: false)
        #expect(waitUntilFinished([dependency, operation]))
        #expect(waitUntil { logger.kinds(of: name).last == .finished(errors: []) })

        // Then the logger heard only the starts and the finishes
        #expect(logger.kinds(of: name) == [.started, .finished(errors: [])])
        #expect(logger.kinds(of: dependencyName) == [.started, .finished(errors: [])])
        #expect(logger.events.all.allSatisfy { $0.level >= .info })
    }

    // PrintLogger: "queue.logger = PrintLogger(minimumLevel: .warning)    // only operations that
    // failed". OperationLogLevel.warning: "Finished with errors."
    @Test
    func loggerFromWarning_hearsOnlyTheFinishOfTheOperationThatFailed() {
        // Given a queue logging from .warning up
        let logger = recordingLogger(from: .warning)
        let queue = namedQueue("warning-logged")
        queue.logger = logger
        let goodName = uniqueName("succeeds")
        let badName = uniqueName("fails")
        let failure = StubError("broken")

        // When one operation succeeds and one throws
        let good = quickOperation(goodName)
        let bad = quickOperation(badName, throwing: failure)
        queue.addOperations([good, bad], waitUntilFinished: false)
        #expect(waitUntilFinished([good, bad]))
        #expect(waitUntil { !logger.kinds(of: badName).isEmpty })
        Thread.sleep(forTimeInterval: 0.1) // a late event about the good one would come now

        // Then only the failed finish was heard, at .warning, with the error itself
        #expect(logger.kinds(of: goodName).isEmpty, "\(logger.kinds(of: goodName))")
        let events = logger.events(of: badName)
        #expect(events.map(\.kind) == [.finished(errors: ["\(failure)"])])
        #expect(events.map(\.level) == [.warning])
        #expect(events.first?.errors.asStubErrors == [failure])
    }

    // OperationLogger: "a logger whose `minimumLevel` is `.error` (the framework's own events
    // are never that serious): its queue does not even attach it." OperationLogLevel.error: "the
    // framework's own events never use it".
    @Test
    func loggerFromError_isNeverCalled_whateverItsOperationsDo() {
        // Given a queue whose logger wants only .error
        let logger = recordingLogger(from: .error)
        let queue = namedQueue("error-logged")
        queue.logger = logger
        let failing = quickOperation(uniqueName("fails"), throwing: StubError())
        let cancelled = quickOperation(uniqueName("cancelled"))
        cancelled.cancel(with: StubError())
        let fine = quickOperation(uniqueName("fine"))

        // When operations fail, are cancelled and succeed on it
        queue.addOperations([failing, cancelled, fine], waitUntilFinished: false)
        #expect(waitUntilFinished([failing, cancelled, fine]))
        Thread.sleep(forTimeInterval: 0.1) // a late event would come now

        // Then the logger heard nothing
        #expect(logger.events.count == 0, "\(logger.events.all.map(\.description))")
    }

    // OperationLogEvent.queueName: "`nil` while the queue has Foundation's default name".
    // PrintLogger: "Each line is the event's level in brackets, its queue's name (when the queue
    // was given one) and the event's `description`."
    @Test
    func logEventsOfAnUnnamedQueue_carryNoQueueName_andPrintLoggerLinesHaveNoQueuePart() {
        // Given an unnamed queue logging to a recorder and to a PrintLogger from .info up
        let recording = RecordingLogger()
        let lines = Recorder<String>()
        let queue = AsyncOperationQueue()
        queue.logger = MultiplexOperationLogger([recording, PrintLogger(minimumLevel: .info) { lines.append($0) }])
        let name = uniqueName("unnamed-queue")
        let operation = quickOperation(name)

        // When an operation runs on it
        queue.addOperation(operation)
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { lines.count >= 2 })

        // Then no event names a queue, and the lines are the level and the description only
        #expect(recording.events(of: name).allSatisfy { $0.queueName == nil }, "\(recording.events(of: name).map(\.queueName))")
        #expect(lines.all == ["[info] \(name): started", "[info] \(name): finished"])
    }

    // PrintLogger.init(minimumLevel:write:): "Creates a logger that hands each line (without its
    // line break) to `write`"; line(for:): "The line for `event`". MultiplexOperationLogger: "Its
    // own `minimumLevel` is the lowest of theirs ..., so an event is made if any of them wants
    // it, and given only to those that do."
    @Test
    func printLoggerBehindAMultiplexer_writesTheLineForEachEventFromItsLevel_only_withoutLineBreaks() {
        // Given a named queue logging through a multiplexer to a recorder (everything) and a
        // PrintLogger from .notice up
        let recording = RecordingLogger()
        let lines = Recorder<String>()
        let multiplexer = MultiplexOperationLogger([PrintLogger(minimumLevel: .notice) { lines.append($0) }, recording])
        #expect(multiplexer.minimumLevel == .trace)
        let queue = namedQueue("multiplexed")
        queue.logger = multiplexer
        let held = HeldOperations()
        let name = uniqueName("cancelled-running")
        let operation = held.make(name)
        operation.addCondition(ExclusiveCategory(uniqueName("X")))

        // When an operation runs and is cancelled with a reason
        queue.addOperation(operation)
        #expect(held.waitUntilStarted(name))
        operation.cancel(with: StubError("cut short"))
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { recording.kinds(of: name).last.map { if case .finished = $0 { true } else { false } } == true })

        // Then the PrintLogger wrote, for the events from .notice up that the recorder heard,
        // exactly their lines, in order, none with a line break
        let expected = recording.events(of: name).filter { $0.level >= .notice }.map(PrintLogger.line(for:))
        #expect(expected.count == 2, "\(recording.kinds(of: name))")
        #expect(lines.all == expected, "\(lines.all)")
        #expect(lines.all.allSatisfy { !$0.contains("\n") })
        #expect(recording.kinds(of: name).first == .added)
    }

    // PrintLogger.line(for:): "`[info] ledger: migrate: started`"; PrintLogger's example "//
    // [warning] ledger: sync: finished with errors: the operation did not finish within 30 s of
    // starting"; OperationLogEvent.description: "such as `save: waiting for category 'Database'
    // (held by 'migrate'; 1st in line)`".
    @Test
    func printLoggerLine_isTheLevelInBrackets_theQueuesName_thenTheDescription_asDocumented() {
        // Given events as the documentation shows them
        let started = OperationLogEvent(operationName: "migrate", queueName: "ledger", kind: .started)
        let waiting = OperationLogEvent(operationName: "save", queueName: "ledger", kind: .waiting([.category("Database", heldBy: "migrate", waitersAhead: 0)]))
        let failed = OperationLogEvent(operationName: "sync", queueName: "ledger", kind: .finished(errors: [AsyncOperationError.timedOut(after: 30).description]))
        let unnamed = OperationLogEvent(operationName: "migrate", queueName: nil, kind: .cancelled)

        // When PrintLogger makes their lines
        let lines = [started, waiting, failed, unnamed].map(PrintLogger.line(for:))

        // Then they are the documented ones
        #expect(lines == [
            "[info] ledger: migrate: started",
            "[debug] ledger: save: waiting for category 'Database' (held by 'migrate'; 1st in line)",
            "[warning] ledger: sync: finished with errors: the operation did not finish within 30 s of starting",
            "[notice] migrate: cancelled",
        ])
    }

    // MultiplexOperationLogger: "Gives `event` to every logger whose `minimumLevel` it reaches.
    // ... The loggers are called one after another, in order"; minimumLevel: "The lowest
    // `minimumLevel` of `loggers` (`.error`, the quietest, if there are none)."
    @Test
    func multiplexer_callsItsLoggersInOrder_eachFromItsOwnLevel_andWithoutLoggersIsAtError() {
        // Given a multiplexer of a logger from .trace and one from .warning, sharing a log
        let log = Recorder<String>()
        let multiplexer = MultiplexOperationLogger([
            TaggedLogger(tag: "first", minimumLevel: .trace, log: log),
            TaggedLogger(tag: "second", minimumLevel: .warning, log: log),
        ])

        // When it is handed a failed finish, then a start
        multiplexer.log(OperationLogEvent(operationName: "a", queueName: nil, kind: .finished(errors: ["boom"])))
        multiplexer.log(OperationLogEvent(operationName: "a", queueName: nil, kind: .started))

        // Then both heard the finish, in order, and only the first the start
        #expect(log.all == ["first:finished", "second:finished", "first:started"])
        #expect(multiplexer.minimumLevel == .trace)
        #expect(MultiplexOperationLogger([]).minimumLevel == .error)
    }

    // OperationLogEvent.isFoundationOperation: "`true` for a plain Foundation operation ..., of
    // which a logger hears only `.added`". OperationID: "a number given to it when it joins a
    // queue that has a logger, unique in the process".
    @Test
    func logEventsOfPlainOperations_areOnlyTheirAdds_markedAsFoundations_eachWithAnIdentityOfItsOwn() {
        // Given a named logging queue
        let logger = RecordingLogger()
        let queue = namedQueue("plain-logged")
        queue.logger = logger
        let names = (uniqueName("plain-a"), uniqueName("plain-b"))
        let first = BlockOperation {}
        first.name = names.0
        let second = BlockOperation {}
        second.name = names.1

        // When two plain operations run on it
        queue.addOperations([first, second], waitUntilFinished: false)
        #expect(waitUntilFinished([first, second]))
        Thread.sleep(forTimeInterval: 0.1) // a late event would come now

        // Then each was heard added, only, as Foundation's, with distinct identities
        let a = logger.events(of: names.0)
        let b = logger.events(of: names.1)
        #expect(a.map(\.kind) == [.added] && b.map(\.kind) == [.added], "\(a.map(\.kind)) \(b.map(\.kind))")
        #expect((a + b).allSatisfy { $0.isFoundationOperation && $0.queueName == queue.name })
        #expect(a.first?.operationID != b.first?.operationID)
        #expect(a.first?.operationID.rawValue != 0 && b.first?.operationID.rawValue != 0)
    }

    // OperationLogEvent.dependencyIDs: "such as the link before it in a chain: its work follows
    // theirs." addChain: "Every operation gets a dependency on the operation before it".
    @Test
    func logEventsOfAChainsLinks_eachNameTheLinkBeforeIt_andTheFirstNone() throws {
        // Given a logging queue and three links
        let logger = RecordingLogger()
        let queue = namedQueue("chain-logged")
        queue.logger = logger
        let names = [uniqueName("link-0"), uniqueName("link-1"), uniqueName("link-2")]
        let links = names.map { quickOperation($0) }

        // When they are added as a chain
        queue.addChain(links)
        #expect(waitUntilFinished(links))
        #expect(waitUntil { names.allSatisfy { logger.kinds(of: $0).last == .finished(errors: []) } })

        // Then each link's events name the link before it
        let ids = try names.map { try #require(logger.id(of: $0)) }
        #expect(logger.events(of: names[0]).allSatisfy { $0.dependencyIDs.isEmpty })
        #expect(logger.events(of: names[1]).allSatisfy { $0.dependencyIDs == [ids[0]] }, "\(logger.events(of: names[1]).map(\.dependencyIDs))")
        #expect(logger.events(of: names[2]).allSatisfy { $0.dependencyIDs == [ids[1]] }, "\(logger.events(of: names[2]).map(\.dependencyIDs))")
    }

    // DebuggingAQueue.md: the logger hears "waiting and for what"; OperationLogEvent.Kind.waiting:
    // "Started waiting, for what the reasons say (... categories ...)"; Reason.category: "the
    // operation holding it ..., and how many operations stand ahead of this one".
    @Test
    func waitingEvent_forACategoryHeldOnAnotherQueue_namesItsHolder_andFirstInLine_thenGrantedOnceFree() {
        // Given X held on another queue, and a logging queue
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let logger = RecordingLogger()
        let queue = namedQueue("category-logged")
        queue.logger = logger
        let name = uniqueName("waits-for-x")
        let operation = quickOperation(name)
        operation.addCondition(ExclusiveCategory(x))

        // When an operation needing X is added there, and X is freed
        queue.addOperation(operation)
        #expect(waitUntil { !waitingReasons(logger.kinds(of: name)).isEmpty })
        held.finish(holderName)
        #expect(waitUntilFinished([holder, operation]))
        #expect(waitUntil { logger.kinds(of: name).last == .finished(errors: []) })

        // Then it was heard waiting for X held by the holder, 1st in line, then granted X
        let reasons = waitingReasons(logger.kinds(of: name))
        #expect(reasons.last == [.category(x, heldBy: holderName, waitersAhead: 0)], "\(reasons)")
        let afterWaiting = logger.kinds(of: name).drop { $0 != .categoriesGranted([x]) }
        #expect(Array(afterWaiting) == [.categoriesGranted([x]), .started, .finished(errors: [])], "\(logger.kinds(of: name))")
    }

    // OperationLogEvent.Kind.waiting: "Started waiting, for what the reasons say (dependencies,
    // conditions, categories, a suspended queue, its turn on a serial queue)": a suspended queue,
    // then, once it resumes, a category held elsewhere.
    @Test
    func logger_hearsAnOperationWaitForItsSuspendedQueue_thenForTheCategoryHeldElsewhere_onceTheQueueResumes() {
        // Given X held on another queue, and a suspended logging queue
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let logger = RecordingLogger()
        let queue = namedQueue("suspended-logged")
        queue.isSuspended = true
        queue.logger = logger
        let name = uniqueName("parked")
        let operation = quickOperation(name)
        operation.addCondition(ExclusiveCategory(x))

        // When an operation needing X is added, and the queue resumes
        queue.addOperation(operation)
        #expect(waitUntil { waitingReasons(logger.kinds(of: name)).contains([.suspendedQueue(queue.name)]) }, "\(logger.kinds(of: name))")
        queue.isSuspended = false

        // Then the logger hears it wait for X, held by the holder
        #expect(waitUntil { waitingReasons(logger.kinds(of: name)).contains([.category(x, heldBy: holderName, waitersAhead: 0)]) }, "\(logger.kinds(of: name))")
        held.finish(holderName)
        #expect(waitUntilFinished([holder, operation]))
    }

    // OperationLogEvent.queueName: "Read as the operation is added (a group's child: as its group
    // joins a logging queue)"; groupID: "The GroupOperation ... whose child the operation is".
    // Reason.groupToStart: "It is a child of a group (by name) that has not started executing."
    @Test
    func logger_hearsAGroupsChild_waitForItsGroupToStart_withTheGroupsID() throws {
        // Given a suspended logging queue and a group with a child
        let logger = RecordingLogger()
        let queue = namedQueue("group-logged")
        queue.isSuspended = true
        queue.logger = logger
        let childName = uniqueName("child")
        let child = quickOperation(childName)
        let group = GroupOperation(operations: [child])
        let groupName = uniqueName("group")
        group.name = groupName

        // When the group is added, then the queue resumes
        queue.addOperation(group)
        #expect(waitUntil { logger.kinds(of: childName).first == .added })
        queue.isSuspended = false
        #expect(waitUntilFinished([group, child]))
        #expect(waitUntil { logger.kinds(of: childName).last == .finished(errors: []) })

        // Then the child was heard waiting for its group to start, with the group's identity
        #expect(waitingReasons(logger.kinds(of: childName)).contains([.groupToStart(groupName)]), "\(logger.kinds(of: childName))")
        let groupID = try #require(logger.id(of: groupName))
        #expect(logger.events(of: childName).allSatisfy { $0.groupID == groupID })
    }

    // AsyncOperationQueue.logger: "Hears the lifecycle of every operation added from now on";
    // OperationLogger: "Each event comes once". README: adding an operation already on a queue
    // is ignored ("the second add is ignored; the operation runs once").
    @Test
    func operationRefusedByASecondLoggingQueue_isHeardOnlyByItsOwnQueuesLogger_onceEach() {
        // Given an operation waiting on a suspended logging queue
        let (own, other) = (RecordingLogger(), RecordingLogger())
        let queue = namedQueue("own-logged")
        queue.isSuspended = true
        queue.logger = own
        let name = uniqueName("added-twice")
        let operation = quickOperation(name)
        queue.addOperation(operation)

        // When a second logging queue, and its own queue again, are asked to take it
        let second = namedQueue("refusing-logged")
        second.logger = other
        second.addOperation(operation)
        queue.addOperation(operation)
        queue.isSuspended = false
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { own.kinds(of: name).last == .finished(errors: []) })
        Thread.sleep(forTimeInterval: 0.1) // a late event would come now

        // Then the refusing queue's logger heard nothing, and its own queue's heard each event once
        #expect(other.kinds(of: name).isEmpty, "\(other.kinds(of: name))")
        #expect(own.kinds(of: name).filter { !isWaiting($0) } == [.added, .started, .finished(errors: [])], "\(own.kinds(of: name))")
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.addedTwice, .addedTwice])
    }

    // MARK: - Snapshots and debugDescription

    // API.md, Seeing inside: "`AsyncOperation.debugDescription` says, while the operation waits,
    // exactly what for: unfinished dependencies by name"; the queue's "lists every unfinished
    // operation ... with the same explanation". QueueSnapshot: "the queue's `debugDescription`
    // is its `description`".
    @Test
    func snapshotOfAnOperationWaitingForADependencyOnAnotherQueue_namesIt_andItsQueueListsTheSameLine() {
        // Given a dependency running on one queue until told, and an operation on another
        let held = HeldOperations()
        let dependencyName = uniqueName("elsewhere")
        let dependency = held.make(dependencyName)
        AsyncOperationQueue().addOperation(dependency)
        #expect(held.waitUntilStarted(dependencyName))
        let queue = namedQueue("waiting-queue")
        let name = uniqueName("waits-across")
        let operation = quickOperation(name)
        operation.addDependency(dependency)

        // When it waits
        queue.addOperation(operation)

        // Then it names the dependency, and its queue's snapshot lists the same
        let snapshot = operation.snapshot()
        #expect(snapshot.state == .waitingForDependencies)
        #expect(snapshot.waitsFor == [.dependency(dependencyName)])
        #expect(operation.debugDescription == "\(name): waiting for dependencies; waits for dependency '\(dependencyName)'")
        #expect(queue.snapshot().operations == [snapshot])
        #expect(queue.debugDescription == queue.snapshot().description)
        held.finish(dependencyName)
        #expect(waitUntilFinished([dependency, operation]))
    }

    // API.md, Seeing inside: "each category it waits for with the name of the operation holding
    // it". API.md 2: "An operation in several categories holds all of them."
    @Test
    func snapshotOfAnOperationWaitingForTwoCategoriesHeldOnTwoQueues_namesEachWithItsHolder() {
        // Given X and Y held by two operations on two queues
        let (x, heldX, holderX, opX, _) = startHoldingACategory()
        let (y, heldY, holderY, opY, _) = startHoldingACategory()
        let name = uniqueName("needs-both")
        let operation = quickOperation(name)
        operation.addCondition(ExclusiveCategory(x))
        operation.addCondition(ExclusiveCategory(y))

        // When an operation needing both waits
        let queue = namedQueue("two-categories")
        queue.addOperation(operation)
        #expect(waitUntil { operation.snapshot().state == .waitingForCategories && operation.snapshot().waitsFor.count == 2 })

        // Then it names each category with its holder
        let reasons = Set(operation.snapshot().waitsFor)
        #expect(reasons == [.category(x, heldBy: holderX, waitersAhead: 0), .category(y, heldBy: holderY, waitersAhead: 0)], "\(operation.snapshot())")
        heldX.finish(holderX)
        #expect(waitUntil { operation.snapshot().waitsFor == [.category(y, heldBy: holderY, waitersAhead: 0)] }, "\(operation.snapshot())")
        heldY.finish(holderY)
        #expect(waitUntilFinished([opX, opY, operation]))
    }

    // API.md, Seeing inside: "each category it waits for with the name of the operation holding
    // it"; API.md 2: mutual exclusion holds "also when they sit on different queues"; GroupOperation:
    // "Children run with the full engine: dependencies, conditions, mutual exclusion".
    @Test
    func snapshotNamesAGroupsChild_asTheHolderOfACategoryItHolds_forAWaiterOnAnotherQueue() {
        // Given a group on one queue whose child holds X and runs until told
        let x = uniqueName("X")
        let held = HeldOperations()
        let childName = uniqueName("child-holder")
        let child = held.make(childName)
        child.addCondition(ExclusiveCategory(x))
        let group = GroupOperation(operations: [child])
        group.name = uniqueName("holding-group")
        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted(childName))

        // When an operation needing X waits on another queue
        let name = uniqueName("waits-for-child")
        let operation = quickOperation(name)
        operation.addCondition(ExclusiveCategory(x))
        namedQueue("other").addOperation(operation)
        #expect(waitUntil { !operation.snapshot().waitsFor.isEmpty })

        // Then it names the child as the holder
        #expect(operation.snapshot().waitsFor == [.category(x, heldBy: childName, waitersAhead: 0)], "\(operation.snapshot())")
        held.finish(childName)
        #expect(waitUntilFinished([group, operation]))
    }

    // The same sentence, for a category the group itself holds while its children run.
    @Test
    func snapshotNamesTheGroup_asTheHolderOfACategoryTheGroupHolds_whileItsChildRuns() {
        // Given a group holding X, whose child runs until told
        let x = uniqueName("X")
        let held = HeldOperations()
        let childName = uniqueName("child")
        let group = GroupOperation(operations: [held.make(childName)])
        let groupName = uniqueName("x-group")
        group.name = groupName
        group.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted(childName))

        // When an operation needing X waits on another queue
        let operation = quickOperation(uniqueName("waits-for-group"))
        operation.addCondition(ExclusiveCategory(x))
        namedQueue("other").addOperation(operation)
        #expect(waitUntil { !operation.snapshot().waitsFor.isEmpty })

        // Then it names the group as the holder
        #expect(operation.snapshot().waitsFor == [.category(x, heldBy: groupName, waitersAhead: 0)], "\(operation.snapshot())")
        held.finish(childName)
        #expect(waitUntilFinished([group, operation]))
    }

    // Reason.groupToStart: "It is a child of a group (by name) that has not started executing."
    // GroupOperation: children "start when the group executes; until then they wait".
    @Test
    func snapshotOfAGroupsChild_whileTheGroupWaitsOnASuspendedQueue_saysItWaitsForItsGroupToStart() {
        // Given a group on a suspended queue
        let queue = namedQueue("suspended-for-group")
        queue.isSuspended = true
        let childName = uniqueName("child")
        let child = quickOperation(childName)
        let group = GroupOperation(operations: [child])
        let groupName = uniqueName("unstarted-group")
        group.name = groupName

        // When it is added
        queue.addOperation(group)

        // Then its child waits for the group to start; the group for its queue
        #expect(child.snapshot().waitsFor == [.groupToStart(groupName)], "\(child.snapshot())")
        #expect(child.debugDescription.contains("its group '\(groupName)' to start"), "\(child.debugDescription)")
        #expect(group.snapshot().waitsFor == [.suspendedQueue(queue.name)], "\(group.snapshot())")
        queue.isSuspended = false
        #expect(waitUntilFinished([group, child]))
    }

    // API.md 10: "A suspended queue evaluates no condition, takes no category and starts
    // nothing." DebuggingAQueue.md: it says what it waits for: "... a suspended queue".
    @Test
    func snapshotOfAnOperationNeedingACategoryHeldElsewhere_onASuspendedQueue_saysOnlyThatTheQueueIsSuspended() {
        // Given X held on another queue, and a suspended queue
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let queue = namedQueue("suspended")
        queue.isSuspended = true
        let operation = quickOperation(uniqueName("parked"))
        operation.addCondition(ExclusiveCategory(x))

        // When an operation needing X is added to the suspended queue
        queue.addOperation(operation)

        // Then it waits in line for the queue to resume, and for nothing else yet
        let snapshot = operation.snapshot()
        #expect(snapshot.state == .waitingInLine, "\(snapshot)")
        #expect(snapshot.waitsFor == [.suspendedQueue(queue.name)], "\(snapshot)")
        queue.isSuspended = false
        #expect(waitUntil { operation.snapshot().waitsFor == [.category(x, heldBy: holderName, waitersAhead: 0)] }, "\(operation.snapshot())")
        held.finish(holderName)
        #expect(waitUntilFinished([holder, operation]))
    }

    // Reason.freeSlot: "It needs mutually exclusive categories, and every slot of its queue (by
    // name) is taken: it asks for them once it could start (it holds none meanwhile)."
    @Test
    func snapshotOfAnOperationNeedingAFreeCategory_onAQueueWhoseSlotsAreTaken_saysItWaitsForAFreeSlot() {
        // Given a queue of width 2 whose slots are taken
        let queue = namedQueue("full")
        let held = HeldOperations()
        let (first, second) = takeBothSlots(of: queue, with: held)
        let x = uniqueName("X")
        let operation = quickOperation(uniqueName("no-slot"))
        operation.addCondition(ExclusiveCategory(x))

        // When an operation needing a free category is added
        queue.addOperation(operation)

        // Then it waits for a free slot on that queue, and does not hold X meanwhile
        #expect(waitUntil { operation.snapshot().waitsFor == [.freeSlot(onQueue: queue.name)] }, "\(operation.snapshot())")
        let other = quickOperation(uniqueName("takes-x"))
        other.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(other)
        #expect(waitUntilFinished([other]), "X was held by an operation without a slot")
        held.finish(first)
        held.finish(second)
        #expect(waitUntilFinished([operation]))
    }

    // QueueSnapshot.description: "A header line, then one line per operation"; its example
    // "AsyncOperationQueue 'sync': suspended, 2 unfinished operations" and "migrate: waiting in
    // line; waits for its queue 'sync' to resume (suspended)".
    @Test
    func queueSnapshotOfASuspendedSerialQueue_saysSuspendedSerial_countsOneOperation_andExplainsIt() {
        // Given a suspended serial queue with one operation
        let queue = serialAsyncQueue(uniqueName("serial-suspended"))
        queue.isSuspended = true
        let name = uniqueName("held")
        let operation = quickOperation(name)
        queue.addOperation(operation)

        // When it is described
        let snapshot = queue.snapshot()

        // Then the header and the line are the documented ones
        #expect(snapshot.isSuspended && snapshot.maxConcurrentOperationCount == 1 && snapshot.name == queue.name)
        #expect(snapshot.description == """
            AsyncOperationQueue '\(queue.name!)': suspended, serial, 1 unfinished operation
              \(name): waiting in line; waits for its queue '\(queue.name!)' to resume (suspended)
            """)
        queue.isSuspended = false
        #expect(waitUntilFinished([operation]))
    }

    // AsyncOperationQueue.snapshot(): "every unfinished operation on it ..., in add order, each
    // with what it waits for" (plain ones included: API.md, allOperations).
    @Test
    func queueSnapshot_saysWhatAPlainOperationWaitsFor_itsUnfinishedDependencyByName() {
        // Given an operation running until told, and a plain operation depending on it
        let held = HeldOperations()
        let dependencyName = uniqueName("running")
        let dependency = held.make(dependencyName)
        let plainName = uniqueName("plain-dependent")
        let plain = BlockOperation {}
        plain.name = plainName
        plain.addDependency(dependency)
        let queue = namedQueue("plain-waits")

        // When both are on the queue
        queue.addOperations([dependency, plain], waitUntilFinished: false)
        #expect(held.waitUntilStarted(dependencyName))

        // Then the plain one's line names the dependency
        let line = queue.snapshot().operations.first { $0.name == plainName }
        #expect(line?.state == .waitingForDependencies, "\(queue.snapshot())")
        #expect(line?.waitsFor == [.dependency(dependencyName)], "\(queue.snapshot())")
        held.finish(dependencyName)
        #expect(waitUntilFinished([dependency, plain]))
    }

    // MARK: - Snapshots: barriers, serial groups, lines across suspended queues

    // API.md, Seeing inside: it "says, while the operation waits, exactly what for".
    // AsyncOperationQueue.snapshot(): "the operation behind a barrier block, named `barrier`".
    // Foundation's addBarrierBlock: operations added after it wait until it has run.
    @Test
    func snapshotOfAnOperationAddedBehindABarrier_saysItWaitsForTheBarrier() {
        // Given a queue running an operation until told, then a barrier
        let held = HeldOperations()
        let queue = namedQueue("barrier-queue")
        let runningName = uniqueName("running")
        let running = held.make(runningName)
        queue.addOperation(running)
        #expect(held.waitUntilStarted(runningName))
        let barrierRan = Counter()
        queue.addBarrierBlock { barrierRan.increment() }

        // When an operation is added behind the barrier
        let name = uniqueName("behind-barrier")
        let operation = quickOperation(name)
        queue.addOperation(operation)

        // Then it says it waits, and for the barrier
        let snapshot = operation.snapshot()
        #expect(!snapshot.waitsFor.isEmpty, "\(snapshot)")
        #expect(snapshot.description.contains("barrier"), "\(snapshot)")
        #expect(!operation.isExecuting && !operation.isFinished)
        held.finish(runningName)
        #expect(waitUntilFinished([running, operation]))
        #expect(barrierRan.current == 1)
    }

    // Reason.turnOnSerialQueue: "Its queue (by name) is serial and lets an operation added earlier
    // go first." GroupOperation.maxConcurrentOperationCount: "1 runs them one after another".
    // Messages call a group's own queue after its group ("children of <group>").
    @Test
    func snapshotOfASerialGroupsSecondChild_saysItWaitsForItsTurn_namingTheQueueAfterTheGroup() {
        // Given a serial group whose first child runs until told
        let held = HeldOperations()
        let firstName = uniqueName("first-child")
        let first = held.make(firstName)
        let secondName = uniqueName("second-child")
        let second = quickOperation(secondName)
        let group = GroupOperation(operations: [first, second])
        let groupName = uniqueName("serial-group")
        group.name = groupName
        group.maxConcurrentOperationCount = 1

        // When the group runs
        namedQueue("outer").addOperation(group)
        #expect(held.waitUntilStarted(firstName))

        // Then the second child waits for its turn on its group's queue
        let snapshot = second.snapshot()
        #expect(snapshot.state == .waitingInLine, "\(snapshot)")
        guard case let .turnOnSerialQueue(queueName)? = snapshot.waitsFor.first else {
            Issue.record("\(snapshot)")
            held.finish(firstName)
            return
        }
        #expect(snapshot.waitsFor.count == 1, "\(snapshot)")
        #expect(queueName == "children of \(groupName)", "\(snapshot)")
        held.finish(firstName)
        #expect(waitUntilFinished([group, first, second]))
    }

    // API.md 10: "A suspended queue evaluates no condition, takes no category and starts
    // nothing"; Reason.category: "how many operations stand ahead of this one in the category's
    // line"; DebuggingAQueue.md: "each category it needs with the operation holding it and its own
    // place in line".
    @Test
    func waiterAheadWhoseQueueIsSuspended_leavesTheLine_theNextOneSaysFirstInLine_andIsGrantedTheCategoryFirst() {
        // Given X held on a third queue, and two operations needing X waiting on two queues
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let (firstQueue, secondQueue) = (namedQueue("first-in-line"), namedQueue("second-in-line"))
        let firstName = uniqueName("ahead")
        let first = quickOperation(firstName)
        first.addCondition(ExclusiveCategory(x))
        firstQueue.addOperation(first)
        #expect(waitUntil { first.snapshot().waitsFor == [.category(x, heldBy: holderName, waitersAhead: 0)] }, "\(first.snapshot())")
        let second = quickOperation(uniqueName("behind"))
        second.addCondition(ExclusiveCategory(x))
        secondQueue.addOperation(second)
        #expect(waitUntil { second.snapshot().waitsFor == [.category(x, heldBy: holderName, waitersAhead: 1)] }, "\(second.snapshot())")

        // When the first one's queue is suspended
        firstQueue.isSuspended = true

        // Then the first says its queue is suspended, the second that it is 1st in line
        #expect(waitUntil { first.snapshot().waitsFor == [.suspendedQueue(firstQueue.name)] }, "\(first.snapshot())")
        #expect(waitUntil { second.snapshot().waitsFor == [.category(x, heldBy: holderName, waitersAhead: 0)] }, "\(second.snapshot())")

        // and once X is free, the second runs while the first stays parked
        held.finish(holderName)
        #expect(waitUntilFinished([holder, second]))
        #expect(!first.isFinished && !first.isExecuting)
        firstQueue.isSuspended = false
        #expect(waitUntilFinished([first]))
    }

    // API.md, Seeing inside: each category it waits for "with the name of the operation holding
    // it", whatever queue the holder is on, a suspended one included (suspending a queue does not
    // stop what it runs).
    @Test
    func snapshotAndStallReport_nameTheHolder_whoseQueueWasSuspendedWhileItRuns() {
        // Given X held by an operation whose queue is suspended while it runs, and a watched queue
        let (x, held, holderName, holder, holderQueue) = startHoldingACategory()
        holderQueue.isSuspended = true
        let queue = namedQueue("watched-behind-suspended")
        queue.stallReportThreshold = 0.2
        let name = uniqueName("waits-for-suspended-holder")
        let operation = quickOperation(name)
        operation.addCondition(ExclusiveCategory(x))

        // When an operation needing X waits past the threshold
        queue.addOperation(operation)
        #expect(DiagnosticsLog.shared.kinds(about: name, onceThereAre: 1) == [.stalled])

        // Then its snapshot and its report name the holder
        #expect(operation.snapshot().waitsFor == [.category(x, heldBy: holderName, waitersAhead: 0)], "\(operation.snapshot())")
        let message = DiagnosticsLog.shared.diagnostics(about: name).first?.message ?? ""
        #expect(message.contains("held by '\(holderName)'"), "\(message)")
        queue.stallReportThreshold = nil
        held.finish(holderName)
        #expect(waitUntilFinished([holder, operation]))
        holderQueue.isSuspended = false
    }

    // MARK: - Chains

    // addChain: "Every operation gets a dependency on the operation before it"; "an
    // `AsyncOperationQueue` also honours the operations' conditions, categories and observers".
    // Seeing inside: it says "unfinished dependencies by name, conditions not yet answered by
    // name, each category it waits for with the name of the operation holding it".
    @Test
    func chainLinks_whileTheFirstRuns_waitForTheLinkBeforeThem_thenTheSecondForTheCategoryItNeeds_namingItsHolder() {
        // Given X held on another queue, and a chain whose second link needs X
        let (x, heldX, holderName, holder, _) = startHoldingACategory()
        let held = HeldOperations()
        let names = [uniqueName("link-0"), uniqueName("link-1"), uniqueName("link-2")]
        let first = held.make(names[0])
        let second = quickOperation(names[1])
        second.addCondition(ExclusiveCategory(x))
        let third = quickOperation(names[2])
        let queue = namedQueue("chain-seen")

        // When the chain is added and its first link runs
        queue.addChain([first, second, third])
        #expect(held.waitUntilStarted(names[0]))

        // Then each later link waits for the one before it, and nothing else
        #expect(second.snapshot().waitsFor == [.dependency(names[0])], "\(second.snapshot())")
        #expect(third.snapshot().waitsFor == [.dependency(names[1])], "\(third.snapshot())")

        // and once the first finished, the second waits for X, held by its holder
        held.finish(names[0])
        #expect(waitUntil { second.snapshot().waitsFor == [.category(x, heldBy: holderName, waitersAhead: 0)] }, "\(second.snapshot())")
        #expect(third.snapshot().waitsFor == [.dependency(names[1])], "\(third.snapshot())")
        heldX.finish(holderName)
        #expect(waitUntilFinished([holder, first, second, third]))
        #expect([first, second, third].allSatisfy { $0.errors.isEmpty })
    }

    // addChain: "each waits for the one before it". Composition.md: "`addChain(_:)` adds an
    // ordered list of operations to any `OperationQueue`, each waiting for the one before it".
    @Test
    func chainOnAConcurrentQueue_startsEachLinkOnlyAfterTheOneBeforeItFinished() {
        // Given five links that record their start and end, on a wide queue
        let log = Recorder<String>()
        let links = (0 ..< 5).map { index in
            let operation = AsyncBlockOperation {
                log.append("start \(index)")
                usleep(2_000)
                log.append("end \(index)")
            }
            operation.name = uniqueName("link-\(index)")
            return operation
        }
        let queue = namedQueue("wide")
        queue.maxConcurrentOperationCount = 8

        // When they are added as a chain
        queue.addChain(links)
        #expect(waitUntilFinished(links))

        // Then they ran one after another, in order
        #expect(log.all == (0 ..< 5).flatMap { ["start \($0)", "end \($0)"] })
    }

    // addChain(_:waitUntilFinished:): added with `addOperations(operations, waitUntilFinished:
    // wait)`, so with `true` the call returns once every link has finished.
    @Test
    func chainAddedWaitingUntilFinished_returnsOnlyOnceEveryLinkFinished_theFailedOnesIncluded() {
        // Given a chain whose first link fails
        let failure = StubError("first fails")
        let names = [uniqueName("link-0"), uniqueName("link-1"), uniqueName("link-2")]
        let links = [quickOperation(names[0], throwing: failure), quickOperation(names[1]), quickOperation(names[2])]
        let queue = namedQueue("waited-chain")

        // When it is added waiting until finished (on a thread of its own: bounded)
        let finishedOnReturn = Recorder<[Bool]>()
        let done = runOnOwnThread {
            queue.addChain(links, waitUntilFinished: true)
            finishedOnReturn.append(links.map(\.isFinished))
        }

        // Then the call returned with every link finished, the later ones with upstreamFailed
        #expect(done.wait(timeout: generousTimeout))
        #expect(finishedOnReturn.all == [[true, true, true]])
        #expect(links[1].errors.asOperationErrors == [.upstreamFailed(operation: names[1], upstream: names[0], reason: "\(failure)")])
        #expect(links[2].errors.asOperationErrors == [.upstreamFailed(operation: names[2], upstream: names[0], reason: "\(failure)")])
    }

    // AsyncOperationError.upstreamCancelled: "Along a chain, `upstream` names the first operation
    // that was cancelled." addChain: "one failure ends the rest of the chain".
    @Test
    func chainWhoseMiddleLinkIsCancelledWhileTheFirstRuns_endsTheRestWithUpstreamCancelledNamingIt_andTheFirstFinishesUnharmed() {
        // Given a chain of four whose first link runs until told
        let held = HeldOperations()
        let names = (0 ..< 4).map { uniqueName("link-\($0)") }
        let executed = Recorder<String>()
        let first = held.make(names[0])
        let rest = names.dropFirst().map { name in
            let operation = AsyncBlockOperation { executed.append(name) }
            operation.name = name
            return operation
        }
        namedQueue("cut-chain").addChain([first] + rest)
        #expect(held.waitUntilStarted(names[0]))

        // When the second link is cancelled, then the first finishes
        rest[0].cancel()
        held.finish(names[0])
        #expect(waitUntilFinished([first] + rest))

        // Then the first succeeded, nothing after it executed, and the last two name the second
        #expect(first.errors.isEmpty)
        #expect(executed.all.isEmpty)
        #expect(rest[1].errors.asOperationErrors == [.upstreamCancelled(operation: names[2], upstream: names[1])])
        #expect(rest[2].errors.asOperationErrors == [.upstreamCancelled(operation: names[3], upstream: names[1])])
    }

    // AsyncOperationError.upstreamFailed: "Along a chain, `upstream` and `reason` name the first
    // operation that failed, not the link just before." Composition.md: "naming the first
    // operation that failed and why".
    @Test
    func chainWhoseSecondLinkAlsoHasAFailingConditionOfItsOwn_namesTheFirstLinkToTheThird() {
        // Given a chain whose first link fails, and whose second has a failing condition of its own
        let failure = StubError("offline")
        let names = [uniqueName("download"), uniqueName("unzip"), uniqueName("import")]
        let first = quickOperation(names[0], throwing: failure)
        let second = quickOperation(names[1])
        second.addCondition(StubCondition.failing(StubError("no disk"), name: "DiskSpace"))
        let third = quickOperation(names[2])

        // When the chain runs
        namedQueue("double-failure").addChain([first, second, third])
        #expect(waitUntilFinished([first, second, third]))

        // Then the third names the first link, which failed first, and its reason
        #expect(second.errors.asOperationErrors.contains(.upstreamFailed(operation: names[1], upstream: names[0], reason: "\(failure)")), "\(second.errors)")
        #expect(third.errors.asOperationErrors == [.upstreamFailed(operation: names[2], upstream: names[0], reason: "\(failure)")], "\(third.errors)")
    }

    // MARK: - The stall watch

    // DebuggingAQueue.md: the watch reports "with the explanation above and how long the holder
    // of its category has been executing"; StallWatch: "the holder is found by identity in the
    // engine, whichever queue it is on". OperationDiagnostic.queueNames: "the queue the
    // operation is on".
    @Test
    func stallReport_forAWaitOnACategoryHeldOnAnotherQueue_namesTheHolder_andHowLongItHasBeenExecuting() {
        // Given X held on an unwatched queue, and a watched queue
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let queue = namedQueue("watched")
        queue.stallReportThreshold = 0.2
        let name = uniqueName("stalled-on-x")
        let operation = quickOperation(name)
        operation.addCondition(ExclusiveCategory(x))

        // When an operation needing X waits there past the threshold
        queue.addOperation(operation)
        #expect(DiagnosticsLog.shared.kinds(about: name, onceThereAre: 1) == [.stalled])

        // Then the report names X, its holder and how long the holder has been executing
        let report = DiagnosticsLog.shared.diagnostics(about: name).first
        #expect(report?.queueNames == [queue.name!], "\(String(describing: report))")
        #expect(report?.message.contains("category '\(x)' (held by '\(holderName)'; 1st in line)") == true, "\(String(describing: report))")
        #expect(report?.message.contains("('\(holderName)' has been executing for ") == true, "\(String(describing: report))")
        #expect(DiagnosticsLog.shared.kinds(about: holderName).isEmpty)
        queue.stallReportThreshold = nil
        held.finish(holderName)
        #expect(waitUntilFinished([holder, operation]))
    }

    // AsyncOperationQueue.stallReportThreshold: "after `nil`, the watch starts afresh"; "one
    // `.stalled` diagnostic per operation" while it watches.
    @Test
    func stallWatch_switchedOffAndOnAgain_reportsAnOperationStillWaitingOnceMore() {
        // Given an operation reported stalled on a suspended, watched queue
        let queue = namedQueue("watched-twice")
        queue.isSuspended = true
        queue.stallReportThreshold = 0.1
        let name = uniqueName("still-waiting")
        let operation = quickOperation(name)
        queue.addOperation(operation)
        #expect(DiagnosticsLog.shared.kinds(about: name, onceThereAre: 1) == [.stalled])

        // When the watch is switched off and on again
        queue.stallReportThreshold = nil
        #expect(queue.stallReportThreshold == nil)
        queue.stallReportThreshold = 0.1
        #expect(queue.stallReportThreshold == 0.1)

        // Then the operation is reported again, once
        #expect(DiagnosticsLog.shared.kinds(about: name, onceThereAre: 2) == [.stalled, .stalled])
        queue.stallReportThreshold = nil
        queue.isSuspended = false
        #expect(waitUntilFinished([operation]))
    }

    // AsyncOperationQueue.stallReportThreshold: "The children of a group that starts on the
    // queue are watched too". OperationDiagnostics: a group's own queue "is called after its
    // group" in messages ("children of <group>").
    @Test
    func stallReport_forAGroupsChildWaitingForACategory_namesTheGroupsQueueAfterTheGroup_andTheHolder() {
        // Given X held elsewhere, and a watched queue running a group whose child needs X
        let (x, held, holderName, holder, _) = startHoldingACategory()
        let queue = namedQueue("watched-group")
        queue.stallReportThreshold = 0.2
        let childName = uniqueName("stalled-child")
        let child = quickOperation(childName)
        child.addCondition(ExclusiveCategory(x))
        let group = GroupOperation(operations: [child])
        let groupName = uniqueName("group")
        group.name = groupName

        // When the group runs and its child waits past the threshold
        queue.addOperation(group)
        #expect(DiagnosticsLog.shared.kinds(about: childName, onceThereAre: 1) == [.stalled])

        // Then the report names the child's queue after the group, and the holder
        let report = DiagnosticsLog.shared.diagnostics(about: childName).first
        #expect(report?.queueNames == ["children of \(groupName)"], "\(String(describing: report))")
        #expect(report?.message.contains("held by '\(holderName)'") == true, "\(String(describing: report))")
        queue.stallReportThreshold = nil
        held.finish(holderName)
        #expect(waitUntilFinished([holder, group]))
    }

    // DebuggingAQueue.md: "The watch costs nothing until it is set, so it times what it sees from
    // then on: a wait (or an execution) already under way when it is set is reported as \"at
    // least\" the time it saw."
    @Test
    func stallReport_forAHolderExecutingSinceBeforeTheWatchWasSet_saysAtLeast_alsoForAWaiterThatCameLater() {
        // Given X held by an operation executing on another queue, and a watched queue that has
        // already looked (it reported an operation waiting there for a dependency)
        let (x, heldX, holderName, holder, _) = startHoldingACategory()
        let queue = namedQueue("watched-late-waiter")
        queue.stallReportThreshold = 0.2
        let held = HeldOperations()
        let dependencyName = uniqueName("sentinel-dependency")
        let dependency = held.make(dependencyName)
        AsyncOperationQueue().addOperation(dependency)
        let sentinelName = uniqueName("sentinel")
        let sentinel = quickOperation(sentinelName)
        sentinel.addDependency(dependency)
        queue.addOperation(sentinel)
        #expect(DiagnosticsLog.shared.kinds(about: sentinelName, onceThereAre: 1) == [.stalled])

        // When an operation needing X comes to the watched queue and waits past the threshold
        let name = uniqueName("late-waiter")
        let operation = quickOperation(name)
        operation.addCondition(ExclusiveCategory(x))
        queue.addOperation(operation)
        #expect(DiagnosticsLog.shared.kinds(about: name, onceThereAre: 1) == [.stalled])

        // Then the holder, executing since before the watch was set, is said to have executed
        // "at least" the time the watch saw, not exactly that
        let message = DiagnosticsLog.shared.diagnostics(about: name).first?.message ?? ""
        #expect(message.contains("'\(holderName)' has been executing for "), "\(message)")
        #expect(message.contains("'\(holderName)' has been executing for at least "), "\(message)")
        queue.stallReportThreshold = nil
        held.finish(dependencyName)
        heldX.finish(holderName)
        #expect(waitUntilFinished([holder, dependency, sentinel, operation]))
    }

    // DebuggingAQueue.md: "it times what it sees from then on"; StallWatch: "An operation's
    // waiting time (and a holder's executing time) counts from the first look that saw it so".
    @Test
    func stallReport_forASecondWaiterOnTheSameHolder_timesTheHolderFromWhenTheWatchFirstSawItExecute() throws {
        // Given a watched queue where an operation was reported waiting for X, held by an
        // operation that started executing after the watch was set
        let queue = namedQueue("watched-holder")
        queue.stallReportThreshold = 0.2
        let x = uniqueName("X")
        let held = HeldOperations()
        let holderName = uniqueName("holder")
        let holder = held.make(holderName)
        holder.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(holder)
        #expect(held.waitUntilStarted(holderName))
        let firstName = uniqueName("first-waiter")
        let first = quickOperation(firstName)
        first.addCondition(ExclusiveCategory(x))
        queue.addOperation(first)
        #expect(DiagnosticsLog.shared.kinds(about: firstName, onceThereAre: 1) == [.stalled])

        // When that waiter is cancelled, and a second one comes a while later
        first.cancel()
        #expect(waitUntilFinished([first]))
        Thread.sleep(forTimeInterval: 1.0) // the holder goes on executing, seen by the watch before
        let secondName = uniqueName("second-waiter")
        let second = quickOperation(secondName)
        second.addCondition(ExclusiveCategory(x))
        queue.addOperation(second)
        #expect(DiagnosticsLog.shared.kinds(about: secondName, onceThereAre: 1) == [.stalled])

        // Then the second report's holder time covers what the watch saw of it, over a second more
        // than the second waiter waited, or says "at least"
        let message = DiagnosticsLog.shared.diagnostics(about: secondName).first?.message ?? ""
        let executing = try #require(secondsExecuting(of: holderName, in: message), "\(message)")
        let waited = try #require(Self.secondsWaited(in: message), "\(message)")
        #expect(executing >= waited + 0.9 || message.contains("executing for at least"), "\(message)")
        queue.stallReportThreshold = nil
        held.finish(holderName)
        #expect(waitUntilFinished([holder, second]))
    }

    // StallWatch: "what the watch's very first look found already waiting or executing began
    // earlier, so its report says \"at least\"": what comes after that look is timed exactly.
    @Test
    func stallReport_forAnOperationThatBeganWaitingAfterTheWatchsFirstLook_givesAnExactTime() {
        // Given a watched queue that has already looked (it reported a first operation)
        let queue = namedQueue("watched-exact")
        queue.isSuspended = true
        queue.stallReportThreshold = 0.2
        let firstName = uniqueName("first")
        let first = quickOperation(firstName)
        queue.addOperation(first)
        #expect(DiagnosticsLog.shared.kinds(about: firstName, onceThereAre: 1) == [.stalled])

        // When a second operation begins waiting there
        let name = uniqueName("second")
        let operation = quickOperation(name)
        queue.addOperation(operation)
        #expect(DiagnosticsLog.shared.kinds(about: name, onceThereAre: 1) == [.stalled])

        // Then its report gives the time without "at least", and explains the wait
        let message = DiagnosticsLog.shared.diagnostics(about: name).first?.message ?? ""
        #expect(message.hasPrefix("has waited ") && !message.hasPrefix("has waited at least"), "\(message)")
        #expect(message.contains("\(name): waiting in line; waits for its queue '\(queue.name!)' to resume (suspended)"), "\(message)")
        queue.stallReportThreshold = nil
        queue.isSuspended = false
        #expect(waitUntilFinished([first, operation]))
    }

    // MARK: - Diagnostics

    // README: "`addDependency` or `addCondition` after the operation stopped waiting ... |
    // `.configuredTooLate` | ignored". OperationDiagnostic.queueNames: "the queue the operation is
    // on (or ran on)".
    @Test
    func dependencyAddedAfterTheOperationFinished_isReportedConfiguredTooLate_namingTheQueueItRanOn() {
        // Given an operation that finished on a named queue
        let queue = namedQueue("ran-on")
        let name = uniqueName("finished-early")
        let operation = quickOperation(name)
        queue.addOperations([operation], waitUntilFinished: true)

        // When a dependency is added to it
        operation.addDependency(BlockOperation {})

        // Then it is reported, naming the queue it ran on
        #expect(DiagnosticsLog.shared.kinds(about: name, onceThereAre: 1) == [.configuredTooLate])
        #expect(DiagnosticsLog.shared.diagnostics(about: name).first?.queueNames == [queue.name!])
    }

    // README: "a condition that drops its completion handler | `.conditionNeverAnswered` | the
    // operation fails with `AsyncOperationError.conditionNeverAnswered`". Kind: the message "says
    // what went wrong".
    @Test
    func conditionThatDropsItsCompletion_isReported_namingTheConditionAndTheQueue_andTheOperationFails() {
        // Given a named queue and an operation whose condition drops its completion handler
        let queue = namedQueue("dropping")
        let name = uniqueName("dropped")
        let operation = quickOperation(name)
        operation.addCondition(StubCondition(name: "Forgetful") { _, _ in })

        // When it runs
        queue.addOperation(operation)
        #expect(waitUntilFinished([operation]))

        // Then it fails with conditionNeverAnswered, reported naming the condition and the queue
        #expect(operation.errors.asOperationErrors == [.conditionNeverAnswered(condition: "Forgetful")])
        #expect(DiagnosticsLog.shared.kinds(about: name, onceThereAre: 1) == [.conditionNeverAnswered])
        let report = DiagnosticsLog.shared.diagnostics(about: name).first
        #expect(report?.queueNames == [queue.name!], "\(String(describing: report))")
        #expect(report?.message.contains("'Forgetful'") == true, "\(String(describing: report))")
    }

    // README: "a condition that never answers | `.conditionTimedOut` | after the queue's
    // `conditionEvaluationTimeout` ... the operation fails with
    // `AsyncOperationError.conditionTimedOut`"; Kind.conditionTimedOut: "A condition did not
    // answer in time; the operation fails."
    @Test
    func conditionThatNeverAnswers_isReportedTimedOut_onItsQueue_andTheLoggerHearsOneFailure() {
        // Given a named logging queue with a short condition timeout, and an operation whose
        // condition keeps its completion handler
        let logger = RecordingLogger()
        let queue = namedQueue("timing-out")
        queue.conditionEvaluationTimeout = 0.2
        queue.logger = logger
        let kept = HeldCallback<ConditionResult>()
        let name = uniqueName("never-answered")
        let operation = quickOperation(name)
        operation.addCondition(StubCondition(name: "Silent") { _, completion in kept.hold(completion) })

        // When it runs past the timeout
        queue.addOperation(operation)
        #expect(waitUntilFinished([operation]))

        // Then it fails with the timeout, is reported on its queue, and the logger heard one failed condition
        #expect(operation.errors.asOperationErrors == [.conditionTimedOut(condition: "Silent", after: 0.2)])
        #expect(DiagnosticsLog.shared.kinds(about: name, onceThereAre: 1) == [.conditionTimedOut])
        #expect(DiagnosticsLog.shared.diagnostics(about: name).first?.queueNames == [queue.name!])
        #expect(waitUntil { logger.kinds(of: name).last.map { if case .finished = $0 { true } else { false } } == true })
        let kinds = logger.kinds(of: name).filter { !isWaiting($0) }
        #expect(kinds == [.added, .conditionsAnswered(failures: 1), .finished(errors: ["\(AsyncOperationError.conditionTimedOut(condition: "Silent", after: 0.2))"])], "\(kinds)")
        kept.call(.satisfied) // a late answer changes nothing
        #expect(operation.errors.count == 1)
    }

    // README: "[Operations] finishedTwice (sync, queue 'ledger'): finish(with:) was called at
    // App/Sync.swift:42 on an operation that had already finished; the call was ignored and the
    // error it passed was dropped: conflict(record: 17)". OperationDiagnostic.description: "One
    // line: `[Operations] kind (operation, queue 'name'): message`."
    @Test
    func finishCalledAgainAfterTheOperationFinishedOnANamedQueue_isReportedWithTheDocumentedLine() {
        // Given an operation that finished on a named queue
        let queue = namedQueue("ledger")
        let name = uniqueName("sync")
        let operation = quickOperation(name)
        queue.addOperations([operation], waitUntilFinished: true)

        // When finish(with:) is called again with an error
        let late = StubError("conflict")
        operation.finish(with: late); let line = #line

        // Then it is reported naming the operation, the queue, the call site and the lost error
        #expect(DiagnosticsLog.shared.kinds(about: name, onceThereAre: 1) == [.finishedTwice])
        let report = DiagnosticsLog.shared.diagnostics(about: name).first
        #expect(report?.description == "[Operations] finishedTwice (\(name), queue '\(queue.name!)'): finish(with:) was called at \(#fileID):\(line) on an operation that had already finished; the call was ignored and the error it passed was dropped: \(late)", "\(String(describing: report))")
        #expect(operation.errors.isEmpty)
    }

    // OperationDiagnostic.Kind.producedWithoutQueue: "`produce(_:)` was called on an operation
    // that is not on a queue; the produced operation runs on a shared fallback queue instead."
    // queueNames: "Empty when the operation is on no queue."
    @Test
    func produceFromAnOperationStartedByHand_isReportedProducedWithoutQueue_namingNoQueue_andTheProducedOneRuns() {
        // Given an operation on no queue that produces one as it executes
        let name = uniqueName("by-hand-producer")
        let ran = Counter()
        let produced = AsyncBlockOperation { ran.increment() }
        produced.name = uniqueName("produced")
        let producer = ClosureOperation(name: name) { operation in
            operation.produce(produced)
            operation.finish()
        }

        // When it is started by hand
        producer.start()

        // Then the produce is reported, naming no queue, and the produced operation runs anyway
        #expect(DiagnosticsLog.shared.kinds(about: name, onceThereAre: 1) == [.producedWithoutQueue])
        #expect(DiagnosticsLog.shared.diagnostics(about: name).first?.queueNames == [])
        #expect(waitUntilFinished([producer, produced]))
        #expect(ran.current == 1)
    }

    // OperationDiagnostics.handler: "The function that receives every diagnostic. ... The
    // default writes the diagnostic's `description` to standard error." resetHandler():
    // "Restores the default handler, which prints to standard error." The handler is process-wide,
    // so the scenario runs in a child process of the test binary.
    @Test
    func diagnosticsHandler_receivesEachDiagnostic_andAfterResetHandlerTheyArePrintedToStandardError() {
        // Given / When the scenario runs in a child process
        let outcome = runProbeScenarioInChildProcess(
            testName: "seeingInsideProbe_handlerThenResetHandler",
            scenario: "seeingInsideHandlerThenReset",
            timeout: 120
        )

        // Then the scenario passed, and the diagnostic made after the reset was printed whole
        #expect(outcome != nil, "the scenario did not end within its time")
        #expect(outcome?.passed == true, "\(outcome.map(String.init(describing:)) ?? "")")
        let printed = "[Operations] finishedTwice (after-reset, queue 'reset-probe'): finish(with:) was called at "
        #expect(outcome?.output.contains(printed) == true, "\(outcome?.output.suffix(800) ?? "")")
        #expect(outcome?.output.contains("(before-reset,") == false, "the handler's diagnostic was printed too")
    }

    @Test(.enabled(if: isProbeScenario("seeingInsideHandlerThenReset")))
    func seeingInsideProbe_handlerThenResetHandler() {
        // Child process only: the handler is this process's alone.
        let heard = Recorder<OperationDiagnostic>()
        OperationDiagnostics.handler = { heard.append($0) }
        let queue = AsyncOperationQueue()
        queue.name = "reset-probe"
        let before = quickOperation("before-reset")
        queue.addOperations([before], waitUntilFinished: true)
        before.finish(with: StubError("late"))
        #expect(heard.all.map(\.kind) == [.finishedTwice])
        #expect(heard.all.first?.operationName == "before-reset")

        OperationDiagnostics.resetHandler()
        let after = quickOperation("after-reset")
        queue.addOperations([after], waitUntilFinished: true)
        after.finish(with: StubError("late"))
        #expect(heard.count == 1, "the replaced handler still heard a diagnostic after resetHandler()")
    }

    /// How many seconds a stall report says its operation has waited, if it says.
    private static func secondsWaited(in message: String) -> Double? {
        guard let range = message.range(of: "has waited ") else { return nil }
        let rest = message[range.upperBound...].replacingOccurrences(of: "at least ", with: "")
        return Double(rest.prefix { $0.isNumber || $0 == "." })
    }
}
