import Foundation
@testable import Operations
import Testing

// Single events of the queue's scheduler, without threads (the exploration tests walk every
// order of events).

@Suite struct QueueSchedulerTests {
    @Test func batchAddedToASuspendedQueue_reservesItsTableOnce_andABatchRefusedLeavesNoTable() {
        var scheduler = QueueScheduler()
        _ = scheduler.setSuspended(true)
        guard case let .admit(generation, _) = scheduler.beginAdmission(counting: 5_000) else {
            Issue.record("expected the add to begin")
            return
        }
        #expect(scheduler.held.tableSize >= 10_000, "room for the whole batch, reserved when the add begins")
        // Every operation of the batch was refused (none reached the scheduler): they leave again.
        for _ in 0..<5_000 {
            _ = scheduler.refusedAtAdd()
        }
        _ = scheduler.endAdmission(generation: generation, cancellationsAtBegin: scheduler.cancellationsOfAll)
        #expect(scheduler.held.isEmpty && scheduler.held.tableSize == 0, "the unused room is given back when the add ends")
    }

    /// `cancelAllOperations()` during an add: the add cancels its own operations as it ends;
    /// one that began after the cancellation does not.
    @Test func anAddInFlightAcrossACancellationOfAll_cancelsItsOperations_andOneBegunAfterDoesNot() {
        var scheduler = QueueScheduler()
        let before = scheduler.cancellationsOfAll
        guard case let .admit(generation, _) = scheduler.beginAdmission(counting: 1) else {
            Issue.record("expected the add to begin")
            return
        }
        scheduler.cancellingAll()
        let after = scheduler.cancellationsOfAll
        guard case let .admit(laterGeneration, _) = scheduler.beginAdmission(counting: 1) else {
            Issue.record("expected the later add to begin")
            return
        }

        guard case let .ended(_, cancelsFirst) = scheduler.endAdmission(generation: generation, cancellationsAtBegin: before),
              case let .ended(_, cancelsLater) = scheduler.endAdmission(generation: laterGeneration, cancellationsAtBegin: after) else {
            Issue.record("expected both adds to end")
            return
        }
        #expect(cancelsFirst)
        #expect(!cancelsLater)
    }

    /// An add that joins one in flight (a condition's dependency, added as its operation is) is
    /// part of it: a barrier placed since waits for both, and its gate opens once both ended.
    @Test func addJoiningOneInFlight_isWaitedForByABarrierPlacedSince_andKeepsItsGateClosed() {
        var scheduler = QueueScheduler()
        guard case let .admit(generation, nil) = scheduler.beginAdmission(counting: 1) else {
            Issue.record("expected the add to begin, with no barrier")
            return
        }
        let barrier = AsyncOperation()
        let gate = AsyncOperation()
        guard case .place(needsGate: true, previous: nil) = scheduler.placeBarrier(barrier, gate: gate) else {
            Issue.record("expected the barrier to wait for the add in flight")
            return
        }
        scheduler.joinAdmission(of: generation, counting: 1)
        for (end, opensGate) in [("the joined add", false), ("the add it joined", true)] {
            guard case let .joinBarrier(joined) = scheduler.endAdmission(generation: generation, cancellationsAtBegin: scheduler.cancellationsOfAll), joined === barrier else {
                Issue.record("expected the barrier to wait for the operations of \(end)")
                return
            }
            guard case let .ended(gates, _) = scheduler.endAdmission(generation: generation, joined: true, cancellationsAtBegin: scheduler.cancellationsOfAll) else {
                Issue.record("expected \(end) to end")
                return
            }
            #expect(gates.count == (opensGate ? 1 : 0) && gates.allSatisfy { $0 === gate }, "as \(end) ends")
        }
        #expect(scheduler.admissions.isEmpty && scheduler.pendingBarriers.isEmpty, "nothing is left in flight")
    }

