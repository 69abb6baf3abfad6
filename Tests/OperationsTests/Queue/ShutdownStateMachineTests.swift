import Foundation
@testable import Operations
import Testing
import TestSupport

// Every order of events of a queue's shut-down for up to three operations, without threads: the
// adds in flight ending, listeners registered, operations finishing, the grace period ending and
// the queue emptying. The model plays `QueueShutdown`'s part.

private struct ShutdownModel {
    var machine = ShutdownStateMachine()
    let operations: Int
    /// Listeners registered so far, and operations finished among them.
    var listened = 0
    var finished = 0
    var listenersComplete = false
    var drainRequested = false
    var cancelledRunning = 0
    var awaitingEmptyQueue = false
    var gracePeriodEnded = false

    mutating func perform(_ action: ShutdownStateMachine.Action) {
        switch action {
        case .none: break
        case let .sweep(cancelRunning):
            drainRequested = true
            if cancelRunning { cancelledRunning += 1 }
        case .cancelRunning:
            #expect(listenersComplete, "running operations cancelled while the sweep ran")
            cancelledRunning += 1
        case .awaitEmptyQueue:
            #expect(!awaitingEmptyQueue, "the end was announced twice")
            awaitingEmptyQueue = true
        }
    }

    var key: String {
        "\(machine.state) \(listened) \(finished) \(listenersComplete) \(drainRequested) \(cancelledRunning) \(awaitingEmptyQueue) \(gracePeriodEnded)"
    }

    var events: [ExplorationEvent<ShutdownModel>] {
        var events: [ExplorationEvent<ShutdownModel>] = []
        if !drainRequested {
            events.append(.init("admissionsEnded") { $0.perform($0.machine.admissionsEnded()) })
        }
        if drainRequested, !listenersComplete {
            if listened < operations {
                events.append(.init("listen") { model in
                    model.machine.willListen()
                    model.listened += 1
                })
            } else {
                events.append(.init("sweepEnded") { model in
                    model.listenersComplete = true
                    model.perform(model.machine.sweepEnded())
                })
            }
        }
        if finished < listened {
            events.append(.init("finished") { model in
                model.finished += 1
                model.perform(model.machine.operationFinished())
            })
        }
        if !gracePeriodEnded {
            events.append(.init("graceEnded") { model in
                model.gracePeriodEnded = true
                model.perform(model.machine.gracePeriodEnded())
            })
        }
        if awaitingEmptyQueue, !machine.isComplete {
            events.append(.init("queueEmptied") { $0.machine.queueEmptied() })
        }
        return events
    }
}

@Suite struct ShutdownStateMachineTests {
    @Test(arguments: 0...3) func everyOrder_completesOnce_afterEveryOperationFinished_andCancelsRunningOnlyOnceAfterTheGracePeriod(operations: Int) {
        let report = exploreEveryOrder(
            from: ShutdownModel(operations: operations),
            events: \.events,
            key: \.key,
            check: { model, trail in
                #expect(model.cancelledRunning <= 1, "running operations cancelled twice: \(trail)")
                if model.cancelledRunning == 1 {
                    #expect(model.gracePeriodEnded, "running operations cancelled before the grace period ended: \(trail)")
                }
                if model.gracePeriodEnded, model.listenersComplete, case .draining = model.machine.state {
                    #expect(model.cancelledRunning == 1, "operations still run past the grace period: \(trail)")
                }
                if model.awaitingEmptyQueue {
                    #expect(model.listenersComplete && model.finished == model.operations, "the end came before every operation finished: \(trail)")
                }
            },
            checkTerminal: { model, trail in
                #expect(model.machine.isComplete, "stuck: \(trail) in \(model.machine.state)")

            }
        )
        #expect(report.terminalStates > 0)
    }

    @Test func aGracePeriodEndingWhileAddsAreInFlight_cancelsTheRunningOnesWithTheDrain() {
        var machine = ShutdownStateMachine()
        #expect(machine.gracePeriodEnded() == .none)
        #expect(machine.admissionsEnded() == .sweep(cancelRunning: true))
        #expect(machine.gracePeriodEnded() == .none)
    }
}
