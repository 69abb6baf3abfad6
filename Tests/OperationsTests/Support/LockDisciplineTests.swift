import Foundation
@testable import Operations
import Testing

// The engine's locks never nest (debug builds check it: `LockDiscipline`). The whole suite runs
// with the check on, so any nesting anywhere stops the run; this test trips it on purpose, to
// show that the check is there and says what happened.

@Suite struct LockDisciplineTests {
    @Test func takingALockWhileHoldingAnother_isReported() {
        #if DEBUG
        let outer = Locked.make(0)
        let inner = Locked.make(0)
        var reports: [String] = []
        LockDiscipline.withViolationHandler({ reports.append($0) }) {
            outer.withLock { _ in
                inner.withLock { $0 += 1 }
            }
        }
        #expect(reports.count == 1)
        #expect(reports.first?.contains("must never nest") == true)
        #endif
    }

    @Test func locksTakenOneAfterAnother_areFine() {
        #if DEBUG
        let first = Locked.make(0)
        let second = Locked.make(0)
        var reports: [String] = []
        LockDiscipline.withViolationHandler({ reports.append($0) }) {
            first.withLock { $0 += 1 }
            second.withLock { $0 += 1 }
        }
        #expect(reports.isEmpty)
        #endif
    }
}
