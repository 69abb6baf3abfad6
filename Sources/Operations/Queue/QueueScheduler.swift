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
///   from "its dependencies finished" to "finished, its dependents told" (the *turn*), in the
///   order the operations were added, so conditions, categories and priorities never reorder
///   it, and dependents released by one finish go before operations added after them, as on
///   Foundation's serial queue, which picks its next operation among those ready once the one
///   it ran has finished.
///   Operations that need neither conditions nor categories, and plain Foundation operations,
///   wait in the same line. A plain operation ready to start as Foundation gets it keeps the
///   turn until it has finished and its dependents have heard of it (the queue watches it).
///   One that waits for dependencies gives the turn up then (`turnEnded(ticket:)`), as
///   Foundation's serial queue runs others while it waits, behind a *gate* (an operation it
///   depends on, which the queue finishes): once its dependencies have finished it asks for its
///   turn again by its ticket (`plainOperationReady(_:)`), and its gate opens when the turn
///   comes, so that it runs in its place, never beside another operation's turn. (Should its
///   dependencies all have finished as its gate went in, it keeps the turn instead, and the gate
///   opens at once.)
/// - A **suspended** queue lets nothing through: an operation added meanwhile, or one that
///   reaches its conditions or its categories, waits in line (*parked*) and goes on, in add
///   order, once the queue resumes. A queue **shutting down** does the same from the moment
///   `shutDown` begins until its sweep has cancelled what waits (`shutDownBegan()`,
///   `shutDownSwept()`), so that nothing waiting then runs, whatever the user's suspension.
/// - An operation that needs mutually exclusive categories asks for them only when the queue has
///   a free **slot** (fewer of its operations with Foundation than `maxConcurrentOperationCount`):
///   otherwise it waits in the *slot line*, holding no category, and goes on as slots free up,
///   as Foundation starts ready operations: by `queuePriority`, then in add order (on a serial
///   queue, in add order alone). So a category is never held by an operation that cannot start,
///   while the operation that could use it (say, the child of a group holding the queue's only
///   slot) waits. (An operation that needs no category goes to Foundation meanwhile, and may take
///   the next slot first: holding it back behind operations that may yet wait long for their
///   categories could keep it from running at all.)
/// - On a serial queue, every hand-off to Foundation passes through one *outbox*, delivered by one
///   thread at a time in the order the scheduler decided, so threads that let operations through
///   at the same moment (an add, a resume, a grant) never overtake each other at Foundation.
/// - A **barrier** waits for everything added before it, including adds that were in progress
///   on other threads when it was placed (an *admission* in flight), through a *gate*.
struct QueueScheduler {
    /// An operation waiting in line, and what it does once let through.
    enum Waiter {
        /// Given to Foundation's queue: it needs nothing more.
        case handOff(Operation, ticket: UInt64)
        /// Goes on with its conditions or categories (`AsyncOperation.continueTowardsExecution()`).
        case proceed(AsyncOperation, ticket: UInt64)
        /// A plain operation Foundation has, behind its gate (`GateOperation`): the gate opens.
        case openGate(GateOperation)

        var ticket: UInt64 {
            switch self {
            case let .handOff(_, ticket), let .proceed(_, ticket): ticket
            case let .openGate(gate): gate.ticket
            }
        }

        var operation: Operation {
            switch self {
            case let .handOff(operation, _): operation
            case let .proceed(operation, _): operation
            case let .openGate(gate): gate.operation
            }
        }
    }

    /// Operations let through by an event, to be handed to Foundation (in this order) and then
    /// let go on, after unlocking.
    struct LetThrough {
        /// What goes on after the hand-offs, once Foundation has them, in the order let through.
        enum Onward {
            /// Goes on with its conditions or categories (`AsyncOperation.continueTowardsExecution()`).
            case proceed(AsyncOperation)
            /// A gate opens: the plain operation it holds back has its turn (`GateOperation`).
            case openGate(GateOperation)

            /// The operation whose queue priority orders it among others (`proceedsByPriority`).
            var operation: Operation {
                switch self {
                case let .proceed(operation): operation
                case let .openGate(gate): gate.operation
                }
            }
        }

        /// Usually one operation: kept inline, with no buffer to allocate.
        var handOff = SmallArray<Operation>()
        /// Hand-offs went to the outbox, and the caller is its one deliverer: it delivers the
        /// outbox (`takeOutbox(given:)`) until it is empty.
        var deliversOutbox = false
        /// One list for both kinds: a fifth stored property made every `LetThrough` dearer to
        /// copy and destroy, on every add and every finish (about 650 instructions an operation
        /// on the benchmark's W2).
        var onward: [Onward] = []
        /// `onward` came from a concurrent queue's line all at once (a resume): they go on
        /// highest priority first, as Foundation would start them.
        var proceedsByPriority = false

