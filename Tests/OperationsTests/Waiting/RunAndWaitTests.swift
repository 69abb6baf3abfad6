import Foundation
import Operations
import Testing
import TestSupport

// Stays private: deliberately not Equatable, so `multipleErrors` must compare it by type and description.
private struct Opaque: Error {
    let text: String
}

/// Records every event an observer hears, by name.
private struct EventLog: OperationObserver {
    let events: Recorder<String>
    func operationDidStart(_ operation: AsyncOperation) { events.append("start") }
    func operationDidCancel(_ operation: AsyncOperation) { events.append("cancel") }
    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) { events.append("finish") }
}

/// A result operation whose subclass forgets to produce its output.
private final class ForgetfulOperation: ResultOperation<Int>, @unchecked Sendable {
    override func execute() { finish() }
}

@Suite struct RunAndWaitTests {
    // MARK: - Outcomes

    @Test func runAndWait_blocksUntilFinishedFromAnotherThread() throws {
        let finishedLater = Counter()
        let operation = AsyncBlockOperation { finish in
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) {
                finishedLater.increment()
                finish(nil)
            }
        }

        try operation.runAndWait()

        #expect(finishedLater.current == 1)
        #expect(operation.isFinished)
    }

    @Test func failingOperation_throwsItsErrorAsItIs() {
        let operation = AsyncBlockOperation { throw StubError("7") }
        #expect(throws: StubError("7")) { try operation.runAndWait() }
    }

    @Test func severalErrors_areThrownTogether_inTheOrderCollected() {
        let group = GroupOperation(operations: [
            AsyncBlockOperation { throw StubError("1") },
            AsyncBlockOperation { throw StubError("2") },
        ])
        group.maxConcurrentOperationCount = 1
        let expected = AsyncOperationError.multipleErrors(operation: "GroupOperation", errors: [StubError("1"), StubError("2")])
        #expect(throws: expected) { try group.runAndWait() }
    }

    @Test func cancelledWithoutError_throwsCancellationError_withoutExecuting() {
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.cancel()
        #expect(throws: CancellationError.self) { try operation.runAndWait() }
        #expect(ran.current == 0)
        #expect(operation.isFinished)
    }

    @Test func cancelledWithError_throwsThatError() {
        let operation = AsyncBlockOperation {}
        operation.cancel(with: StubError("3"))
        #expect(throws: StubError("3")) { try operation.runAndWait() }
    }

    @Test func resultOperation_returnsItsOutput() throws {
        let answer = try ResultBlockOperation { 6 * 7 }.runAndWait()
        #expect(answer == 42)
    }

    @Test func resultOperation_failing_throws() {
        let operation = ResultBlockOperation<Int> { throw StubError("4") }
        #expect(throws: StubError("4")) { try operation.runAndWait() }
    }

    @Test func resultOperation_finishedWithoutOutput_throwsFinishedWithoutOutput() {
        let operation = ForgetfulOperation()
        operation.name = uniqueName("forgetful")
        #expect(throws: AsyncOperationError.finishedWithoutOutput(operation: operation.name!)) {
            try operation.runAndWait()
        }
    }

    @Test func group_returnsAfterEveryChild() throws {
        let finished = Counter()
        let children = (0..<10).map { _ in
            AsyncBlockOperation { finish in
                DispatchQueue.global().async { finished.increment(); finish(nil) }
            }
        }
        try GroupOperation(operations: children).runAndWait()
        #expect(finished.current == 10)
        #expect(children.allSatisfy { $0.isFinished })
    }

    // MARK: - Where it runs

    @Test func givenQueue_runsTheOperationThere() throws {
        let queue = AsyncOperationQueue()
        let ranOnQueue = Recorder<Bool>()
        let operation = AsyncBlockOperation { ranOnQueue.append(OperationQueue.current === queue) }
        try operation.runAndWait(on: queue)
        #expect(ranOnQueue.all == [true])
    }

    @Test func operationAlreadyOnAQueue_isWaitedForThere_notAddedAgain() throws {
        let name = uniqueName("queued")
        _ = DiagnosticsLog.shared
        let gate = AsyncBlockOperation { finish in
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { finish(nil) }
        }
        let operation = AsyncBlockOperation {}
        operation.name = name
        operation.addDependency(gate)
        let queue = AsyncOperationQueue()
        queue.addOperations([gate, operation], waitUntilFinished: false)

        try operation.runAndWait(on: AsyncOperationQueue())

        #expect(gate.isFinished && operation.isFinished)
        #expect(DiagnosticsLog.shared.kinds(about: name).isEmpty)
    }

    @Test func finishedOperation_returnsItsOutcomeAtOnce() throws {
        let operation = ResultBlockOperation { "done" }
        AsyncOperationQueue().addOperations([operation], waitUntilFinished: true)
        #expect(try operation.runAndWait() == "done")
        #expect(try operation.runAndWait() == "done")
    }

    @Test func dependencyOnAnotherQueue_isWaitedFor() throws {
        let order = Recorder<String>()
        let first = AsyncBlockOperation { finish in
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { order.append("first"); finish(nil) }
        }
        let second = AsyncBlockOperation { order.append("second") }
        second.addDependency(first)
        AsyncOperationQueue().addOperation(first)

        try second.runAndWait()

        #expect(order.all == ["first", "second"])
    }

    // MARK: - Timeout

    @Test func timeout_cancelsTheOperation_andThrows() {
        let name = uniqueName("never")
        let operation = AsyncBlockOperation { _ in } // never calls its continuation
        operation.name = name
        let expected = AsyncOperationError.waitTimedOut(operation: name, after: 0.1)

        #expect(throws: expected) { try operation.runAndWait(timeout: 0.1) }

        #expect(operation.isCancelled)
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.compactMap { $0 as? AsyncOperationError } == [expected])
    }

    @Test func timeout_notReached_returnsNormally() throws {
        let operation = ResultBlockOperation { "in time" }
        #expect(try operation.runAndWait(timeout: generousTimeout) == "in time")
        #expect(!operation.isCancelled)
    }

    @Test func timedOutOperation_isReleasedOnceFinished() {
        var operation: AsyncBlockOperation? = AsyncBlockOperation { _ in }
        let probe = WeakProbe(operation!)
        #expect(throws: AsyncOperationError.self) { try operation!.runAndWait(timeout: 0.05) }
        operation = nil
        #expect(probe.isReleased())
    }

    // MARK: - Deadlocks

    @MainActor
    @Test func onTheMainThread_forTheMainQueue_throwsAtOnce_withoutRunningIt() {
        let ran = Counter()
        let name = uniqueName("main")
        let operation = AsyncBlockOperation { ran.increment() }
        operation.name = name

        #expect {
            try operation.runAndWait(on: OperationQueue.main)
        } throws: { error in
            guard case let .waitWouldDeadlock(operation, _)? = error as? AsyncOperationError else { return false }
            return operation == name
        }
        #expect(ran.current == 0)
        #expect(!operation.isFinished && !operation.isCancelled) // untouched: it can still be run elsewhere
        try? operation.runAndWait()
        #expect(ran.current == 1)
    }

    // Apple documents the main queue as an invalid underlyingQueue for an OperationQueue.
    #if !canImport(Darwin)
    @MainActor
    @Test func onTheMainThread_forAQueueOnTheMainDispatchQueue_throwsAtOnce() {
        let queue = AsyncOperationQueue()
        queue.underlyingQueue = DispatchQueue.main
        #expect(throws: AsyncOperationError.self) { try AsyncBlockOperation {}.runAndWait(on: queue) }
    }
    #endif

    @Test func insideAnOperation_forItsOwnSerialQueue_throwsAtOnce() {
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let innerRan = Counter()
        let outcome = Recorder<String>()
        let outer = AsyncBlockOperation {
            do {
                try AsyncBlockOperation { innerRan.increment() }.runAndWait(on: queue)
                outcome.append("returned")
            } catch let error as AsyncOperationError {
                if case .waitWouldDeadlock = error { outcome.append("deadlock") }
            }
        }
        queue.addOperations([outer], waitUntilFinished: true)
        #expect(outcome.all == ["deadlock"])
        #expect(innerRan.current == 0)
    }

    @Test func inAnObserverOfItsOwnFinish_throwsAtOnce_andTheFinishCompletes() {
        // Given an observer that waits for the operation whose finish it hears
        let outcome = Recorder<String>()
        let operation = AsyncBlockOperation {}
        operation.addObserver(WaitingInDidFinish(outcome: outcome))

        // When it runs
        AsyncOperationQueue().addOperation(operation)

        // Then the wait throws at once rather than blocking the finish it waits for
        #expect(waitUntilFinished([operation]))
        #expect(outcome.all == ["deadlock"])
    }

    @Test func insideAnOperation_forItsOwnQueueWithAFreeSlot_waits() {
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 2
        let outcome = Recorder<String>()
        let outer = AsyncBlockOperation {
            let inner = ResultBlockOperation { "inner" }
            outcome.append((try? inner.runAndWait(on: queue)) ?? "failed")
        }
        queue.addOperations([outer], waitUntilFinished: true)
        #expect(outcome.all == ["inner"])
    }

    @Test func insideAnOperation_whenEveryOtherSlotWaits_throwsAtOnce() {
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 2
        let outcome = Recorder<String>()
        let inner = AsyncBlockOperation {
            // Runs in the second slot while `outer` waits for it in the first: one more operation
            // on this queue could never get a slot.
            do {
                try AsyncBlockOperation {}.runAndWait(on: queue)
                outcome.append("inner returned")
            } catch AsyncOperationError.waitWouldDeadlock {
                outcome.append("inner refused")
            } catch {
                outcome.append("inner failed otherwise")
            }
        }
        let outer = AsyncBlockOperation {
            outcome.append((try? inner.runAndWait(on: queue)) != nil ? "outer returned" : "outer failed")
        }
        queue.addOperations([outer], waitUntilFinished: true)
        #expect(outcome.all == ["inner refused", "outer returned"])
    }

    // MARK: - The errors it throws

    @Test func multipleErrors_compareTheirErrors_andDescribeThem() {
        let one = AsyncOperationError.multipleErrors(operation: "sync", errors: [StubError("1"), Opaque(text: "a")])
        #expect(one == .multipleErrors(operation: "sync", errors: [StubError("1"), Opaque(text: "a")]))
        #expect(one != .multipleErrors(operation: "sync", errors: [StubError("2"), Opaque(text: "a")]))
        #expect(one != .multipleErrors(operation: "sync", errors: [StubError("1"), Opaque(text: "b")]))
        #expect(one != .multipleErrors(operation: "sync", errors: [StubError("1")]))
        #expect(one != .multipleErrors(operation: "other", errors: [StubError("1"), Opaque(text: "a")]))
        #expect(one != .waitTimedOut(operation: "sync", after: 1))
        #expect(one.description == #"'sync' failed with 2 errors: StubError(1); Opaque(text: "a")"#)
    }

    @Test func waitErrors_sayWhatHappened() {
        #expect(AsyncOperationError.waitTimedOut(operation: "sync", after: 1.5).description
            == "gave up waiting for 'sync' after 1.5 s and cancelled it")
        #expect(AsyncOperationError.finishedWithoutOutput(operation: "fetch").description
            == "'fetch' finished without producing its output")
        #expect(AsyncOperationError.waitWouldDeadlock(operation: "sync", reason: "because").description
            == "waiting for 'sync' here would never end: because")
    }

    // MARK: - Events and memory

    @Test func observersHearEachEventOnce() throws {
        let events = Recorder<String>()
        let operation = AsyncBlockOperation {}
        operation.addObserver(EventLog(events: events))
        try operation.runAndWait()
        #expect(events.all == ["start", "finish"])
    }

    @Test func finishedOperation_isReleased() throws {
        var operation: ResultBlockOperation<Int>? = ResultBlockOperation { 1 }
        let probe = WeakProbe(operation!)
        _ = try operation!.runAndWait()
        operation = nil
        #expect(probe.isReleased())
    }
}

/// Waits, in `operationDidFinish`, for the operation it observes.
private struct WaitingInDidFinish: OperationObserver {
    let outcome: Recorder<String>

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        do {
            try operation.runAndWait(timeout: 2)
            outcome.append("returned")
        } catch let error as AsyncOperationError {
            if case .waitWouldDeadlock = error { outcome.append("deadlock") } else { outcome.append("\(error)") }
        } catch {
            outcome.append("\(error)")
        }
    }
}
