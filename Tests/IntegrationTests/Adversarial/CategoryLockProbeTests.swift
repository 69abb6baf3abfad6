import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Adversarial probes of categories held beyond one process (/work/shared/API.md "Beyond one
// process", point 11, and points 2, 10 and 12 where a category has a lock; the README's and the
// article's "Exclusion across processes and hosts"; the `///` comments of `CategoryLock`,
// `FileCategoryLock`, `CategoryLockError`, `ExclusiveCategory`, `MutuallyExclusive` and
// `fencingToken(for:)`), each not covered by `ExclusiveCategoryLockTests`, `CategoryLockDocsTests`
// or `FileCategoryLockProcessTests`. Another process is played by a bare `flock`
// (`HeldLockFile`) or by a real `category-lock-worker`. Every test names the sentence it checks.
// Every wait is bounded; none asserts on wall-clock speed.

@Suite("Category lock probes")
struct CategoryLockProbeTests {
    private let directory = TemporaryDirectory("category-lock-probes")

    private func makeLock() throws -> FileCategoryLock {
        try FileCategoryLock(directory: directory.url)
    }

    /// An operation of `category` through `lock` that records its fencing token in `tokens`,
    /// then finishes.
    private func tokenRecording(_ category: String, lock: some CategoryLock, into tokens: Recorder<UInt64?>) -> ClosureOperation {
        let operation = ClosureOperation { operation in
            tokens.append(operation.fencingToken(for: category))
            operation.finish()
        }
        operation.addCondition(ExclusiveCategory(category, lock: lock))
        return operation
    }

    /// Whether `operation` says it waits for its category held by another process.
    private func waitsElsewhere(_ operation: AsyncOperation) -> Bool {
        operation.debugDescription.contains("held by another process")
    }

    // MARK: - One category, whatever names it

    // API.md 11: "`ExclusiveCategory("x")` and `ExclusiveCategory("x", lock: L)` exclude each other
    // in one process."
    @Test(arguments: [true, false])
    func plainAndLockedNamesOfOneCategory_excludeEachOther_onTwoQueues(lockedOneHoldsIt: Bool) throws {
        defer { directory.remove() }
        // Given one spelling of X holding it on one queue
        let lock = try makeLock()
        let x = uniqueName("x")
        let held = HeldOperations()
        let holderName = uniqueName("holder")
        let holder = held.make(holderName)
        holder.addCondition(lockedOneHoldsIt ? ExclusiveCategory(x, lock: lock) : ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(holder)
        #expect(held.waitUntilStarted(holderName))

        // When the other spelling is added to another queue
        let executed = Counter()
        let other = AsyncBlockOperation { executed.increment() }
        other.addCondition(lockedOneHoldsIt ? ExclusiveCategory(x) : ExclusiveCategory(x, lock: lock))
        AsyncOperationQueue().addOperation(other)

        // Then it waits for the holder, and runs once the holder finished
        #expect(waitUntil { other.debugDescription.contains("held by '\(holderName)'") })
        #expect(executed.current == 0 && !other.isFinished)
        held.finish(holderName)
        #expect(waitUntilFinished([holder, other]))
        #expect(executed.current == 1)
        #expect(other.errors.isEmpty)
    }

    // `fencingToken(for:)`: "`nil` while it does not hold the category, or if no lock extends the
    // category beyond this process." API.md 2: "An operation in several categories holds all of
    // them." `MutuallyExclusive<T>(lock:)`: "extended beyond this process by `lock`".
    @Test
    func fencingToken_isThereOnlyForLockedCategoriesTheOperationHolds_whileItHoldsThem() throws {
        defer { directory.remove() }
        // Given an operation in two locked categories named after types and one plain category,
        // whose first locked category another process holds for now
        let lock = try makeLock()
        let ledger = String(reflecting: ProbeLedger.self)
        let mailer = String(reflecting: ProbeMailer.self)
        let plain = uniqueName("plain")
        let notHeld = uniqueName("not-held")
        let seen = Recorder<String>()
        let first = ClosureOperation(name: uniqueName("first")) { operation in
            for category in [ledger, mailer, plain, notHeld] {
                seen.append("\(category)=\(operation.fencingToken(for: category).map(String.init) ?? "nil")")
            }
            // finished by the test
        }
        first.addCondition(MutuallyExclusive<ProbeLedger>(lock: lock))
        first.addCondition(MutuallyExclusive<ProbeMailer>(lock: lock))
        first.addCondition(ExclusiveCategory(plain))
        #expect(first.fencingToken(for: ledger) == nil) // not even added
        let elsewhere = HeldLockFile(lock, category: ledger)
        defer { elsewhere.release() }
        let queue = AsyncOperationQueue()
        queue.addOperation(first)

        // While it waits for the lock, it has no token
        #expect(waitUntil { waitsElsewhere(first) })
        #expect(first.fencingToken(for: ledger) == nil)
        #expect(first.fencingToken(for: mailer) == nil)

        // When the other process lets go
        elsewhere.release()
        #expect(waitUntil { seen.count == 4 })

        // Then, as it runs, it has a token for each locked category only
        #expect(seen.all == ["\(ledger)=1", "\(mailer)=1", "\(plain)=nil", "\(notHeld)=nil"])
        // and holds all three: an operation in just one of them waits
        let second = ClosureOperation { operation in
            seen.append("second=\(operation.fencingToken(for: mailer).map(String.init) ?? "nil")")
            operation.finish()
        }
        second.addCondition(MutuallyExclusive<ProbeMailer>(lock: lock))
        AsyncOperationQueue().addOperation(second)
        #expect(waitUntil { second.debugDescription.contains("held by '\(first.name ?? "")'") })
        first.finish()
        #expect(waitUntilFinished([first, second]))
        #expect(seen.all.last == "second=2")
        #expect(first.fencingToken(for: ledger) == nil && first.fencingToken(for: mailer) == nil) // finished
    }

    // API.md 2: "Within a category, operations that are otherwise free to run ... are granted it
    // in the order they were added", "also when they sit on different `AsyncOperationQueue`s".
    // `CategoryLock`: "only that operation asks the lock. So a process has at most one request per
    // category outstanding." API.md 11: "Fencing tokens of a category strictly increase across
    // every grant".
    @Test
    func operationsOnThreeQueuesWaitingForACategoryHeldElsewhere_getItInAddOrder_throughOneRequest() throws {
        defer { directory.remove() }
        // Given X held by another process
        let lock = try makeLock()
        let x = uniqueName("x")
        let lockFile = lock.lockFile(for: x).path
        let elsewhere = HeldLockFile(lock, category: x)
        defer { elsewhere.release() }

        // When six operations, two of three with the lock, are added to three queues in turn
        let order = Recorder<Int>()
        let tokens = Recorder<UInt64>()
        let queues = (0..<3).map { _ in AsyncOperationQueue() }
        let operations = (0..<6).map { index in
            let operation = ClosureOperation { operation in
                order.append(index)
                if let token = operation.fencingToken(for: x) { tokens.append(token) }
                operation.finish()
            }
            operation.addCondition(index % 3 == 1 ? ExclusiveCategory(x) : ExclusiveCategory(x, lock: lock))
            return operation
        }
        for (index, operation) in operations.enumerated() {
            queues[index % 3].addOperation(operation)
        }

        // Then only the first asks the lock, and none runs
        #expect(waitUntil { waitsElsewhere(operations[0]) })
        #expect(waitUntil { openFileDescriptors(on: lockFile) == 2 }) // its request opens the file next
        Thread.sleep(forTimeInterval: 0.2) // a chance for a second request to be made
        #expect(openFileDescriptors(on: lockFile) == 2) // the other process's, and one request
        #expect(order.all.isEmpty)

        // And once the other process lets go, they run in add order, each token above the last
        elsewhere.release()
        #expect(waitUntilFinished(operations))
        #expect(order.all == Array(0..<6))
        #expect(tokens.count == 4)
        #expect(zip(tokens.all, tokens.all.dropFirst()).allSatisfy { $0 < $1 }, "\(tokens.all)")
    }

    // MARK: - Slots and suspension

    // `CategoryLock`: "While it waits for the lock, the operation holds no slot of its queue."
    @Test
    func operationWaitingForALockHeldElsewhere_holdsNoSlotOfItsQueue() throws {
        defer { directory.remove() }
        // Given a queue of two slots whose first operation waits for X, held by another process
        let lock = try makeLock()
        let x = uniqueName("x")
        let elsewhere = HeldLockFile(lock, category: x)
        defer { elsewhere.release() }
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 2
        let waiting = AsyncBlockOperation {}
        waiting.addCondition(ExclusiveCategory(x, lock: lock))
        queue.addOperation(waiting)
        #expect(waitUntil { waitsElsewhere(waiting) })

        // When two operations without categories are added
        let held = HeldOperations()
        let (a, b) = (uniqueName("a"), uniqueName("b"))
        queue.addOperation(held.make(a))
        queue.addOperation(held.make(b))

        // Then both run at once: the waiting one takes neither slot
        #expect(held.waitUntilStarted(a))
        #expect(held.waitUntilStarted(b))
        held.finish(a)
        held.finish(b)
        elsewhere.release()
        #expect(waitUntilFinished([waiting]))
        #expect(waiting.errors.isEmpty)
    }

    // API.md 2: "an operation is never granted a category while it cannot take a slot on its
    // queue." `CategoryLock`: "only that operation asks the lock".
    @Test
    func operationThatCannotTakeASlot_asksNoLock_andLeavesItsCategoryToAnotherQueue() throws {
        defer { directory.remove() }
        // Given a serial queue whose slot is taken
        let lock = try makeLock()
        let x = uniqueName("x")
        let held = HeldOperations()
        let blockerName = uniqueName("blocker")
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.addOperation(held.make(blockerName))
        #expect(held.waitUntilStarted(blockerName))

        // When an operation of X with a lock is added to it, then one of plain X to another queue
        let tokens = Recorder<UInt64?>()
        let locked = tokenRecording(x, lock: lock, into: tokens)
        queue.addOperation(locked)
        let elsewhere = AsyncBlockOperation {}
        elsewhere.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(elsewhere)

        // Then the other queue's runs, and the lock was never asked (its file was never made)
        #expect(waitUntilFinished([elsewhere]))
        #expect(!FileManager.default.fileExists(atPath: lock.lockFile(for: x).path))
        #expect(tokens.all.isEmpty)

        // And once the slot is free, it gets the first grant
        held.finish(blockerName)
        #expect(waitUntilFinished([locked]))
        #expect(tokens.all == [1])
    }

    // API.md 10: "A suspended queue evaluates no condition, takes no category and starts nothing."
    @Test
    func suspendedQueue_asksNoLock_untilResumed() throws {
        defer { directory.remove() }
        // Given a suspended queue with an operation of X with a lock
        let lock = try makeLock()
        let x = uniqueName("x")
        let tokens = Recorder<UInt64?>()
        let locked = tokenRecording(x, lock: lock, into: tokens)
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        queue.addOperation(locked)

        // When an operation of plain X runs on another queue meanwhile
        let plain = AsyncBlockOperation {}
        plain.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(plain)
        #expect(waitUntilFinished([plain]))
        Thread.sleep(forTimeInterval: 0.1) // a chance for a wrong queue to ask the lock

        // Then the suspended one asked no lock: its file was never made
        #expect(!FileManager.default.fileExists(atPath: lock.lockFile(for: x).path))
        #expect(tokens.all.isEmpty)

        // And once resumed it gets the first grant
        queue.isSuspended = false
        #expect(waitUntilFinished([locked]))
        #expect(tokens.all == [1])
    }

    // API.md 9: "A queue with `maxConcurrentOperationCount = 1` ... start[s] the operations whose
    // dependencies have finished in the order they were added, conditions and categories
    // included". (`CategoryLock`: "While it waits for the lock, the operation holds no slot of its
    // queue" does not let a later one overtake it there.)
    @Test
    func serialQueue_startsNothingAddedAfterAnOperationWaitingForALock_beforeIt() throws {
        defer { directory.remove() }
        // Given a serial queue whose first operation waits for X, held by another process, and
        // whose second needs nothing
        let lock = try makeLock()
        let x = uniqueName("x")
        let elsewhere = HeldLockFile(lock, category: x)
        defer { elsewhere.release() }
        let order = Recorder<String>()
        let locked = AsyncBlockOperation { order.append("locked") }
        locked.addCondition(ExclusiveCategory(x, lock: lock))
        let free = AsyncBlockOperation { order.append("free") }
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.addOperations([locked, free], waitUntilFinished: false)

        // Then the second does not start while the first waits
        #expect(waitUntil { waitsElsewhere(locked) })
        Thread.sleep(forTimeInterval: 0.2) // a chance for the second to overtake
        #expect(order.all.isEmpty)

        // And once the other process lets go, they run in add order
        elsewhere.release()
        #expect(waitUntilFinished([locked, free]))
        #expect(order.all == ["locked", "free"])
    }

    // MARK: - Shutting down

    // API.md 12: "every operation that was on the queue finishes exactly once; the call returns
    // when the queue is empty." `shutDown(gracePeriod:)`: "every operation still waiting (for ...
    // categories ...) is cancelled with `AsyncOperationError.queueShutDown` and finishes without
    // executing." The article: cancelling "withdraws its request and leaves no descriptor".
    @Test
    func shutDown_whileAnOperationWaitsForALockHeldElsewhere_finishesItOnceWithoutExecuting_andReturns() async throws {
        defer { directory.remove() }
        // Given an operation waiting for X, held by another process
        let lock = try makeLock()
        let x = uniqueName("x")
        let lockFile = lock.lockFile(for: x).path
        let elsewhere = HeldLockFile(lock, category: x)
        defer { elsewhere.release() }
        let executed = Counter()
        let finishes = Recorder<[any Error]>()
        let waiting = AsyncBlockOperation { executed.increment() }
        waiting.addCondition(ExclusiveCategory(x, lock: lock))
        waiting.addObserver(FinishedObserver { _, errors in finishes.append(errors) })
        let queue = AsyncOperationQueue()
        queue.addOperation(waiting)
        #expect(await eventually { waitsElsewhere(waiting) })

        // When the queue is shut down
        let returned = Flag()
        Task {
            await queue.shutDown(gracePeriod: 0.2)
            returned.raise()
        }

        // Then the call returns, the operation finished once without executing, and its request
        // is withdrawn
        #expect(await eventually { returned.isRaised })
        #expect(waiting.isFinished)
        #expect(executed.current == 0)
        #expect(finishes.count == 1)
        #expect(waiting.errors.contains { isSameError($0, AsyncOperationError.queueShutDown) }, "\(waiting.errors)")
        #expect(await eventually { openFileDescriptors(on: lockFile) == 1 }) // the other process's only
    }

    // API.md 12: "running operations may finish within the grace period, then are cancelled ...
    // Other queues are unaffected." API.md 2: "Cancelling or failing an operation frees its
    // categories." API.md 11: tokens "strictly increase across every grant".
    @Test
    func shutDown_cancelsARunningHolderOfALockedCategory_andTheCategoryGoesToAnotherQueue() async throws {
        defer { directory.remove() }
        // Given a holder of X that runs until cancelled, and an operation of X waiting on another
        // queue
        let lock = try makeLock()
        let x = uniqueName("x")
        let held = HeldOperations()
        let holderName = uniqueName("holder")
        let holder = held.make(holderName)
        holder.addCondition(ExclusiveCategory(x, lock: lock))
        let finishes = Counter()
        holder.addObserver(FinishedObserver { _, _ in finishes.increment() })
        let queue = AsyncOperationQueue()
        queue.addOperation(holder)
        #expect(await eventually { held.startCount(holderName) == 1 })
        let tokens = Recorder<UInt64?>()
        let next = tokenRecording(x, lock: lock, into: tokens)
        AsyncOperationQueue().addOperation(next)

        // When the holder's queue is shut down with a short grace period
        let returned = Flag()
        Task {
            await queue.shutDown(gracePeriod: 0.2)
            returned.raise()
        }

        // Then the holder is cancelled and finishes once, and the other queue's operation gets
        // the next grant
        #expect(await eventually { returned.isRaised })
        #expect(holder.isCancelled && holder.isFinished)
        #expect(finishes.current == 1)
        #expect(await eventually { next.isFinished })
        #expect(next.errors.isEmpty)
        #expect(tokens.all == [2])
        held.finish(holderName) // a late continuation call changes nothing
    }

    // MARK: - Unavailable and lost locks

    // `FileCategoryLock.init`: "A directory that cannot be created now is tried again by each
    // acquisition, which fails with `CategoryLockError.unavailable` once `unavailableTimeout` has
    // passed." `CategoryLockError.unavailable`: "The operation finished with this error, without
    // executing." The article: "it never runs without its lock."
    @Test(arguments: [false, true])
    func lockDirectoryRemovedAfterInit_isMadeAgain_orFailsOnlyThatOperation_whenAFileTookItsPlace(replacedByAFile: Bool) throws {
        defer { directory.remove() }
        // Given a lock whose directory is removed after the lock was made (a file put in its place)
        let locks = directory.url.appendingPathComponent("locks")
        let lock = try FileCategoryLock(directory: locks, unavailableTimeout: 0.3)
        try FileManager.default.removeItem(at: locks)
        if replacedByAFile {
            #expect(FileManager.default.createFile(atPath: locks.path, contents: Data()))
        }

        // When an operation of X with the lock is followed, on its serial queue and on another
        // queue, by operations of plain X
        let x = uniqueName("x")
        let executed = Counter()
        let finishes = Recorder<[any Error]>()
        let locked = AsyncBlockOperation { executed.increment() }
        locked.addCondition(ExclusiveCategory(x, lock: lock))
        locked.addObserver(FinishedObserver { _, errors in finishes.append(errors) })
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let nextHere = AsyncBlockOperation {}
        nextHere.addCondition(ExclusiveCategory(x))
        let nextThere = AsyncBlockOperation {}
        nextThere.addCondition(ExclusiveCategory(x))
        queue.addOperations([locked, nextHere], waitUntilFinished: false)
        AsyncOperationQueue().addOperation(nextThere)

        // Then every one finishes; the locked one ran only if the directory could be made again
        #expect(waitUntilFinished([locked, nextHere, nextThere]))
        #expect(nextHere.errors.isEmpty && nextThere.errors.isEmpty)
        #expect(finishes.count == 1)
        if replacedByAFile {
            #expect(executed.current == 0)
            guard case let .unavailable(category, _)? = locked.errors.first as? CategoryLockError else {
                Issue.record("expected CategoryLockError.unavailable, got \(locked.errors)")
                return
            }
            #expect(category == x)
            #expect(locked.errors.count == 1)
        } else {
            #expect(executed.current == 1)
            #expect(locked.errors.isEmpty, "\(locked.errors)")
        }
    }

    // `CategoryLock`: "An operation that needs several categories asks for them one at a time";
    // `CategoryLockError.unavailable`: "The operation finished with this error, without
    // executing"; API.md 2: "Cancelling or failing an operation frees its categories."
    @Test
    func secondLockUnavailable_givesTheFirstLeaseBack_forTheNextOperation() throws {
        defer { directory.remove() }
        // Given an operation of A (a working lock) and B (a lock whose directory is a file)
        let good = try makeLock()
        let notADirectory = directory.file("plain-file")
        #expect(FileManager.default.createFile(atPath: notADirectory, contents: Data()))
        let unreachable = try FileCategoryLock(directory: URL(fileURLWithPath: notADirectory).appendingPathComponent("locks"), unavailableTimeout: 0.3)
        let (a, b) = ("a-" + UUID().uuidString, "b-" + UUID().uuidString) // asked in this order
        let executed = Counter()
        let operation = AsyncBlockOperation { executed.increment() }
        operation.addCondition(ExclusiveCategory(a, lock: good))
        operation.addCondition(ExclusiveCategory(b, lock: unreachable))

        // When it runs
        let queue = AsyncOperationQueue()
        queue.addOperation(operation)
        #expect(waitUntilFinished([operation]))

        // Then it failed with B unavailable, without executing, and gave A's lease back
        #expect(executed.current == 0)
        guard case let .unavailable(category, _)? = operation.errors.first as? CategoryLockError else {
            Issue.record("expected CategoryLockError.unavailable, got \(operation.errors)")
            return
        }
        #expect(category == b)
        #expect(waitUntil { openFileDescriptors(on: good.lockFile(for: a).path) == 0 })
        let tokens = Recorder<UInt64?>()
        let next = ClosureOperation { next in
            tokens.append(next.fencingToken(for: a))
            next.finish()
        }
        next.addCondition(ExclusiveCategory(a, lock: good))
        queue.addOperation(next)
        #expect(waitUntilFinished([next]))
        #expect(next.errors.isEmpty)
        #expect((tokens.all.first ?? nil).map { $0 >= 2 } == true, "\(tokens.all)") // above the failed grant's
    }

    // API.md 11: "A lock lost while its holder runs cancels the holder with
    // `CategoryLockError.lost`." The article: "the operation is cancelled with
    // `CategoryLockError/lost(category:)`, and its observers hear it."
    @Test
    func leaseLostWhileTheHolderRuns_cancelsItWithLost_andItsObserversHearIt() throws {
        defer { directory.remove() } // made for every test
        // Given an operation that holds X through a lock answered by hand, and runs on
        let lock = HandAnsweredLock()
        let x = uniqueName("x")
        let events = Recorder<String>()
        let operation = ClosureOperation { _ in events.append("executed") } // finished by the test
        operation.addCondition(ExclusiveCategory(x, lock: lock))
        operation.addObserver(BlockObserver(didCancel: { _ in events.append("cancelled") }))
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntil { lock.isAsked(for: x) })
        #expect(lock.grant(x, token: 41))
        #expect(waitUntil { events.all == ["executed"] })
        #expect(operation.fencingToken(for: x) == 41)

        // When the lease is lost
        lock.loseLease(x)

        // Then the operation is cancelled with `lost`, its observers hear it, and the lease is
        // given back once it finished
        #expect(waitUntil { operation.isCancelled })
        #expect(waitUntil { events.all == ["executed", "cancelled"] })
        operation.finish()
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.contains { ($0 as? CategoryLockError).map(Self.isLost(x)) ?? false }, "\(operation.errors)")
        #expect(waitUntil { lock.leases.all.allSatisfy { $0.releases.current >= 1 } })
    }

    // `fencingToken(for:)`: "`nil` while it does not hold the category". `CategoryLockError.lost`:
    // "another process may hold the category now." The article's example reads a `nil` token as a
    // lost lock: `guard let token = fencingToken(for: "billing") else { finish(with:
    // CategoryLockError.lost(category: "billing")) ... }`.
    @Test
    func leaseLostWhileTheHolderRuns_leavesItNoFencingToken() throws {
        defer { directory.remove() } // made for every test
        // Given an operation that holds X through a lock answered by hand, and runs on
        let lock = HandAnsweredLock()
        let x = uniqueName("x")
        let operation = ClosureOperation { _ in } // finished by the test
        operation.addCondition(ExclusiveCategory(x, lock: lock))
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntil { lock.isAsked(for: x) })
        #expect(lock.grant(x, token: 41))
        #expect(waitUntil { operation.isExecuting })
        #expect(operation.fencingToken(for: x) == 41)

        // When the lease is lost
        lock.loseLease(x)
        #expect(waitUntil { operation.isCancelled })

        // Then it no longer has a token for X: it does not hold it beyond the process
        #expect(operation.fencingToken(for: x) == nil)
        operation.finish()
        #expect(waitUntilFinished([operation]))
    }

    // The article: "A lease lost before the operation started (while it still acquired its other
    // categories, say) fails the operation with the same error: it never runs without its lock."
    @Test
    func leaseLostWhileTheNextCategoryIsAsked_failsTheOperationWithLost_withoutExecuting() throws {
        defer { directory.remove() } // made for every test
        // Given an operation of A and B through a lock answered by hand, granted A and asking B
        let lock = HandAnsweredLock()
        let (a, b) = ("a-" + UUID().uuidString, "b-" + UUID().uuidString) // asked in this order
        let executed = Counter()
        let operation = AsyncBlockOperation { executed.increment() }
        operation.addCondition(ExclusiveCategory(b, lock: lock))
        operation.addCondition(ExclusiveCategory(a, lock: lock))
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntil { lock.isAsked(for: a) })
        #expect(lock.grant(a, token: 1))
        #expect(waitUntil { lock.isAsked(for: b) })

        // When A's lease is lost
        lock.loseLease(a)

        // Then the operation fails with A lost, never executing, and gives A's lease back
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 0)
        #expect(operation.errors.count == 1)
        #expect(operation.errors.first.flatMap { ($0 as? CategoryLockError).map(Self.isLost(a)) } == true, "\(operation.errors)")
        #expect(waitUntil { lock.leases.all.allSatisfy { $0.releases.current >= 1 } })
        if !operation.isFinished { operation.cancel() } // leaves nothing behind if it failed
    }

    // API.md 11: "A category's name means the same category whatever reaches it". `CategoryLock`:
    // "Two locks with the same identity are the same lock"; `FileCategoryLock`: "Two
    // `FileCategoryLock`s on one directory are the same lock." "Fencing tokens of a category
    // strictly increase across every grant, in every process."
    @Test
    func grantsOfThisProcessAndAWorker_neverOverlap_andTheirTokensOnlyGrow_throughTwoLocksOnOneDirectory() throws {
        defer { directory.remove() }
        // Given a worker process running operations of one category, and two locks of this
        // process on the same directory, one through a symbolic link
        let locks = directory.file("locks")
        let log = directory.file("shared.log")
        let category = uniqueName("billing")
        let direct = try FileCategoryLock(directory: URL(fileURLWithPath: locks))
        try FileManager.default.createSymbolicLink(atPath: directory.file("link"), withDestinationPath: locks)
        let linked = try FileCategoryLock(directory: URL(fileURLWithPath: directory.file("link")))
        #expect(direct.identity == linked.identity)
        let worker = try WorkerProcess([
            "--directory", locks, "--log", log, "--categories", category, "--operations", "300", "--queues", "2",
        ])
        defer { worker.stop() }

        // When this process runs operations of the category meanwhile, through both locks, on
        // two queues, logging as the worker does
        let descriptor = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        let pid = getpid()
        let queues = (0..<2).map { _ in AsyncOperationQueue() }
        let operations = (0..<100).map { index in
            let name = "\(pid)-probe-\(index)"
            let operation = ClosureOperation(name: name) { operation in
                let pair = "\(category):\(operation.fencingToken(for: category).map(String.init) ?? "none")"
                for kind in ["begin", "end"] {
                    let line = Array("\(kind) \(pid) \(pair) \(name)\n".utf8)
                    _ = write(descriptor, line, line.count)
                }
                operation.finish()
            }
            operation.addCondition(ExclusiveCategory(category, lock: index % 2 == 0 ? direct : linked))
            return operation
        }
        for (index, operation) in operations.enumerated() {
            queues[index % 2].addOperation(operation)
        }

        // Then no two grants overlapped, and every token is above the one before it
        #expect(waitUntilFinished(operations, timeout: 120))
        #expect(operations.allSatisfy { $0.errors.isEmpty })
        #expect(worker.waitForExit() == 0)
        let check = SharedLogCheck(logFile: log)
        #expect(check.problems.isEmpty, "\(check.problems.prefix(10))")
        #expect(check.begun == 400)
        #expect(check.workersDone == 1)
    }

    // API.md 11: "an operation never runs without its lock"; "Fencing tokens ... strictly increase
    // across every grant, in every process." The article: "its `debugDescription` says who holds
    // the category elsewhere ... ("category 'billing', held by another process (pid 4242, file
    // lock /tmp/billing-locks/billing.lock)")"; API.md: the queue's `debugDescription` lists every
    // unfinished operation "with the same explanation".
    @Test
    func operationWaitingForAWorkerThatHoldsItsCategory_namesThatWorker_andRunsOnceItIsKilled_withAGreaterToken() throws {
        defer { directory.remove() }
        // Given a worker process holding X until killed
        let locks = directory.file("locks")
        let log = directory.file("shared.log")
        let x = uniqueName("x")
        let holder = try WorkerProcess(["--directory", locks, "--log", log, "--hold", x])
        defer { holder.stop() }
        #expect(waitUntil(timeout: blockingTimeout) { SharedLogCheck.lastToken(of: x, in: log) != nil })
        let heldToken = SharedLogCheck.lastToken(of: x, in: log) ?? 0

        // When this process adds an operation of X
        let lock = try FileCategoryLock(directory: URL(fileURLWithPath: locks))
        let tokens = Recorder<UInt64?>()
        let waiting = ClosureOperation(name: uniqueName("waiting")) { operation in
            tokens.append(operation.fencingToken(for: x))
            operation.finish()
        }
        waiting.addCondition(ExclusiveCategory(x, lock: lock))
        let queue = AsyncOperationQueue()
        queue.addOperation(waiting)

        // Then it waits, and it and its queue name the worker's process ID and the lock file
        let expected = "category '\(x)', held by another process (pid \(holder.pid), file lock \(lock.lockFile(for: x).path))"
        #expect(waitUntil { waiting.debugDescription.contains(expected) }, "\(waiting.debugDescription)")
        #expect(queue.debugDescription.contains(expected), "\(queue.debugDescription)")
        #expect(tokens.all.isEmpty)

        // And once the worker is killed, it runs with a greater token
        kill(holder.pid, SIGKILL)
        #expect(waitUntilFinished([waiting]))
        #expect(waiting.errors.isEmpty)
        #expect(tokens.all.count == 1)
        #expect((tokens.all.first ?? nil).map { $0 > heldToken } == true, "\(tokens.all) after \(heldToken)")
    }

    // `ExclusiveCategory.init(_:lock:)`: "Naming one category with two different locks fails the
    // operation with `AsyncOperationError.categoryLockConflict`." `CategoryLock.identity`:
    // "Naming one category with two locks of different identities is an error on the operation."
    @Test
    func categoryNamedWithAnotherLockThanARunningHoldersLock_failsTheNewcomer_clearly() throws {
        defer { directory.remove() }
        // Given a holder of X through one lock
        let x = uniqueName("x")
        let first = try FileCategoryLock(directory: directory.url.appendingPathComponent("first"))
        let second = try FileCategoryLock(directory: directory.url.appendingPathComponent("second"))
        let held = HeldOperations()
        let holderName = uniqueName("holder")
        let holder = held.make(holderName)
        holder.addCondition(ExclusiveCategory(x, lock: first))
        AsyncOperationQueue().addOperation(holder)
        #expect(held.waitUntilStarted(holderName))

        // When an operation names X with another lock, on another queue
        let executed = Counter()
        let newcomer = AsyncBlockOperation { executed.increment() }
        newcomer.name = uniqueName("newcomer")
        newcomer.addCondition(ExclusiveCategory(x, lock: second))
        AsyncOperationQueue().addOperation(newcomer)

        // Then it fails with the conflict, without executing, and the holder runs on
        #expect(waitUntilFinished([newcomer]))
        #expect(executed.current == 0)
        #expect(newcomer.errors.count == 1)
        #expect(newcomer.errors.first.map { isSameError($0, AsyncOperationError.categoryLockConflict(category: x, operation: newcomer.name ?? "")) } == true, "\(newcomer.errors)")
        #expect(holder.isExecuting)
        held.finish(holderName)
        #expect(waitUntilFinished([holder]))
        #expect(holder.errors.isEmpty)
    }

    // `FileCategoryLock.init`: "Throws: `CocoaError(.fileWriteUnsupportedScheme)` if `directory`
    // is not a file URL; `POSIXError(.ENOTDIR)` if it names a file that is not a directory."
    @Test
    func lockOnAWebAddressOrAFile_isRefusedWithTheDocumentedErrors() throws {
        defer { directory.remove() }
        do {
            _ = try FileCategoryLock(directory: try #require(URL(string: "https://example.com/locks")))
            Issue.record("a lock on a web address was made")
        } catch let error as CocoaError {
            #expect(error.code == .fileWriteUnsupportedScheme)
        } catch {
            Issue.record("expected CocoaError(.fileWriteUnsupportedScheme), got \(error)")
        }
        let file = directory.file("plain-file")
        #expect(FileManager.default.createFile(atPath: file, contents: Data()))
        do {
            _ = try FileCategoryLock(directory: URL(fileURLWithPath: file))
            Issue.record("a lock on a plain file was made")
        } catch let error as POSIXError {
            #expect(error.code == .ENOTDIR)
        } catch {
            Issue.record("expected POSIXError(.ENOTDIR), got \(error)")
        }
    }

    // `FileCategoryLockCorruptRecord`: "A lock file whose record is not one this lock wrote (or
    // whose token reached `UInt64.max`): the grant fails with `CategoryLockError.unavailable` ...
    // Mend it by writing a token no lower than the last one your resources accepted, as 20
    // digits, a space, 10 digits and a newline (`printf '%020d %010d\n' TOKEN 0 > FILE`)."
    @Test
    func lockFileWhoseTokenReachedTheMaximum_failsTheGrant_andOnceMendedTheTokensGoOnFromTheMend() throws {
        defer { directory.remove() }
        // Given a lock file whose token can grow no more
        let lock = try makeLock()
        let x = uniqueName("x")
        let file = lock.lockFile(for: x)
        try "\(UInt64.max) 0000000001\n".write(to: file, atomically: false, encoding: .utf8)
        let executed = Counter()
        let first = AsyncBlockOperation { executed.increment() }
        first.addCondition(ExclusiveCategory(x, lock: lock))

        // When an operation asks for it, it fails without executing
        AsyncOperationQueue().addOperations([first], waitUntilFinished: true)
        #expect(executed.current == 0)
        guard case let .unavailable(_, underlying)? = first.errors.first as? CategoryLockError else {
            Issue.record("expected CategoryLockError.unavailable, got \(first.errors)")
            return
        }
        #expect(underlying is FileCategoryLockCorruptRecord)

        // And once mended as documented, the next grant's token is above the mended one
        let mended = "41"
        try (String(repeating: "0", count: 20 - mended.count) + mended + " " + String(repeating: "0", count: 10) + "\n")
            .write(to: file, atomically: false, encoding: .utf8)
        let tokens = Recorder<UInt64?>()
        let second = tokenRecording(x, lock: lock, into: tokens)
        AsyncOperationQueue().addOperations([second], waitUntilFinished: true)
        #expect(second.errors.isEmpty, "\(second.errors)")
        #expect((tokens.all.first ?? nil).map { $0 > 41 } == true, "\(tokens.all)")
    }

    // `CategoryLock`: "A lock built on `async` code can conform to `AsyncCategoryLock` instead,
    // which bridges the two." `AsyncCategoryLock`: "implement `acquire(_:onLost:)`, which runs in
    // a task that is cancelled with the request." The article: "Cancelling a waiting operation
    // ... withdraws its request". (Async, waiting without blocking: the lock's task runs on the
    // shared pool, which a blocking wait here would hold up, as that doc warns.)
    @Test
    func asyncLock_grantsThroughItsLease_andCancellingAWaitingOperationCancelsItsTask() async throws {
        defer { directory.remove() } // made for every test
        // Given an async lock that grants G at once, and never grants S
        let lock = SleepyAsyncLock()
        let (g, s) = (uniqueName("g"), uniqueName("s"))
        let tokens = Recorder<UInt64?>()
        let granted = tokenRecording(g, lock: lock, into: tokens)
        let executed = Counter()
        let waiting = AsyncBlockOperation { executed.increment() }
        waiting.addCondition(ExclusiveCategory(s, lock: lock))
        let queue = AsyncOperationQueue()

        // When both are added, then the one waiting for S is cancelled
        queue.addOperations([granted, waiting], waitUntilFinished: false)
        #expect(await eventually { granted.isFinished })
        #expect(await eventually { waiting.debugDescription.contains("held by \(SleepyAsyncLock.holderText)") })
        waiting.cancel()

        // Then G was granted with the lease's token, and S's task was cancelled: the operation
        // finished without executing
        #expect(granted.errors.isEmpty)
        #expect(tokens.all == [SleepyAsyncLock.token])
        #expect(await eventually { waiting.isFinished })
        #expect(executed.current == 0)
        #expect(await eventually { lock.cancelled.all == [s] })
    }

    // MARK: - Names

    // API.md 11: "A category's name means the same category whatever reaches it ... the lock
    // extends the reach to every process using the same lock"; "an operation never runs without
    // its lock"; tokens "strictly increase across every grant". (Swift's `String` equality, which
    // the categories' sets use, makes "é" and "e" + U+0301 one name.)
    @Test
    func oneNameSpelledInTwoCanonicallyEquivalentWays_isOneCategoryBeyondTheProcessToo() throws {
        defer { directory.remove() }
        // Given a category granted once under its composed spelling, then held by another process
        let lock = try makeLock()
        let stem = uniqueName("caf")
        let composed = stem + "\u{E9}"
        let decomposed = stem + "e\u{301}"
        #expect(composed == decomposed)
        let first = AsyncBlockOperation {}
        first.addCondition(ExclusiveCategory(composed, lock: lock))
        AsyncOperationQueue().addOperations([first], waitUntilFinished: true)
        #expect(first.errors.isEmpty)
        let elsewhere = HeldLockFile(lock, category: composed)
        defer { elsewhere.release() }

        // When an operation names it with the decomposed spelling
        let tokens = Recorder<UInt64?>()
        let second = tokenRecording(decomposed, lock: lock, into: tokens)
        AsyncOperationQueue().addOperation(second)

        // Then it waits for the other process, and then gets a token above the first grant's
        #expect(waitUntil(timeout: 10) { waitsElsewhere(second) || second.isFinished })
        #expect(tokens.all.isEmpty, "ran while another process held the category, with token \(tokens.all)")
        elsewhere.release()
        #expect(waitUntilFinished([second]))
        #expect((tokens.all.first ?? nil).map { $0 >= 2 } == true, "\(tokens.all)")
    }

    // `FileCategoryLock`: "one lock file per category in `directory`". API.md 2: operations in
    // different categories do not exclude each other (only those "that share a mutually
    // exclusive category").
    @Test
    func twoDifferentLongCategoryNames_neverShareALockFile() throws {
        defer { directory.remove() }
        // Given a long name, and another name spelled like the first one's shortened lock file
        let lock = try makeLock()
        let long = uniqueName(String(repeating: "x", count: 300))
        let lookalike = String(lock.lockFile(for: long).lastPathComponent.dropLast(".lock".count))
        #expect(long != lookalike)

        // Then they have different lock files
        #expect(lock.lockFile(for: long) != lock.lockFile(for: lookalike))

        // and an operation of one runs while an operation of the other holds its category
        let held = HeldOperations()
        let holderName = uniqueName("holder")
        let holder = held.make(holderName)
        holder.addCondition(ExclusiveCategory(long, lock: lock))
        AsyncOperationQueue().addOperation(holder)
        #expect(held.waitUntilStarted(holderName))
        let other = AsyncBlockOperation {}
        other.addCondition(ExclusiveCategory(lookalike, lock: lock))
        AsyncOperationQueue().addOperation(other)
        #expect(waitUntilFinished([other], timeout: 10))
        held.finish(holderName)
        #expect(waitUntilFinished([holder, other]))
    }

    // `FileCategoryLock.lockFile(for:)`: "its name, with every character other than letters,
    // digits, `.`, `-` and `_` escaped" ("one lock file per category in `directory`"); API.md 11
    // tokens; `CategoryLockError.unavailable`: a failing operation finishes "without executing".
    @Test
    func oddCategoryNames_keepTheirLockFilesInsideTheDirectory_andEachRunsOrFailsClearly() throws {
        defer { directory.remove() }
        // Given a lock in a directory of its own, and names a careless caller might pass
        let locks = directory.url.appendingPathComponent("locks")
        let lock = try FileCategoryLock(directory: locks)
        let names = ["", ".", "..", "/", "../escaped", "a/../../b", "nul\u{0}byte", " ", "🙂",
                     "%2F", String(repeating: "é", count: 5_000), String(repeating: "/", count: 300)]

        // Then every lock file is a distinct file right inside the directory
        let files = names.map { lock.lockFile(for: $0) }
        #expect(Set(files.map(\.path)).count == names.count)
        for file in files {
            #expect(file.deletingLastPathComponent().standardizedFileURL.path == lock.directory.resolvingSymlinksInPath().path, "\(file.path)")
            #expect(file.lastPathComponent.utf8.count <= 255, "\(file.lastPathComponent.prefix(40))")
        }

        // When an operation of each name runs, twice
        let outcomes = Recorder<String>()
        let operations = (0..<2).flatMap { round in
            names.enumerated().map { index, name in
                let operation = ClosureOperation { operation in
                    outcomes.append("\(round)-\(index)=\(operation.fencingToken(for: name).map(String.init) ?? "nil")")
                    operation.finish()
                }
                operation.addCondition(ExclusiveCategory(name, lock: lock))
                return operation
            }
        }
        AsyncOperationQueue().addOperations(operations, waitUntilFinished: false)

        // Then each finishes: run with a token, or failed with a clear error without running
        #expect(waitUntilFinished(operations))
        for (position, operation) in operations.enumerated() {
            let label = "\(position / names.count)-\(position % names.count)"
            let ran = outcomes.all.filter { $0.hasPrefix(label + "=") }
            if operation.errors.isEmpty {
                #expect(ran.count == 1 && ran.first != label + "=nil", "\(label): \(ran)")
            } else {
                #expect(ran.isEmpty, "\(label): ran and failed with \(operation.errors)")
                #expect(operation.errors.allSatisfy { $0 is CategoryLockError }, "\(label): \(operation.errors)")
            }
        }
        // and nothing was written outside the lock directory
        let besides = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        #expect(besides == ["locks"], "\(besides)")
    }

    /// Whether `error` is `CategoryLockError.lost` of `category`.
    private static func isLost(_ category: String) -> (CategoryLockError) -> Bool {
        { error in
            guard case let .lost(lost) = error else { return false }
            return lost == category
        }
    }
}