        /// Nobody is let through.
        var isEmpty: Bool {
            handOff.isEmpty && !deliversOutbox && onward.isEmpty
        }
    }

    /// Why an operation waits in one of the scheduler's lines.
    enum LineReason: Equatable {
        /// The queue is suspended (or its shut-down has begun and not yet swept).
        case suspended
        /// The queue is serial and an operation added earlier goes first.
        case turn
        /// Every slot of the queue is taken, and it needs categories (see the slot line).
        case slot
    }

    /// A barrier placed while adds begun before it were still in flight, and the gate that keeps
    /// it from running until they have ended (and made their operations its dependencies).
    struct PendingBarrier {
        let generation: UInt64
        let barrier: AsyncOperation
        let gate: AsyncOperation
    }

    /// The user's suspension (`isSuspended`), as the queue reports it.
    private(set) var isSuspended = false
    /// `shutDown` began and its sweep has not yet cancelled what waits.
    private(set) var isHeldForShutDown = false
    /// Nothing goes on: the queue is suspended, or its shut-down has not swept yet.
    private var letsNothingThrough: Bool { isSuspended || isHeldForShutDown }
    /// `maxConcurrentOperationCount`; negative for Foundation's default (no limit).
    private(set) var width = OperationQueue.defaultMaxConcurrentOperationCount
    var isSerial: Bool { width == 1 }
    /// `AsyncOperation`s admitted and not yet given to Foundation.
    private(set) var held = HeldOperations()
    /// Operations waiting for their turn or for the queue to resume, by ticket.
    private(set) var line = WaitingLine()
    /// Operations that need categories, waiting for a free slot, by priority and then ticket.
    private(set) var slotLine = SlotLine()
    /// A serial queue's hand-offs not yet given to Foundation, in order, delivered by one thread
    /// at a time.
    private(set) var outbox = SerialDrain<Operation>()

    /// The operations waiting in line, in the order they will be let through.
    var waiting: [Waiter] { line.waiters }
    /// Operations let through and not yet handed off (evaluating conditions, waiting for
    /// categories or a slot), or, on a serial queue, handed off and not yet finished (its
    /// dependents not yet told), by ticket: on a serial queue, the one whose *turn* it is. Kept on
    /// every queue, so that a queue made serial while several are under way lets nothing else go
    /// before all of them have been handed off (and those handed off since, finished).
    private(set) var inProgress = FibonacciSet<TicketKeying>()
    /// `AsyncOperation`s admitted and not finished yet, held or handed off.
    private(set) var unfinished = 0
    /// Held `AsyncOperation`s on their way to Foundation (in a hand-off list or the outbox): they
    /// count as taking a slot already.
    private(set) var handingOff = 0
    /// Plain operations the scheduler keeps (in line, or in the outbox) and has not given to
    /// Foundation yet: a wait for the queue waits for them too, as Foundation's would.
    private(set) var keptPlain = 0
    /// Plain operations on their way to Foundation through a serial queue's outbox (in it, or
    /// taken by its deliverer), with the tickets of the turns they take: handed to the deliverer
    /// with them (`OutboxDelivery.plainTurns`), and listed (`allWaiting`) until Foundation has
    /// them, so that a cancellation of all, a shut-down's sweep or a barrier never misses one.
    private var plainOnTheirWay: [PlainTurn] = []
    /// Threads in `waitUntilAllOperationsAreFinished()`, woken once the scheduler is idle.
    private(set) var idleWaiters = IdleWaiters()
    /// The latest barrier that has not finished: everything added after it waits for it.
    private(set) var barrier: Operation?
    /// Counts barriers placed; an add remembers the generation it began in.
    private(set) var generation: UInt64 = 0
    /// Adds in progress, by the generation they began in (ascending).
    private(set) var admissions: [(generation: UInt64, count: Int)] = []
    /// How many times every operation was cancelled (`cancelAllOperations()`): an add that began
    /// before one and ended after it cancels its own operations as it ends, since they were in
    /// neither list the cancellation read.
    private(set) var cancellationsOfAll: UInt64 = 0
    private(set) var pendingBarriers: [PendingBarrier] = []

    // MARK: - Adding

    /// What an add that begins must know.
    enum AdmissionStart {
        /// Admit the operations, remembering `generation` for the end of the add; each waits for
        /// `barrier`, if any.
        case admit(generation: UInt64, barrier: Operation?)
    }

