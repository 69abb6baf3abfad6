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

// Adversarial probes, second round, of categories held beyond one process (/work/shared/API.md
// "Beyond one process", point 11 and points 2, 10 where a category has a lock; the article
// "Exclusion across processes and hosts"; the `///` comments of `CategoryLock`,
// `FileCategoryLock`, `CategoryLockError`, `CategoryLockWaitTimedOut`, `ExclusiveCategory` and of
// the timeouts and waits that meet them). Another process is a bare `flock` (`HeldLockFile`) or a
// real `category-lock-worker` (`WorkerProcess`, always stopped and reaped). None repeats
// CategoryLockProbeTests or the unit tests. Every wait is bounded; none asserts on wall-clock
// speed.

@Suite("Category lock probes, round 2")
struct CategoryLockProbeTests2 {
    private let directory = TemporaryDirectory("category-lock-probes-2")

    private func makeLock(waitTimeout: TimeInterval? = nil) throws -> FileCategoryLock {
        try FileCategoryLock(directory: directory.url, waitTimeout: waitTimeout)
    }

    // MARK: - Processes that die

    // README: `FileCategoryLock` "(`flock`; the kernel frees it when a holder dies)". The article:
    // "a run that finds the category held waits for it, and executes after the holder finishes or
    // dies". API.md 11: "Fencing tokens of a category strictly increase across every grant, in
    // every process." API.md 2: operations sharing a category "never execute at the same time".
    @Test
    func twoWorkersAndThisProcess_waitingOnAHolderThatIsKilled_takeTheCategoryOneAtATime_withGrowingTokens() throws {
        defer { directory.remove() }
        // Given a worker holding X until killed, a second worker waiting for X, and an operation
        // of this process waiting for X
        let locks = directory.file("locks")
        let log = directory.file("shared.log")
        let x = uniqueName("x")
        let first = try WorkerProcess(["--directory", locks, "--log", log, "--hold", x])
        defer { first.stop() }
        #expect(waitUntil(timeout: blockingTimeout) { Self.holdings(of: x, in: log).count == 1 })
        let second = try WorkerProcess(["--directory", locks, "--log", log, "--hold", x])
        defer { second.stop() }
        let lock = try FileCategoryLock(directory: URL(fileURLWithPath: locks))
        let tokens = Recorder<UInt64?>()
        let mine = ClosureOperation(name: uniqueName("mine")) { operation in
            tokens.append(operation.fencingToken(for: x))
            operation.finish()
        }
        mine.addCondition(ExclusiveCategory(x, lock: lock))
        AsyncOperationQueue().addOperation(mine)
        #expect(waitUntil { Self.waitsElsewhere(mine) })
        #expect(tokens.all.isEmpty)

        // When the holder is killed
        first.stop()

        // Then the category goes to one of the others first, then to the last; this process never
        // runs while the second worker holds it, and each grant's token is above the one before
        #expect(waitUntil { Self.holdings(of: x, in: log).count == 2 || mine.isFinished })
        let secondWentFirst = !mine.isFinished
        if secondWentFirst {
            // The second worker holds it (and keeps it until killed): this process must wait
            Thread.sleep(forTimeInterval: 0.1) // a chance for this process to run alongside it
            #expect(tokens.all.isEmpty, "ran while the second worker held the category")
            second.stop()
        }
        #expect(waitUntilFinished([mine]))
        #expect(waitUntil(timeout: blockingTimeout) { Self.holdings(of: x, in: log).count == 2 })
        #expect(mine.errors.isEmpty, "\(mine.errors)")
        let holdings = Self.holdings(of: x, in: log)
        #expect(holdings.map(\.pid) == [first.pid, second.pid])
        let myToken = tokens.all.first ?? nil
        #expect(myToken != nil)
        if let myToken, holdings.count == 2 {
            let (firstToken, secondToken) = (holdings[0].token, holdings[1].token)
            #expect(firstToken < min(myToken, secondToken), "\(holdings) and mine \(myToken)")
            #expect(secondWentFirst ? myToken > secondToken : myToken < secondToken, "\(holdings) and mine \(myToken)")
        }
    }

    // MARK: - Releasing

