import Foundation
@testable import Operations
import Testing

@Suite struct SlotLineTests {
    @Test func waitersLeaveByPriorityThenTicket_andCanBeTakenOutByTicketAlone() {
        var line = SlotLine()
        let operations = (0..<4).map { _ in AsyncOperation() }
        let priorities: [Operation.QueuePriority] = [.low, .normal, .high, .normal]
        for (index, operation) in operations.enumerated() {
            line.insert(.proceed(operation, ticket: UInt64(index + 1)), priority: priorities[index])
        }
        line.insert(.proceed(operations[0], ticket: 1), priority: .veryHigh) // parked twice: keeps its place
        #expect(line.waiters.map(\.ticket) == [3, 2, 4, 1])

        #expect(line.remove(ticket: 4)?.ticket == 4)
        #expect(line.remove(ticket: 4) == nil)
        #expect(!line.contains(ticket: 4) && line.contains(ticket: 1))
        #expect(line.removeFirst()?.ticket == 3)
        #expect(line.removeFirst()?.ticket == 2)
        #expect(line.removeFirst()?.ticket == 1)
        #expect(line.removeFirst() == nil && line.isEmpty)
    }

    @Test func namedPriorities_rankFromVeryHighToVeryLow() {
        let ranks = [Operation.QueuePriority.veryHigh, .high, .normal, .low, .veryLow].map(SlotLine.rank(of:))
        #expect(ranks == [0, 4, 8, 12, 16])
    }

    @Test func aWaiterWhosePriorityChanges_movesToItsNewPlace_andOneNotWaitingIsLeftAlone() {
        var line = SlotLine()
        for ticket in UInt64(1)...3 {
            line.insert(.proceed(AsyncOperation(), ticket: ticket), priority: .normal)
        }
        line.reprioritize(ticket: 3, priority: .high)
        line.reprioritize(ticket: 1, priority: .low)
        line.reprioritize(ticket: 9, priority: .veryHigh) // not waiting
        #expect(line.waiters.map(\.ticket) == [3, 2, 1])
        line.forgetPriorities()
        #expect(line.waiters.map(\.ticket) == [1, 2, 3])
    }
}
