import Foundation
@testable import Operations
import Testing
import TestSupport

// Every order of events for small scopes of the queue's scheduling rules, without threads: adds,
// dependencies finishing, conditions passing, categories granted, Foundation starting what it was
// given, cancellations, suspensions and resumes, a shut-down held until its sweep, on serial and
// concurrent queues. The model plays the queue's part (it performs the scheduler's actions as
// `AsyncOperationQueue` does); the invariants are checked in every state.

/// What one operation of the model needs before it can run.
private enum Needs: String {
    var isPlain: Bool { self == .plain || self == .plainWaiting }

    /// A plain Foundation operation: handed to Foundation as it is.
    case plain
    /// A plain Foundation operation that still waits for dependencies as Foundation gets it: on
    /// a serial queue it gives its turn up at once, behind a gate, and once they finish it waits
    /// for its turn again, by its ticket.
    case plainWaiting
    /// An `AsyncOperation` without dependencies or conditions.
    case nothing
    /// Dependencies to finish, then conditions to pass.
    case conditions
    /// Dependencies to finish, conditions to pass, then a category to be granted.
    case category
    /// Conditions naming no category, and no dependency known when it is added: it asks for its
    /// turn as it is held, and may find a dependency after all (a condition's), giving it back.
    case conditionsAtOnce
}

/// Where a plain operation behind a gate stands (see `GateOperation`).
private enum GateState: String {
    /// No gate.
    case none = "-"
    /// Its dependencies have not finished.
    case waitingForDependencies = "d"
    /// They have; it waits in line for its turn.
    case waitingForTurn = "t"
}

/// Where one operation of the model stands.
private enum Stage: Equatable, CustomStringConvertible {
    case notAdded
    /// Held, waiting for its dependencies.
    case waitingForDependencies
    /// Waiting in the scheduler's line (for its turn, or for a resume).
    case inLine
    /// Let through: its conditions are being evaluated.
    case evaluatingConditions
    /// Asked for its category, waiting for the grant.
    case acquiring
    /// Given back its category (its queue was suspended, or had no free slot), about to park.
    case givingBack
    case handedOff
    /// Handed off and started by Foundation (an `AsyncOperation`: the queue hears of it).
    case started
    /// Handed off, finished, and let go of by Foundation: its slot is free again.
    case left
    case finishedBeforeHandOff

    var description: String {
        switch self {
        case .notAdded: "-"
        case .waitingForDependencies: "deps"
        case .inLine: "line"
        case .evaluatingConditions: "cond"
        case .acquiring: "acq"
        case .givingBack: "back"
        case .handedOff: "off"
        case .started: "run"
        case .left: "left"
        case .finishedBeforeHandOff: "fin"
        }
    }
}

private struct SchedulerModel {
    let needs: [Needs]
    let operations: [Operation]
    var scheduler = QueueScheduler()
    var stages: [Stage]
    /// When each operation became ready to go (dependencies finished), and when it went (let
    /// through, or handed off for one that needs nothing), in event counts.
    var readyAt: [Int?]
    var wentAt: [Int?]
    var conditionsPassed: [Bool]
    /// Took its turn as it was held, and has not given it back or handed out its conditions yet.
    var holdsTurnFromAdd: [Bool]
    /// Found a dependency after taking its turn as it was held (once at most, to bound the scope).
    var foundDependency: [Bool]
    /// A plain operation given to Foundation on a serial queue, holding the turn until it left.
    var plainHoldsTurn: [Bool]
    var gates: [GateState]
    var clock = 0
    var handOffOrder: [Int] = []
    var suspensionsLeft: Int
    /// Whether a shut-down may still begin (once at most).
    var mayShutDown: Bool
    /// A shut-down began and its sweep has not ended.
    var shuttingDown = false
    var violations: [String] = []

    /// `maxConcurrentOperationCount`: 1 for a serial queue.
    let width: Int