    // API.md 2: "Cancelling or failing an operation frees its categories." API.md 11: the lock
    // "extends the reach to every process using the same lock"; "Fencing tokens of a category
    // strictly increase across every grant, in every process." API.md 5: an `AsyncBlockOperation`
    // "whose continuation has not been called yet finishes at once" when cancelled.
    @Test(arguments: ["failed", "cancelled"])
    func holderThatFailsOrIsCancelled_letsAWorkerWaitingForItsCategoryHaveIt_withAGreaterToken(ending: String) throws {
        defer { directory.remove() }
        // Given an operation of this process holding X through the lock, running until told, and
        // a worker waiting for X
        let locks = directory.file("locks")
        let log = directory.file("shared.log")
        let x = uniqueName("x")
        let lock = try FileCategoryLock(directory: URL(fileURLWithPath: locks))
        let held = HeldOperations()
        let holderName = uniqueName("holder")
        let holder = held.make(holderName)
        holder.addCondition(ExclusiveCategory(x, lock: lock))
        AsyncOperationQueue().addOperation(holder)
        #expect(held.waitUntilStarted(holderName))
        let myToken = holder.fencingToken(for: x)
        #expect(myToken != nil)
        let worker = try WorkerProcess(["--directory", locks, "--log", log, "--hold", x])
        defer { worker.stop() }
        Thread.sleep(forTimeInterval: 0.3) // a chance for the worker to take X wrongly
        #expect(Self.holdings(of: x, in: log).isEmpty, "the worker took X while this process held it")

        // When the holder fails, or is cancelled
        if ending == "failed" {
            held.finish(holderName, with: StubError("failed while holding"))
        } else {
            holder.cancel()
        }

        // Then the worker gets X, with a greater token
        #expect(waitUntilFinished([holder]))
        #expect(waitUntil(timeout: blockingTimeout) { Self.holdings(of: x, in: log).count == 1 })
        let workerToken = Self.holdings(of: x, in: log).first?.token
        #expect(workerToken.flatMap { worker in myToken.map { worker > $0 } } == true, "\(String(describing: workerToken)) after \(String(describing: myToken))")
    }

    // AsyncAwait.md: "Cancelling the operation cancels the task; the operation finishes when the
    // closure returns, so its categories are never freed while the closure still runs." API.md
    // 11: "the lock extends the reach to every process using the same lock".
    @Test
    func taskOperationWhoseBodyIgnoresCancellation_keepsTheCategoryOnTheHostUntilTheBodyReturns() async throws {
        defer { directory.remove() }
        // Given an async operation holding X through the lock, whose body waits until told,
        // deaf to cancellation (async, waiting without blocking: the body runs on the shared pool)
        let lock = try makeLock()
        let x = uniqueName("x")
        let gate = HeldCallback<Void>()
        let operation = AsyncTaskOperation {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                gate.hold { _ in continuation.resume() }
            }
        }
        operation.addCondition(ExclusiveCategory(x, lock: lock))
        AsyncOperationQueue().addOperation(operation)
        #expect(await eventually { gate.timesHeld > 0 })
        let file = lock.lockFile(for: x).path
        #expect(Self.isHeldOnTheHost(file))

        // When it is cancelled, while its body goes on
        operation.cancel()
        try? await Task.sleep(nanoseconds: 200_000_000) // a chance for a wrong release

        // Then another process still cannot take X, until the body returns
        #expect(!operation.isFinished)
        #expect(Self.isHeldOnTheHost(file), "the lock was let go while the closure still ran")
        gate.call(())
        #expect(await eventually { operation.isFinished })
        #expect(await eventually { !Self.isHeldOnTheHost(file) })
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    // MARK: - Withdrawing a request

