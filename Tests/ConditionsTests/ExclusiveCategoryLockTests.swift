import Conditions
import Foundation
import Operations
import Testing
import TestSupport

/// Categories extended beyond the process by a `FileCategoryLock`, seen from one process: the
/// other process is played by a bare `flock` on the lock file (`HeldLockFile`).
@Suite("ExclusiveCategory with a lock")
struct ExclusiveCategoryLockTests {
    private let directory = TemporaryDirectory("category-locks")

    private func makeLock() throws -> FileCategoryLock {
        try FileCategoryLock(directory: directory.url)
    }

    @Test func aCategoryHeldByAnotherProcess_waitsThenRuns_withAGreaterToken() throws {
        defer { directory.remove() }
        let lock = try makeLock()
        let category = uniqueName("billing")
        let first = AsyncBlockOperation { }
        first.addCondition(ExclusiveCategory(category, lock: lock))
        let queue = AsyncOperationQueue()
        queue.addOperations([first], waitUntilFinished: true)

        let elsewhere = HeldLockFile(lock, category: category)
        let tokens = Recorder<UInt64?>()
        let second = TokenRecordingOperation(category: category, tokens: tokens)
        second.addCondition(ExclusiveCategory(category, lock: lock))
        queue.addOperation(second)

        #expect(waitUntil { second.debugDescription.contains("held by another process") })
        #expect(second.debugDescription.contains("file lock \(lock.lockFile(for: category).path)"))
        #expect(!second.isExecuting && !second.isFinished)
        elsewhere.release()
        #expect(waitUntilFinished([second]))
        #expect(second.errors.isEmpty)
        #expect(tokens.all == [2])
        #expect(second.fencingToken(for: category) == nil) // only while it holds the category
    }