    /// An add begins. `asyncCount` `AsyncOperation`s are counted as unfinished at once, before any
    /// of them can finish; one that is refused leaves again through `refusedAtAdd()`.
    mutating func beginAdmission(counting asyncCount: Int) -> AdmissionStart {
        unfinished += asyncCount
        if asyncCount > 1 && (letsNothingThrough || isSerial) {
            held.reserveCapacity(forAdding: asyncCount) // they will stand in line
        }
        if let last = admissions.last, last.generation == generation {
            admissions[admissions.count - 1].count += 1
        } else {
            admissions.append((generation, 1))
        }
        return .admit(generation: generation, barrier: barrier)
    }

    /// An add begins as part of the add of `enclosing`, still in flight: it adds the dependency a
    /// condition of that add's operation brings. Its operations wait for the barrier the
    /// operations of `enclosing` wait for, and a barrier placed since waits for them too; it ends
    /// as any add (`endAdmission(generation: enclosing)`). Counts as `beginAdmission`.
    mutating func joinAdmission(of enclosing: UInt64, counting asyncCount: Int) {
        unfinished += asyncCount
        if let index = admissions.lastIndex(where: { $0.generation == enclosing }) {
            admissions[index].count += 1
        } else { // never so (it is joined from within), but the order of generations is kept
            admissions.insert((enclosing, 1), at: admissions.firstIndex { $0.generation > enclosing } ?? admissions.count)
        }
    }

    /// Every operation is being cancelled: adds in flight cancel theirs (as each is held or kept,
    /// or, for those given straight to Foundation, as the add ends).
    mutating func cancellingAll() {
        cancellationsOfAll &+= 1
    }

    /// Whether every operation was cancelled since `cancellationsOfAll` read `count` (as an add
    /// began): an operation of that add, not yet held then, was missed.
    func cancelledAll(since count: UInt64) -> Bool {
        cancellationsOfAll != count
    }

    /// What ending an add asks of the queue.
    enum EndOfAdmission {
        /// The add has ended; open these barrier gates. `cancelOperations`: every operation was
        /// cancelled while the add was in flight; cancel the add's own operations too.
        case ended(openGates: [AsyncOperation], cancelOperations: Bool)
        /// A barrier was placed while the add was in flight: make the add's operations its
        /// dependencies first, then call `endAdmission(generation:)` again with `joined`.
        case joinBarrier(AsyncOperation)
    }

    /// An add ends (its operations are held or with Foundation). In the common case (no
    /// barrier placed meanwhile) this is one step. `cancellationsAtBegin`: `cancellationsOfAll`
    /// as the add began.
    mutating func endAdmission(generation: UInt64, joined: Bool = false, cancellationsAtBegin: UInt64) -> EndOfAdmission {
        if !joined, let barrier = pendingBarriers.first(where: { $0.generation > generation })?.barrier {
            return .joinBarrier(barrier)
        }
        return .ended(openGates: closeAdmission(generation: generation), cancelOperations: cancelledAll(since: cancellationsAtBegin))
    }

    private mutating func closeAdmission(generation: UInt64) -> [AsyncOperation] {
        if let index = admissions.lastIndex(where: { $0.generation == generation }) {
            admissions[index].count -= 1
            if admissions[index].count == 0 { admissions.remove(at: index) }
        }
        held.releaseTableIfEmpty() // room reserved for a batch that was refused after all
        guard !pendingBarriers.isEmpty else { return [] }
        let oldestInFlight = admissions.first?.generation ?? .max
        let opened = pendingBarriers.filter { $0.generation <= oldestInFlight }
        pendingBarriers.removeAll { $0.generation <= oldestInFlight }
        return opened.map(\.gate)
    }

    /// What to do with an operation that needs nothing more.
    enum AdmitAction {
        /// Give it to Foundation with the add's batch.
        case handOff
        /// The scheduler keeps it (in line, or in the outbox); do what `letThrough` says: deliver
        /// the outbox, let operations waiting for a slot go on (it no longer counts as on its way
        /// to Foundation).
        case kept(LetThrough)
    }

    /// Admits an operation that needs nothing more (a plain operation, or an `AsyncOperation`
    /// without dependencies or conditions): to Foundation now, or in line: for the queue to resume
    /// (so that a queue made serial meanwhile still starts everything in add order), or for its
    /// turn on a serial queue.
    mutating func admitReady(_ operation: Operation, ticket: UInt64) -> AdmitAction {
        let waits = letsNothingThrough || isSerial && (!inProgress.isEmpty || !line.isEmpty)
        guard waits || usesOutbox else { return .handOff }
        if let operation = operation as? AsyncOperation {
            held.insert(operation) // until it is delivered
        } else {
            keptPlain += 1 // until it is delivered
        }
        var letThrough = LetThrough()
        if waits {
            insert(.handOff(operation, ticket: ticket))
        } else {
            send(operation, ticket: ticket, into: &letThrough)
        }
        drainSlotLine(into: &letThrough)
        return .kept(letThrough)
    }