private enum ProbeLedger {}
private enum ProbeMailer {}

/// A `CategoryLock` the test answers by hand: it keeps each request until `grant(_:token:)`, and
/// loses a granted lease on `loseLease(_:)`, as a database's lock does when its session ends. A
/// cancelled request completes with `CancellationError`, as the protocol asks.
private final class HandAnsweredLock: CategoryLock, @unchecked Sendable { // @unchecked: `pending` and `lostHandlers` are only touched while holding `mutex`
    private struct Pending {
        let request: CategoryLockRequest
        let onLost: @Sendable (CategoryLockError) -> Void
        let completion: @Sendable (Result<any CategoryLease, any Error>) -> Void
    }

    private let mutex = NSLock()
    private var pending: [String: Pending] = [:]
    private var lostHandlers: [String: @Sendable (CategoryLockError) -> Void] = [:]
    /// Every lease granted.
    let leases = Recorder<HandAnsweredLease>()
    let identity = "hand-answered:" + UUID().uuidString

    var description: String { "hand-answered lock" }

    func holder(of category: String) -> String? { nil }

    func acquire(
        _ request: CategoryLockRequest,
        onLost: @escaping @Sendable (CategoryLockError) -> Void,
        completion: @escaping @Sendable (Result<any CategoryLease, any Error>) -> Void
    ) {
        mutex.lock()
        pending[request.category] = Pending(request: request, onLost: onLost, completion: completion)
        mutex.unlock()
        request.onCancel { [weak self] in
            self?.take(request.category, matching: request)?.completion(.failure(CancellationError()))
        }
    }

