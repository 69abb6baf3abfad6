import Foundation
@testable import Operations
import Testing

/// The composite's rules, checked without threads or operations.
@Suite struct CompositeStateMachineTests {
    private final class Child {}
    private typealias Machine = CompositeStateMachine<Child>

    private static func id(_ child: Child) -> ObjectIdentifier { ObjectIdentifier(child) }

    @Test func serial_launchesOneChildAtATime_thenCompletes() {
        var machine = Machine(mode: .serial, childCount: 2)
        let (first, second) = (Child(), Child())

        let start = machine.start()
        let firstAccepted = machine.launched(first, slot: 0, attempt: 1)
        let afterFirst = machine.childFinished(Self.id(first), failed: false, compositeIsStopping: false)
        let secondAccepted = machine.launched(second, slot: 1, attempt: 1)
        let afterSecond = machine.childFinished(Self.id(second), failed: false, compositeIsStopping: false)

        #expect(start == [.launch(slot: 0, attempt: 1)])
        #expect(firstAccepted == .add && secondAccepted == .add)
        #expect(afterFirst == .record(steps: [.launch(slot: 1, attempt: 1)]))
        #expect(afterSecond == .record(steps: [.complete]))
        #expect(machine.phase == .completed)
    }

    @Test func concurrent_launchesEveryChild_andCompletesWhenAllAreDone() {
        var machine = Machine(mode: .concurrent, childCount: 3)
        let children = (0..<3).map { _ in Child() }

        let start = machine.start()
        let accepted = children.enumerated().map { machine.launched($1, slot: $0, attempt: 1) }
        let afterLast = machine.childFinished(Self.id(children[2]), failed: false, compositeIsStopping: false)
        let afterFailure = machine.childFinished(Self.id(children[0]), failed: true, compositeIsStopping: false)
        let carriedOn = machine.resolve(slot: 0, with: .carryOn, compositeIsStopping: false)
        let afterMiddle = machine.childFinished(Self.id(children[1]), failed: false, compositeIsStopping: false)

        #expect(start == (0..<3).map { .launch(slot: $0, attempt: 1) })
        #expect(accepted == [.add, .add, .add])
        #expect(afterLast == .record(steps: []))
        #expect(afterFailure == .askHandler(slot: 0, attempt: 1))
        #expect(carriedOn == .init(keepsErrors: false, steps: []))
        #expect(afterMiddle == .record(steps: [.complete]))
    }

    @Test func aCancelSeenBeforeItReachesTheMachine_stopsIt_withoutAskingTheHandlerOrCompleting() {
        var machine = Machine(mode: .serial, childCount: 1)
        let child = Child()
        _ = machine.start()
        _ = machine.launched(child, slot: 0, attempt: 1)

        let afterFailure = machine.childFinished(Self.id(child), failed: true, compositeIsStopping: true)
        let live = machine.cancel() // cancel() arrives once the composite's observers heard it

        #expect(afterFailure == .record(steps: []))
        #expect(machine.phase == .cancelled)
        #expect(live.isEmpty)
    }

    @Test func aCancelWhileTheHandlerDecides_dropsItsAnswer_evenBeforeItReachesTheMachine() {
        var machine = Machine(mode: .concurrent, childCount: 2)
        let (first, second) = (Child(), Child())
        _ = machine.start()
        _ = machine.launched(first, slot: 0, attempt: 1)
        _ = machine.launched(second, slot: 1, attempt: 1)
        _ = machine.childFinished(Self.id(second), failed: false, compositeIsStopping: false)
        let asked = machine.childFinished(Self.id(first), failed: true, compositeIsStopping: false)

        let resolution = machine.resolve(slot: 0, with: .carryOn, compositeIsStopping: true)

        #expect(asked == .askHandler(slot: 0, attempt: 1))
        #expect(resolution.steps.isEmpty) // no `.complete`: the completion handler is not called
        #expect(machine.phase == .cancelled)
    }

    @Test func emptyComposite_completesAtStart() {
        var machine = Machine(mode: .concurrent, childCount: 0)
        let start = machine.start()
        #expect(start == [.complete])
    }