    /// What admitting a held operation came to.
    enum HeldAdmission {
        /// Held; it asks for its turn once its dependencies finished. It no longer counts as on
        /// its way to Foundation: operations waiting for a slot go on first (`letThrough`).
        case held(LetThrough)
        /// Held, with the turn it asked for: it goes on to its conditions without asking again.
        /// Nobody else was let through.
        case heldWithTurn
    }

    /// Admits an `AsyncOperation` that waits for dependencies or conditions first. It no longer
    /// counts as on its way to Foundation, so a slot may have come free for a waiter.
    /// `reservingFor`: the first of its batch to be held makes room for the rest of the batch
    /// too (a chain added at once), so that the table grows once. `askingTurnFor`: its ticket,
    /// if it waits for nothing known yet and needs no slot: it takes its turn now if it may
    /// (`requestTurn`'s rule) and nobody else is let through, in the same step. Otherwise it asks
    /// once its dependencies finished.
    mutating func admitHeld(_ operation: AsyncOperation, reservingFor batchRemainder: Int = 1, askingTurnFor ticket: UInt64? = nil) -> HeldAdmission {
        if batchRemainder > 1 {
            held.reserveCapacity(forAdding: batchRemainder)
        }
        held.insert(operation)
        var letThrough = LetThrough()
        drainSlotLine(into: &letThrough)
        // Those let through were added earlier, and go first: the turn is given as it is held only
        // when nothing (no other operation's conditions) comes between it and its evaluation.
        guard let ticket, mayGiveTurn, letThrough.isEmpty else { return .held(letThrough) }
        inProgress.insert(ticket)
        return .heldWithTurn
    }

    /// Operations the scheduler let through were given to Foundation: they are no longer held.
    /// (They stay held until Foundation lists them, so that `allOperations` and barriers always
    /// see them.) Returns the threads to wake if nothing is left to wait for.
    mutating func gaveToFoundation(_ operations: some Sequence<Operation>) -> IdleWaiters {
        for operation in operations {
            if let operation = operation as? AsyncOperation {
                if held.remove(operation) {
                    handingOff -= 1 // it was on its way from the scheduler (not from an add's batch)
                }
            } else {
                keptPlain -= 1 // a plain operation reaches Foundation only from the scheduler's line or outbox
                if !plainOnTheirWay.isEmpty, let index = plainOnTheirWay.firstIndex(where: { $0.operation === operation }) {
                    plainOnTheirWay.remove(at: index)
                }
            }
        }
        return takeIdleWaitersIfIdle()
    }

    /// Everything admitted and not given to Foundation yet: held operations, plain ones waiting
    /// for their turn (not those behind a gate: Foundation has them) and plain ones on their way
    /// to Foundation.
    var allWaiting: [Operation] {
        var all: [Operation] = held.all
        for waiter in line.waiters {
            if case let .handOff(operation, _) = waiter, !(operation is AsyncOperation) {
                all.append(operation)
            }
        }
        all += plainOnTheirWay.map(\.operation)
        return all
    }

    // MARK: - Slots

    /// Whether an operation about to ask for its categories could take a slot now: fewer of the
    /// queue's `AsyncOperation`s are with Foundation (or on their way to it) than its width.
    /// Operations being added right now count as on their way until they are held, so the answer
    /// errs on the side of waiting, and each of those events lets the slot line through again.
    var hasFreeSlot: Bool {
        width < 0 || unfinished - held.count + handingOff < width
    }

    /// Whether an operation may ask for its categories now: the queue runs and has a free slot.
    var mayTakeCategories: Bool {
        !letsNothingThrough && hasFreeSlot
    }

    // MARK: - The way to execution

    /// Whether an operation may go on towards execution now.
    enum Passage: Equatable {
        /// Go on now.
        case proceed
        /// It waits in one of the lines; `AsyncOperation.continueTowardsExecution()` is called
        /// when it may go on.
        case parked
    }

    /// An operation's dependencies finished: it may go on to its conditions (or categories) now,
    /// or waits in line and is let through later. `needsSlot`: it needs categories, so it also
    /// waits for a free slot (it asks for them as soon as its conditions pass).
    mutating func requestTurn(for operation: AsyncOperation, ticket: UInt64, needsSlot: Bool = false, priority: Operation.QueuePriority = .normal) -> Passage {
        if !inProgress.contains(ticket) {
            guard mayGiveTurn else {
                insert(.proceed(operation, ticket: ticket))
                return .parked
            }
            inProgress.insert(ticket)
        } else if letsNothingThrough {
            insert(.proceed(operation, ticket: ticket))
            return .parked
        }
        guard needsSlot, !hasFreeSlot else { return .proceed }
        joinSlotLine(.proceed(operation, ticket: ticket), priority: priority) // still under way: keeps its turn
        return .parked
    }

