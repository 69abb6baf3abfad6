import Foundation
import Operations
import Testing
import TestSupport


@Suite struct GroupOperationTests {
    @Test func group_finishesAfterEveryChild() {
        let finished = Counter()
        let children = (0..<20).map { _ in AsyncBlockOperation { finished.increment() } }
        let group = GroupOperation(operations: children)
        AsyncOperationQueue().addOperations([group], waitUntilFinished: true)
        #expect(finished.current == 20)
        #expect(children.allSatisfy { $0.isFinished })
        #expect(group.isFinished && !group.isFailed)
    }

    @Test func emptyGroup_finishes() {
        let group = GroupOperation()
        AsyncOperationQueue().addOperations([group], waitUntilFinished: true)
        #expect(group.isFinished)
    }

    @Test func maxConcurrentOne_runsChildrenInOrderAdded() {
        let order = Recorder<Int>()
        let probe = ConcurrencyProbe()
        let children = (0..<30).map { index in
            AsyncBlockOperation {
                probe.enter("group")
                order.append(index)
                usleep(200)
                probe.leave("group")
            }
        }
        let group = GroupOperation(operations: children)
        group.maxConcurrentOperationCount = 1
        AsyncOperationQueue().addOperations([group], waitUntilFinished: true)
        #expect(order.all == Array(0..<30))
        #expect(probe.maximum("group") == 1)
    }

    @Test func errors_holdEveryChildsErrors() {
        let children = (1...3).map { code in AsyncBlockOperation { throw StubError("\(code)") } }
        let group = GroupOperation(operations: children + [AsyncBlockOperation {}])
        AsyncOperationQueue().addOperations([group], waitUntilFinished: true)
        let labels = group.errors.compactMap { ($0 as? StubError)?.label }.sorted()
        #expect(labels == ["1", "2", "3"])
    }

    @Test func childrenAddedWhileRunning_andProduced_areAwaited() {
        let ran = Recorder<String>()
        let group = GroupOperation()
        let producer = AsyncBlockOperation {}
        let first = AsyncBlockOperation { finish in
            ran.append("first")
            group.addChild(AsyncBlockOperation { usleep(2_000); ran.append("added later") })
            finish(nil)
        }
        let second = AsyncBlockOperation { ran.append("second") }
        let producing = AsyncBlockOperation {}
        producer.name = "producer"
        group.addChildren([first, second, producing])
        producing.addObserver(ProduceOnStart { operation in
            operation.produce(AsyncBlockOperation { usleep(2_000); ran.append("produced") })
        })
        AsyncOperationQueue().addOperations([group], waitUntilFinished: true)
        #expect(Set(ran.all) == ["first", "second", "added later", "produced"])
    }

    @Test func nestedGroups_finishInsideOut() {
        let ran = Counter()
        let inner = GroupOperation(operations: [AsyncBlockOperation { ran.increment() }])
        let middle = GroupOperation(operations: [inner, AsyncBlockOperation { ran.increment() }])
        let outer = GroupOperation(operations: [middle])
        AsyncOperationQueue().addOperations([outer], waitUntilFinished: true)
        #expect(ran.current == 2)
        #expect(inner.isFinished && middle.isFinished && outer.isFinished)
    }

    @Test func cancellingGroup_cancelsChildren_andWaitsForThem() {
        let started = Signal()
        let release = Signal()
        let longChild = AsyncBlockOperation { finish in
            started.signal()
            DispatchQueue.global().async { _ = release.wait(); finish(nil) }
        }
        let waitingChild = AsyncBlockOperation {}
        waitingChild.addDependency(longChild)
        let group = GroupOperation(operations: [longChild, waitingChild])
        let queue = AsyncOperationQueue()
        queue.addOperation(group)
        #expect(started.wait())

        group.cancel()

        // The continuation child finishes at once when cancelled; the group then finishes.
        #expect(waitUntilFinished([group]))
        #expect(longChild.isCancelled && waitingChild.isCancelled)
        #expect(longChild.isFinished && waitingChild.isFinished)
        release.signal()
    }

    @Test func childAddedToACancelledRunningGroup_isCancelledToo() {
        // A child that ignores cancellation keeps the cancelled group running.
        final class Stubborn: AsyncOperation, @unchecked Sendable {
            let started = Signal()
            let release = Signal()
            override func execute() {
                started.signal()
                DispatchQueue.global().async { _ = self.release.wait(); self.finish() }
            }
        }
        let blocker = Stubborn()
        let started = blocker.started
        let release = blocker.release
        let group = GroupOperation(operations: [blocker])
        AsyncOperationQueue().addOperation(group)
        #expect(started.wait())
        group.cancel()

        let ran = Counter()
        let late = AsyncBlockOperation { ran.increment() }
        group.addChild(late)

        release.signal()
        #expect(waitUntilFinished([group, late]))
        #expect(late.isCancelled)
        #expect(ran.current == 0)
    }