    init(_ needs: [Needs], width: Int, suspensions: Int, shutsDown: Bool = false) {
        self.width = width
        self.needs = needs
        operations = needs.enumerated().map { index, need in
            let operation: Operation = need.isPlain ? BlockOperation {} : AsyncOperation()
            operation.name = "op\(index)"
            return operation
        }
        stages = Array(repeating: .notAdded, count: needs.count)
        readyAt = Array(repeating: nil, count: needs.count)
        wentAt = Array(repeating: nil, count: needs.count)
        conditionsPassed = Array(repeating: false, count: needs.count)
        holdsTurnFromAdd = Array(repeating: false, count: needs.count)
        foundDependency = Array(repeating: false, count: needs.count)
        plainHoldsTurn = Array(repeating: false, count: needs.count)
        gates = Array(repeating: .none, count: needs.count)
        suspensionsLeft = suspensions
        mayShutDown = shutsDown
        _ = scheduler.setWidth(width)
    }

    func ticket(_ index: Int) -> UInt64 { UInt64(index + 1) }

    func index(of operation: Operation) -> Int {
        operations.firstIndex { $0 === operation }!
    }

    func async(_ index: Int) -> AsyncOperation { operations[index] as! AsyncOperation }

    // MARK: Performing the scheduler's actions, as the queue does

    mutating func perform(_ letThrough: QueueScheduler.LetThrough) {
        if scheduler.isSuspended && !letThrough.proceed.isEmpty {
            violations.append("let operations go on while suspended")
        }
        if shuttingDown && !letThrough.proceed.isEmpty {
            violations.append("let operations go on after the shut-down began, before its sweep")
        }
        handOff(letThrough.handOff)
        _ = scheduler.gaveToFoundation(letThrough.handOff)
        if letThrough.deliversOutbox {
            var delivery = scheduler.takeOutbox(given: [])
            while !delivery.next.isEmpty {
                var givenUp: [UInt64] = []
                for turn in delivery.plainTurns {
                    let index = index(of: turn.operation)
                    if needs[index] == .plainWaiting {
                        givenUp.append(turn.ticket) // it waits for dependencies: the turn goes on once Foundation has it
                        gates[index] = .waitingForDependencies
                    } else {
                        plainHoldsTurn[index] = true // ready: it keeps the turn until it left
                    }
                }
                handOff(delivery.next)
                for ticket in givenUp {
                    perform(scheduler.turnEnded(ticket: ticket))
                }
                delivery = scheduler.takeOutbox(given: delivery.next)
            }
        }
        for onward in letThrough.onward { // in the order let through, as the queue goes on
            switch onward {
            case let .proceed(operation): proceed(index(of: operation))
            case let .openGate(gate): openGate(index(of: gate.operation))
            }
        }
    }

    /// The turn of a plain operation behind a gate came: the gate opens, and it keeps the turn
    /// until it left.
    mutating func openGate(_ index: Int) {
        if gates[index] != .waitingForTurn { violations.append("op\(index)'s gate opened as it waited for dependencies") }
        if shuttingDown || scheduler.isSuspended { violations.append("op\(index)'s gate opened on a suspended queue, or before a shut-down's sweep") }
        gates[index] = .none
        plainHoldsTurn[index] = true
        wentAt[index] = clock
        checkSerialTurnOrder(going: index)
    }

    /// The dependencies of a plain operation behind a gate finished: it asks for its turn.
    mutating func plainDependenciesFinished(_ index: Int) {
        readyAt[index] = clock
        gates[index] = .waitingForTurn
        perform(scheduler.plainOperationReady(GateOperation(holdingBack: operations[index], ticket: ticket(index))))
    }

