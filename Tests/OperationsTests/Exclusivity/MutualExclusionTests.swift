import Foundation
import Operations
import Testing
import TestSupport

// Mutual exclusion (contract, "Semantics clients rely on" 2): operations that share a category
// never execute together, on any queue; within a category they start in the order they were
// added; an operation in several categories holds all of them; finishing, failing and
// cancelling free categories; overlapping categories never deadlock; and a waiting operation
// occupies no concurrency slot.

@Suite("Mutual exclusion")
struct MutualExclusionTests {
    // MARK: - Never together

    @Test func operationsSharingACategory_neverExecuteAtTheSameTime() {
        // Given many operations of one category, on a queue that could run them all at once
        let timeline = Timeline()
        let x = uniqueName("X")
        let queue = makeQueue(maxConcurrent: 8)
        let operations = (0..<40).map { timeline.operation("op\($0)", categories: [x]) { usleep(300) } }

        // When
        queue.addOperations(operations, waitUntilFinished: false)

        // Then
        #expect(waitUntilFinished(operations))
        #expect(timeline.probe.maximum(x) == 1)
        #expect(timeline.starts.count == 40)
    }

    @Test func exclusion_holdsAcrossTwoQueues() {
        // Given operations of one category spread over two queues
        let timeline = Timeline()
        let x = uniqueName("X")
        let queues = [makeQueue(maxConcurrent: 4), makeQueue(maxConcurrent: 4)]
        let operations = (0..<40).map { timeline.operation("op\($0)", categories: [x]) { usleep(300) } }

        // When both queues get their share at the same time
        DispatchQueue.concurrentPerform(iterations: 2) { half in
            for (index, operation) in operations.enumerated() where index % 2 == half {
                queues[half].addOperation(operation)
            }
        }

        // Then
        #expect(waitUntilFinished(operations))
        #expect(timeline.probe.maximum(x) == 1)
        #expect(timeline.starts.count == 40)
    }

    @Test func operationInSeveralCategories_holdsAllOfThem() {
        // Given XY holds X and Y (from two conditions) and blocks; X, Y and an unrelated Z follow
        let timeline = Timeline()
        let (x, y, z) = (uniqueName("X"), uniqueName("Y"), uniqueName("Z"))
        let release = Signal()
        let queue = makeQueue(maxConcurrent: 4)
        let holder = timeline.operation("XY", categories: [x, y], oneConditionPerCategory: true) { _ = release.wait() }
        let onlyX = timeline.operation("X", categories: [x])
        let onlyY = timeline.operation("Y", categories: [y])
        let unrelated = timeline.operation("Z", categories: [z])

        // When
        queue.addOperations([holder, onlyX, onlyY, unrelated], waitUntilFinished: false)

        // Then Z, added last, runs; X and Y wait for XY
        #expect(waitUntilFinished([unrelated]))
        #expect(!timeline.didStart("X"))
        #expect(!timeline.didStart("Y"))
        release.signal()
        #expect(waitUntilFinished([holder, onlyX, onlyY]))
        #expect(timeline.happened("XY end", before: "X start"))
        #expect(timeline.happened("XY end", before: "Y start"))
        #expect(timeline.probe.maximum(x) == 1)
        #expect(timeline.probe.maximum(y) == 1)
    }

    @Test func overlappingCategories_neverDeadlock() {
        // Given hundreds of operations over A, B and C in every overlapping combination
        let timeline = Timeline()
        let (a, b, c) = (uniqueName("A"), uniqueName("B"), uniqueName("C"))
        let mixes = [[a, b], [b, c], [c, a], [a], [a, b, c], [b], [c, b], [c], [b, a], [a, c]]
        let queues = [makeQueue(maxConcurrent: 3), makeQueue(maxConcurrent: 3)]
        let operations = (0..<300).map { index in
            timeline.operation("op\(index)", categories: mixes[index % mixes.count]) { usleep(50) }
        }

        // When two threads add them to two queues at the same time
        DispatchQueue.concurrentPerform(iterations: 2) { half in
            for (index, operation) in operations.enumerated() where index % 2 == half {
                queues[half].addOperation(operation)
            }
        }

        // Then all finish, and no category ever had two holders
        #expect(waitUntilFinished(operations, timeout: 120))
        #expect(timeline.starts.count == 300)
        for category in [a, b, c] {
            #expect(timeline.probe.maximum(category) == 1, "category \(category)")
        }
    }

