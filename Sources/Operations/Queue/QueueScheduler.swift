import Foundation

/// The rules of an `AsyncOperationQueue`'s scheduling, without threads or side effects: which
/// operations it holds back from Foundation, which wait for their turn or for the queue to
/// resume, in what order they are let through, and the barrier.
///
/// The queue keeps one of these under its lock (`QueueStorage`). Every change is an event method
/// that returns what the queue must do next (hand operations to Foundation, let operations go on
/// towards execution); the queue does it after unlocking.
///
/// - A **serial** queue (`maxConcurrentOperationCount == 1`) lets one operation at a time go
///   from "its dependencies finished" to "handed to Foundation" (the *turn*), in the order the
///   operations were added, so conditions and categories never reorder it. Operations that need
///   neither conditions nor categories, and plain Foundation operations, wait in the same line.
/// - A **suspended** queue lets nothing through: an operation added meanwhile, or one that
///   reaches its conditions or its categories, waits in line (*parked*) and goes on, in add
///   order, once the queue resumes.
/// - A **barrier** waits for everything added before it, including adds that were in progress
///   on other threads when it was placed (an *admission* in flight), through a *gate*.
struct QueueScheduler {
    /// An operation waiting in line, and what it does once let through.
    enum Waiter {
        /// Given to Foundation's queue: it needs nothing more.
        case handOff(Operation, ticket: UInt64)
        /// Goes on with its conditions or categories (`AsyncOperation.continueTowardsExecution()`).
        case proceed(AsyncOperation, ticket: UInt64)

        var ticket: UInt64 {
            switch self {
            case let .handOff(_, ticket), let .proceed(_, ticket): ticket
            }
        }

        var operation: Operation {
            switch self {
            case let .handOff(operation, _): operation
            case let .proceed(operation, _): operation
            }
        }
    }

    /// Operations let through by an event, to be handed to Foundation (in this order) and then
    /// let go on, after unlocking.
    struct LetThrough {
        var handOff: [Operation] = []
        var proceed: [AsyncOperation] = []

    }

    /// A barrier placed while adds begun before it were still in flight, and the gate that keeps
    /// it from running until they have ended (and made their operations its dependencies).
    struct PendingBarrier {
        let generation: UInt64
        let barrier: AsyncOperation
        let gate: AsyncOperation
    }

    private(set) var isSuspended = false
    private(set) var isSerial = false
    /// `AsyncOperation`s admitted and not yet given to Foundation.
    private(set) var held = HeldOperations()
    /// Operations waiting for their turn or for the queue to resume, by ticket.
    private(set) var line = WaitingLine()

    /// The operations waiting in line, in the order they will be let through.
    var waiting: [Waiter] { line.waiters }
    /// On a serial queue: the operation between being let through and its hand-off.
    private(set) var turn: ObjectIdentifier?
    /// `AsyncOperation`s admitted and not finished yet, held or handed off.
    private(set) var unfinished = 0
    /// Threads in `waitUntilAllOperationsAreFinished()`, woken when `unfinished` drops to 0.
    private(set) var idleWaiters: [DispatchSemaphore] = []
    /// The latest barrier that has not finished: everything added after it waits for it.
    private(set) var barrier: Operation?
    /// Counts barriers placed; an add remembers the generation it began in.
    private(set) var generation: UInt64 = 0
    /// Adds in progress, by the generation they began in (ascending).
    private(set) var admissions: [(generation: UInt64, count: Int)] = []
    private(set) var pendingBarriers: [PendingBarrier] = []

    // MARK: - Adding

    /// An add begins: returns its generation and the barrier its operations must wait for.
    /// `asyncCount` `AsyncOperation`s are counted as unfinished at once, before any of them can
    /// finish; one that is refused leaves again through `operationLeft()`.
    mutating func beginAdmission(counting asyncCount: Int) -> (generation: UInt64, barrier: Operation?) {
        unfinished += asyncCount
        if let last = admissions.last, last.generation == generation {
            admissions[admissions.count - 1].count += 1
        } else {
            admissions.append((generation, 1))
        }
        return (generation, barrier)
    }

    /// What ending an add asks of the queue.
    enum EndOfAdmission {
        /// The add has ended; open these barrier gates.
        case ended(openGates: [AsyncOperation])
        /// A barrier was placed while the add was in flight: make the add's operations its
        /// dependencies first, then call `endAdmission(generation:)` again with `joined`.
        case joinBarrier(AsyncOperation)
    }

    /// An add ends (its operations are held or with Foundation). In the common case (no
    /// barrier placed meanwhile) this is one step.
    mutating func endAdmission(generation: UInt64, joined: Bool = false) -> EndOfAdmission {
        if !joined, let barrier = pendingBarriers.first(where: { $0.generation > generation })?.barrier {
            return .joinBarrier(barrier)
        }
        return .ended(openGates: closeAdmission(generation: generation))
    }

