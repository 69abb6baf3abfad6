import Foundation
import Observers
import Operations
import Testing
import TestSupport

@Suite("ProducedObserver")
struct ProducedObserverTests {
    @Test func isCalledWithEveryProducedOperation_inOrder() {
        // Given an operation that produces two operations
        let products = [BlockOperation {}, BlockOperation {}]
        let operation = Producer(products: products)
        let seen = Recorder<Operation>()
        let fromOperation = Recorder<Bool>()
        operation.addObserver(ProducedObserver { producer, product in
            fromOperation.append(producer === operation)
            seen.append(product)
        })
        let queue = AsyncOperationQueue()

        // When
        queue.addOperation(operation)

        // Then both were reported, and both ran on the producer's queue
        #expect(waitUntilFinished([operation] + products))
        #expect(seen.count == 2)
        #expect(seen.all.first === products[0])
        #expect(seen.all.last === products[1])
        #expect(fromOperation.all == [true, true])
    }

    @Test func isNotCalled_whenNothingIsProduced() {
        let calls = Counter()
        let operation = Producer(products: [])
        operation.addObserver(ProducedObserver { _, _ in calls.increment() })
        let queue = AsyncOperationQueue()

        queue.addOperation(operation)

        #expect(waitUntilFinished([operation]))
        #expect(calls.current == 0)
    }
}

/// Produces each of `products`, then finishes.
private final class Producer: AsyncOperation, @unchecked Sendable {
    // @unchecked Sendable: `products` is immutable; the rest is AsyncOperation's.
    private let products: [Operation]

    init(products: [Operation]) {
        self.products = products
        super.init()
    }

    override func execute() {
        products.forEach(produce)
        finish()
    }
}