    // MARK: - Order

    @Test func operationsOfACategory_startInTheOrderTheyWereAdded() {
        // Given
        let timeline = Timeline()
        let x = uniqueName("X")
        let queue = makeQueue(maxConcurrent: 8)
        let labels = (0..<100).map { "op\($0)" }
        let operations = labels.map { timeline.operation($0, categories: [x]) }

        // When added one by one
        for operation in operations {
            queue.addOperation(operation)
        }

        // Then
        #expect(waitUntilFinished(operations))
        #expect(timeline.starts == labels)
    }

    @Test func startOrder_followsAddOrder_acrossQueues() {
        // Given two queues
        let timeline = Timeline()
        let x = uniqueName("X")
        let queues = [makeQueue(maxConcurrent: 4), makeQueue(maxConcurrent: 4)]
        let labels = (0..<60).map { "op\($0)" }
        let operations = labels.map { timeline.operation($0, categories: [x]) }

        // When the operations are added alternately to one and the other
        for (index, operation) in operations.enumerated() {
            queues[index % 2].addOperation(operation)
        }

        // Then
        #expect(waitUntilFinished(operations))
        #expect(timeline.starts == labels)
        #expect(timeline.probe.maximum(x) == 1)
    }

    @Test func laterOperation_waitsForAnEarlierOneWhoseConditionAnsweredLater() {
        // Given H holds X; A (X, its other condition answers late) and B (X) wait behind it
        let timeline = Timeline()
        let x = uniqueName("X")
        let release = Signal()
        let gate = Signal()
        let answered = Signal()
        let queue = makeQueue(maxConcurrent: 4)
        let holder = timeline.operation("H", categories: [x]) { _ = release.wait() }
        let earlier = timeline.operation("A", categories: [x])
        earlier.addCondition(LateAnswer(gate: gate, answered: answered))
        let later = timeline.operation("B", categories: [x])
        queue.addOperations([holder, earlier, later], waitUntilFinished: false)
        #expect(timeline.waitForStart("H"))

        // When A's condition answers after B's, while H still holds X
        gate.signal()
        #expect(answered.wait())
        release.signal()

        // Then
        #expect(waitUntilFinished([holder, earlier, later]))
        #expect(timeline.starts == ["H", "A", "B"])
    }

    @Test func earlierOperationWithASlowCondition_doesNotHoldUpALaterOne() {
        // Given A (X, another condition that answers late) is added before B (X); X is free
        // (API.md, semantics 2: a category goes in add order to the operations otherwise free to
        // run; A is not, until its condition answers)
        let timeline = Timeline()
        let x = uniqueName("X")
        let gate = Signal()
        let answered = Signal()
        let queue = makeQueue(maxConcurrent: 4)
        let earlier = timeline.operation("A", categories: [x])
        earlier.addCondition(LateAnswer(gate: gate, answered: answered))
        let later = timeline.operation("B", categories: [x])

        // When B is free to run first
        queue.addOperations([earlier, later], waitUntilFinished: false)

        // Then B runs while A's condition is still unanswered, and A runs once it answers
        #expect(waitUntilFinished([later]))
        #expect(!earlier.isFinished)
        gate.signal()
        #expect(waitUntilFinished([earlier]))
        #expect(timeline.starts == ["B", "A"])
    }

