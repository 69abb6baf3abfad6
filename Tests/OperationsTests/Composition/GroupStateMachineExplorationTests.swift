import Foundation
@testable import Operations
import Testing
import TestSupport

// Every order of events for small scopes of a group's bookkeeping, without threads: children
// admitted and finishing (some with errors), the group executing, or finishing without executing
// (cancelled before it started) and draining its children. The model plays `GroupOperation`'s
// part; the invariants are checked in every state.

private struct GroupModel {
    var machine = GroupStateMachine()
    /// Children the scope may still admit; each finishes with an error when `failing` says so.
    var childrenLeft: Int
    var failing: Set<Int>
    var admitted = 0
    var unfinished: [Int] = []
    var finishedChildren: [Int] = []
    var executed = false
    var cancelledBeforeStart = false
    var finishDeliveries = 0
    var deliveredErrors: [String] = []
    var violations: [String] = []

    init(children: Int, failing: Set<Int>) {
        childrenLeft = children
        self.failing = failing
    }

    mutating func perform(_ action: GroupStateMachine.Action) {
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
        if (machine.finished() == .drainChildren) != !executed { violations.append("finished() misreports whether it executed") }
    }

    var possibleEvents: [ExplorationEvent<GroupModel>] {
        var events: [ExplorationEvent<GroupModel>] = []
        let open = finishDeliveries == 0 && !machine.isDone
        if childrenLeft > 0 && open {
            events.append(ExplorationEvent("admit") { model in
                model.childrenLeft -= 1
                _ = model.machine.childAdmitted()
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
                model.perform(model.machine.executionBegan())
            })
            events.append(ExplorationEvent("cancel before start") { model in
                model.cancelledBeforeStart = true
                switch model.machine.holdFinishWithoutExecuting() {
                case .doNotHold:
                    model.deliver([])
                case .drainChildren:
                    break
                case let .deliverHeldFinish(childErrors):
                    model.deliver(childErrors)
                }
            })
        }
        return events
    }

    var key: String {
        "\(childrenLeft)|\(unfinished)|\(finishedChildren)|\(executed)|\(cancelledBeforeStart)|\(finishDeliveries)|\(machine.phase)|\(violations.count)"
    }

    func checkInvariants(_ trail: [String]) {
        #expect(violations.isEmpty, "\(violations) after \(trail)")
        #expect(finishDeliveries <= 1, "finished \(finishDeliveries) times after \(trail)")
        #expect(machine.unfinishedChildren == unfinished.count, "counts \(machine.unfinishedChildren) unfinished, model \(unfinished.count) after \(trail)")
        #expect(machine.admittedChildren == admitted)
    }

    func checkTerminal(_ trail: [String]) {
        #expect(finishDeliveries == 1 || (!executed && !cancelledBeforeStart), "not finished exactly once after \(trail)")
        if finishDeliveries == 1 { // executed or not, the group reports every child's errors
            let expected = finishedChildren.filter(failing.contains).map { "\(StubError("child\($0)"))" }
            #expect(deliveredErrors == expected, "errors \(deliveredErrors), expected \(expected) after \(trail)")
        }
    }
}

@Suite struct GroupStateMachineExplorationTests {
    @Test func everyOrderOfEvents_finishesTheGroupOnceAfterItsChildren() {
        var total = 0
        for (children, failing) in [(0, Set<Int>()), (2, [1]), (3, [0, 2]), (4, [1, 2]), (5, [0, 3])] {
            let report = exploreEveryOrder(
                from: GroupModel(children: children, failing: failing),
                events: \.possibleEvents,
                key: \.key,
                check: { $0.checkInvariants($1) },
                checkTerminal: { $0.checkTerminal($1) }
            )
            #expect(report.terminalStates > 0, "GroupStateMachine exploration, \(children) children (\(failing.count) failing): \(report)")
            total += report.states
        }
        #expect(total > 500) // the scopes really branch
    }
}