    /// Whether an operation whose dependencies finished may go on towards execution now (a
    /// running queue; on a serial one, nobody else under way or waiting in line first).
    private var mayGiveTurn: Bool {
        !letsNothingThrough && (!isSerial || inProgress.isEmpty && line.isEmpty)
    }

    /// An operation is about to ask for its categories: it parks if the queue is suspended
    /// (until it resumes, or a shut-down's sweep) or has no free slot (until one frees up).
    mutating func parkUnlessFreeToTakeCategories(_ operation: AsyncOperation, ticket: UInt64, priority: Operation.QueuePriority = .normal) -> Passage {
        if letsNothingThrough {
            insert(.proceed(operation, ticket: ticket))
            return .parked
        }
        guard !hasFreeSlot else { return .proceed }
        joinSlotLine(.proceed(operation, ticket: ticket), priority: priority)
        return .parked
    }

    enum HandOffAction {
        /// Give these to Foundation (the operation first), then let the others go on.
        case handOff(LetThrough)
        /// The operation holds categories, but the queue is suspended or shutting down (before
        /// its sweep), or (granted just as the
        /// last slot was taken) has no free slot: it gives them back (they go to whoever can run)
        /// and parks, to ask again when the queue resumes or a slot frees up.
        case giveBackCategories
    }

    /// An operation is cleared to run (its conditions passed, its categories are held).
    mutating func clearedToRun(_ operation: AsyncOperation, ticket: UInt64, holdsCategories: Bool) -> HandOffAction {
        if holdsCategories && !mayTakeCategories {
            return .giveBackCategories
        }
        var letThrough = LetThrough()
        send(operation, ticket: ticket, into: &letThrough)
        if !isSerial, inProgress.remove(ticket) { // on a serial queue the turn lasts until it left
            drain(into: &letThrough)
        }
        return .handOff(letThrough)
    }

    /// An operation given to Foundation started, or finished without starting. On a serial queue
    /// its turn goes on until it has finished and let its dependents go (`operationLeft(ticket:)`),
    /// so that those added before the next in line go first, as on Foundation's serial queue.
    /// On a concurrent queue (made so since it was handed off) its turn ends, and whoever waits
    /// goes on. `nil` if nobody is let through (the usual case, answered without building a
    /// let-through list).
    mutating func handedOffOperationStarted(ticket: UInt64) -> LetThrough? {
        guard !isSerial else { return nil }
        return endTurn(ticket: ticket)
    }

    /// The turn of the operation added with `ticket` ends, if it held one: whoever waits in line
    /// for it goes on; `nil` if it held none.
    private mutating func endTurn(ticket: UInt64) -> LetThrough? {
        guard inProgress.remove(ticket) else { return nil }
        var letThrough = LetThrough()
        drain(into: &letThrough)
        return letThrough
    }

    /// An operation finished before it was given to Foundation (cancelled, or a condition failed).
    /// A turn it held ends once it has let its dependents go (`operationLeft(ticket:)`).
    mutating func finishedBeforeHandOff(_ operation: AsyncOperation, ticket: UInt64) {
        held.remove(operation)
        line.remove(ticket: ticket)
        slotLine.remove(ticket: ticket)
    }

    /// An operation finished while it was being added, its finish perhaps heard before the
    /// queue held it and gave it a turn: the queue lets go of it, and of that turn, at once (its
    /// `operationLeft(ticket:)` may have come already). A second time changes nothing.
    mutating func finishedWhileAdded(_ operation: AsyncOperation, ticket: UInt64) -> LetThrough {
        finishedBeforeHandOff(operation, ticket: ticket)
        return endTurn(ticket: ticket) ?? LetThrough()
    }

    /// A turn ends outside the usual finish of an `AsyncOperation` (`operationLeft(ticket:)`),
    /// and whoever waits for it goes on. Either an operation gives up a turn it was given without
    /// using it: it finished first, after its finish was heard (`finishedBeforeHandOff`), or
    /// something stood in its way as it was held with its turn
    /// (`OperationLifecycle.EnqueuedHoldingTurn.giveBackTurn`). Or a plain operation given to
    /// Foundation on a serial queue has finished and its dependents have heard of it, or it
    /// waited for dependencies as Foundation got it. A second time changes nothing.
    mutating func turnEnded(ticket: UInt64) -> LetThrough {
        endTurn(ticket: ticket) ?? LetThrough()
    }

