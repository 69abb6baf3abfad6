import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// Probes of round 2 that found breaks (fixed since): each checks a documented sentence (quoted
// above it), written as the probe suites are (Given / When / Then, bounded waits, nothing left
// running), and its failure message shows what was observed.

@Suite struct BreakProbeTests {
    // OperationObserver: "Methods are called on arbitrary threads, never while the framework
    // holds a lock, and in this order: `operationDidStart` exactly once, before `execute()` (only
    // if the operation executes); `operationDidCancel` at most once; ... and `operationDidFinish`
    // exactly once, last". API.md 4. OperationLogger: "An operation's events come one at a time,
    // in the order they were made".
    @Test
    func observerAfterOneThatCancelsOnHearingTheStart_hearsTheStartBeforeTheCancel() {
        // Given an operation on a logging queue whose first observer cancels it on hearing it
        // start, and whose second observer writes down what it hears
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let name = uniqueName("cancelled-on-start")
        let executed = Counter()
        let operation = AsyncBlockOperation { _ in executed.increment() } // never calls its continuation
        operation.name = name
        let error = StubError("cancelled on start")
        operation.addObserver(StartedObserver { operation in operation.cancel(with: error) })
        let events = EventLogObserver()
        operation.addObserver(events)

        // When it runs
        queue.addOperation(operation)
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { events.log.count >= 3 })
        #expect(waitUntil { logger.kinds(of: name).last == .finished(errors: ["\(error)"]) })

