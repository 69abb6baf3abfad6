import Foundation

/// An `OperationQueue` that evaluates conditions, enforces mutual exclusion and tells observers,
/// before it lets an `AsyncOperation` execute.
///
/// Add operations with any of Foundation's methods. An `AsyncOperation` is held in the queue's own
/// scheduler while it waits for dependencies, conditions and categories, and handed to
/// Foundation's queue only once it can run: waiting operations occupy no concurrency slot and do
/// not slow Foundation down. Plain Foundation operations pass through untouched.
///
/// Operations held back still count as on the queue: `operations`, `operationCount`,
/// `waitUntilAllOperationsAreFinished()`, `addOperations(_:waitUntilFinished:)`,
/// `cancelAllOperations()`, `isSuspended` and `maxConcurrentOperationCount` behave as Foundation
/// documents them.
///
/// ```swift
/// let queue = AsyncOperationQueue()
/// let save = AsyncBlockOperation { try database.save(record) }
/// save.addCondition(MutuallyExclusive<Database>())
/// save.addObserver(TimeoutObserver(timeout: 10))
/// queue.addOperation(save)
/// ```
// @unchecked Sendable: the queue's own state lives in `book`, reached only under its lock.
open class AsyncOperationQueue: OperationQueue, @unchecked Sendable {
    /// How long a condition may take to answer, unless a queue says otherwise: 60 seconds.
    public static let defaultConditionEvaluationTimeout: TimeInterval = 60

    struct Book {
        /// Operations added to this queue that Foundation has not been given yet.
        var held = HeldOperations()
        /// Operations whose conditions passed while the queue was suspended.
        var parked: [AsyncOperation] = []
        var isSuspended = false
        weak var delegate: (any AsyncOperationQueueDelegate)?
        var conditionEvaluationTimeout = AsyncOperationQueue.defaultConditionEvaluationTimeout
        /// The latest barrier that has not finished: everything added after it waits for it.
        var barrier: Operation?
        /// The group whose children this queue runs, if it is a `GroupOperation`'s queue.
        weak var group: GroupOperation?
        /// `AsyncOperation`s admitted and not finished yet, held or handed off.
        var unfinished = 0
        /// Threads in `waitUntilAllOperationsAreFinished()`, woken when `unfinished` drops to 0.
        var idleWaiters: [DispatchSemaphore] = []
    }

    /// The group whose children this queue runs, if any.
    var group: GroupOperation? {
        book.withLock { $0.group }
    }

    let book = Locked<Book>.make(Book())

    /// Creates an empty queue.
    public override init() {
        super.init()
    }

    /// Told when operations are added, start and finish. Held weakly.
    public weak var delegate: (any AsyncOperationQueueDelegate)? {
        get { book.withLock { $0.delegate } }
        set { book.withLock { $0.delegate = newValue } }
    }

    /// How long a condition may take to call its completion handler before the operation fails
    /// with `AsyncOperationError.conditionTimedOut`. Defaults to 60 seconds; `.infinity` waits
    /// forever.
    public var conditionEvaluationTimeout: TimeInterval {
        get { book.withLock { $0.conditionEvaluationTimeout } }
        set { book.withLock { $0.conditionEvaluationTimeout = newValue } }
    }

    // MARK: - Adding

    /// Adds an operation. An `AsyncOperation` runs once its dependencies finished, its conditions
    /// passed and its categories are free; anything else is handed to Foundation as it is.
    ///
    /// Adding an operation that is already on a queue, or has finished, is reported as a
    /// diagnostic (`.addedTwice`, `.addedAfterFinishing`) and ignored instead of crashing.
    open override func addOperation(_ operation: Operation) {
        if PerThreadState.current.isForwardingToFoundation {
            super.addOperation(operation)
            return
        }
        var batch = Batch()
        accept(operation, into: &batch, book.withLock(AddContext.init))
        giveToFoundation(batch)
    }

    /// Adds operations in order and, if `wait` is true, blocks until all of them have finished.
    open override func addOperations(_ operations: [Operation], waitUntilFinished wait: Bool) {
        if PerThreadState.current.isForwardingToFoundation {
            super.addOperations(operations, waitUntilFinished: wait)
            return
        }
        var batch = Batch()
        batch.operations.reserveCapacity(operations.count)
        let context = book.withLock(AddContext.init)
        for operation in operations {
            accept(operation, into: &batch, context)
        }
        giveToFoundation(batch)
        if wait {
            for operation in operations {
                operation.waitUntilFinished()
            }
        }
    }

    /// Wraps `block` in a `BlockOperation` and adds it.
    open override func addOperation(_ block: @escaping @Sendable () -> Void) {
        addOperation(BlockOperation(block: block))
    }