    @Test func childAddedToACancelledFinishedGroup_finishesCancelled() {
        let group = GroupOperation()
        group.cancel()
        AsyncOperationQueue().addOperations([group], waitUntilFinished: true)
        let ran = Counter()
        let late = AsyncBlockOperation { ran.increment() }
        group.addChild(late)
        #expect(waitUntilFinished([late]))
        #expect(late.isCancelled && ran.current == 0)
    }

    @Test func groupCancelledBeforeStart_neverRunsChildren_andReleasesThem() {
        let ran = Counter()
        let child = AsyncBlockOperation { ran.increment() }
        let plainChild = BlockOperation { ran.increment() }
        let group = GroupOperation(operations: [child, plainChild])
        group.cancel()
        AsyncOperationQueue().addOperations([group], waitUntilFinished: true)
        #expect(waitUntilFinished([child, plainChild]))
        #expect(ran.current == 0)
    }

    @Test func plainFoundationChildren_areAwaited() {
        let ran = Counter()
        let group = GroupOperation(operations: (0..<5).map { _ in BlockOperation { usleep(1_000); ran.increment() } })
        AsyncOperationQueue().addOperations([group], waitUntilFinished: true)
        #expect(ran.current == 5)
    }

    @Test func childNeedingCategoryHeldByGroup_failsAtOnce() {
        let category = uniqueName("category")
        let child = AsyncBlockOperation {}
        child.addCondition(ExclusiveStub(category))
        let group = GroupOperation(operations: [child])
        group.addCondition(ExclusiveStub(category))
        AsyncOperationQueue().addOperations([group], waitUntilFinished: true)
        let error = child.errors.first as? AsyncOperationError
        #expect(error == .categoryHeldByEnclosingGroup(category: category, operation: "AsyncBlockOperation"))
        #expect(group.isFinished)
    }

    @Test func subclass_addsChildrenInExecute() {
        final class Sync: GroupOperation, @unchecked Sendable {
            let ran = Counter()
            override func execute() {
                let ran = self.ran
                addChildren([AsyncBlockOperation { ran.increment() }, AsyncBlockOperation { ran.increment() }])
                super.execute()
            }
        }
        let sync = Sync()
        AsyncOperationQueue().addOperations([sync], waitUntilFinished: true)
        #expect(sync.ran.current == 2)
    }

    @Test func finishedGroup_isReleasedWithItsChildren() {
        var group: GroupOperation? = GroupOperation(operations: [AsyncBlockOperation {}])
        let groupProbe = WeakProbe(group!)
        AsyncOperationQueue().addOperations([group!], waitUntilFinished: true)
        group = nil
        #expect(groupProbe.isReleased())
    }

    // Found by a soak (API.md, semantics 7: a group's errors hold every child's errors and its
    // own): a group cancelled before it executed reported none of its children's errors.
    @Test func groupCancelledBeforeItExecutes_reportsItsChildrensErrors_thenItsOwn() {
        // Given a group not yet executing, one of whose children was cancelled with an error
        let childError = StubError("child")
        let groupError = StubError("group")
        let failedChild = AsyncBlockOperation {}
        let group = GroupOperation(operations: [failedChild, AsyncBlockOperation {}])
        failedChild.cancel(with: childError)

        // When the group is cancelled with an error of its own, and runs
        group.cancel(with: groupError)
        AsyncOperationQueue().addOperations([group], waitUntilFinished: true)

        // Then its errors are the child's, then its own
        #expect(group.errors.asStubErrors == [childError, groupError])
    }

    @Test func groupCancelledBeforeItExecutes_withEveryChildAlreadyFinished_reportsTheirErrors() {
        // Given a group whose only child, waiting for a dependency, was cancelled with an error
        // (so it finished before the group ran)
        let childError = StubError("child")
        let child = AsyncBlockOperation {}
        child.addDependency(AsyncBlockOperation {}) // never runs
        let group = GroupOperation(operations: [child])
        child.cancel(with: childError)
        #expect(waitUntil { child.isFinished })

        // When the group is cancelled before it executes, and runs
        group.cancel()
        AsyncOperationQueue().addOperations([group], waitUntilFinished: true)

        // Then it still reports the child's error
        #expect(group.errors.asStubErrors == [childError])
    }

    @Test func childrensConditions_getTheTimeOfTheQueueTheGroupRunsOn_nestedGroupsToo() {
        // Given a queue that gives conditions 0.2 s, and a group with a child, and a nested
        // group's child, whose conditions never answer
        let queue = AsyncOperationQueue()
        queue.conditionEvaluationTimeout = 0.2
        let answers = HeldCallback<ConditionResult>()
        let nestedAnswers = HeldCallback<ConditionResult>()
        let child = AsyncBlockOperation {}
        child.addCondition(StubCondition(name: "Silent") { _, completion in answers.hold(completion) })
        let nestedChild = AsyncBlockOperation {}
        nestedChild.addCondition(StubCondition(name: "Silent") { _, completion in nestedAnswers.hold(completion) })
        let group = GroupOperation(operations: [child, GroupOperation(operations: [nestedChild])])

        // When the group runs
        queue.addOperation(group)

        // Then both children fail with the queue's timeout, long before the default 60 s
        #expect(waitUntilFinished([group], timeout: 20))
        #expect(child.errors.asOperationErrors == [.conditionTimedOut(condition: "Silent", after: 0.2)])
        #expect(nestedChild.errors.asOperationErrors == [.conditionTimedOut(condition: "Silent", after: 0.2)])
        answers.drop()
        nestedAnswers.drop()
    }