    private func take(_ category: String, matching request: CategoryLockRequest?) -> Pending? {
        mutex.lock()
        defer { mutex.unlock() }
        guard let entry = pending[category], request.map({ $0 === entry.request }) ?? true else { return nil }
        pending[category] = nil
        return entry
    }

    /// Whether a request for `category` waits for an answer.
    func isAsked(for category: String) -> Bool {
        mutex.lock()
        defer { mutex.unlock() }
        return pending[category] != nil
    }

    /// Grants the waiting request for `category`; `false` if there is none.
    func grant(_ category: String, token: UInt64) -> Bool {
        guard let entry = take(category, matching: nil) else { return false }
        let lease = HandAnsweredLease(fencingToken: token)
        leases.append(lease)
        mutex.lock()
        lostHandlers[category] = entry.onLost
        mutex.unlock()
        entry.completion(.success(lease))
        return true
    }

    /// Reports the lease of `category` lost.
    func loseLease(_ category: String) {
        mutex.lock()
        let onLost = lostHandlers.removeValue(forKey: category)
        mutex.unlock()
        onLost?(.lost(category: category))
    }
}

/// An `AsyncCategoryLock` that grants a category at once unless its name starts with "s-", which
/// it never grants: its task sleeps until cancelled, and records the cancellation.
private struct SleepyAsyncLock: AsyncCategoryLock {
    static let token: UInt64 = 7
    static let holderText = "a sleepy holder"
    let identity = "sleepy:" + UUID().uuidString
    /// The categories whose task was cancelled.
    let cancelled = Recorder<String>()

    var description: String { "sleepy async lock" }

    func holder(of category: String) -> String? { Self.holderText }

    func acquire(_ category: String, onLost: @escaping @Sendable (CategoryLockError) -> Void) async throws -> any CategoryLease {
        guard category.hasPrefix("s-") else { return HandAnsweredLease(fencingToken: Self.token) }
        do {
            try await Task.sleep(nanoseconds: 600_000_000_000)
        } catch {
            cancelled.append(category)
            throw error
        }
        return HandAnsweredLease(fencingToken: Self.token)
    }
}

/// A lease of `HandAnsweredLock`, counting its releases.
private final class HandAnsweredLease: CategoryLease {
    let fencingToken: UInt64
    let releases = Counter()

    init(fencingToken: UInt64) {
        self.fencingToken = fencingToken
    }

    func release() {
        releases.increment()
    }
}
