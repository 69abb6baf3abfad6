import Foundation
import Operations
import Testing
import TestSupport

// A dependency cycle closed through a dependency that a condition produced is diagnosed like any
// other cycle: a `.dependencyCycle` diagnostic, and the operation that closed it finishes with
// `AsyncOperationError.dependencyCycle`, so the rest of the cycle can proceed. Never a silent hang:
// every wait here is bounded, so a hang fails the test.

@Suite("Dependency cycle through a condition")
struct DependencyCycleThroughConditionTests {
    init() {
        _ = DiagnosticsLog.shared // capture diagnostics before any test reports one
    }

    /// What the condition's dependency is, and how it leads back to the conditioned operation.
    enum Shape: String, CaseIterable, Sendable {
        /// An `AsyncOperation` that depends on the conditioned operation.
        case asyncDependency
        /// A plain `BlockOperation` that depends on the conditioned operation.
        case plainDependency
        /// An `AsyncOperation` that depends on another operation of the queue, which depends on
        /// the conditioned operation.
        case throughAnotherOperation
        /// The same, the other operation a plain `BlockOperation`: nothing waits for the
        /// conditioned operation that it can see.
        case throughAPlainOperation
    }

    @Test(arguments: Shape.allCases)
    func cycleThroughAConditionsDependency_isDiagnosedAndBroken(shape: Shape) throws {
        // Given an operation whose condition produces a dependency that leads back to it
        let operations = RecordingOperations("cycle")
        let executed = operations.executed
        let middle = operations.make("middle")
        let plainMiddle = operations.makePlain("middle")
        let produced = Recorder<Operation>()
        let operation = operations.make("conditioned")
        operation.addCondition(StubCondition(name: "ProducesACycle", dependency: { conditioned in
            let dependency: Operation
            switch shape {
            case .asyncDependency:
                dependency = operations.make("produced")
                dependency.addDependency(conditioned)
            case .plainDependency:
                dependency = operations.makePlain("produced")
                dependency.addDependency(conditioned)
            case .throughAnotherOperation:
                dependency = operations.make("produced")
                dependency.addDependency(middle)
            case .throughAPlainOperation:
                dependency = operations.make("produced")
                dependency.addDependency(plainMiddle)
            }
            produced.append(dependency)
            return dependency
        }) { _, completion in
            completion(.satisfied)
        })
        var added: [Operation] = [operation]
        if shape == .throughAnotherOperation {
            middle.addDependency(operation)
            added.append(middle)
        } else if shape == .throughAPlainOperation {
            plainMiddle.addDependency(operation)
            added.append(plainMiddle)
        }

        // When it is added
        let queue = AsyncOperationQueue()
        queue.addOperations(added, waitUntilFinished: false)

        // Then everything finishes, and the cycle was reported and broken with .dependencyCycle
        try #require(waitUntilFinished(added), "a silent hang: \(executed.all) executed, diagnostics \(["conditioned", "produced", "middle"].map(operations.name).flatMap(DiagnosticsLog.shared.kinds(about:)))")
        let dependency = try #require(produced.all.first, "the condition's dependency was never asked for")
        #expect(waitUntilFinished([dependency]))
        let involved: [Operation] = added + [dependency]
        let cycleErrors = involved
            .compactMap { $0 as? AsyncOperation }
            .flatMap(\.errors)
            .compactMap { $0 as? AsyncOperationError }
            .filter { if case .dependencyCycle = $0 { true } else { false } }
        #expect(!cycleErrors.isEmpty, "no operation finished with .dependencyCycle; executed \(executed.all)")
        let diagnosed = ["conditioned", "produced", "middle"].map(operations.name).flatMap(DiagnosticsLog.shared.kinds(about:))
        #expect(diagnosed.contains(.dependencyCycle), "diagnostics: \(diagnosed)")
        if shape == .plainDependency || shape == .throughAPlainOperation {
            // Only the conditioned operation can carry the error: it closed the cycle
            #expect(operation.errors.asOperationErrors.contains { if case .dependencyCycle? = $0 { true } else { false } })
            #expect(!executed.all.contains("conditioned"))
        }
    }

    /// When the condition that brings the dependency is added, and what else happens then.
    enum Bringing: String, CaseIterable, Sendable {
        /// With the operation, before its add.
        case withTheAdd
        /// While the operation waits for a dependency.
        case whileWaiting
        /// While it waits, the condition cancelling the operation as it brings the dependency:
        /// the operation finishes while the dependency is being attached.
        case whileWaitingCancellingIt
        /// With the operation, the condition finishing it during its add.
        case withTheAddFinishingIt
    }

    /// A condition's dependency that waits for the operation (Foundation keeps its dependencies
    /// for good) closes a cycle: once both finished and nothing else holds them, both are freed,
    /// the operation keeping nothing its condition brought past its finish and the attachment,
    /// however the condition came and whatever finished the operation.
    @Test(arguments: Bringing.allCases)
    func cycleThroughAConditionsPlainDependency_leavesNothingAlive(bringing: Bringing) throws {
        // Given an operation whose condition brings a plain dependency that waits for it
        let (operation, dependency) = runCycleThroughAPlainDependency(bringing: bringing)

        // Then, once both finished and were dropped, neither is kept alive
        #expect(operation.isReleased(), "the operation was kept alive")
        #expect(dependency.isReleased(), "the condition's dependency was kept alive")
    }

    private func runCycleThroughAPlainDependency(bringing: Bringing) -> (WeakProbe<AsyncOperation>, WeakProbe<Operation>) {
        let produced = Recorder<Operation>()
        let operation = AsyncBlockOperation {}
        let condition = StubCondition(name: "ProducesACycle", dependency: { conditioned in
            switch bringing {
            case .whileWaitingCancellingIt: conditioned.cancel()
            case .withTheAddFinishingIt: conditioned.finish()
            case .withTheAdd, .whileWaiting: break
            }
            let dependency = BlockOperation {}
            dependency.addDependency(conditioned)
            produced.append(dependency)
            return dependency
        }) { _, completion in completion(.satisfied) }
        let queue = AsyncOperationQueue()
        switch bringing {
        case .whileWaiting, .whileWaitingCancellingIt:
            let blocker = BlockOperation {}
            operation.addDependency(blocker)
            queue.addOperation(operation)
            #expect(waitUntil { operation.snapshot().state == .waitingForDependencies })
            operation.addCondition(condition)
            queue.addOperation(blocker)
        case .withTheAdd, .withTheAddFinishingIt:
            operation.addCondition(condition)
            queue.addOperation(operation)
        }
        #expect(waitUntilFinished([operation]))
        let dependency = produced.all.first ?? BlockOperation {}
        #expect(waitUntilFinished([dependency]))
        return (WeakProbe(operation), WeakProbe(dependency))
    }
}