    /// Runs `barrier` once every operation added before it has finished, and before any operation
    /// added after it starts, counting operations still waiting in the queue's scheduler.
    open override func addBarrierBlock(_ barrier: @escaping @Sendable () -> Void) {
        let barrierOperation = AsyncBlockOperation(barrier)
        barrierOperation.name = "barrier"
        for operation in allOperations {
            barrierOperation.addDependency(operation)
        }
        barrierOperation.addObserver(BarrierRelease(queue: self))
        addOperation(barrierOperation)
        book.withLock { $0.barrier = barrierOperation }
    }

    /// What adding operations reads from the queue's book once per call.
    private struct AddContext {
        let delegate: (any AsyncOperationQueueDelegate)?
        let barrier: Operation?
        let group: GroupOperation?

        init(_ book: inout Book) {
            delegate = book.delegate
            barrier = book.barrier
            group = book.group
        }
    }

    /// Admits one operation: an `AsyncOperation` into the scheduler (or `batch`, when it can run
    /// at once), anything else into `batch` for Foundation.
    private func accept(_ operation: Operation, into batch: inout Batch, _ context: AddContext) {
        context.delegate?.operationQueue(self, willAdd: operation)
        if let barrier = context.barrier, barrier !== operation {
            operation.addDependency(barrier)
        }
        if let operation = operation as? AsyncOperation {
            admit(operation, batch: &batch, group: context.group)
        } else if operation.isFinished || operation.isExecuting {
            OperationDiagnostics.report(.addedAfterFinishing, operation, "a finished or executing operation cannot be added to a queue; the add was ignored")
        } else if !PlainOperationRegistry.register(operation, ticket: Ticket.next()) {
            OperationDiagnostics.report(.addedTwice, operation, "the operation is already on a queue; the second add was ignored")
        } else {
            context.group?.childWasAdmitted(operation)
            batch.operations.append(operation)
        }
    }

    /// Operations on their way to Foundation's queue, and how many of them are `AsyncOperation`s.
    private struct Batch {
        var operations: [Operation] = []
        var asyncCount = 0
    }

    private func admit(_ operation: AsyncOperation, batch: inout Batch, group: GroupOperation?) {
        let ticket = Ticket.next()
        let lineRoot = group?.lifecycle.withLock { $0.linePlace.root } ?? 0
        switch operation.lifecycle.withLock({ $0.enqueue(on: self, ticket: ticket, lineRoot: lineRoot) }) {
        case let .reject(kind, message):
            OperationDiagnostics.report(kind, operation, message)
        case .handOffNow:
            group?.childWasAdmitted(operation)
            batch.operations.append(operation)
            batch.asyncCount += 1
        case let .runPipeline(conditions):
            group?.childWasAdmitted(operation)
            giveToFoundation(batch) // keep Foundation's order the order of adding
            batch.operations.removeAll(keepingCapacity: true)
            batch.asyncCount = 0
            book.withLock { book in
                book.held.insert(operation)
                book.unfinished += 1
            }
            operation.runPipeline(conditions, addingDependenciesTo: self)
        }
    }

    /// Gives an operation that is cleared to run to Foundation's queue.
    func handOff(_ operation: AsyncOperation) {
        giveToFoundation([operation])
        book.withLock { $0.held.remove(operation) }
    }

    private func giveToFoundation(_ batch: Batch) {
        guard !batch.operations.isEmpty else { return }
        if batch.asyncCount > 0 {
            book.withLock { $0.unfinished += batch.asyncCount } // before any of them can finish
        }
        giveToFoundation(batch.operations)
    }

    private func giveToFoundation(_ operations: [Operation]) {
        guard !operations.isEmpty else { return }
        let thread = PerThreadState.current
        thread.isForwardingToFoundation = true
        super.addOperations(operations, waitUntilFinished: false)
        thread.isForwardingToFoundation = false
    }

    // MARK: - Events from operations