    /// Operations reach Foundation, in this order.
    mutating func handOff(_ operations: some Sequence<Operation>) {
        for operation in operations {
            let index = index(of: operation)
            if [.handedOff, .started].contains(stages[index]) { violations.append("op\(index) handed off twice") }
            if shuttingDown && [.plain, .plainWaiting, .nothing].contains(needs[index]) {
                violations.append("op\(index), which needs nothing, handed off after the shut-down began, before its sweep")
            }
            stages[index] = .handedOff
            handOffOrder.append(index)
            if wentAt[index] == nil && gates[index] == .none { // a gated one goes as its gate opens
                wentAt[index] = clock
                checkSerialTurnOrder(going: index)
            }
        }
    }

    /// Operations of this queue with Foundation and not gone: those using (or waiting for) a slot.
    var withFoundation: Int {
        stages.enumerated().filter { [.handedOff, .started].contains($0.element) && !needs[$0.offset].isPlain }.count
    }

    /// `AsyncOperation.continueTowardsExecution()`.
    mutating func proceed(_ index: Int) {
        if wentAt[index] == nil {
            wentAt[index] = clock
            checkSerialTurnOrder(going: index)
        }
        guard stages[index] == .inLine else {
            violations.append("op\(index) let through from \(stages[index])")
            return
        }
        if conditionsPassed[index] {
            acquire(index) // parked before its category (or after giving it back)
        } else {
            stages[index] = .evaluatingConditions
        }
    }

    /// Asking for the category, as `AsyncOperation.acquire(_:)` does: parked if suspended or
    /// without a free slot.
    mutating func acquire(_ index: Int) {
        if scheduler.parkUnlessFreeToTakeCategories(async(index), ticket: ticket(index)) == .parked {
            stages[index] = .inLine
        } else {
            stages[index] = .acquiring
        }
    }

    /// A serial queue lets operations go in add order among those ready when one goes.
    mutating func checkSerialTurnOrder(going index: Int) {
        guard scheduler.isSerial, readyAt[index] != nil else { return }
        for earlier in 0..<index where readyAt[earlier].map({ $0 <= clock }) ?? false {
            if wentAt[earlier] == nil && stages[earlier] != .finishedBeforeHandOff {
                violations.append("op\(index) went before op\(earlier), which was ready earlier")
            }
        }
    }

    mutating func clearedToRun(_ index: Int, holdsCategories: Bool) {
        let busy = withFoundation
        switch scheduler.clearedToRun(async(index), ticket: ticket(index), holdsCategories: holdsCategories) {
        case let .handOff(letThrough):
            if holdsCategories && (scheduler.isSuspended || shuttingDown) {
                violations.append("op\(index) handed off holding a category while suspended or before a shut-down's sweep")
            }
            if holdsCategories && busy >= width && width > 0 {
                violations.append("op\(index) handed off holding a category with every slot taken")
            }
            perform(letThrough)
            if !holdsCategories && stages[index] != .handedOff {
                violations.append("op\(index) cleared to run without a category, and not handed off")
            }
        case .giveBackCategories:
            if !scheduler.isSuspended && !shuttingDown && (busy < width || width < 0) {
                violations.append("op\(index) gave back its category on a running queue with a free slot")
            }
            stages[index] = .givingBack
        }
    }

    // MARK: Events