    /// A plain operation kept in line by a suspended queue keeps a wait for the queue waiting, as
    /// Foundation's own queue would, until it reaches Foundation.
    @Test func plainOperationKeptWhileSuspended_keepsTheSchedulerBusyUntilGivenToFoundation() {
        var scheduler = QueueScheduler()
        _ = scheduler.setSuspended(true)
        let plain = BlockOperation {}
        guard case .kept = scheduler.admitReady(plain, ticket: 1) else {
            Issue.record("expected a suspended queue to keep the operation")
            return
        }
        guard case let .wait(idle) = scheduler.waitForIdle() else {
            Issue.record("expected a wait for the queue to wait for the kept operation")
            return
        }
        let letThrough = scheduler.setSuspended(false)
        #expect(letThrough.handOff.count == 1 && letThrough.handOff[0] === plain)
        #expect(!scheduler.isIdle, "busy until Foundation has it")
        let woken = scheduler.gaveToFoundation(letThrough.handOff)
        #expect(scheduler.isIdle)
        #expect(woken.semaphores.count == 1 && woken.semaphores[0] === idle)
    }

    /// Operations that need categories and wait for a slot go on by priority, then in add order;
    /// once the queue is made serial, in add order alone.
    @Test(arguments: [false, true])
    func operationsWaitingForASlot_goOnByPriority_orInAddOrderOnceSerial(madeSerial: Bool) {
        var scheduler = QueueScheduler()
        _ = scheduler.setWidth(2)
        _ = scheduler.beginAdmission(counting: 5)
        for ticket in UInt64(1)...2 {
            _ = scheduler.admitReady(AsyncOperation(), ticket: ticket) // running, with the add's batch
        }
        let waiting = (0..<3).map { _ in AsyncOperation() }
        let priorities: [Operation.QueuePriority] = [.low, .normal, .high]
        for (index, operation) in waiting.enumerated() {
            _ = scheduler.admitHeld(operation)
            let passage = scheduler.requestTurn(for: operation, ticket: UInt64(index + 3), needsSlot: true, priority: priorities[index])
            #expect(passage == .parked, "every slot is taken")
        }
        #expect(scheduler.slotLine.waiters.map(\.ticket) == [5, 4, 3])
        if madeSerial {
            _ = scheduler.setWidth(1)
            #expect(scheduler.slotLine.waiters.map(\.ticket) == [3, 4, 5])
            _ = scheduler.operationLeft(ticket: 1) // one running operation is left: no slot is free yet
        }

        // A slot frees up: the first in the line goes on.
        let departure = scheduler.operationLeft(ticket: madeSerial ? 2 : 1)
        #expect(departure.letThrough.proceed.map(ObjectIdentifier.init) == [ObjectIdentifier(madeSerial ? waiting[0] : waiting[2])])
    }

    /// A plain operation behind a gate whose dependencies finished while another operation holds
    /// a serial queue's turn waits in line by its ticket: its gate opens when that turn ends,
    /// before an operation added after it, and it then holds the turn itself.
    @Test func gatedPlainOperationReady_waitsForTheTurn_andGoesBeforeALaterOne() {
        var scheduler = QueueScheduler()
        _ = scheduler.setWidth(1)
        let runner = AsyncOperation()
        #expect(scheduler.requestTurn(for: runner, ticket: 1) == .proceed)
        let gated = GateOperation(holdingBack: BlockOperation {}, ticket: 2)
        let later = AsyncOperation()

        #expect(scheduler.plainOperationReady(gated).isEmpty, "the runner holds the turn")
        #expect(scheduler.requestTurn(for: later, ticket: 3) == .parked)
        let letThrough = scheduler.turnEnded(ticket: 1)

        #expect(letThrough.gatesToOpen.map(\.ticket) == [2])
        #expect(letThrough.proceed.isEmpty, "the later one waits for the gated one's turn")
        #expect(scheduler.holdsTurn(ticket: 2))
        #expect(scheduler.turnEnded(ticket: 2).proceed.map(ObjectIdentifier.init) == [ObjectIdentifier(later)])
    }
}
