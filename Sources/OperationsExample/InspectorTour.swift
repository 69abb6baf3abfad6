import Conditions
import Foundation
import Operations

// Seeing inside: an operation stuck behind another one's category, explained by the inspector,
// and a group's progress printed as it advances.

/// Runs the inspector tour.
func runInspectorTour() {
    print("\nSeeing inside: why does an operation wait?\n")
    let queue = AsyncOperationQueue()
    queue.name = "ledger"

    let migrationMayEnd = DispatchSemaphore(value: 0)
    let migrationStarted = DispatchSemaphore(value: 0)
    let migrate = AsyncBlockOperation { finish in
        migrationStarted.signal()
        DispatchQueue.global().async {
            migrationMayEnd.wait()
            finish(nil)
        }
    }
    migrate.name = "migrate"
    migrate.addCondition(MutuallyExclusive<Database>())

    let sync = AsyncBlockOperation {}
    sync.name = "sync"
    sync.addCondition(MutuallyExclusive<Database>())
    let report = AsyncBlockOperation {}
    report.name = "report"
    report.addDependency(sync)

    queue.addOperation(migrate)
    migrationStarted.wait()
    queue.addOperations([sync, report], waitUntilFinished: false)
    while sync.snapshot().state != .waitingForCategories {
        Thread.sleep(forTimeInterval: 0.001)
    }
    // One line per unfinished operation, in add order, each saying what it waits for.
    print(queue.debugDescription.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))

    migrationMayEnd.signal()
    queue.waitUntilAllOperationsAreFinished()
    print("\n  Once 'migrate' finished: \(queue.snapshot().operations.count) operations left.")

    print("\nA group's progress as its children finish:\n")
    let steps = (1...4).map { step -> AsyncBlockOperation in
        let operation = AsyncBlockOperation { Thread.sleep(forTimeInterval: 0.01) }
        operation.name = "step \(step)"
        return operation
    }
    let group = GroupOperation(operations: steps)
    group.maxConcurrentOperationCount = 1
    for step in steps {
        step.addObserver(ProgressLine(group: group))
    }
    queue.addOperations([group], waitUntilFinished: true)
    print(String(format: "  group finished: %.0f %%", group.progress.fractionCompleted * 100))
}

/// Prints the group's progress each time one of its children finishes.
private struct ProgressLine: OperationObserver {
    let group: GroupOperation

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        // The group counts the child once the child's finish is complete, a moment after this.
        let done = group.progress.completedUnitCount + 1
        print("  \(operation.name ?? "?") done: \(done) of \(group.progress.totalUnitCount)")
    }
}