    var possibleEvents: [ExplorationEvent<SchedulerModel>] {
        var events: [ExplorationEvent<SchedulerModel>] = []
        // Adds happen in order: the add order is the ticket order.
        if let next = stages.firstIndex(of: .notAdded) {
            events.append(ExplorationEvent("add op\(next)") { $0.add(next) })
        }
        for index in needs.indices {
            switch stages[index] {
            case .waitingForDependencies:
                events.append(ExplorationEvent("deps op\(index)") { $0.dependenciesFinished(index) })
            case .evaluatingConditions:
                events.append(ExplorationEvent("pass op\(index)") { $0.conditionsPass(index) })
                if holdsTurnFromAdd[index] && !foundDependency[index] {
                    events.append(ExplorationEvent("dependency found op\(index)") { $0.findDependency(index) })
                }
            case .acquiring:
                events.append(ExplorationEvent("grant op\(index)") { $0.clearedToRun(index, holdsCategories: true) })
            case .givingBack:
                events.append(ExplorationEvent("park op\(index)") { $0.acquire(index) })
            case .handedOff where !needs[index].isPlain:
                events.append(ExplorationEvent("start op\(index)") { $0.start(index) })
                events.append(ExplorationEvent("leave op\(index)") { $0.leave(index) }) // cancelled: finished unstarted
            case .handedOff where plainHoldsTurn[index]:
                events.append(ExplorationEvent("leave op\(index)") { $0.plainLeft(index) })
            case .handedOff where gates[index] == .waitingForDependencies:
                events.append(ExplorationEvent("deps op\(index)") { $0.plainDependenciesFinished(index) })
            case .started:
                events.append(ExplorationEvent("leave op\(index)") { $0.leave(index) })
            default:
                break
            }
            if !needs[index].isPlain && needs[index] != .nothing, [.waitingForDependencies, .inLine, .evaluatingConditions, .acquiring].contains(stages[index]) {
                events.append(ExplorationEvent("cancel op\(index)") { $0.cancel(index) })
            }
        }
        if scheduler.isSuspended {
            events.append(ExplorationEvent("resume") { $0.perform($0.scheduler.setSuspended(false)) })
        } else if suspensionsLeft > 0 {
            events.append(ExplorationEvent("suspend") { model in
                model.suspensionsLeft -= 1
                model.perform(model.scheduler.setSuspended(true))
            })
        }
        // A shut-down holds everything from its beginning until its sweep (which cancels what
        // waits: here, the cancel events) lets what waits go on.
        if shuttingDown {
            events.append(ExplorationEvent("swept") { model in
                model.shuttingDown = false
                model.perform(model.scheduler.shutDownSwept())
            })
        } else if mayShutDown {
            events.append(ExplorationEvent("shut down") { model in
                model.mayShutDown = false
                model.shuttingDown = true
                model.scheduler.shutDownBegan()
            })
        }
        return events.map { event in
            ExplorationEvent(event.name) { model in
                model.clock += 1
                event.apply(&model)
            }
        }
    }

    mutating func add(_ index: Int) {
        let operation = operations[index]
        let isAsync = !needs[index].isPlain
        guard case let .admit(generation, _) = scheduler.beginAdmission(counting: isAsync ? 1 : 0) else { return }
        switch needs[index] {
        case .plain, .plainWaiting, .nothing:
            if needs[index] != .plainWaiting || !scheduler.isSerial {
                readyAt[index] = clock // (a plain one waiting for dependencies is ready once they finish)
            }
            stages[index] = .inLine
            switch scheduler.admitReady(operation, ticket: ticket(index)) {
            case .handOff:
                handOff([operation]) // with the add's batch, not through the scheduler
            case let .kept(letThrough):
                perform(letThrough)
            }
        case .conditions, .category:
            stages[index] = .waitingForDependencies
            if case let .held(letThrough) = scheduler.admitHeld(async(index)) {
                perform(letThrough)
            }
        case .conditionsAtOnce:
            switch scheduler.admitHeld(async(index), askingTurnFor: ticket(index)) {
            case .heldWithTurn:
                if scheduler.isSuspended { violations.append("op\(index) took its turn as it was held on a suspended queue") }
                readyAt[index] = clock
                stages[index] = .inLine
                holdsTurnFromAdd[index] = true
                proceed(index)
            case let .held(letThrough):
                stages[index] = .waitingForDependencies // it asks once its dependencies finished
                perform(letThrough)
            }
        }
        _ = scheduler.endAdmission(generation: generation, cancellationsAtBegin: scheduler.cancellationsOfAll)
    }