        // Then the second observer, and the logger (an observer added with the queue's add), hear
        // the start before the cancel
        #expect(events.log.all == ["didStart", "didCancel", "didFinish"], "executed: \(executed.current)")
        #expect(logger.kinds(of: name) == [.added, .started, .cancelled, .finished(errors: ["\(error)"])], "executed: \(executed.current)")
    }

    // DebuggingAQueue.md: "`logger` (off by default) hears each operation's lifecycle with a
    // level: added, waiting and for what, conditions answered, categories granted, started".
    // OperationLogEvent.Kind.waiting: "Started waiting, for what the reasons say (dependencies,
    // conditions, categories, ...)". OperationSnapshot.Reason.categoryHeldElsewhere: "the
    // operation is first in line here, and waits for the lock; `holder` says who holds it
    // elsewhere".
    @Test
    func logger_hearsAnOperationWaitForACategoryHeldByAnotherProcess_beforeItIsGranted() throws {
        let directory = TemporaryDirectory("failing-probes")
        defer { directory.remove() }
        // Given X held by another process, and a logging queue
        let lock = try FileCategoryLock(directory: directory.url)
        let x = uniqueName("x")
        let elsewhere = HeldLockFile(lock, category: x)
        defer { elsewhere.release() }
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let name = uniqueName("logged-waiter")
        let operation = AsyncBlockOperation {}
        operation.name = name
        operation.addCondition(ExclusiveCategory(x, lock: lock))

        // When an operation of X waits for it (its snapshot says so), then gets it
        queue.addOperation(operation)
        let waitsElsewhere = {
            operation.snapshot().waitsFor.contains { if case .categoryHeldElsewhere = $0 { true } else { false } }
        }
        #expect(waitUntil(waitsElsewhere))
        let heardTheWait = {
            logger.kinds(of: name).contains { kind in
                guard case let .waiting(reasons) = kind else { return false }
                return reasons.contains { if case .categoryHeldElsewhere = $0 { true } else { false } }
            }
        }
        _ = waitUntil(heardTheWait) // bounded; checked below with what was heard
        let heardWhileWaiting = logger.kinds(of: name)
        let snapshotWhileWaiting = operation.snapshot()
        elsewhere.release()
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { logger.kinds(of: name).last == .finished(errors: []) })

        // Then the logger heard it wait for X held elsewhere, before X was granted
        let kinds = logger.kinds(of: name)
        let waitedElsewhere = kinds.firstIndex { kind in
            guard case let .waiting(reasons) = kind else { return false }
            return reasons.contains { if case .categoryHeldElsewhere(x, _) = $0 { true } else { false } }
        }
        let granted = kinds.firstIndex(of: .categoriesGranted([x]))
        #expect(waitedElsewhere != nil, "snapshot while waiting: \(snapshotWhileWaiting); heard while waiting: \(heardWhileWaiting); in all: \(kinds)")
        #expect(waitedElsewhere.flatMap { waited in granted.map { waited < $0 } } == true, "\(kinds)")
    }

    // API.md, Seeing inside: "`AsyncOperation.debugDescription` says, while the operation waits,
    // exactly what for: unfinished dependencies by name, ...; `AsyncOperationQueue.debugDescription`
    // lists every unfinished operation (held ones included) with the same explanation and whether
    // the queue is suspended." DebuggingAQueue.md: "names the operation, its state and, while it
    // waits, exactly what for: its unfinished dependencies, ..., a suspended queue".
    @Test
    func queueExplainsAPlainOperationWaitingForADependencyOnASuspendedQueue_namingTheDependency_asItDoesForAnAsyncOperation() {
        // Given a dependency running elsewhere until told, and a suspended queue holding a plain
        // operation and an operation of the package, both waiting for it
        let held = HeldOperations()
        let dependencyName = uniqueName("dependency")
        let dependency = held.make(dependencyName)
        AsyncOperationQueue().addOperation(dependency)
        #expect(held.waitUntilStarted(dependencyName))
        let queue = AsyncOperationQueue()
        queue.name = uniqueName("suspended")
        queue.isSuspended = true
        let plain = BlockOperation {}
        plain.name = uniqueName("plain")
        plain.addDependency(dependency)
        let async = AsyncBlockOperation {}
        async.name = uniqueName("async")
        async.addDependency(dependency)
        queue.addOperations([plain, async], waitUntilFinished: false)

        // When the queue describes them
        let snapshot = queue.snapshot()
        let plainLine = snapshot.operations.first { $0.name == plain.name! }
        let asyncLine = snapshot.operations.first { $0.name == async.name! }

        // Then each names the dependency it waits for
        #expect(asyncLine?.waitsFor.contains(.dependency(dependencyName)) == true, "\(String(describing: asyncLine))")
        #expect(plainLine?.waitsFor.contains(.dependency(dependencyName)) == true, "\(String(describing: plainLine)), while the other says \(String(describing: asyncLine))")
        queue.isSuspended = false
        held.finish(dependencyName)
        #expect(waitUntilFinished([dependency, plain, async]))
    }

    // OperationLogEvent.Kind.categoriesGranted: "Granted its mutually exclusive categories."
    // OperationLogger: "Hears the lifecycle of every operation ...: added, waiting (and for what),
    // conditions answered, categories granted, started, cancelled, produced, finished. Each event
    // comes once. An operation's events come one at a time, in the order they were made".
    // OperationObserver (the logger hears `.finished` as an observer does): "`operationDidFinish`
    // exactly once, last". API.md 2: "Cancelling or failing an operation frees its categories."
    @Test
    func operationCancelledWhileWaitingForACategory_isNotHeardGrantedIt_afterItsFinish_whenTheHolderLetsGoMeanwhile() {
        // Given X held by an operation running until told, and an operation waiting for X on a
        // logging queue, with an observer (after the logger's) that holds its finish until told
        let (x, held, holderName, holder, holderQueue) = startHoldingACategory()
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let name = uniqueName("cancelled-waiter")
        let executed = Counter()
        let waiter = AsyncBlockOperation { executed.increment() }
        waiter.name = name
        waiter.addCondition(ExclusiveCategory(x))
        queue.addOperation(waiter)
        #expect(waitUntil { waiter.snapshot().waitsFor == [.category(x, heldBy: holderName, waitersAhead: 0)] })
        let finishHeard = Signal()
        let letFinishEnd = Signal()
        waiter.addObserver(FinishedObserver { _, _ in
            finishHeard.signal()
            _ = letFinishEnd.wait()
        })

        // When it is cancelled, and, while its finish is being heard, the holder lets X go
        let cancelling = runOnOwnThread { waiter.cancel() }
        #expect(finishHeard.wait(timeout: generousTimeout))
        held.finish(holderName)
        #expect(waitUntilFinished([holder]))
        Thread.sleep(forTimeInterval: 0.1) // a chance for X to be handed on
        letFinishEnd.signal()
        #expect(cancelling.wait(timeout: generousTimeout))
        #expect(waitUntilFinished([waiter]))
        Thread.sleep(forTimeInterval: 0.1) // a chance for a late event

        // Then the logger heard its finish last, and never heard it granted X
        let kinds = logger.kinds(of: name)
        #expect(executed.current == 0)
        #expect(kinds.last == .finished(errors: []), "\(kinds)")
        #expect(!kinds.contains(.categoriesGranted([x])), "\(kinds)")
        withExtendedLifetime(holderQueue) {}
    }

    // OperationLogEvent.Kind.categoriesGranted: "Granted its mutually exclusive categories."
    // OperationLogger: "Hears the lifecycle of every operation ...: added, waiting (and for what),
    // conditions answered, categories granted, started, cancelled, produced, finished. Each event
    // comes once." OperationObserver (the logger hears `.finished` as an observer):
    // "`operationDidFinish` exactly once, last". The article: "Cancelling a waiting operation ...
    // withdraws its request" (it never got the category). The lock's own variant of the
    // probe above: the grant comes through the lock gate, after the cancelled request ended.
    @Test
    func operationCancelledWhileWaitingForALockHeldElsewhere_isNeverHeardGrantedTheCategory_afterItsFinish() throws {
        let directory = TemporaryDirectory("failing-probes")
        defer { directory.remove() }
        // Given X held by another process, and an operation of X waiting for it on a logging queue
        let lock = try FileCategoryLock(directory: directory.url)
        let x = uniqueName("x")
        let elsewhere = HeldLockFile(lock, category: x)
        defer { elsewhere.release() }
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let name = uniqueName("cancelled-waiter")
        let executed = Counter()
        let operation = AsyncBlockOperation { executed.increment() }
        operation.name = name
        operation.addCondition(ExclusiveCategory(x, lock: lock))
        queue.addOperation(operation)
        #expect(waitUntil { operation.snapshot().waitsFor.contains { if case .categoryHeldElsewhere = $0 { true } else { false } } })

        // When it is cancelled
        operation.cancel()
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { logger.kinds(of: name).contains(.finished(errors: [])) })
        Thread.sleep(forTimeInterval: 0.2) // a chance for a late event

        // Then the logger heard it cancelled and finished, last, and never granted X
        let kinds = logger.kinds(of: name)
        #expect(executed.current == 0)
        #expect(kinds.last == .finished(errors: []), "\(kinds)")
        #expect(!kinds.contains(.categoriesGranted([x])), "\(kinds)")
    }
}
