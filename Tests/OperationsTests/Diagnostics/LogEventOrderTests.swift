@testable import Operations
import Testing

/// One operation's log events are heard one at a time, in the order they were made, and a
/// `waiting` snapshot overtaken by a later event is dropped.
@Suite struct LogEventOrderTests {
    private func event(_ kind: OperationLogEvent.Kind) -> OperationLogEvent {
        OperationLogEvent(operationName: "save", queueName: nil, kind: kind)
    }

    private func isDone(_ next: SerialDrain<OperationLogEvent>.Next) -> Bool {
        if case .done = next { true } else { false }
    }

    private func delivered(_ next: SerialDrain<OperationLogEvent>.Next) -> [OperationLogEvent.Kind]? {
        if case let .items(events) = next { events.map(\.kind) } else { nil }
    }

    @Test func anEventMadeWhileNoneIsHeard_isDeliveredByItsMaker() {
        var order = LogEventOrder()
        #expect(order.made(event(.added)) == .deliver)
        #expect(isDone(order.delivered()))
        #expect(order.made(event(.started)) == .deliver)
    }

    @Test func eventsMadeWhileOneIsHeard_goToItsDeliverer_inTheOrderMade() {
        var order = LogEventOrder()
        #expect(order.made(event(.started)) == .deliver)
        #expect(order.made(event(.cancelled)) == .leftToTheDeliverer)
        #expect(order.made(event(.produced("next"))) == .leftToTheDeliverer)

        #expect(delivered(order.delivered()) == [.cancelled, .produced("next")])
        #expect(order.made(event(.finished(errors: []))) == .leftToTheDeliverer) // still delivering
        #expect(delivered(order.delivered()) == [.finished(errors: [])])
        #expect(isDone(order.delivered()))
    }

    @Test func anEventMadeAfterTheFinish_isDropped_whoeverDelivers() {
        var order = LogEventOrder()
        #expect(order.made(event(.started)) == .deliver)
        #expect(order.made(event(.finished(errors: []))) == .leftToTheDeliverer)
        #expect(order.made(event(.categoriesGranted(["x"]))) == .afterTheFinish) // a grant on its way
        #expect(delivered(order.delivered()) == [.finished(errors: [])])
        #expect(isDone(order.delivered()))
        #expect(order.made(event(.waiting([.dependency("fetch")]))) == .afterTheFinish)
        #expect(isDone(order.delivered()))
    }

    @Test func aSnapshotOvertakenByAnotherEvent_isStale_andCountsForNothing() {
        var order = LogEventOrder()
        let mark = order.eventsMade
        #expect(order.made(event(.started)) == .deliver)
        #expect(order.made(event(.waiting([.dependency("fetch")])), madeSince: mark) == .stale)
        #expect(order.eventsMade == mark + 1)
        #expect(isDone(order.delivered())) // the stale event was not left to the deliverer either
    }

    @Test func aSnapshotNothingOvertook_isMade_andLaterSnapshotsMarkAfterIt() {
        var order = LogEventOrder()
        #expect(order.made(event(.added)) == .deliver)
        let mark = order.eventsMade
        #expect(order.made(event(.waiting([.dependency("fetch")])), madeSince: mark) == .leftToTheDeliverer)
        #expect(order.made(event(.waiting([.dependency("fetch")])), madeSince: mark) == .stale)
        #expect(delivered(order.delivered()) == [.waiting([.dependency("fetch")])])
    }

    @Test func eventsMadeBeforeTheAdd_areHeardRightAfterIt_andTheMissedCancelBeforeThem() {
        var order = LogEventOrder(waitsForAdded: true)
        #expect(order.made(event(.cancelled)) == .leftToTheDeliverer) // a cancel racing the add
        #expect(order.made(event(.finished(errors: []))) == .leftToTheDeliverer)
        #expect(order.added(event(.added), thenMissed: event(.cancelled)) == .deliver)
        #expect(order.made(event(.categoriesGranted(["x"]))) == .afterTheFinish)
        #expect(delivered(order.delivered()) == [.added, .cancelled, .cancelled, .finished(errors: [])])
        #expect(isDone(order.delivered()))
        #expect(order.eventsMade == 4)
    }

    @Test func anOrderWaitingForTheAdd_deliversTheAddAtOnce_whenItComesFirst() {
        var order = LogEventOrder(waitsForAdded: true)
        #expect(order.added(event(.added), thenMissed: nil) == .deliver)
        #expect(delivered(order.delivered()) == [.added])
        #expect(isDone(order.delivered()))
        #expect(order.made(event(.cancelled)) == .deliver)
    }

    @Test func eventsMadeBeforeAnAddThatIsNotHeard_areHeardOnceItHappens() {
        var order = LogEventOrder(waitsForAdded: true)
        #expect(order.made(event(.cancelled)) == .leftToTheDeliverer)
        #expect(order.added(nil, thenMissed: nil) == .deliver) // below the logger's level, or refused
        #expect(delivered(order.delivered()) == [.cancelled])
        #expect(isDone(order.delivered()))
        #expect(order.made(event(.finished(errors: []))) == .deliver)
    }

    @Test func anAddWithNothingToHear_leavesNobodyDelivering() {
        var order = LogEventOrder(waitsForAdded: true)
        #expect(order.added(nil, thenMissed: nil) == .leftToTheDeliverer)
        #expect(order.made(event(.started)) == .deliver)
    }
}