    private mutating func closeAdmission(generation: UInt64) -> [AsyncOperation] {
        if let index = admissions.lastIndex(where: { $0.generation == generation }) {
            admissions[index].count -= 1
            if admissions[index].count == 0 { admissions.remove(at: index) }
        }
        guard !pendingBarriers.isEmpty else { return [] }
        let oldestInFlight = admissions.first?.generation ?? .max
        let opened = pendingBarriers.filter { $0.generation <= oldestInFlight }
        pendingBarriers.removeAll { $0.generation <= oldestInFlight }
        return opened.map(\.gate)
    }

    /// Admits an operation that needs nothing more (a plain operation, or an `AsyncOperation`
    /// without dependencies or conditions): `true` to hand it to Foundation now, `false` if it
    /// waits in line: for the queue to resume (so that a queue made serial meanwhile still
    /// starts everything in add order), or for its turn on a serial queue.
    mutating func admitReady(_ operation: Operation, ticket: UInt64) -> Bool {
        guard isSuspended || isSerial && (turn != nil || !line.isEmpty) else { return true }
        if let operation = operation as? AsyncOperation {
            held.insert(operation)
        }
        insert(.handOff(operation, ticket: ticket))
        return false
    }

    /// Admits an `AsyncOperation` that waits for dependencies or conditions first.
    mutating func admitHeld(_ operation: AsyncOperation) {
        held.insert(operation)
    }

    /// Operations were given to Foundation: they are no longer held. (They stay held until
    /// Foundation lists them, so that `allOperations` and barriers always see them.)
    mutating func gaveToFoundation(_ operations: [Operation]) {
        for case let operation as AsyncOperation in operations {
            held.remove(operation)
        }
    }

    /// Everything admitted and not given to Foundation yet: held operations and plain ones
    /// waiting for their turn.
    var allWaiting: [Operation] {
        var all: [Operation] = held.all
        for waiter in line.waiters where !(waiter.operation is AsyncOperation) {
            all.append(waiter.operation)
        }
        return all
    }

    // MARK: - The way to execution

    /// An operation's dependencies finished: `true` if it may go on now (to its conditions, or its
    /// categories); otherwise it waits in line and is let through later.
    mutating func requestTurn(for operation: AsyncOperation, ticket: UInt64) -> Bool {
        if isSuspended {
            insert(.proceed(operation, ticket: ticket))
            return false
        }
        guard isSerial else { return true }
        let id = ObjectIdentifier(operation)
        if turn == id { return true }
        if turn == nil && line.isEmpty {
            turn = id
            return true
        }
        insert(.proceed(operation, ticket: ticket))
        return false
    }

    /// Parks an operation about to ask for its categories if the queue is suspended: `true` if it
    /// was parked (it is let through when the queue resumes).
    mutating func parkIfSuspended(_ operation: AsyncOperation, ticket: UInt64) -> Bool {
        guard isSuspended else { return false }
        insert(.proceed(operation, ticket: ticket))
        return true
    }

    enum HandOffAction {
        /// Give these to Foundation (the operation first), then let the others go on.
        case handOff(LetThrough)
        /// The queue is suspended and the operation holds categories: it gives them back (a
        /// suspended queue takes no category) and parks, to ask again when the queue resumes.
        case giveBackCategories
    }

    /// An operation is cleared to run (its conditions passed, its categories are held).
    mutating func clearedToRun(_ operation: AsyncOperation, holdsCategories: Bool) -> HandOffAction {
        if isSuspended && holdsCategories {
            return .giveBackCategories
        }
        var letThrough = LetThrough(handOff: [operation])
        if turn == ObjectIdentifier(operation) {
            turn = nil
            drain(into: &letThrough)
        }
        return .handOff(letThrough)
    }

    /// An operation finished before it was given to Foundation (cancelled, or a condition failed).
    mutating func finishedBeforeHandOff(_ operation: AsyncOperation) -> LetThrough {
        held.remove(operation)
        line.remove(operation)
        var letThrough = LetThrough()
        if turn == ObjectIdentifier(operation) {
            turn = nil
            drain(into: &letThrough)
        }
        return letThrough
    }

    /// An `AsyncOperation` has finished and Foundation has let go of it: returns the threads to
    /// wake if nothing is left.
    mutating func operationLeft() -> [DispatchSemaphore] {
        unfinished -= 1
        guard unfinished == 0 else { return [] }
        defer { idleWaiters = [] }
        return idleWaiters
    }

    /// A thread waits until no `AsyncOperation` is unfinished; `nil` if none is.
    mutating func waitForIdle() -> DispatchSemaphore? {
        guard unfinished > 0 else { return nil }
        let waiter = DispatchSemaphore(value: 0)
        idleWaiters.append(waiter)
        return waiter
    }

    /// Whether `operation` waits in the scheduler's line, and why: `true` because the queue is
    /// suspended, `false` for its turn on a serial queue; `nil` if it is not in line.
    func waitsInLine(_ operation: Operation) -> Bool? {
        guard line.contains(operation) else { return nil }
        return isSuspended
    }

    // MARK: - Settings that change the order

    mutating func setSuspended(_ suspended: Bool) -> LetThrough {
        isSuspended = suspended
        var letThrough = LetThrough()
        drain(into: &letThrough)
        return letThrough
    }

