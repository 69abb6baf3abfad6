import Foundation
@testable import Operations
import Testing
import TestSupport

/// A group's progress while an add to its queue is under way (reaching the group's own queue
/// needs `@testable`).
@Suite struct GroupProgressDuringAddTests {
    @Test func aChildLetThroughWhileItsAddIsUnderWay_isCountedBeforeItFinishes() {
        // The group's queue is suspended until the group executes, so its children wait in line;
        // here the group starts in the middle of an add, and its first child runs and finishes
        // before the add ends. It must have been counted by then: otherwise the group, finished,
        // would see its total grow afterwards and never report its progress complete.
        let group = GroupOperation()
        let first = AsyncBlockOperation {}
        let second = AsyncBlockOperation {}
        let hook = WillAddHook { operation in
            guard operation === second else { return }
            AsyncOperationQueue().addOperation(group)
            _ = waitUntilFinished([first])
        }
        group.queue.delegate = hook

        group.addChildren([first, second])

        #expect(waitUntilFinished([group, second]))
        #expect(group.progress.completedUnitCount == group.progress.totalUnitCount)
        #expect(group.progress.fractionCompleted == 1)
        withExtendedLifetime(hook) {}
    }
}