    @Test func aSilentCategoryWithALock_waitsForAnotherProcess_andHoldsALease() throws {
        defer { directory.remove() }
        let lock = try makeLock()
        let category = uniqueName("billing")
        let elsewhere = HeldLockFile(lock, category: category)
        let tokens = Recorder<UInt64?>()
        let operation = TokenRecordingOperation(category: category, tokens: tokens)
        operation.addCondition(SilentCondition(ExclusiveCategory(category, lock: lock)))
        AsyncOperationQueue().addOperation(operation)

        #expect(waitUntil { operation.debugDescription.contains("held by another process") })
        #expect(!operation.isExecuting && !operation.isFinished)
        elsewhere.release()
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.isEmpty)
        #expect(tokens.all.count == 1)
        #expect((tokens.all.first ?? nil).map { $0 > 0 } == true)
    }

    @Test func theSameNameWithAndWithoutALock_isOneCategory_inAddOrder() throws {
        defer { directory.remove() }
        let lock = try makeLock()
        let category = uniqueName("billing")
        let order = Recorder<String>()
        let gate = Signal()
        let holder = AsyncBlockOperation { _ = gate.wait(); order.append("plain") }
        holder.addCondition(ExclusiveCategory(category))
        let locked = AsyncBlockOperation { order.append("locked") }
        locked.addCondition(ExclusiveCategory(category, lock: lock))
        let plainAgain = AsyncBlockOperation { order.append("plain again") }
        plainAgain.addCondition(ExclusiveCategory(category))
        let queue = AsyncOperationQueue()
        queue.addOperations([holder, locked, plainAgain], waitUntilFinished: false)

        #expect(waitUntil { holder.isExecuting })
        #expect(!locked.isExecuting)
        gate.signal()
        #expect(waitUntilFinished([holder, locked, plainAgain]))
        #expect(order.all == ["plain", "locked", "plain again"])
    }

    @Test func twoLocksForOneCategory_failTheOperation_clearly() throws {
        defer { directory.remove() }
        let other = TemporaryDirectory("other-locks")
        defer { other.remove() }
        let category = uniqueName("billing")
        let operation = AsyncBlockOperation { }
        operation.name = uniqueName("conflicted")
        operation.addCondition(ExclusiveCategory(category, lock: try makeLock()))
        operation.addCondition(ExclusiveCategory(category, lock: try FileCategoryLock(directory: other.url)))

        AsyncOperationQueue().addOperations([operation], waitUntilFinished: true)

        #expect(operation.errors.count == 1)
        #expect(operation.errors.first.map { isSameError($0, AsyncOperationError.categoryLockConflict(category: category, operation: operation.name!)) } == true)
        #expect(DiagnosticsLog.shared.kinds(about: operation.name!) == [.categoryLockConflict])
    }

    @Test func twoLocksOnOneDirectory_areTheSameLock() throws {
        defer { directory.remove() }
        let category = uniqueName("billing")
        let first = AsyncBlockOperation { }
        first.addCondition(ExclusiveCategory(category, lock: try makeLock()))
        first.addCondition(MutuallyExclusive<Billing>(lock: try makeLock()))
        let second = AsyncBlockOperation { }
        second.addCondition(ExclusiveCategory(category, lock: try FileCategoryLock(directory: directory.url.appendingPathComponent("."))))

        AsyncOperationQueue().addOperations([first, second], waitUntilFinished: true)

        #expect(first.errors.isEmpty && second.errors.isEmpty)
    }

    @Test func cancellingAWaitingOperation_withdrawsItsRequest_leavingNothingBehind() async throws {
        defer { directory.remove() }
        let lock = try makeLock()
        let category = uniqueName("billing")
        let elsewhere = HeldLockFile(lock, category: category)
        defer { elsewhere.release() }
        let waiting = AsyncBlockOperation { }
        waiting.addCondition(ExclusiveCategory(category, lock: lock))
        let queue = AsyncOperationQueue()
        queue.addOperation(waiting)
        #expect(await eventually { waiting.debugDescription.contains("held by another process") })
        #expect(openFileDescriptors(on: lock.lockFile(for: category).path) == 2) // its request's too

        waiting.cancel()

        #expect(await eventually { waiting.isFinished })
        #expect(waiting.isCancelled)
        #expect(await eventually { openFileDescriptors(on: lock.lockFile(for: category).path) == 1 }) // the other process's only
        // The category is free within the process again.
        let next = AsyncBlockOperation { }
        next.addCondition(ExclusiveCategory(category))
        queue.addOperation(next)
        #expect(await eventually { next.isFinished })
    }

    @Test func suspendingTheQueue_withdrawsTheRequest_andResumingAsksAgain() async throws {
        defer { directory.remove() }
        let lock = try makeLock()
        let category = uniqueName("billing")
        let elsewhere = HeldLockFile(lock, category: category)
        let waiting = AsyncBlockOperation { }
        waiting.addCondition(ExclusiveCategory(category, lock: lock))
        let queue = AsyncOperationQueue()
        queue.addOperation(waiting)
        #expect(await eventually { waiting.debugDescription.contains("held by another process") })
        #expect(openFileDescriptors(on: lock.lockFile(for: category).path) == 2) // its request's too

        queue.isSuspended = true
        #expect(await eventually { openFileDescriptors(on: lock.lockFile(for: category).path) == 1 }) // the other process's only
        let plain = AsyncBlockOperation { }
        plain.addCondition(ExclusiveCategory(category))
        AsyncOperationQueue().addOperation(plain) // the category is free within the process meanwhile
        #expect(await eventually { plain.isFinished })

        elsewhere.release()
        queue.isSuspended = false
        #expect(await eventually { waiting.isFinished })
        #expect(waiting.errors.isEmpty && !waiting.isCancelled)
    }

    @Test func anUnreachableLock_failsTheOperationAfterItsTimeout_andNothingElse() throws {
        defer { directory.remove() }
        let notADirectory = directory.file("plain-file")
        #expect(FileManager.default.createFile(atPath: notADirectory, contents: Data()))
        let unreachable = try FileCategoryLock(directory: URL(fileURLWithPath: notADirectory).appendingPathComponent("locks"), unavailableTimeout: 0.3)
        let category = uniqueName("billing")
        let ran = Counter()
        let failing = AsyncBlockOperation { ran.increment() }
        failing.addCondition(ExclusiveCategory(category, lock: unreachable))
        let other = AsyncBlockOperation { }
        other.addCondition(ExclusiveCategory(uniqueName("other"), lock: try makeLock()))
        let queue = AsyncOperationQueue()

        queue.addOperations([failing, other], waitUntilFinished: true)

        #expect(ran.current == 0)
        #expect(other.errors.isEmpty)
        guard case let .unavailable(failedCategory, _)? = failing.errors.first as? CategoryLockError else {
            Issue.record("expected CategoryLockError.unavailable, got \(failing.errors)")
            return
        }
        #expect(failedCategory == category)
    }

    @Test func aWaitTimeout_failsAnOperationWhoseCategoryStaysHeld() throws {
        defer { directory.remove() }
        let lock = try FileCategoryLock(directory: directory.url, waitTimeout: 0.2)
        let category = uniqueName("billing")
        let elsewhere = HeldLockFile(lock, category: category)
        defer { elsewhere.release() }
        let operation = AsyncBlockOperation { }
        operation.addCondition(ExclusiveCategory(category, lock: lock))

        AsyncOperationQueue().addOperations([operation], waitUntilFinished: true)

        guard case let .unavailable(_, underlying)? = operation.errors.first as? CategoryLockError else {
            Issue.record("expected CategoryLockError.unavailable, got \(operation.errors)")
            return
        }
        #expect(underlying is CategoryLockWaitTimedOut)
    }

    @Test func severalCategories_areTakenTogether_withATokenEach() throws {
        defer { directory.remove() }
        let lock = try makeLock()
        let (a, b) = (uniqueName("a"), uniqueName("b"))
        let tokens = Recorder<UInt64?>()
        let operation = TokenRecordingOperation(category: a, also: b, tokens: tokens)
        operation.addCondition(ExclusiveCategory(b, lock: lock))
        operation.addCondition(ExclusiveCategory(a, lock: lock))

        AsyncOperationQueue().addOperations([operation], waitUntilFinished: true)

        #expect(operation.errors.isEmpty)
        #expect(tokens.all == [1, 1])
    }

    @Test func theLockFile_holdsTheTokenAndTheHoldersProcessID_inAFixedReadableRecord() throws {
        defer { directory.remove() }
        let lock = try makeLock()
        let category = uniqueName("billing")
        let operations = (0..<2).map { _ in
            let operation = AsyncBlockOperation { }
            operation.addCondition(ExclusiveCategory(category, lock: lock))
            return operation
        }
        AsyncOperationQueue().addOperations(operations, waitUntilFinished: true)

        let record = try String(contentsOf: lock.lockFile(for: category), encoding: .utf8)
        let pid = String(ProcessInfo.processInfo.processIdentifier)
        #expect(record == "00000000000000000002 " + String(repeating: "0", count: 10 - pid.count) + pid + "\n")
    }

    @Test func lockFileNames_keepLettersDigitsDashesAndUnderscores_andEscapeTheRest() throws {
        defer { directory.remove() }
        let lock = try makeLock()
        #expect(lock.lockFile(for: "billing-2026_Q4").lastPathComponent == "billing-2026_Q4.lock")
        #expect(lock.lockFile(for: "tenant/42 é").lastPathComponent == "tenant%2F42%20%C3%A9.lock")
        #expect(lock.lockFile(for: ".hidden.x").lastPathComponent == "%2Ehidden.x.lock")
        let long = lock.lockFile(for: String(repeating: "x", count: 300)).lastPathComponent
        #expect(long.utf8.count < 255 && long.hasPrefix(String(repeating: "x", count: 160) + "%-"))
        #expect(lock.lockFile(for: "cafe\u{301}") == lock.lockFile(for: "caf\u{E9}")) // one spelling: NFC
    }

    @Test func aLockIsAskedForACategoryInCanonicalComposition_whicheverSpellingNamedIt() {
        defer { directory.remove() }
        let lock = NameRecordingLock()
        let operation = AsyncBlockOperation {}
        operation.addCondition(ExclusiveCategory(uniqueName("menu") + "-cafe\u{301}", lock: lock))
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntilFinished([operation]))
        let asked = lock.asked.all
        #expect(asked.count == 1)
        #expect(asked.first.map { Array($0.unicodeScalars.suffix(1)) } == ["\u{E9}"]) // composed, not e + U+0301
    }

    @Test func aLockFileWhoseRecordIsNotOurs_failsTheGrant_andIsLeftAsItIs() throws {
        defer { directory.remove() }
        let lock = try makeLock()
        let category = uniqueName("billing")
        let garbage = "not a fencing token\n"
        try garbage.write(to: lock.lockFile(for: category), atomically: false, encoding: .utf8)
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.addCondition(ExclusiveCategory(category, lock: lock))

        AsyncOperationQueue().addOperations([operation], waitUntilFinished: true)

        #expect(ran.current == 0)
        guard case let .unavailable(_, underlying)? = operation.errors.first as? CategoryLockError else {
            Issue.record("expected CategoryLockError.unavailable, got \(operation.errors)")
            return
        }
        #expect(underlying is FileCategoryLockCorruptRecord)
        #expect(try String(contentsOf: lock.lockFile(for: category), encoding: .utf8) == garbage)
        #expect(openFileDescriptors(on: lock.lockFile(for: category).path) == 0)
    }
}

private enum Billing {}

/// Records its fencing tokens while it executes.
private final class TokenRecordingOperation: AsyncOperation, @unchecked Sendable { // @unchecked: lets only
    let categories: [String]
    let tokens: Recorder<UInt64?>

    init(category: String, also other: String? = nil, tokens: Recorder<UInt64?>) {
        self.categories = [category] + (other.map { [$0] } ?? [])
        self.tokens = tokens
    }

    override func execute() {
        for category in categories {
            tokens.append(fencingToken(for: category))
        }
        finish()
    }
}

/// A `CategoryLock` that grants at once, on the calling thread, and records the names it was
/// asked for.
private struct NameRecordingLock: CategoryLock {
    private final class Lease: CategoryLease {
        let fencingToken: UInt64 = 1
        func release() {}
    }

    let identity = "name-recording:" + UUID().uuidString
    let asked = Recorder<String>()
    var description: String { "name-recording lock" }

    func holder(of category: String) -> String? { nil }

    func acquire(
        _ request: CategoryLockRequest,
        onLost: @escaping @Sendable (CategoryLockError) -> Void,
        completion: @escaping @Sendable (Result<any CategoryLease, any Error>) -> Void
    ) {
        asked.append(request.category)
        completion(.success(Lease()))
    }
}
