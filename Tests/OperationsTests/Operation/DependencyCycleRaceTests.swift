import Foundation
@testable import Operations
import Testing
import TestSupport

/// Two threads closing a cycle at the same moment, replayed step by step: each `addDependency`
/// is one step that adds the dependency (reading who waits for the operation) and one that
/// publishes the wait and searches. The interleaving where both adds read before either wait is
/// published is the one a race rarely hits.
@Suite struct DependencyCycleRaceTests {
    @Test func twoOperationsNothingWaitsFor_madeToDependOnEachOtherAtOnce_reportTheCycle() {
        // Given a and b, which nothing waits for, each made to depend on the other, both adds
        // reading who waits for their operation before either wait is published
        let operations = RecordingOperations("race")
        let a = operations.make("a")
        let b = operations.make("b")
        guard case let .added(aDependents) = a.lifecycle.addDependency(b),
              case let .added(bDependents) = b.lifecycle.addDependency(a) else {
            Issue.record("expected both dependencies to be added")
            return
        }
        #expect(aDependents.isEmpty && bDependents.isEmpty)

        // When a's add publishes its wait and searches, then b's
        let aWaits = a.waitForNewDependency(b, dependents: aDependents)
        let bWaits = b.waitForNewDependency(a, dependents: bDependents)

        // Then the second sees the first waiting for its operation, and reports the cycle it closes
        #expect(aWaits && !bWaits)
        #expect(DiagnosticsLog.shared.kinds(about: operations.name("b")) == [.dependencyCycle])

        // And once queued, b fails and a runs after it instead of both waiting for ever
        let queue = AsyncOperationQueue()
        queue.addOperations([a, b], waitUntilFinished: false)
        #expect(waitUntilFinished([a, b], timeout: 5))
        #expect(b.errors.asOperationErrors == [.dependencyCycle(operation: operations.name("b"), dependency: operations.name("a"))])
        #expect(operations.executed.all == ["a"])
        if !(a.isFinished && b.isFinished) { queue.cancelAllOperations() }
    }
}