    // Found by a race audit: API.md 7, a group finishes only after every child. A group that
    // finished by `finish(with:)` (a subclass that rejects its input in `execute()`, or a call
    // from outside while its children run) was heard finished before its children were.
    @Test(arguments: [false, true])
    func aGroupFinishedByHand_isHeardFinishedOnlyAfterItsChildren_withTheirErrorsAndItsOwn(whileChildrenRun: Bool) {
        // Given a group with a child, that finishes by hand: in its execute(), before starting
        // the children, or from outside while its child runs
        let held = HeldOperations()
        let childName = uniqueName("child")
        let child = held.make(childName)
        let group: GroupOperation = whileChildrenRun ? GroupOperation(operations: [child]) : RejectingGroup(operations: [child])
        let childFinishedFirst = Recorder<Bool>()
        group.addObserver(OnFinish { childFinishedFirst.append(child.isFinished) })
        let queue = AsyncOperationQueue()

        // When it runs (and, while its child runs, it is finished from outside)
        queue.addOperation(group)
        if whileChildrenRun {
            #expect(held.waitUntilStarted(childName))
            group.finish(with: StubError("finished by hand"))
        }

        // Then its child was cancelled and finished before the group was heard finished, and the
        // group has its own error
        #expect(waitUntilFinished([group]))
        #expect(childFinishedFirst.all == [true])
        #expect(child.isFinished && child.isCancelled)
        #expect(group.errors.contains { ($0 as? StubError)?.label == (whileChildrenRun ? "finished by hand" : "rejected") })
        held.finish(childName)
    }

    // Found by a race audit: a child admitted just as its cancelled group finished (`.tooLate`)
    // ran on the group's queue, which the drain had resumed.
    @Test func aChildAddedAsItsCancelledGroupFinishes_finishesCancelled_withoutRunning() {
        // Given a group waiting on a suspended queue, and an add of two children on another
        // thread, held after the group's check while the queue reads the first one
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        let group = GroupOperation()
        queue.addOperation(group)
        let reading = Signal()
        let mayGoOn = Signal()
        let first = StallingExecutingRead(reading: reading, mayGoOn: mayGoOn)
        let ran = Flag()
        let second = AsyncBlockOperation { ran.raise() }
        first.arm()
        Thread.detachNewThread { group.addChildren([first, second]) }
        #expect(reading.wait(timeout: generousTimeout))

        // When the group is cancelled and finishes (it never executed: its queue resumes to let
        // it) before the add goes on
        group.cancel()
        queue.isSuspended = false
        #expect(waitUntilFinished([group]))
        mayGoOn.signal()

        // Then the child added too late finishes cancelled, without running
        #expect(waitUntilFinished([second]))
        #expect(second.isCancelled && !ran.isRaised)
    }
}

/// A plain operation whose first `isExecuting` read, once armed, signals `reading` and waits for
/// `mayGoOn` (bounded): it holds an add at the moment the queue reads it.
private final class StallingExecutingRead: Operation, @unchecked Sendable {
    // @unchecked Sendable: `armed` is only touched while holding `lock`.
    private let lock = NSLock()
    private var armed = false
    private let reading: Signal
    private let mayGoOn: Signal

    init(reading: Signal, mayGoOn: Signal) {
        self.reading = reading
        self.mayGoOn = mayGoOn
    }

    func arm() {
        lock.withLock { armed = true }
    }

    override var isExecuting: Bool {
        let stalls = lock.withLock { () -> Bool in
            defer { armed = false }
            return armed
        }
        if stalls {
            reading.signal()
            _ = mayGoOn.wait(timeout: generousTimeout)
        }
        return super.isExecuting
    }
}

/// A group that rejects its input in `execute()`: it finishes with an error without starting
/// its children.
private final class RejectingGroup: GroupOperation, @unchecked Sendable {
    override func execute() {
        finish(with: StubError("rejected"))
    }
}

/// Calls `body` when the observed operation finishes.
private struct OnFinish: OperationObserver {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) { body() }
}

/// Calls `body` when the observed operation starts.
private struct ProduceOnStart: OperationObserver {
    let body: @Sendable (AsyncOperation) -> Void
    init(_ body: @escaping @Sendable (AsyncOperation) -> Void) { self.body = body }
    func operationDidStart(_ operation: AsyncOperation) { body(operation) }
}