    mutating func setSerial(_ serial: Bool) -> LetThrough {
        isSerial = serial
        if !serial { turn = nil }
        var letThrough = LetThrough()
        drain(into: &letThrough)
        return letThrough
    }

    // MARK: - Barriers

    /// Places `barrier`: operations added from now on wait for it. Returns `needsGate` true if
    /// adds begun earlier are still in flight, in which case `gate` (a dependency of the barrier)
    /// is opened once they have ended; and the barrier placed before it, if it has not finished,
    /// which it must wait for.
    mutating func placeBarrier(_ barrier: AsyncOperation, gate: AsyncOperation) -> (needsGate: Bool, previous: Operation?) {
        let previous = self.barrier
        generation += 1
        self.barrier = barrier
        guard admissions.contains(where: { $0.generation < generation }) else { return (false, previous) }
        pendingBarriers.append(PendingBarrier(generation: generation, barrier: barrier, gate: gate))
        return (true, previous)
    }

    mutating func barrierFinished(_ operation: Operation) {
        if barrier === operation { barrier = nil }
    }

    // MARK: - The line

    /// Puts `waiter` in line by ticket, unless its operation already waits there (an operation
    /// parked twice, by a suspension and by its own way to its categories, goes on once).
    private mutating func insert(_ waiter: Waiter) {
        line.insert(waiter)
    }

    /// Lets through what may go now: everything on a concurrent queue; on a serial one, the
    /// operation whose turn it is, or the waiters up to and including the next one that needs a
    /// turn of its own.
    private mutating func drain(into letThrough: inout LetThrough) {
        guard !isSuspended, !line.isEmpty else { return }
        guard isSerial else {
            for waiter in line.removeAll() {
                release(waiter, into: &letThrough)
            }
            return
        }
        if let turn {
            // The turn's owner parked (the queue was suspended): it goes on first.
            if let waiter = line.remove(id: turn) {
                release(waiter, into: &letThrough)
            }
            return
        }
        while let waiter = line.removeFirst() {
            release(waiter, into: &letThrough)
            if case .proceed = waiter {
                turn = ObjectIdentifier(waiter.operation)
                return
            }
        }
    }

    private mutating func release(_ waiter: Waiter, into letThrough: inout LetThrough) {
        switch waiter {
        case let .handOff(operation, _):
            letThrough.handOff.append(operation)
        case let .proceed(operation, _):
            letThrough.proceed.append(operation)
        }
    }
}

/// The scheduler's line: waiters by ticket, cheap to add to at the end, to pop from the front,
/// and to ask about (each operation stands in it once). A waiter that leaves out of turn (it
/// finished) is only forgotten, and skipped when its turn comes.
struct WaitingLine {
    private var entries: [QueueScheduler.Waiter] = []
    private var head = 0
    private var members: Set<ObjectIdentifier> = []

    var isEmpty: Bool { members.isEmpty }

    /// The waiters, in order.
    var waiters: [QueueScheduler.Waiter] {
        entries[head...].filter { members.contains(ObjectIdentifier($0.operation)) }
    }

    func contains(_ operation: Operation) -> Bool {
        members.contains(ObjectIdentifier(operation))
    }

    /// Puts `waiter` in line by ticket, unless its operation already stands in it (an operation
    /// parked twice, by a suspension and by its own way to its categories, goes on once).
    mutating func insert(_ waiter: QueueScheduler.Waiter) {
        guard members.insert(ObjectIdentifier(waiter.operation)).inserted else { return }
        if let last = entries.last, head < entries.count, last.ticket > waiter.ticket {
            let index = entries[head...].firstIndex { $0.ticket > waiter.ticket } ?? entries.count
            entries.insert(waiter, at: index)
        } else {
            entries.append(waiter)
        }
    }

    /// Forgets `operation`'s place (it finished while waiting).
    mutating func remove(_ operation: Operation) {
        members.remove(ObjectIdentifier(operation))
        compactIfEmpty()
    }

    /// Takes the waiter of the operation `id` out of line, wherever it stands.
    mutating func remove(id: ObjectIdentifier) -> QueueScheduler.Waiter? {
        guard members.remove(id) != nil,
              let index = entries[head...].firstIndex(where: { ObjectIdentifier($0.operation) == id })
        else { return nil }
        let waiter = entries.remove(at: index)
        compactIfEmpty()
        return waiter
    }

    /// Takes the first waiter out of line.
    mutating func removeFirst() -> QueueScheduler.Waiter? {
        while head < entries.count {
            let waiter = entries[head]
            head += 1
            if members.remove(ObjectIdentifier(waiter.operation)) != nil {
                compactIfEmpty()
                return waiter
            }
        }
        compactIfEmpty()
        return nil
    }

    /// Takes every waiter out of line, in order.
    mutating func removeAll() -> [QueueScheduler.Waiter] {
        let all = waiters
        entries.removeAll()
        members.removeAll()
        head = 0
        return all
    }

    private mutating func compactIfEmpty() {
        if members.isEmpty {
            entries.removeAll(keepingCapacity: entries.count <= 1024)
            head = 0
        } else if head >= 1024 && head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }
}
