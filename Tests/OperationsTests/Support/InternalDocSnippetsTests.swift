import Foundation
@testable import Operations
import Testing

// The examples of the `///` comments of the engine's internal helpers, verbatim between the
// `// docs:` markers (IntegrationTests' ReadmeSnippetsTests checks that they are), so that they
// keep compiling for whoever works on the engine.

private struct State {
    var block: (@Sendable () -> Void)?
}

@Suite struct InternalDocSnippetsTests {
    @Test func finishListener_example() {
        let operation = AsyncBlockOperation {}
        let semaphore = DispatchSemaphore(value: 0)
        // docs:
        let listener = FinishListener()
        listener.listen(to: operation) { semaphore.signal() }
        // :docs
        AsyncOperationQueue().addOperation(operation)
        #expect(semaphore.wait(timeout: .now() + 60) == .success)
    }

    @Test func take_example() {
        let state = Locked.make(State(block: {}))
        // docs:
        let released = state.withLock { $0.block.take() }
        _ = released // dropped here, outside the lock
        // :docs
        #expect(state.withLock { $0.block == nil })
    }
}