    /// Threads in `waitUntilAllOperationsAreFinished()`, to wake once nothing is left.
    struct IdleWaiters {
        private(set) var semaphores: [DispatchSemaphore] = []

        mutating func append(_ semaphore: DispatchSemaphore) {
            semaphores.append(semaphore)
        }

        /// Wakes every one of them (after unlocking).
        func signal() {
            guard !semaphores.isEmpty else { return }
            for semaphore in semaphores {
                semaphore.signal()
            }
        }
    }

    /// What follows an operation's leaving.
    struct Departure {
        /// Threads in `waitUntilAllOperationsAreFinished()` to wake: nothing is left.
        var idleWaiters = IdleWaiters()
        /// Its slot is free: operations waiting for one go on.
        var letThrough = LetThrough()
    }

    /// An `AsyncOperation` has finished, Foundation has let go of it and its dependents have
    /// heard of it. A turn it held ends: whoever waits in line goes on, after those dependents
    /// that asked for their turn meanwhile and were added earlier.
    mutating func operationLeft(ticket: UInt64) -> Departure {
        var departure = Departure()
        if inProgress.remove(ticket) {
            drain(into: &departure.letThrough)
        }
        depart(&departure)
        return departure
    }

    /// A plain operation that waited for dependencies behind a gate (`GateOperation`) on a
    /// serial queue: they have finished. Its gate opens when its turn comes, by its ticket,
    /// before operations added after it.
    mutating func plainOperationReady(_ gate: GateOperation) -> LetThrough {
        insert(.openGate(gate))
        var letThrough = LetThrough()
        drain(into: &letThrough)
        return letThrough
    }

    /// Whether the operation added with `ticket` holds a turn (on a serial queue, the turn).
    func holdsTurn(ticket: UInt64) -> Bool {
        inProgress.contains(ticket)
    }

    /// The turns of the plain operations among `delivered`, which the outbox's deliverer takes
    /// to give to Foundation; they stay listed until Foundation has them (`gaveToFoundation`).
    private func plainTurns(of delivered: [Operation]) -> [PlainTurn] {
        var taken: [PlainTurn] = []
        for operation in delivered where !(operation is AsyncOperation) {
            if let turn = plainOnTheirWay.first(where: { $0.operation === operation }) {
                taken.append(turn)
            }
        }
        return taken
    }

    /// An `AsyncOperation` counted as the add began was refused (it went to another queue, or
    /// finished meanwhile): it leaves again, having held no turn.
    mutating func refusedAtAdd() -> Departure {
        var departure = Departure()
        depart(&departure)
        return departure
    }

    /// One operation fewer is unfinished: its slot is free for whoever waits for one, after
    /// those `departure` lets through already.
    private mutating func depart(_ departure: inout Departure) {
        unfinished -= 1
        drainSlotLine(into: &departure.letThrough)
        departure.idleWaiters = takeIdleWaitersIfIdle()
    }

    /// Whether nothing the scheduler counts is left: no `AsyncOperation` unfinished, no plain
    /// operation kept from Foundation. (Foundation's own queue may still run plain operations.)
    var isIdle: Bool {
        unfinished == 0 && keptPlain == 0
    }

    private mutating func takeIdleWaitersIfIdle() -> IdleWaiters {
        guard isIdle, !idleWaiters.semaphores.isEmpty else { return IdleWaiters() }
        defer { idleWaiters = IdleWaiters() }
        return idleWaiters
    }

    // MARK: - The outbox (serial queues)

    private var usesOutbox: Bool {
        isSerial || outbox.isDraining || !outbox.isEmpty
    }

    /// Sends an operation cleared to run towards Foundation: straight in `letThrough`, or, on a
    /// serial queue, through the outbox, whose deliverer the caller becomes if there is none.
    ///
    /// On a serial queue an `AsyncOperation` keeps the turn until it has finished and let its
    /// dependents go (`operationLeft(ticket:)`): Foundation's serial queue starts the highest
    /// `queuePriority` among those it holds, so it is given one at a time, in add order, and
    /// only once the one before has finished, as Foundation's own queue picks its next operation
    /// among those ready then.
    private mutating func send(_ operation: Operation, ticket: UInt64, into letThrough: inout LetThrough) {
        if operation is AsyncOperation {
            handingOff += 1 // takes a slot from now on, though held until Foundation has it
            if isSerial {
                inProgress.insert(ticket)
            }
        } else if isSerial {
            inProgress.insert(ticket) // until `turnEnded(ticket:)`
            plainOnTheirWay.append(PlainTurn(operation: operation, ticket: ticket))
        }
        guard usesOutbox else {
            letThrough.handOff.append(operation)
            return
        }
        if case .drain = outbox.submit(operation) {
            letThrough.deliversOutbox = true
        }
    }

