import Foundation
@testable import Operations
import Testing
import TestSupport

// Every order of events for small scopes of a group's bookkeeping, without threads: children
// admitted and finishing (some with errors), the group executing, or finishing without executing
// (cancelled before it started) and draining its children, or finished by hand while it executes
// (`finish(with:)`) and draining them then. The model plays `GroupOperation`'s
// part; the invariants are checked in every state.

private struct GroupModel {
    var machine = GroupStateMachine<Int>()
    /// Children the scope may still admit; each finishes with an error when `failing` says so.
    var childrenLeft: Int
    var failing: Set<Int>
    var admitted = 0
    var unfinished: [Int] = []
    var finishedChildren: [Int] = []
    var executed = false
    var cancelledBeforeStart = false
    /// Finished by hand (`finish(with:)`) after it executed: it holds its finish until its
    /// children drain.
    var finishedByHand = false
    /// Children the group cancelled by name (admitted while it waited, and it never executed).
    var cancelledByName: Set<Int> = []
    /// Children admitted as never to run (the group drains already): cancelled when admitted.
    var cancelledOnAdmission: Set<Int> = []
    /// Children not finished when the group was stopped before it started: each must be
    /// cancelled by name (it may still be on its way into the queue).
    var unfinishedWhenStopped: Set<Int> = []
    var finishDeliveries = 0
    var deliveredErrors: [String] = []
    var violations: [String] = []

    init(children: Int, failing: Set<Int>) {
        childrenLeft = children
        self.failing = failing
    }

    mutating func perform(_ action: GroupStateMachine<Int>.Action) {
        switch action {
        case .none:
            break
        case let .finish(errors):
            deliver(errors)
        case let .deliverHeldFinish(childErrors):
            deliver(childErrors) // a finish held back: the children's errors, then the group's own
        }
    }

    mutating func deliver(_ errors: [any Error]) {
        finishDeliveries += 1
        deliveredErrors = errors.map { "\($0)" }
        if !unfinished.isEmpty { violations.append("finished with children \(unfinished) unfinished") }
        let finish = machine.finished()
        if case let .drainChildren(cancel) = finish {
            cancelledByName.formUnion(cancel)
        }
        if case let .drainChildren(cancel) = finish, executed, !cancel.isEmpty { violations.append("finished() cancels children of a group that executed by name") }
        if case .none = finish, !executed { violations.append("finished() misreports whether it executed") }
    }

    var possibleEvents: [ExplorationEvent<GroupModel>] {
        var events: [ExplorationEvent<GroupModel>] = []
        let open = finishDeliveries == 0 && !machine.isDone
        if childrenLeft > 0 && open {
            events.append(ExplorationEvent("admit") { model in
                model.childrenLeft -= 1
                let admission = model.machine.childAdmitted(model.admitted, groupIsCancelled: false)
                if admission == .countedNeverToRun {
                    model.cancelledOnAdmission.insert(model.admitted)
                } else if model.cancelledBeforeStart {
                    model.violations.append("child\(model.admitted), admitted while the group drains, may run (\(admission))")
                }
                model.unfinished.append(model.admitted)
                model.admitted += 1
            })
        }
        for child in unfinished { // a child may finish any time (cancelled while the group waits)
            events.append(ExplorationEvent("finish child\(child)") { model in
                model.unfinished.removeAll { $0 == child }
                model.finishedChildren.append(child)
                let errors: [any Error] = model.failing.contains(child) ? [StubError("child\(child)")] : []
                model.perform(model.machine.childFinished(errors: errors))
            })
        }
        if !executed && !cancelledBeforeStart && open {
            events.append(ExplorationEvent("execute") { model in
                model.executed = true
                let start = model.machine.executionBegan()
                if start.released != Array(0..<model.admitted) {
                    model.violations.append("executionBegan() released \(start.released), not the \(model.admitted) children admitted while the group waited")
                }
                model.perform(start.action)
            })
            events.append(ExplorationEvent("cancel before start") { model in
                model.cancelledBeforeStart = true
                model.unfinishedWhenStopped = Set(model.unfinished)
                switch model.machine.holdFinish() {
                case .doNotHold:
                    model.deliver([])
                case let .drainChildren(cancel):
                    model.cancelledByName.formUnion(cancel)
                case let .deliverHeldFinish(childErrors, _):
                    model.deliver(childErrors)
                case .interruptChildren:
                    model.violations.append("a group that never executed interrupts its children as if they ran")
                }
            })
        }
        if executed && open && !finishedByHand {
            events.append(ExplorationEvent("finish by hand") { model in
                model.finishedByHand = true
                switch model.machine.holdFinish() {
                case .doNotHold:
                    model.deliver([]) // nothing left to wait for (a violation if children are)
                case .drainChildren:
                    model.violations.append("a group that executed drains its children as if they never ran")
                case .interruptChildren:
                    if !model.machine.stopsChildren { model.violations.append("interrupting children does not stop them") }
                case let .deliverHeldFinish(childErrors, _):
                    model.deliver(childErrors)
                }
            })
        }
        return events
    }

    var key: String {
        "\(childrenLeft)|\(unfinished)|\(finishedChildren)|\(executed)|\(cancelledBeforeStart)|\(finishedByHand)|\(finishDeliveries)|\(machine.phase)|\(violations.count)|\(cancelledByName.sorted())|\(cancelledOnAdmission.sorted())|\(unfinishedWhenStopped.sorted())"
    }

    func checkInvariants(_ trail: [String]) {
        #expect(violations.isEmpty, "\(violations) after \(trail)")
        #expect(finishDeliveries <= 1, "finished \(finishDeliveries) times after \(trail)")
        #expect(machine.unfinishedChildren == unfinished.count, "counts \(machine.unfinishedChildren) unfinished, model \(unfinished.count) after \(trail)")
        #expect(machine.admittedChildren == admitted)
    }

    func checkTerminal(_ trail: [String]) {
        if cancelledBeforeStart { // never executed: no child may run
            #expect(unfinishedWhenStopped.isSubset(of: cancelledByName), "children \(unfinishedWhenStopped.subtracting(cancelledByName)) of a group stopped before it started were not cancelled after \(trail)")
        }
        #expect(finishDeliveries == 1 || (!executed && !cancelledBeforeStart), "not finished exactly once after \(trail)")
        if finishDeliveries == 1 { // executed or not, the group reports every child's errors
            let expected = finishedChildren.filter(failing.contains).map { "\(StubError("child\($0)"))" }
            #expect(deliveredErrors == expected, "errors \(deliveredErrors), expected \(expected) after \(trail)")
        }
    }
}

@Suite struct GroupStateMachineExplorationTests {
    @Test func everyOrderOfEvents_finishesTheGroupOnceAfterItsChildren() async {
        var total = 0
        for (children, failing) in [(0, Set<Int>()), (2, [1]), (3, [0, 2]), (4, [1, 2]), (5, [0, 3])] {
            let report = await offThePool {
                exploreEveryOrder(
                    from: GroupModel(children: children, failing: failing),
                    events: \.possibleEvents,
                    key: \.key,
                    check: { $0.checkInvariants($1) },
                    checkTerminal: { $0.checkTerminal($1) }
                )
            }
            #expect(report.terminalStates > 0, "GroupStateMachine exploration, \(children) children (\(failing.count) failing): \(report)")
            total += report.states
        }
        #expect(total > 500) // the scopes really branch
    }
}
