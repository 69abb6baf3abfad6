import Foundation
import Operations
import Testing
import TestSupport

// Long dependency chains: they run in order, and neither finishing nor releasing them recurses
// once per link (a recursive release of 100,000 operations overflows the stack, which would crash
// the test process rather than fail a test).

@Suite("Long dependency chains", .serialized)
struct ChainTests {
    static let length = 100_000
    /// Long chains take a while in debug and sanitizer builds; this bounds a hang, not speed.
    static let chainTimeout: TimeInterval = 600

    @Test func chainOfDependentOperations_runsInOrder_andIsReleasedAfterwards() {
        // Given a chain of 100,000 operations, each depending on the one before
        let ran = Recorder<Int>()

        // When it runs to the end and every reference to it is dropped
        let (first, last, outcome) = runChain(recordingInto: ran)

        // Then every body ran once, in order, and nothing is kept alive
        #expect(outcome.allFinished)
        #expect(outcome.failedCount == 0)
        #expect(ran.count == Self.length)
        #expect(ran.all == Array(0..<Self.length))
        #expect(first.isReleased())
        #expect(last.isReleased())
    }

    @Test func chainWhoseHeadWaitsForAPlainOperation_runsInOrder() {
        // Given a chain of 100,000 operations built front to back, whose head waits for a plain
        // operation (so every link reaches it: a search for a cycle from each link through the
        // whole chain would take quadratic time)
        let ran = Recorder<Int>()

        // When it runs to the end
        let (first, last, outcome) = runChain(recordingInto: ran, headWaitingFor: BlockOperation {})

        // Then every body ran once, in order, and nothing is kept alive
        #expect(outcome.allFinished)
        #expect(outcome.failedCount == 0)
        #expect(ran.all == Array(0..<Self.length))
        #expect(first.isReleased())
        #expect(last.isReleased())
    }

    @Test
    func chainThatNeverRan_isReleasedWithoutRecursion() {
        // Given a chain of 100,000 operations that is never added to a queue
        let ran = Counter()

        // When the only reference to it, its last operation, is dropped
        let (first, last) = buildAndDropChain(counting: ran)

        // Then the process is still here, and all of it is gone
        #expect(first.isReleased())
        #expect(last.isReleased())
        #expect(ran.current == 0)
    }

    @Test func cancelAllOperations_finishesAWaitingChain_withoutRunningIt() {
        // Given a chain of 100,000 operations whose head executes and never finishes by itself
        let ran = Counter()

        // When the queue cancels all its operations
        let (first, last, outcome) = cancelChain(counting: ran)

        // Then all of them finish, cancelled, and only the head ever ran
        #expect(outcome.allFinished)
        #expect(outcome.cancelledCount == Self.length)
        #expect(ran.current == 1)
        #expect(first.isReleased())
        #expect(last.isReleased())
    }

    @Test func cancelledChainOfConditionDependencies_isReleasedWithoutRecursion() {
        // Given a chain of 100,000 operations, each brought by the next one's condition, whose
        // head executes and never finishes by itself
        let ran = Counter()

        // When the queue cancels them all, and every reference to them is dropped (each keeps
        // what its conditions brought until it goes, as it never executed)
        let (first, last, outcome) = cancelChain(counting: ran, linkedByConditions: true)

        // Then all of them finished, cancelled, and all of them are gone
        #expect(outcome.allFinished)
        #expect(outcome.cancelledCount == Self.length)
        #expect(first.isReleased())
        #expect(last.isReleased())
    }

    @Test func failureCascadingDownALongChain_finishesEveryOperationWithoutRunningIt() {
        // Given a chain of 100,000 operations, each refusing to run after a failed dependency
        let ran = Counter()

        // When its head fails
        let (first, last, outcome) = cascadeFailure(counting: ran)

        // Then the failure reaches the end of the chain, one link at a time, without recursion
        #expect(outcome.allFinished)
        #expect(outcome.failedCount == Self.length)
        #expect(ran.current == 1)
        #expect(first.isReleased())
        #expect(last.isReleased())
    }
}

// MARK: - Helpers (each keeps the chain local, so that returning drops every reference)

private struct ChainOutcome {
    var allFinished: Bool
    var failedCount: Int
    var cancelledCount: Int