    @Test func operationStillWaitingForADependency_doesNotHoldUpALaterOne() {
        // Given A (X) waits for a dependency, B (X) is added after A; X is free
        // (an operation takes its place in line only once its dependencies finished: a later
        // operation it depends on must never be stuck behind it)
        let timeline = Timeline()
        let x = uniqueName("X")
        let release = Signal()
        let queue = makeQueue(maxConcurrent: 4)
        let dependency = timeline.operation("D", categories: []) { _ = release.wait() }
        let earlier = timeline.operation("A", categories: [x])
        earlier.addDependency(dependency)
        let later = timeline.operation("B", categories: [x])

        // When B is ready while A still waits
        queue.addOperations([dependency, earlier, later], waitUntilFinished: false)

        // Then B runs without waiting for A, and A runs once its dependency finished
        #expect(waitUntilFinished([later]))
        #expect(!earlier.isFinished)
        release.signal()
        #expect(waitUntilFinished([dependency, earlier, later]))
        #expect(timeline.happened("B start", before: "A start"))
    }

    // MARK: - Freeing categories

    @Test func finishingWithAThrownError_freesTheCategory() {
        // Given A (X) throws, B (X) waits for it
        let timeline = Timeline()
        let x = uniqueName("X")
        let queue = makeQueue(maxConcurrent: 4)
        let failing = timeline.operation("A", categories: [x]) { throw StubError.thrown }
        let next = timeline.operation("B", categories: [x])

        // When
        queue.addOperations([failing, next], waitUntilFinished: false)

        // Then
        #expect(waitUntilFinished([failing, next]))
        #expect(failing.errors.asStubErrors == [.thrown])
        #expect(timeline.starts == ["A", "B"])
    }

    @Test func finishingWithAnErrorThroughTheContinuation_freesTheCategory() {
        // Given A (X) finishes with an error through its continuation, later, on another thread
        let timeline = Timeline()
        let x = uniqueName("X")
        let queue = makeQueue(maxConcurrent: 4)
        let failing = AsyncBlockOperation { finish in
            timeline.events.append("A start")
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) {
                timeline.events.append("A end")
                finish(StubError.thrown)
            }
        }
        failing.addCondition(ExclusiveStub([x]))
        let next = timeline.operation("B", categories: [x])

        // When
        queue.addOperations([failing, next], waitUntilFinished: false)

