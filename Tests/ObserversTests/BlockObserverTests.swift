import Foundation
import Observers
import Operations
import Testing
import TestSupport

@Suite("BlockObserver")
struct BlockObserverTests {
    @Test func everyClosure_isCalledOnceForItsEvent_inOrder() {
        // Given an operation that starts, produces, is cancelled and finishes
        let log = Recorder<String>()
        let product = BlockOperation {}
        let operation = ProducesThenWaitsForCancellation(product: product)
        let isSelf: @Sendable (AsyncOperation) -> Bool = { $0 === operation }
        operation.addObserver(BlockObserver(
            didStart: { log.append(isSelf($0) ? "start" : "start: wrong operation") },
            didCancel: { log.append(isSelf($0) ? "cancel" : "cancel: wrong operation") },
            didProduce: { log.append(isSelf($0) && $1 === product ? "produce" : "produce: wrong operations") },
            didFinish: { log.append(isSelf($0) ? "finish \($1.map { "\($0)" }.joined(separator: ", "))" : "finish: wrong operation") }
        ))
        let queue = AsyncOperationQueue()

        // When
        queue.addOperation(operation)
        #expect(waitUntil { log.all.contains("produce") })
        operation.cancel()

        // Then
        #expect(waitUntilFinished([operation, product]))
        #expect(log.all == ["start", "produce", "cancel", "finish StubError(stopped)"])
    }

    @Test func closuresLeftOut_areSimplyNotCalled() {
        // Given an observer with only didFinish, on an operation that goes through every event
        let finishes = Counter()
        let product = BlockOperation {}
        let operation = ProducesThenWaitsForCancellation(product: product)
        operation.addObserver(BlockObserver(didFinish: { _, _ in finishes.increment() }))
        let queue = AsyncOperationQueue()

        // When
        queue.addOperation(operation)
        #expect(waitUntil { product.isFinished })
        operation.cancel()

        // Then
        #expect(waitUntilFinished([operation]))
        #expect(finishes.current == 1)
    }

    @Test func observerWithNoClosures_changesNothing() {
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.addObserver(BlockObserver())
        let queue = AsyncOperationQueue()

        queue.addOperation(operation)

        #expect(waitUntilFinished([operation]))
        #expect(ran.current == 1)
        #expect(operation.errors.isEmpty)
    }
}

/// Produces `product` when it executes, then waits (cooperatively) to be cancelled and finishes
/// with `StubError("stopped")`.
private final class ProducesThenWaitsForCancellation: AsyncOperation, @unchecked Sendable {
    // @unchecked Sendable: `product` is immutable; the rest is AsyncOperation's.
    private let product: Operation

    init(product: Operation) {
        self.product = product
        super.init()
    }

    override func execute() {
        produce(product)
        DispatchQueue.global().async { [self] in
            _ = waitUntil { self.isCancelled }
            finish(with: StubError("stopped"))
        }
    }
}