    /// A plain operation given to Foundation on a serial queue, and the ticket of the turn it
    /// took: the deliverer ends the turn once the operation has finished, and its dependents
    /// have heard of it, or at once if it waits for dependencies.
    struct PlainTurn {
        /// The plain operation.
        let operation: Operation
        /// The ticket it was added with, and whose turn it took.
        let ticket: UInt64
    }

    /// What the outbox's deliverer does next.
    struct OutboxDelivery {
        /// What to give Foundation next, in order; empty when the outbox is empty, and then
        /// nobody delivers any more.
        var next: [Operation] = []
        /// The turns of the plain operations among `next` (see `PlainTurn`): watched before they
        /// reach Foundation, so that none can finish first.
        var plainTurns: [PlainTurn] = []
        /// Threads to wake: what was given was the last thing left.
        var idleWaiters = IdleWaiters()
    }

    /// The deliverer gave `given` to Foundation: they are no longer held.
    mutating func takeOutbox(given: [Operation]) -> OutboxDelivery {
        var delivery = OutboxDelivery(idleWaiters: gaveToFoundation(given))
        if case let .items(next) = outbox.takeNext() {
            delivery.next = next
            if !plainOnTheirWay.isEmpty {
                delivery.plainTurns = plainTurns(of: next)
            }
        }
        return delivery
    }

    /// What a thread that waits for the queue to be idle does.
    enum IdleWait {
        /// Nothing the scheduler counts is left (`isIdle`): nothing to wait for.
        case idle
        /// Wait on this; it is signalled once nothing is left.
        case wait(DispatchSemaphore)
    }

    /// A thread waits until the scheduler is idle (`isIdle`).
    mutating func waitForIdle() -> IdleWait {
        guard !isIdle else { return .idle }
        let waiter = DispatchSemaphore(value: 0)
        idleWaiters.append(waiter)
        return .wait(waiter)
    }

    /// Whether `operation` waits in one of the scheduler's lines, and why; `nil` if it does not.
    func waitsInLine(ticket: UInt64) -> LineReason? {
        if line.contains(ticket: ticket) { return letsNothingThrough ? .suspended : .turn }
        if slotLine.contains(ticket: ticket) { return letsNothingThrough ? .suspended : .slot }
        return nil
    }

    // MARK: - Settings that change the order

    mutating func setSuspended(_ suspended: Bool) -> LetThrough {
        isSuspended = suspended
        return drainBothLines()
    }

    /// `shutDown` began: nothing goes on from now on (as on a suspended queue) until the sweep
    /// has cancelled what waits (`shutDownSwept()`). Without this, an operation behind one that
    /// finishes meanwhile would be let through, and run, before the sweep reached it.
    mutating func shutDownBegan() {
        isHeldForShutDown = true
    }

    /// The shut-down's sweep has cancelled what waits: it goes on, to finish without executing.
    mutating func shutDownSwept() -> LetThrough {
        isHeldForShutDown = false
        return drainBothLines()
    }

    /// The queue's `maxConcurrentOperationCount` changed; 1 makes it serial.
    mutating func setWidth(_ newWidth: Int) -> LetThrough {
        width = newWidth
        if isSerial {
            slotLine.forgetPriorities() // a serial queue goes by add order alone
        }
        return drainBothLines()
    }

    /// Lets through what may go now from the line, then from the slot line.
    private mutating func drainBothLines() -> LetThrough {
        var letThrough = LetThrough()
        drain(into: &letThrough)
        drainSlotLine(into: &letThrough)
        return letThrough
    }

    // MARK: - Barriers

    /// What placing a barrier asks of the queue.
    enum BarrierPlacement {
        /// Make the barrier wait for `previous` (the barrier placed before it, if it has not
        /// finished) and, with `needsGate`, for `gate`: adds begun earlier are still in flight,
        /// and the gate opens once they have ended.
        case place(needsGate: Bool, previous: Operation?)
    }

