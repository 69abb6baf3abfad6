@testable import Operations
import Testing

// The rules of a group's children, without threads: what a child that joins becomes.

@Suite struct GroupStateMachineTests {
    @Test func childJoiningACancelledGroup_isCountedButMustNotRun_inEveryPhaseBeforeItsFinish() {
        var waiting = GroupStateMachine<Int>()
        #expect(waiting.childAdmitted(1, groupIsCancelled: true) == .countedNeverToRun)
        #expect(waiting.unfinishedChildren == 1)

        var executing = GroupStateMachine<Int>()
        _ = executing.childAdmitted(1, groupIsCancelled: false)
        _ = executing.executionBegan()
        #expect(executing.childAdmitted(2, groupIsCancelled: true) == .countedNeverToRun)
        #expect(executing.childAdmitted(3, groupIsCancelled: false) == .counted)
        #expect(executing.unfinishedChildren == 3)
    }

    @Test func childJoiningAFinishedGroup_isTooLate_andMustNotRunOnlyIfTheGroupStoppedItsChildren() {
        var ran = GroupStateMachine<Int>()
        _ = ran.executionBegan()
        _ = ran.finished()
        #expect(ran.childAdmitted(1, groupIsCancelled: false) == .tooLate)
        #expect(ran.childAdmitted(2, groupIsCancelled: true) == .tooLateNeverToRun)
        #expect(ran.unfinishedChildren == 0)

        var neverRan = GroupStateMachine<Int>()
        _ = neverRan.finished()
        #expect(neverRan.childAdmitted(1, groupIsCancelled: false) == .tooLateNeverToRun)
    }

    @Test func childJoiningAGroupDrainingAfterAFinishByHand_mustNotRun_thoughTheGroupIsNotCancelled() {
        var machine = GroupStateMachine<Int>()
        _ = machine.childAdmitted(1, groupIsCancelled: false)
        _ = machine.executionBegan()
        _ = machine.holdFinish()
        #expect(machine.phase == .draining)
        #expect(machine.childAdmitted(2, groupIsCancelled: false) == .countedNeverToRun)
    }
}