    func operationDidStart(_ operation: AsyncOperation) {
        delegate?.operationQueue(self, didStart: operation)
    }

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error], wasHandedOff: Bool) {
        let (delegate, group) = book.withLock { book -> ((any AsyncOperationQueueDelegate)?, GroupOperation?) in
            if !wasHandedOff {
                book.held.remove(operation)
            }
            return (book.delegate, book.group)
        }
        delegate?.operationQueue(self, didFinish: operation, errors: errors)
        group?.recordChildFinished(operation, errors: errors)
    }

    /// Called last when an operation finished, once Foundation has let go of it too: wakes
    /// `waitUntilAllOperationsAreFinished()` when nothing is left.
    func operationDidLeave() {
        let idleWaiters = book.withLock { book -> [DispatchSemaphore] in
            book.unfinished -= 1
            guard book.unfinished == 0 else { return [] }
            defer { book.idleWaiters = [] }
            return book.idleWaiters
        }
        for waiter in idleWaiters {
            waiter.signal()
        }
    }

    /// Parks `operation` if the queue is suspended; it carries on when the queue resumes. Also
    /// returns the group this queue belongs to, read under the same lock.
    func parkIfSuspended(_ operation: AsyncOperation) -> (parked: Bool, group: GroupOperation?) {
        book.withLock { book in
            guard book.isSuspended else { return (false, book.group) }
            book.parked.append(operation)
            return (true, nil)
        }
    }

    // MARK: - Foundation's API, counting held operations

    /// Whether the queue starts operations. While suspended, operations still wait for their
    /// dependencies, but none has its conditions evaluated, takes a mutually exclusive category
    /// or starts.
    open override var isSuspended: Bool {
        get { super.isSuspended }
        set {
            let resumed = book.withLock { book -> [AsyncOperation] in
                book.isSuspended = newValue
                guard !newValue else { return [] }
                defer { book.parked = [] }
                return book.parked
            }
            super.isSuspended = newValue
            let byTicket = resumed.map { ($0.lifecycle.withLock { $0.ticket }, $0) }.sorted { $0.0 < $1.0 }
            for (_, operation) in byTicket {
                operation.resumeAfterSuspension()
            }
        }
    }

    /// The operations on the queue that have not finished, in the order they were added, including
    /// those still waiting in the queue's scheduler for dependencies, conditions or categories.
    ///
    /// On Apple platforms `operations` returns the same. On Linux, swift-corelibs-foundation
    /// declares `operations` in an extension, where Swift cannot override it, so there it lists
    /// only what Foundation's queue has been given: use `allOperations` for the whole picture.
    public var allOperations: [Operation] {
        let waiting = book.withLock { $0.held.all }
        let running = super.operations
        guard !waiting.isEmpty else { return running }
        var seen = Set<ObjectIdentifier>()
        var merged: [(ticket: UInt64, operation: Operation)] = []
        merged.reserveCapacity(waiting.count + running.count)
        for operation in waiting where seen.insert(ObjectIdentifier(operation)).inserted {
            merged.append((Self.ticket(of: operation) ?? 0, operation))
        }
        var previousTicket: UInt64 = 0
        for operation in running where seen.insert(ObjectIdentifier(operation)).inserted {
            // Foundation's list is in add order; an operation from elsewhere keeps its place.
            let ticket = Self.ticket(of: operation) ?? previousTicket
            previousTicket = ticket
            merged.append((ticket, operation))
        }
        return merged.enumerated()
            .sorted { ($0.element.ticket, $0.offset) < ($1.element.ticket, $1.offset) }
            .map(\.element.operation)
    }

    private static func ticket(of operation: Operation) -> UInt64? {
        if let operation = operation as? AsyncOperation {
            let ticket = operation.lifecycle.withLock { $0.ticket }
            return ticket == 0 ? nil : ticket
        }
        return PlainOperationRegistry.ticket(of: operation)
    }

    /// The number of operations on the queue that have not finished, including those still
    /// waiting in the queue's scheduler. See `allOperations` for why this exists beside
    /// `operationCount`.
    public var allOperationCount: Int {
        let waiting = book.withLock { $0.held.all }
        let running = super.operations
        guard !waiting.isEmpty else { return running.count }
        // An operation being handed off is briefly in both lists: count it once.
        var seen = Set(waiting.map(ObjectIdentifier.init))
        return waiting.count + running.reduce(0) { $0 + (seen.insert(ObjectIdentifier($1)).inserted ? 1 : 0) }
    }

    #if canImport(Darwin)
    /// The operations on the queue that have not finished, including those still waiting for
    /// dependencies, conditions or categories (the same as `allOperations`).
    open override var operations: [Operation] { allOperations }

    /// The number of operations on the queue that have not finished, including those still
    /// waiting (the same as `allOperationCount`).
    open override var operationCount: Int { allOperationCount }
    #endif

    /// Cancels every operation on the queue, including those still waiting. Waiting operations
    /// finish at once, without executing.
    open override func cancelAllOperations() {
        // Latest first, so no dependent is released to run by the cancellation of what it waits for.
        for operation in allOperations.reversed() {
            operation.cancel()
        }
    }

    /// Blocks until every operation on the queue, including those still waiting, has finished.
    ///
    /// It keeps no reference to the operations it waits for, so each is freed as it finishes.
    open override func waitUntilAllOperationsAreFinished() {
        repeat {
            waitUntilNoAsyncOperationIsUnfinished()
            super.waitUntilAllOperationsAreFinished() // plain operations, and Foundation's last word
        } while book.withLock({ $0.unfinished }) > 0
    }

    private func waitUntilNoAsyncOperationIsUnfinished() {
        let waiter = book.withLock { book -> DispatchSemaphore? in
            guard book.unfinished > 0 else { return nil }
            let waiter = DispatchSemaphore(value: 0)
            book.idleWaiters.append(waiter)
            return waiter
        }
        waiter?.wait()
    }
}

/// Stops later operations from waiting for a barrier once it has finished.
private struct BarrierRelease: OperationObserver {
    weak var queue: AsyncOperationQueue?

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        queue?.book.withLock { book in
            if book.barrier === operation { book.barrier = nil }
        }
    }
}