    /// Places `barrier`: operations added from now on wait for it.
    mutating func placeBarrier(_ barrier: AsyncOperation, gate: AsyncOperation) -> BarrierPlacement {
        let previous = self.barrier
        generation += 1
        self.barrier = barrier
        guard admissions.contains(where: { $0.generation < generation }) else { return .place(needsGate: false, previous: previous) }
        pendingBarriers.append(PendingBarrier(generation: generation, barrier: barrier, gate: gate))
        return .place(needsGate: true, previous: previous)
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
    /// operations under way that parked (the queue was suspended, or shutting down), or else the
    /// waiters up to and including the next one that needs a turn of its own.
    private mutating func drain(into letThrough: inout LetThrough) {
        guard !letsNothingThrough, !line.isEmpty else { return }
        guard isSerial else {
            for waiter in line.removeAll() {
                release(waiter, into: &letThrough)
            }
            letThrough.proceedsByPriority = true
            return
        }
        guard inProgress.isEmpty else {
            for ticket in inProgress.all.sorted() {
                if let waiter = line.remove(ticket: ticket) {
                    release(waiter, into: &letThrough)
                }
            }
            return
        }
        while let waiter = line.removeFirst() {
            release(waiter, into: &letThrough)
            if !inProgress.isEmpty { return } // it took the turn: one that goes on, or an `AsyncOperation` until it left
        }
    }

    /// The operation added with `ticket` now has `priority`: if it waits for a slot, its place
    /// in the slot line changes (not on a serial queue, which goes by add order alone).
    mutating func priorityChanged(ticket: UInt64, to priority: Operation.QueuePriority) {
        guard !isSerial else { return }
        slotLine.reprioritize(ticket: ticket, priority: priority)
    }

    /// Puts `waiter` in the slot line: by priority, then ticket; on a serial queue by ticket
    /// alone, since it starts operations in add order whatever their priority.
    private mutating func joinSlotLine(_ waiter: Waiter, priority: Operation.QueuePriority) {
        slotLine.insert(waiter, priority: isSerial ? .normal : priority)
    }

    /// Lets operations waiting for a slot go on, in the slot line's order, as many as slots are free. (They
    /// take no slot until they are handed off, so one may find it taken again and park again.)
    private mutating func drainSlotLine(into letThrough: inout LetThrough) {
        guard !slotLine.isEmpty, !letsNothingThrough else { return }
        var free = width < 0 ? Int.max : width - (unfinished - held.count + handingOff)
        while free > 0, let waiter = slotLine.removeFirst() {
            release(waiter, into: &letThrough)
            free -= 1
        }
    }

    private mutating func release(_ waiter: Waiter, into letThrough: inout LetThrough) {
        switch waiter {
        case let .handOff(operation, ticket):
            send(operation, ticket: ticket, into: &letThrough)
        case let .proceed(operation, ticket):
            inProgress.insert(ticket)
            letThrough.onward.append(.proceed(operation))
        case let .openGate(gate):
            if isSerial {
                inProgress.insert(gate.ticket) // until `turnEnded(ticket:)`
            }
            letThrough.onward.append(.openGate(gate))
        }
    }
}

/// The scheduler's lines: waiters in ticket order, each operation at most once. A thin layer over
/// `TicketLine`, the engine's one ordered line (the categories' lines are the same), keyed by
/// the ticket alone. A waiter that leaves out of turn is taken out at once, so the line never
/// keeps a finished operation alive.
struct WaitingLine {
    private var waiting = TicketLine<QueueScheduler.Waiter>()

    var isEmpty: Bool { waiting.isEmpty }

    /// The waiters, in order.
    var waiters: [QueueScheduler.Waiter] { waiting.elements }

    func contains(ticket: UInt64) -> Bool {
        waiting.position(of: Self.place(ticket)) != nil
    }

    /// Puts `waiter` in line by ticket, unless it already stands in it (an operation parked
    /// twice, by a suspension and by its own way to its categories, goes on once).
    mutating func insert(_ waiter: QueueScheduler.Waiter) {
        waiting.insert(waiter, place: Self.place(waiter.ticket))
    }

    /// Takes the waiter with `ticket` out of line, wherever it stands.
    @discardableResult
    mutating func remove(ticket: UInt64) -> QueueScheduler.Waiter? {
        waiting.remove(place: Self.place(ticket))
    }

    /// Takes the first waiter out of line.
    mutating func removeFirst() -> QueueScheduler.Waiter? {
        waiting.isEmpty ? nil : waiting.removeFirst()
    }

    /// Takes every waiter out of line, in order.
    mutating func removeAll() -> [QueueScheduler.Waiter] {
        var all: [QueueScheduler.Waiter] = []
        while let waiter = removeFirst() {
            all.append(waiter)
        }
        return all
    }

    private static func place(_ ticket: UInt64) -> LinePlace {
        LinePlace(root: 0, ticket: ticket)
    }
}

/// The scheduler's tickets, which are sequential: Fibonacci hashing spreads them evenly.
enum TicketKeying: FibonacciKeying {
    static func key(of ticket: UInt64) -> UInt64 {
        ticket
    }

    static func same(_ ticket: UInt64, _ other: UInt64) -> Bool {
        ticket == other
    }
}