    // The article: "An operation that needs several categories asks for them one at a time, sorted
    // by name"; "Cancelling a waiting operation, or suspending its queue, withdraws its request
    // and leaves no descriptor or connection behind." API.md 10: "A suspended queue ... takes no
    // category". API.md 2: "Cancelling ... an operation frees its categories."
    @Test(arguments: ["suspended", "cancelled"])
    func operationHoldingOneLeaseAndWaitingForTheNext_givesTheFirstBack_whenItsQueueIsSuspendedOrItIsCancelled(how: String) throws {
        defer { directory.remove() }
        // Given an operation of A and B (named in the other order), B held by another process:
        // it holds A's lease and waits for B's
        let lock = try makeLock()
        let (a, b) = ("a-" + UUID().uuidString, "b-" + UUID().uuidString)
        let (fileA, fileB) = (lock.lockFile(for: a).path, lock.lockFile(for: b).path)
        let elsewhere = HeldLockFile(lock, category: b)
        defer { elsewhere.release() }
        let tokens = Recorder<String>()
        let operation = ClosureOperation(name: uniqueName("a-and-b")) { operation in
            tokens.append("\(operation.fencingToken(for: a).map(String.init) ?? "nil") \(operation.fencingToken(for: b).map(String.init) ?? "nil")")
            operation.finish()
        }
        operation.addCondition(ExclusiveCategory(b, lock: lock))
        operation.addCondition(ExclusiveCategory(a, lock: lock))
        let queue = AsyncOperationQueue()
        queue.addOperation(operation)
        #expect(waitUntil { Self.waitsElsewhere(operation) })
        #expect(openFileDescriptors(on: fileA) == 1) // A's lease
        #expect(waitUntil { openFileDescriptors(on: fileB) == 2 }) // the other process's, and the request (opened just after it says it waits)
        #expect(Self.isHeldOnTheHost(fileA))

        // When its queue is suspended, or it is cancelled
        if how == "suspended" {
            queue.isSuspended = true
        } else {
            operation.cancel()
        }

        // Then it gives A back and withdraws its request for B, leaving no descriptor behind
        #expect(waitUntil { openFileDescriptors(on: fileA) == 0 }, "A's lease was kept: \(openFileDescriptors(on: fileA)) descriptors")
        #expect(waitUntil { openFileDescriptors(on: fileB) == 1 }, "B's request was kept: \(openFileDescriptors(on: fileB)) descriptors")
        #expect(!Self.isHeldOnTheHost(fileA))
        if how == "suspended" {
            // and once resumed, with B free, it runs holding both
            elsewhere.release()
            queue.isSuspended = false
            #expect(waitUntilFinished([operation]))
            #expect(tokens.count == 1 && !(tokens.all.first ?? "nil").contains("nil"), "\(tokens.all)")
        } else {
            #expect(waitUntilFinished([operation]))
            #expect(tokens.all.isEmpty)
        }
    }

    // The article: "Cancelling a waiting operation ... withdraws its request and leaves no
    // descriptor". README: "If the awaiting task is cancelled ..., the wait ends at once with
    // `CancellationError`"; AsyncOperationQueue.run: "Cancelling the task cancels the operation."
    // `CategoryLock`: "Within a process ... the queue grants it to the first operation in line,
    // in add order, and only that operation asks the lock."
    @Test
    func cancellingTheTaskThatRunsAnOperationWaitingForALock_withdrawsItsRequest_andTheNextInLineAsksInstead() async throws {
        defer { directory.remove() }
        // Given X held by another process, an operation of X run by a task on one queue, and a
        // second operation of X, added later, on another queue
        let lock = try makeLock()
        let x = uniqueName("x")
        let file = lock.lockFile(for: x).path
        let elsewhere = HeldLockFile(lock, category: x)
        defer { elsewhere.release() }
        let executed = Recorder<String>()
        let first = AsyncBlockOperation { executed.append("first") }
        first.addCondition(ExclusiveCategory(x, lock: lock))
        let running = Task { try await AsyncOperationQueue().run(first) }
        #expect(await eventually { Self.waitsElsewhere(first) })
        let second = AsyncBlockOperation { executed.append("second") }
        second.addCondition(ExclusiveCategory(x, lock: lock))
        AsyncOperationQueue().addOperation(second)
        #expect(await eventually { second.debugDescription.contains("category '\(x)'") })

        // When the task is cancelled
        running.cancel()

        // Then its wait ends with CancellationError, the first finishes without executing, and
        // only the second asks the lock now; it runs once the other process lets go
        let outcome = await boundedOutcome(of: running)
        #expect(outcome.map(isCancellationError) == true, "\(String(describing: outcome))")
        #expect(await eventually { first.isFinished })
        #expect(await eventually { Self.waitsElsewhere(second) })
        #expect(await eventually { openFileDescriptors(on: file) == 2 }) // the other process's, and one request (opened just after it says it waits)
        try? await Task.sleep(nanoseconds: 100_000_000) // the first one's request is gone for good
        #expect(openFileDescriptors(on: file) == 2)
        elsewhere.release()
        #expect(await eventually { second.isFinished })
        #expect(executed.all == ["second"])
        #expect(second.errors.isEmpty)
    }

    // MARK: - Timeouts while waiting

