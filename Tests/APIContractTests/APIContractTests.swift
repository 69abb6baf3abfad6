import Conditions
import Foundation
import Observers
import Operations
import Testing

// Every name of ../shared/API.md, used the way a client would, from a file that imports
// Foundation, Operations, Conditions and Observers together: if a name were renamed, removed,
// changed or made ambiguous with Foundation, this file would stop compiling.

private enum Database {}

private final class ContractOperation: AsyncOperation, @unchecked Sendable {
    override func execute() {
        produce(BlockOperation {})
        finish(with: nil)
    }
}

private struct ContractCondition: OperationCondition {
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(.satisfied)
    }
}

private struct ContractObserver: OperationObserver {}

private struct ContractError: Error {}

@Suite struct APIContractTests {
    @Test func everyNameOfTheContract_compilesAndWorksTogether() throws {
        let queue: AsyncOperationQueue = AsyncOperationQueue()
        let foundationQueue: Foundation.OperationQueue = queue

        let subclass = ContractOperation()
        subclass.addCondition(ContractCondition())
        subclass.addCondition(MutuallyExclusive<Database>())
        subclass.addCondition(ExclusiveCategory("contract"))
        subclass.addCondition(NoFailedDependencies())
        subclass.addCondition(NoCancelledDependencies())
        subclass.addCondition(NegatedCondition(BlockCondition { false }))
        subclass.addCondition(SilentCondition(BlockCondition { true }))
        subclass.addObserver(ContractObserver())
        subclass.addObserver(BlockObserver(didStart: { _ in }, didCancel: { _ in }, didProduce: { _, _ in }, didFinish: { _, _ in }))
        subclass.addObserver(BlockObserver())
        subclass.addObserver(StartedObserver { _ in })
        subclass.addObserver(CancelledObserver { _ in })
        subclass.addObserver(FinishedObserver { _, _ in })
        subclass.addObserver(TimeoutObserver(timeout: 30))

        let throwing = AsyncBlockOperation { throw ContractError() }
        let continuation: AsyncBlockOperation = AsyncBlockOperation { (finish: @escaping AsyncBlockOperation.Continuation) in
            finish(nil)
        }
        let group = GroupOperation(operations: [AsyncBlockOperation {}])
        group.addChild(BlockOperation {})
        group.addChildren([AsyncBlockOperation {}])
        group.maxConcurrentOperationCount = 1

        let cancelled = AsyncBlockOperation {}
        cancelled.cancel(with: ContractError())

        foundationQueue.addOperation(subclass)
        foundationQueue.addOperations([throwing, continuation, group, cancelled], waitUntilFinished: true)
        foundationQueue.addOperation {}
        queue.waitUntilAllOperationsAreFinished()

        #expect(subclass.isFinished && !subclass.isFailed && subclass.errors.isEmpty)
        #expect(throwing.isFailed && throwing.errors.first is ContractError)
        #expect(continuation.isFinished && !continuation.isFailed)
        #expect(group.isFinished && !group.isFailed)
        #expect(cancelled.isCancelled && cancelled.errors.first is ContractError)

        let satisfied: ConditionResult = .satisfied
        let failed: ConditionResult = .failed(ContractError())
        _ = [satisfied, failed]
        let condition: any OperationCondition = ContractCondition()
        #expect(condition.name == "ContractCondition")
        #expect(condition.mutuallyExclusiveCategories.isEmpty)
        #expect(condition.dependency(for: subclass) == nil)
        let observer: any OperationObserver = ContractObserver()
        observer.operationDidStart(subclass)
        observer.operationDidCancel(subclass)
        observer.operation(subclass, didProduce: BlockOperation {})
        observer.operationDidFinish(subclass, errors: [])
    }

    /// The names of "Shutting down": both spellings of the grace period, the blocking twin, the
    /// flag, and the error an operation added too late finishes with.
    @Test func theShutdownNames_compileAndWorkTogether() async {
        let queue = AsyncOperationQueue()
        #expect(!queue.isShutDown)
        await queue.shutDown(gracePeriod: 1 as TimeInterval)
        if #available(macOS 13, iOS 16, tvOS 16, watchOS 9, *) {
            await queue.shutDown(gracePeriod: Duration.seconds(1))
        }
        queue.shutDownAndWait(gracePeriod: 1)
        #expect(queue.isShutDown)
        let late = AsyncBlockOperation {}
        queue.addOperation(late)
        #expect(late.isFinished && late.errors.contains { ($0 as? AsyncOperationError) == .queueShutDown })
        if case .queueShutDown = late.errors.first as? AsyncOperationError {} else {
            Issue.record("the late operation's error is not AsyncOperationError.queueShutDown")
        }
    }
}