    @Test func rerun_launchesTheNextAttempt_andRejectsStaleOnes() {
        var machine = Machine(mode: .serial, childCount: 1)
        let child = Child()
        _ = machine.start()
        _ = machine.launched(child, slot: 0, attempt: 1)
        _ = machine.childFinished(Self.id(child), failed: true, compositeIsStopping: false)

        let rerun = machine.resolve(slot: 0, with: .rerun, compositeIsStopping: false)
        let staleAccepted = machine.launched(Child(), slot: 0, attempt: 1)
        let freshAccepted = machine.launched(Child(), slot: 0, attempt: 2)

        #expect(rerun == .init(keepsErrors: false, steps: [.launch(slot: 0, attempt: 2)]))
        #expect(staleAccepted == .addCancelled)
        #expect(freshAccepted == .add)
    }

    @Test func rerunAfterDelay_launchesOnceTheTimerFires_unlessCancelled() {
        var machine = Machine(mode: .serial, childCount: 1)
        let (child, timer) = (Child(), Child())
        _ = machine.start()
        _ = machine.launched(child, slot: 0, attempt: 1)
        _ = machine.childFinished(Self.id(child), failed: true, compositeIsStopping: false)

        let rerun = machine.resolve(slot: 0, with: .rerun(after: 2), compositeIsStopping: false)
        let timerAccepted = machine.timerCreated(timer, slot: 0)
        let cancelled = machine.cancel().map(Self.id)
        let launchesAfterCancel = machine.delayElapsed(slot: 0, attempt: 2)

        #expect(rerun.steps == [.launchAfter(delay: 2, slot: 0, attempt: 2)])
        #expect(timerAccepted == .add)
        #expect(cancelled == [Self.id(timer)])
        #expect(launchesAfterCancel.isEmpty)
    }

    @Test func rerunAfterDelay_launchesWhenTheTimerFires() {
        var machine = Machine(mode: .serial, childCount: 1)
        let child = Child()
        _ = machine.start()
        _ = machine.launched(child, slot: 0, attempt: 1)
        _ = machine.childFinished(Self.id(child), failed: true, compositeIsStopping: false)
        _ = machine.resolve(slot: 0, with: .rerun(after: 2), compositeIsStopping: false)

        let launches = machine.delayElapsed(slot: 0, attempt: 2)
        let launchesTwice = machine.delayElapsed(slot: 0, attempt: 2)

        #expect(launches == [.launch(slot: 0, attempt: 2)])
        #expect(launchesTwice.isEmpty)
    }

    @Test func cancelAnswer_cancels_andLaterFinishesAreOnlyRecorded() {
        var machine = Machine(mode: .concurrent, childCount: 2)
        let (a, b) = (Child(), Child())
        _ = machine.start()
        _ = machine.launched(a, slot: 0, attempt: 1)
        _ = machine.launched(b, slot: 1, attempt: 1)
        _ = machine.childFinished(Self.id(a), failed: true, compositeIsStopping: false)

        let cancel = machine.resolve(slot: 0, with: .cancel, compositeIsStopping: false)
        let afterB = machine.childFinished(Self.id(b), failed: true, compositeIsStopping: false)

        #expect(cancel == .init(keepsErrors: true, steps: [.cancelComposite]))
        #expect(afterB == .record(steps: []))
        #expect(machine.phase == .cancelled)
    }

    @Test func cancelledWhileResolving_ignoresTheAnswer() {
        var machine = Machine(mode: .serial, childCount: 1)
        let child = Child()
        _ = machine.start()
        _ = machine.launched(child, slot: 0, attempt: 1)
        _ = machine.childFinished(Self.id(child), failed: true, compositeIsStopping: false)
        _ = machine.cancel()

        let rerun = machine.resolve(slot: 0, with: .rerun, compositeIsStopping: false)

        #expect(rerun == .init(keepsErrors: true, steps: []))
    }

    @Test func cancelledBeforeStart_startsNothing() {
        var machine = Machine(mode: .concurrent, childCount: 2)
        let live = machine.cancel()
        let start = machine.start()
        #expect(live.isEmpty)
        #expect(start.isEmpty)
    }

    @Test func unknownOperations_areOnlyRecorded() {
        var machine = Machine(mode: .serial, childCount: 1)
        _ = machine.start()
        let reaction = machine.childFinished(Self.id(Child()), failed: true, compositeIsStopping: false)
        #expect(reaction == .record(steps: []))
    }
}