        // Then
        #expect(waitUntilFinished([failing, next]))
        #expect(failing.errors.asStubErrors == [.thrown])
        #expect(timeline.happened("A end", before: "B start"))
    }

    @Test func failedCondition_skipsExecution_andTheNextOperationRuns() {
        // Given H holds X; F (X) has a condition that fails; N (X) follows
        let timeline = Timeline()
        let x = uniqueName("X")
        let release = Signal()
        let queue = makeQueue(maxConcurrent: 4)
        let holder = timeline.operation("H", categories: [x]) { _ = release.wait() }
        let refused = timeline.operation("F", categories: [x])
        refused.addCondition(Refuses())
        let next = timeline.operation("N", categories: [x])

        // When
        queue.addOperations([holder, refused, next], waitUntilFinished: false)
        #expect(timeline.waitForStart("H"))
        release.signal()

        // Then
        #expect(waitUntilFinished([holder, refused, next]))
        #expect(refused.errors.asStubErrors == [.refused])
        #expect(timeline.starts == ["H", "N"])
    }

    @Test func cancellingAWaitingOperation_letsTheNextOneRun() {
        // Given H holds X; W and N (X) wait in line
        let timeline = Timeline()
        let x = uniqueName("X")
        let release = Signal()
        let queue = makeQueue(maxConcurrent: 4)
        let holder = timeline.operation("H", categories: [x]) { _ = release.wait() }
        let waiting = timeline.operation("W", categories: [x])
        let next = timeline.operation("N", categories: [x])
        queue.addOperations([holder, waiting, next], waitUntilFinished: false)
        #expect(timeline.waitForStart("H"))

        // When W is cancelled while it waits, and H then finishes
        waiting.cancel()
        #expect(waitUntilFinished([waiting]))
        release.signal()

        // Then N runs; W never did
        #expect(waitUntilFinished([holder, next]))
        #expect(waiting.isCancelled)
        #expect(timeline.starts == ["H", "N"])
    }

    @Test func cancellingTheExecutingHolder_letsTheNextOneRun() {
        // Given H holds X and never calls its continuation; N (X) waits
        let timeline = Timeline()
        let x = uniqueName("X")
        let started = Signal()
        let queue = makeQueue(maxConcurrent: 4)
        let holder = AsyncBlockOperation { _ in started.signal() }
        holder.addCondition(ExclusiveStub([x]))
        let next = timeline.operation("N", categories: [x])
        queue.addOperations([holder, next], waitUntilFinished: false)
        #expect(started.wait())

        // When
        holder.cancel()

        // Then
        #expect(waitUntilFinished([holder, next]))
        #expect(holder.isCancelled)
        #expect(timeline.starts == ["N"])
    }

    @Test func cancellingAWaiterFirstInLine_letsALaterOneTakeTheFreeCategory() {
        // Given H holds X; W needs X and Y; V, added after W, needs only Y
        let timeline = Timeline()
        let (x, y) = (uniqueName("X"), uniqueName("Y"))
        let release = Signal()
        let queue = makeQueue(maxConcurrent: 4)
        let holder = timeline.operation("H", categories: [x]) { _ = release.wait() }
        let waiting = timeline.operation("W", categories: [x, y])
        let later = timeline.operation("V", categories: [y])
        queue.addOperations([holder, waiting, later], waitUntilFinished: false)
        #expect(timeline.waitForStart("H"))
        _ = waitUntil(timeout: 0.3) { later.isFinished }
        #expect(!later.isFinished, "V must not overtake W, which was added first and waits for Y too")

        // When W is cancelled
        waiting.cancel()

        // Then V runs while H still holds X
        #expect(waitUntilFinished([later]))
        #expect(!holder.isFinished)
        release.signal()
        #expect(waitUntilFinished([holder, waiting]))
        #expect(timeline.starts == ["H", "V"])
    }

    @Test
    func cancellingAnOperationWaitingForASlot_freesItsCategory() {
        // Given a serial queue busy with R; A (X) is cleared to run there but has no slot yet;
        // B (X) waits on another queue
        let timeline = Timeline()
        let x = uniqueName("X")
        let release = Signal()
        let busy = makeQueue(maxConcurrent: 1)
        let other = makeQueue(maxConcurrent: 4)
        let runner = timeline.operation("R", categories: []) { _ = release.wait() }
        let waitingForSlot = timeline.operation("A", categories: [x])
        busy.addOperations([runner, waitingForSlot], waitUntilFinished: false)
        #expect(timeline.waitForStart("R"))
        let next = timeline.operation("B", categories: [x])
        other.addOperation(next)

        // When A is cancelled
        waitingForSlot.cancel()

        // Then B gets X although R still occupies A's queue
        #expect(waitUntilFinished([next]))
        #expect(!runner.isFinished)
        release.signal()
        #expect(waitUntilFinished([runner, waitingForSlot]))
        #expect(!timeline.didStart("A"))
    }

    @Test func earlierOperationDependingOnALaterOneOfItsCategory_doesNotDeadlock() {
        // Given A (X) depends on B (X), which is added after it
        let timeline = Timeline()
        let x = uniqueName("X")
        let queue = makeQueue(maxConcurrent: 4)
        let earlier = timeline.operation("A", categories: [x])
        let later = timeline.operation("B", categories: [x])
        earlier.addDependency(later)

        // When
        queue.addOperations([earlier, later], waitUntilFinished: false)

        // Then both run, the dependency first
        #expect(waitUntilFinished([earlier, later]))
        #expect(timeline.starts == ["B", "A"])
    }

    @Test func cancelAllOperations_freesTheCategoriesForAnotherQueue() {
        // Given H (never finishing by itself) and W1, W2 hold or wait for X on one queue
        let timeline = Timeline()
        let x = uniqueName("X")
        let started = Signal()
        let first = makeQueue(maxConcurrent: 4)
        let second = makeQueue(maxConcurrent: 4)
        let holder = AsyncBlockOperation { _ in started.signal() }
        holder.addCondition(ExclusiveStub([x]))
        let waiters = [timeline.operation("W1", categories: [x]), timeline.operation("W2", categories: [x])]
        first.addOperations([holder] + waiters, waitUntilFinished: false)
        #expect(started.wait())
        let other = timeline.operation("O", categories: [x])
        second.addOperation(other)

        // When
        first.cancelAllOperations()

        // Then the other queue's operation gets X; the cancelled ones never ran
        #expect(waitUntilFinished([holder, other] + waiters))
        #expect(([holder] + waiters).allSatisfy { $0.isCancelled })
        #expect(timeline.starts == ["O"])
    }

    // MARK: - Concurrency slots

    @Test func operationWaitingForACategory_occupiesNoConcurrencySlot() {
        // Given a queue with two slots: A holds X and blocks, B waits for X, C needs no category
        let timeline = Timeline()
        let x = uniqueName("X")
        let release = Signal()
        let holderExecutes = Signal()
        let queue = makeQueue(maxConcurrent: 2)
        let holder = timeline.operation("A", categories: [x]) {
            holderExecutes.signal()
            _ = release.wait()
        }
        let waiting = timeline.operation("B", categories: [x])
        let ranAlongsideHolder = Recorder<Bool>()
        let free = timeline.operation("C", categories: []) {
            // Either may start first; C waits to see A executing in the other slot.
            ranAlongsideHolder.append(holderExecutes.wait())
        }

        // When
        queue.addOperations([holder, waiting, free], waitUntilFinished: false)

        // Then C takes the second slot while A executes: B is not sitting in it
        #expect(waitUntilFinished([free]))
        #expect(ranAlongsideHolder.all == [true])
        #expect(!timeline.didStart("B"))
        release.signal()
        #expect(waitUntilFinished([holder, waiting]))
        #expect(timeline.happened("A end", before: "B start"))
    }
}