    // `FileCategoryLock.waitTimeout`: "How long an operation waits while another process holds
    // its category before it fails with `CategoryLockError.unavailable` (underlying
    // `CategoryLockWaitTimedOut`)". `CategoryLockWaitTimedOut`: "`category`: The category that
    // stayed held elsewhere"; "`after`: The wait timeout". `FileCategoryLock`: "Two
    // `FileCategoryLock`s on one directory are the same lock." The article: "it never runs without
    // its lock"; "leaves no descriptor ... behind".
    @Test
    func waitTimeout_failsOnlyTheOperationAskingThroughThatLock_withTheCategoryAndTimeoutNamed() throws {
        defer { directory.remove() }
        // Given X held by another process, an operation of X through a lock with a short wait
        // timeout, and, added after it, one through a lock on the same directory without one
        let impatient = try makeLock(waitTimeout: 0.3)
        let patient = try makeLock()
        #expect(impatient.identity == patient.identity)
        let x = uniqueName("x")
        let file = impatient.lockFile(for: x).path
        let elsewhere = HeldLockFile(impatient, category: x)
        defer { elsewhere.release() }
        let executed = Recorder<String>()
        let tokens = Recorder<UInt64?>()
        let first = AsyncBlockOperation { executed.append("first") }
        first.addCondition(ExclusiveCategory(x, lock: impatient))
        let second = ClosureOperation { operation in
            executed.append("second")
            tokens.append(operation.fencingToken(for: x))
            operation.finish()
        }
        second.addCondition(ExclusiveCategory(x, lock: patient))
        AsyncOperationQueue().addOperation(first)
        AsyncOperationQueue().addOperation(second)

        // When the first one's wait timeout passes
        #expect(waitUntilFinished([first]))

        // Then it failed with the documented error, without executing, and withdrew its request;
        // the second asks in its turn and runs once the other process lets go
        if case let .unavailable(category, underlying)? = first.errors.first as? CategoryLockError,
           let timedOut = underlying as? CategoryLockWaitTimedOut {
            #expect(category == x)
            #expect(timedOut.category == x)
            #expect(timedOut.after == 0.3)
        } else {
            Issue.record("expected unavailable(CategoryLockWaitTimedOut), got \(first.errors)")
        }
        #expect(first.errors.count == 1)
        #expect(waitUntil { Self.waitsElsewhere(second) })
        #expect(waitUntil { openFileDescriptors(on: file) == 2 }) // the other process's, and the second's request (opened just after it says it waits)
        elsewhere.release()
        #expect(waitUntilFinished([second]))
        #expect(second.errors.isEmpty, "\(second.errors)")
        #expect(executed.all == ["second"])
        #expect(tokens.all.count == 1 && tokens.all.first != nil)
    }

    // ObserversAndTimeouts.md: "A timeout covers an operation's execution, not its wait". The
    // article: "Waiting for a category held elsewhere has no time limit unless you give the lock
    // one (the `waitTimeout` ...): it is not condition evaluation, and the queue's condition
    // timeout does not apply." `FileCategoryLock.unavailableTimeout`: "How long an acquisition
    // keeps trying while the lock files cannot be opened".
    @Test
    func waitingForALockHeldElsewhere_outlastsTheOperationsTimeout_theQueuesConditionTimeout_andTheUnavailableTimeout() throws {
        defer { directory.remove() }
        // Given X held by another process, and an operation of X with every short timeout there is
        // but the lock's wait timeout
        let lock = try FileCategoryLock(directory: directory.url, unavailableTimeout: 0.2)
        let x = uniqueName("x")
        let elsewhere = HeldLockFile(lock, category: x)
        defer { elsewhere.release() }
        let executed = Counter()
        let operation = AsyncBlockOperation { executed.increment() }
        operation.addCondition(ExclusiveCategory(x, lock: lock))
        operation.addObserver(TimeoutObserver(timeout: 0.2))
        let queue = AsyncOperationQueue()
        queue.conditionEvaluationTimeout = 0.2
        queue.addOperation(operation)

        // When it waits far longer than any of them
        #expect(waitUntil { Self.waitsElsewhere(operation) })
        Thread.sleep(forTimeInterval: 0.8)

        // Then it still waits, and runs once the other process lets go, without errors
        #expect(!operation.isFinished, "\(operation.errors)")
        #expect(Self.waitsElsewhere(operation), "\(operation.debugDescription)")
        elsewhere.release()
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 1)
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    // runAndWait(on:timeout:): "`AsyncOperationError.waitTimedOut` if it has not finished `timeout`
    // seconds after the call: it is then cancelled with that error". The article: "Cancelling a
    // waiting operation ... withdraws its request and leaves no descriptor"; API.md 11: "an
    // operation never runs without its lock".
    @Test
    func runAndWaitGivingUpOnAnOperationWaitingForALock_withdrawsItsRequest_andItNeverExecutes() throws {
        defer { directory.remove() }
        // Given X held by another process
        let lock = try makeLock()
        let x = uniqueName("x")
        let file = lock.lockFile(for: x).path
        let elsewhere = HeldLockFile(lock, category: x)
        defer { elsewhere.release() }
        let name = uniqueName("given-up")
        let executed = Counter()
        let operation = AsyncBlockOperation { executed.increment() }
        operation.name = name
        operation.addCondition(ExclusiveCategory(x, lock: lock))

        // When an operation of X is run and waited for briefly
        #expect(throws: AsyncOperationError.waitTimedOut(operation: name, after: 0.5)) {
            try operation.runAndWait(timeout: 0.5)
        }