    init(_ operations: [AsyncOperation]) {
        allFinished = operations.allSatisfy { $0.isFinished }
        failedCount = operations.lazy.filter { $0.isFailed }.count
        cancelledCount = operations.lazy.filter { $0.isCancelled }.count
    }
}

/// `head`: a plain operation the chain's first link waits for, added to the queue after the chain.
private func runChain(recordingInto ran: Recorder<Int>, headWaitingFor head: Operation? = nil) -> (WeakProbe<AsyncOperation>, WeakProbe<AsyncOperation>, ChainOutcome) {
    let queue = AsyncOperationQueue()
    let operations: [AsyncOperation] = (0..<ChainTests.length).map { index in
        AsyncBlockOperation { ran.append(index) }
    }
    if let head {
        operations[0].addDependency(head)
    }
    for index in operations.indices.dropFirst() {
        operations[index].addDependency(operations[index - 1])
    }
    queue.addOperations(operations, waitUntilFinished: false)
    if let head {
        queue.addOperation(head)
    }
    let last = operations[operations.count - 1]
    _ = waitUntil(timeout: ChainTests.chainTimeout) { last.isFinished }
    return (WeakProbe(operations[0]), WeakProbe(last), ChainOutcome(operations))
}

private func buildAndDropChain(counting ran: Counter) -> (WeakProbe<AsyncOperation>, WeakProbe<AsyncOperation>) {
    let first = AsyncBlockOperation { ran.increment() }
    let firstProbe = WeakProbe<AsyncOperation>(first)
    var previous: AsyncOperation = first
    for _ in 1..<ChainTests.length {
        let next = AsyncBlockOperation { ran.increment() }
        next.addDependency(previous)
        previous = next
    }
    return (firstProbe, WeakProbe(previous))
}

/// `linkedByConditions`: each link's condition brings the one before, instead of the link
/// depending on it directly.
private func cancelChain(counting ran: Counter, linkedByConditions: Bool = false) -> (WeakProbe<AsyncOperation>, WeakProbe<AsyncOperation>, ChainOutcome) {
    let queue = AsyncOperationQueue()
    let headStarted = Signal()
    let head = AsyncBlockOperation { _ in
        ran.increment()
        headStarted.signal()
    }
    var operations: [AsyncOperation] = [head]
    operations.reserveCapacity(ChainTests.length)
    for index in 1..<ChainTests.length {
        let next = AsyncBlockOperation { ran.increment() }
        if linkedByConditions {
            next.addCondition(StubCondition.satisfied(bringing: operations[index - 1]))
        } else {
            next.addDependency(operations[index - 1])
        }
        operations.append(next)
    }
    queue.addOperations(operations, waitUntilFinished: false)
    _ = headStarted.wait()
    queue.cancelAllOperations()
    _ = waitUntil(timeout: ChainTests.chainTimeout) { operations.allSatisfy { $0.isFinished } }
    return (WeakProbe(head), WeakProbe(operations[operations.count - 1]), ChainOutcome(operations))
}

private extension StubError {
    static let headFailed = StubError("headFailed")
    static let dependencyFailed = StubError("dependencyFailed")
}

/// Fails when one of the operation's dependencies failed.
private struct NoFailedDependency: OperationCondition {
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        let failed = operation.dependencies.contains { ($0 as? AsyncOperation)?.isFailed == true }
        completion(failed ? .failed(StubError.dependencyFailed) : .satisfied)
    }
}

private func cascadeFailure(counting ran: Counter) -> (WeakProbe<AsyncOperation>, WeakProbe<AsyncOperation>, ChainOutcome) {
    let queue = AsyncOperationQueue()
    let release = Signal()
    let head = AsyncBlockOperation {
        ran.increment()
        _ = release.wait()
        throw StubError.headFailed
    }
    var operations: [AsyncOperation] = [head]
    operations.reserveCapacity(ChainTests.length)
    for index in 1..<ChainTests.length {
        let next = AsyncBlockOperation { ran.increment() }
        next.addDependency(operations[index - 1])
        next.addCondition(NoFailedDependency())
        operations.append(next)
    }
    queue.addOperations(operations, waitUntilFinished: false)
    release.signal() // every link is waiting now: the failure travels down the whole chain
    let last = operations[operations.count - 1]
    _ = waitUntil(timeout: ChainTests.chainTimeout) { last.isFinished }
    return (WeakProbe(head), WeakProbe(last), ChainOutcome(operations))
}