// MARK: - Helpers

private extension StubError {
    static let thrown = StubError("thrown")
    static let refused = StubError("refused")
}


/// A condition that always fails.
private struct Refuses: OperationCondition {
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(.failed(StubError.refused))
    }
}

/// A condition that is satisfied only once the test opens `gate`; signals `answered` afterwards.
private struct LateAnswer: OperationCondition {
    let gate: Signal
    let answered: Signal

    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        DispatchQueue.global().async {
            _ = gate.wait()
            completion(.satisfied)
            answered.signal()
        }
    }
}

private func makeQueue(maxConcurrent: Int) -> AsyncOperationQueue {
    let queue = AsyncOperationQueue()
    queue.maxConcurrentOperationCount = maxConcurrent
    return queue
}

/// Operations that log "<label> start" / "<label> end" and count, per category, how many of them
/// execute at once.
private final class Timeline: Sendable {
    let probe = ConcurrencyProbe()
    let events = Recorder<String>()

    /// An operation in `categories` that runs `work` between its start and end events.
    func operation(
        _ label: String,
        categories: [String],
        oneConditionPerCategory: Bool = false,
        work: @escaping @Sendable () throws -> Void = {}
    ) -> AsyncBlockOperation {
        let operation = AsyncBlockOperation { [probe, events] in
            categories.forEach(probe.enter)
            events.append("\(label) start")
            defer {
                events.append("\(label) end")
                categories.forEach(probe.leave)
            }
            try work()
        }
        operation.name = label
        if oneConditionPerCategory {
            for category in categories {
                operation.addCondition(ExclusiveStub([category]))
            }
        } else if !categories.isEmpty {
            operation.addCondition(ExclusiveStub(categories))
        }
        return operation
    }

    /// The labels of the operations that started, in order.
    var starts: [String] {
        events.all.compactMap { event in
            event.hasSuffix(" start") ? String(event.dropLast(" start".count)) : nil
        }
    }

    func didStart(_ label: String) -> Bool {
        events.all.contains("\(label) start")
    }

    func waitForStart(_ label: String) -> Bool {
        waitUntil { self.didStart(label) }
    }

    /// Whether both events happened, `first` before `second`.
    func happened(_ first: String, before second: String) -> Bool {
        let all = events.all
        guard let one = all.firstIndex(of: first), let two = all.firstIndex(of: second) else { return false }
        return one < two
    }
}