        // Then it finishes with that error, without executing, and leaves no request behind
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { openFileDescriptors(on: file) == 1 }, "\(openFileDescriptors(on: file)) descriptors")
        elsewhere.release()
        Thread.sleep(forTimeInterval: 0.1) // a chance for a stale request to run it anyway
        #expect(executed.current == 0)
        #expect(operation.errors.asOperationErrors == [.waitTimedOut(operation: name, after: 0.5)])
    }

    // MARK: - Lock files in odd places

    // `FileCategoryLock.init`: "A directory that cannot be created now is tried again by each
    // acquisition, which fails with `CategoryLockError.unavailable` once `unavailableTimeout` has
    // passed." `unavailableTimeout`: "How long an acquisition keeps trying while the lock files
    // cannot be opened (the directory is missing and cannot be created, is not writable ...)".
    // `CategoryLockError.unavailable`: "The operation finished with this error, without
    // executing." API.md 2: operations of other categories do not wait for it.
    @Test(arguments: ["directory that cannot be created", "lock file that is a directory"])
    func lockFileThatCannotBeOpened_failsOnlyItsOperation_withUnavailable_withoutExecuting(place: String) throws {
        defer { directory.remove() }
        // Given a lock whose lock file for X cannot be opened, even by root
        let x = uniqueName("x")
        let lock: FileCategoryLock
        if place == "directory that cannot be created" {
            lock = try FileCategoryLock(directory: URL(fileURLWithPath: "/proc/self/\(uniqueName("no-locks-here"))"), unavailableTimeout: 0.3)
        } else {
            lock = try FileCategoryLock(directory: directory.url, unavailableTimeout: 0.3)
            try FileManager.default.createDirectory(at: lock.lockFile(for: x), withIntermediateDirectories: false)
        }
        let executed = Recorder<String>()
        let blocked = AsyncBlockOperation { executed.append("blocked") }
        blocked.addCondition(ExclusiveCategory(x, lock: lock))
        let good = try makeLock()
        let other = AsyncBlockOperation { executed.append("other") }
        other.addCondition(ExclusiveCategory(uniqueName("y"), lock: good))

        // When an operation of X and an operation of another category run
        let queue = AsyncOperationQueue()
        queue.addOperations([blocked, other], waitUntilFinished: false)

        // Then the other runs; the one of X fails with unavailable for X, without executing
        #expect(waitUntilFinished([blocked, other]))
        #expect(executed.all == ["other"])
        #expect(other.errors.isEmpty)
        if case let .unavailable(category, _)? = blocked.errors.first as? CategoryLockError {
            #expect(category == x)
        } else {
            Issue.record("expected CategoryLockError.unavailable, got \(blocked.errors)")
        }
        #expect(blocked.errors.count == 1)
    }

    // `FileCategoryLock`: "Two `FileCategoryLock`s on one directory are the same lock."
    // `CategoryLock.identity`: "two locks with the same identity are the same lock ... Naming one
    // category with two locks of different identities is an error on the operation."
    // `ExclusiveCategory.init(_:lock:)`: "Naming one category with two different locks fails the
    // operation".
    @Test(arguments: ["/", "/.", "/./", "//", "/missing/.."])
    func oneDirectorySpelledAnotherWay_isTheSameLock_soOneCategoryThroughBothRunsOneAtATime(spelling: String) throws {
        defer { directory.remove() }
        // Given two locks on one directory, the second spelled differently
        let plain = try makeLock()
        let respelled = try FileCategoryLock(directory: URL(fileURLWithPath: directory.path + spelling))
        #expect(plain.identity == respelled.identity, "\(plain.identity) vs \(respelled.identity)")

        // When an operation of X through the first runs, and one of X through the second is added
        let x = uniqueName("x")
        let held = HeldOperations()
        let holderName = uniqueName("holder")
        let holder = held.make(holderName)
        holder.addCondition(ExclusiveCategory(x, lock: plain))
        AsyncOperationQueue().addOperation(holder)
        #expect(held.waitUntilStarted(holderName))
        let executed = Counter()
        let other = AsyncBlockOperation { executed.increment() }
        other.addCondition(ExclusiveCategory(x, lock: respelled))
        AsyncOperationQueue().addOperation(other)

        // Then the second waits for the first, instead of failing with a lock conflict
        #expect(waitUntil { other.debugDescription.contains("held by '\(holderName)'") || other.isFinished }, "\(other.debugDescription)")
        #expect(!other.isFinished, "\(other.errors)")
        held.finish(holderName)
        #expect(waitUntilFinished([holder, other]))
        #expect(other.errors.isEmpty, "\(other.errors)")
        #expect(executed.current == 1)
    }

    // MARK: - Seeing who holds it

    // DebuggingAQueue.md: `stallReportThreshold` "reports each operation that has waited, not
    // executed, longer than the threshold, once, as a `.stalled` diagnostic ... with the
    // explanation above". The article: "its `debugDescription` says who holds the category
    // elsewhere, as far as the lock knows ("category 'billing', held by another process (pid
    // 4242, file lock /tmp/billing-locks/billing.lock)")".
    @Test
    func operationWaitingForAWorkerTooLong_isReportedStalledOnce_namingTheWorkersProcess() throws {
        defer { directory.remove() }
        // Given a worker holding X, and a watched queue
        let locks = directory.file("locks")
        let log = directory.file("shared.log")
        let x = uniqueName("x")
        let worker = try WorkerProcess(["--directory", locks, "--log", log, "--hold", x])
        defer { worker.stop() }
        #expect(waitUntil(timeout: blockingTimeout) { Self.holdings(of: x, in: log).count == 1 })
        let lock = try FileCategoryLock(directory: URL(fileURLWithPath: locks))
        let queue = AsyncOperationQueue()
        queue.stallReportThreshold = 0.1
        let name = uniqueName("stalled-on-a-worker")
        let operation = AsyncBlockOperation {}
        operation.name = name
        operation.addCondition(ExclusiveCategory(x, lock: lock))

        // When an operation of X waits on it past the threshold
        queue.addOperation(operation)
        let kinds = DiagnosticsLog.shared.kinds(about: name, onceThereAre: 1)
        Thread.sleep(forTimeInterval: 0.4) // looked at again and again

        // Then it is reported once, naming the worker's process and the lock file
        #expect(kinds == [.stalled])
        #expect(DiagnosticsLog.shared.kinds(about: name) == [.stalled])
        let message = DiagnosticsLog.shared.diagnostics(about: name).first?.message ?? ""
        let expected = "category '\(x)', held by another process (pid \(worker.pid), file lock \(lock.lockFile(for: x).path))"
        #expect(message.contains(expected), "\(message)")
        queue.stallReportThreshold = nil
        worker.stop()
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.isEmpty)
    }

    // MARK: - Helpers

    /// Whether `operation`'s snapshot says it waits for a category held by another process.
    private static func waitsElsewhere(_ operation: AsyncOperation) -> Bool {
        operation.snapshot().waitsFor.contains { reason in
            if case .categoryHeldElsewhere = reason { return true }
            return false
        }
    }

    /// The grants of `category` that workers logged as "holding", in order: their process IDs
    /// and fencing tokens.
    private static func holdings(of category: String, in logFile: String) -> [(pid: Int32, token: UInt64)] {
        let text = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count >= 3, fields[0] == "holding", let pid = Int32(fields[1]) else { return nil }
            let prefix = "\(category):"
            guard let pair = fields[2].split(separator: ",").first(where: { $0.hasPrefix(prefix) }),
                  let token = UInt64(pair.dropFirst(prefix.count)) else { return nil }
            return (pid, token)
        }
    }

    /// Whether someone holds the lock file at `path`, as another process would find it: a
    /// non-blocking `flock` on a descriptor of its own fails.
    private static func isHeldOnTheHost(_ path: String) -> Bool {
        let descriptor = open(path, O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else { return true }
        flock(descriptor, LOCK_UN)
        return false
    }
}