    mutating func dependenciesFinished(_ index: Int) {
        readyAt[index] = clock
        if scheduler.requestTurn(for: async(index), ticket: ticket(index), needsSlot: needs[index] == .category) == .proceed {
            stages[index] = .inLine
            proceed(index)
        } else {
            stages[index] = .inLine
            if scheduler.isSerial, scheduler.inProgress.contains(ticket(index)), wentAt[index] == nil {
                // It took its turn, and waits for a free slot in it.
                wentAt[index] = clock
                checkSerialTurnOrder(going: index)
            }
        }
    }

    /// It took its turn as it was held, then found it waits for a dependency after all: the turn
    /// goes back (`turnEnded`), and it asks again once the dependency finished.
    mutating func findDependency(_ index: Int) {
        foundDependency[index] = true
        holdsTurnFromAdd[index] = false
        stages[index] = .waitingForDependencies
        readyAt[index] = nil
        wentAt[index] = nil
        perform(scheduler.turnEnded(ticket: ticket(index)))
    }

    mutating func conditionsPass(_ index: Int) {
        holdsTurnFromAdd[index] = false
        conditionsPassed[index] = true
        if needs[index] == .category {
            acquire(index)
        } else {
            clearedToRun(index, holdsCategories: false)
        }
    }

    mutating func cancel(_ index: Int) {
        stages[index] = .finishedBeforeHandOff
        scheduler.finishedBeforeHandOff(async(index), ticket: ticket(index))
        perform(scheduler.operationLeft(ticket: ticket(index)).letThrough)
    }

    /// Foundation started a handed-off operation (`AsyncOperationQueue.operationDidStart`).
    mutating func start(_ index: Int) {
        stages[index] = .started
        if let letThrough = scheduler.handedOffOperationStarted(ticket: ticket(index)) {
            perform(letThrough)
        }
    }

    /// A handed-off operation finished (started or not) and Foundation let go of it.
    mutating func leave(_ index: Int) {
        stages[index] = .left
        if let letThrough = scheduler.handedOffOperationStarted(ticket: ticket(index)) { // `operationDidFinish`
            perform(letThrough)
        }
        perform(scheduler.operationLeft(ticket: ticket(index)).letThrough)
    }

    /// A plain operation holding a serial queue's turn finished, and its dependents heard of it.
    mutating func plainLeft(_ index: Int) {
        stages[index] = .left
        plainHoldsTurn[index] = false
        perform(scheduler.turnEnded(ticket: ticket(index)))
    }

    // MARK: Invariants

    var key: String {
        let stagesKey = stages.map(\.description).joined(separator: ",")
        let line = scheduler.waiting.map { String($0.ticket) }.joined(separator: ",")
        let turn = scheduler.inProgress.all.sorted().map(String.init).joined(separator: ",")
        let slotLine = scheduler.slotLine.waiters.map { String($0.ticket) }.joined(separator: ",")
        let ready = readyAt.map { $0 == nil ? "n" : "r" }.joined()
        let went = wentAt.map { $0 == nil ? "n" : "w" }.joined()
        let passed = zip(conditionsPassed, zip(holdsTurnFromAdd, foundDependency)).map { passed, turn in
            (passed ? "p" : "n") + (turn.0 ? "t" : "") + (turn.1 ? "f" : "")
        }.joined(separator: "/")
        let plainTurns = plainHoldsTurn.map { $0 ? "t" : "n" }.joined() + gates.map(\.rawValue).joined()
        return "\(plainTurns)|\(stagesKey)|\(line)|\(slotLine)|\(turn)|\(scheduler.isSuspended)|\(suspensionsLeft)|\(shuttingDown)|\(mayShutDown)|\(ready)|\(went)|\(passed)|\(handOffOrder)|\(violations.count)"
    }

