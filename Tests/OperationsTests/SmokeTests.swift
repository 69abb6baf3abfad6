import Foundation
import Operations
import Testing
import TestSupport

@Suite struct SmokeTests {
    @Test func blockOperationRunsOnQueue() {
        let queue = AsyncOperationQueue()
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        queue.addOperations([operation], waitUntilFinished: true)
        #expect(ran.current == 1)
        #expect(operation.isFinished)
    }
}
