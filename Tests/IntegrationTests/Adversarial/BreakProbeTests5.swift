import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// The probes of round 5 (`FoundationParityProbeTests5`, `DocumentationProbeTests`) that found
// breaks: each checks a documented sentence (quoted above it), written as the probe suites are
// (Given / When / Then, bounded waits, nothing left running), and its failure message shows what
// was observed. A scenario that crashes the process runs in a child process of the test binary.

@Suite("Break probes, round 5")
struct BreakProbeTests5 {
    // MARK: - Composition.md

    // Composition.md:73-76: "Neither handler is called when the composite itself is cancelled, by
    // `cancel()`, an enclosing composite or group, or a timeout: there is nothing left to decide,
    // and observers hear about it." CompositeOperation: "Neither handler is called once the
    // composite itself is cancelled".
    @Test
    func compositeCancelledWhileItsObserverHearsTheCancel_andAChildFailingMeanwhile_callsNeitherHandler() {
        // Given a cascade whose only child runs until told, with handlers that would carry on,
        // and an observer that, on hearing the cascade cancelled, makes that child fail
        let queue = AsyncOperationQueue()
        let held = HeldOperations()
        let childName = uniqueName("child")
        let handlerCalls = Counter()
        let completionCalls = Counter()
        let cascade = CascadeOperation { steps in
            steps.add { held.make(childName) }
        } completion: {
            completionCalls.increment()
        } cancellation: { _ in
            handlerCalls.increment()
            return .carryOn
        }
        let heardCancelledAsTheChildFailed = Recorder<Bool>()
        cascade.addObserver(BlockObserver(didCancel: { operation in
            heardCancelledAsTheChildFailed.append(operation.isCancelled)
            held.finish(childName, with: StubError("failed as the cascade was being cancelled"))
        }))
        queue.addOperation(cascade)
        #expect(held.waitUntilStarted(childName))

        // When the cascade is cancelled
        cascade.cancel()

        // Then it finishes cancelled, and neither handler was called
        #expect(waitUntilFinished([cascade], timeout: 10))
        #expect(heardCancelledAsTheChildFailed.all == [true])
        #expect(cascade.isCancelled)
        #expect(handlerCalls.current == 0, "the cancellation handler was called \(handlerCalls.current) time(s) after the cascade was cancelled")
        #expect(completionCalls.current == 0, "the completion handler was called \(completionCalls.current) time(s) after the cascade was cancelled")
    }
}