    func checkInvariants(_ trail: [String]) {
        #expect(violations.isEmpty, "\(violations) after \(trail)")
        let tickets = scheduler.waiting.map(\.ticket)
        #expect(tickets == tickets.sorted(), "line out of order \(tickets) after \(trail)")
        #expect(Set(tickets).count == tickets.count, "an operation twice in line \(tickets) after \(trail)")
        if scheduler.isSerial {
            let going = stages.enumerated().filter { index, stage in
                [.evaluatingConditions, .acquiring, .givingBack].contains(stage) || [.handedOff, .started].contains(stage) && (!needs[index].isPlain || plainHoldsTurn[index])
            }.count
            #expect(going <= 1, "\(going) operations going (or given to Foundation and not finished) at once on a serial queue after \(trail)")
        }
        for (index, stage) in stages.enumerated() where [.handedOff, .started, .left, .finishedBeforeHandOff].contains(stage) && gates[index] != .waitingForTurn {
            #expect(!scheduler.waiting.contains { $0.operation === operations[index] }, "op\(index) done but in line after \(trail)")
            #expect(!scheduler.slotLine.waiters.contains { $0.operation === operations[index] }, "op\(index) done but in the slot line after \(trail)")
        }
        #expect(scheduler.outbox.isEmpty && !scheduler.outbox.isDraining, "outbox left undelivered after \(trail)")
        #expect(scheduler.handingOff == 0, "\(scheduler.handingOff) hand-offs counted as under way after \(trail)")
    }

    func checkTerminal(_ trail: [String]) {
        #expect(!scheduler.isSuspended && !scheduler.isHeldForShutDown && !shuttingDown)
        #expect(stages.enumerated().allSatisfy { index, stage in
            stage == .left || stage == .finishedBeforeHandOff || (stage == .handedOff && needs[index].isPlain && !plainHoldsTurn[index] && gates[index] == .none)
        }, "stuck: \(stages) after \(trail)")
        #expect(handOffOrder.count == Set(handOffOrder).count, "handed off twice: \(handOffOrder)")
        #expect(scheduler.waiting.isEmpty && scheduler.slotLine.isEmpty && scheduler.held.isEmpty && scheduler.inProgress.isEmpty, "left over after \(trail)")
        #expect(scheduler.isIdle, "a wait for the queue would not end after \(trail)")
        #expect(scheduler.allWaiting.isEmpty, "listed as waiting though Foundation has it, after \(trail)")
    }
}

@Suite struct QueueSchedulerExplorationTests {
    private static let scopes: [(needs: [Needs], suspensions: Int, shutsDown: Bool)] = [
        ([.conditions, .nothing, .category, .plain], 1, false),
        ([.category, .conditions, .category], 2, false),
        ([.nothing, .conditions, .plain], 2, false),
        ([.plainWaiting, .plain, .conditions], 1, false),
        ([.conditions, .category, .nothing, .category], 2, false),
        ([.conditionsAtOnce, .nothing, .conditionsAtOnce], 1, false),
        ([.conditionsAtOnce, .category, .conditions], 1, false),
        ([.plain, .nothing, .category], 1, true),
        ([.conditions, .plainWaiting, .nothing], 0, true),
    ]

    /// Serial, two slots, and Foundation's default (no limit).
    @Test(arguments: [1, 2, -1])
    func everyOrderOfEvents_keepsTheSchedulingInvariants(width: Int) async {
        var total = 0
        for scope in Self.scopes {
            let report = await offThePool {
                exploreEveryOrder(
                    from: SchedulerModel(scope.needs, width: width, suspensions: scope.suspensions, shutsDown: scope.shutsDown),
                    events: \.possibleEvents,
                    key: \.key,
                    check: { $0.checkInvariants($1) },
                    checkTerminal: { $0.checkTerminal($1) }
                )
            }
            #expect(report.terminalStates > 0, "QueueScheduler exploration, width \(width) \(scope.needs.map(\.rawValue)), \(scope.suspensions) suspension(s), shut-down \(scope.shutsDown): \(report)")
            total += report.states
        }
        #expect(total > 1_000) // the scopes really branch
    }
}
