@testable import Operations
import Testing

// The line each mutually exclusive category keeps its waiters in.

@Suite struct TicketLineTests {
    private final class Waiter {}

    private func place(_ ticket: UInt64) -> LinePlace {
        LinePlace(root: ticket, ticket: ticket)
    }

    @Test func waitersLeaveInPlaceOrder_whateverOrderTheyArrivedIn() {
        var line = TicketLine<UInt64>()
        for ticket: UInt64 in [3, 1, 4, 2, 5] {
            line.insert(ticket, place: place(ticket))
        }
        var departed: [UInt64] = []
        while !line.isEmpty {
            departed.append(line.removeFirst())
        }
        #expect(departed == [1, 2, 3, 4, 5])
    }

    @Test func removingByPlace_takesOutThatWaiterOnly() {
        var line = TicketLine<UInt64>()
        for ticket: UInt64 in 1...4 {
            line.insert(ticket, place: place(ticket))
        }
        #expect(line.remove(place: place(3)) == 3)
        #expect(line.remove(place: place(3)) == nil)
        #expect(line.remove(place: place(1)) == 1)
        #expect(line.first?.element == 2)
        #expect(line.count == 2)
    }

    @Test func aWaiterAskingTwice_keepsItsPlace_andIsNotMadeAgain() {
        var line = TicketLine<Int>()
        var made = 0
        func waiter(_ value: Int) -> Int {
            made += 1
            return value
        }
        let first = line.insert(waiter(2), place: place(2))
        let second = line.insert(waiter(4), place: place(4))

        // Asking again, at the back and in the middle, and a newcomer in between
        let againAtTheBack = line.insert(waiter(40), place: place(4))
        let againInTheMiddle = line.insert(waiter(20), place: place(2))
        let newcomer = line.insert(waiter(3), place: place(3))

        #expect(first && second && newcomer)
        #expect(!againAtTheBack && !againInTheMiddle)

        #expect(made == 3)
        #expect(line.count == 3)
        #expect(line.elements == [2, 3, 4])
    }

    @Test func askingTwice_afterOthersDeparted_findsThePlaceAmongTheRemaining() {
        var line = TicketLine<Int>()
        for ticket: UInt64 in 1...5 {
            line.insert(Int(ticket), place: place(ticket))
        }
        _ = line.removeFirst()
        _ = line.removeFirst() // 1 and 2 left their slots behind, before the head

        let third = line.insert(30, place: place(3)) // now first in line
        let fourth = line.insert(40, place: place(4)) // found by the search
        let firstAgain = line.insert(1, place: place(1)) // gone, so it comes back, at the front

        #expect(!third && !fourth && firstAgain)
        #expect(line.elements == [1, 3, 4, 5])
    }

    @Test func aDepartedWaiter_isNotKeptAlive_byTheLine() {
        // Given a long line (long enough that popping does not compact it at once)
        var line = TicketLine<Waiter>()
        weak var departed: Waiter?
        do {
            let first = Waiter()
            departed = first
            line.insert(first, place: place(1))
        }
        for ticket: UInt64 in 2...200 {
            line.insert(Waiter(), place: place(ticket))
        }

        // When the first waiter leaves and the caller lets go of it
        _ = line.removeFirst()

        // Then nothing holds it any more, though others still wait
        #expect(departed == nil)
        #expect(line.count == 199)
    }

    @Test func positions_findAndUpdateAWaiterInPlace() throws {
        var line = TicketLine<Int>()
        for ticket: UInt64 in 1...3 {
            line.insert(Int(ticket), place: place(ticket))
        }
        let position = try #require(line.position(of: place(2)))
        line.update(at: position) { $0 *= 10 }
        #expect(line.remove(place: place(2)) == 20)
        #expect(line.position(of: place(7)) == nil)
        #expect(line.position(of: place(1)) == line.firstPosition)
    }

    /// The first waiter's place and a look at it, as `first` tells them, through every way the
    /// front of the line moves: arrivals out of order, departures, and the compaction after many.
    @Test func theFirstWaitersPlaceAndALookAtIt_agreeWithFirst() {
        var line = TicketLine<Int>()
        #expect(line.firstPlace == nil)
        #expect(!line.firstSatisfies { _ in true })

        for ticket: UInt64 in [5, 3, 4] {
            line.insert(Int(ticket), place: place(ticket))
        }
        #expect(line.firstPlace == place(3))
        #expect(line.firstSatisfies { $0 == 3 } && !line.firstSatisfies { $0 == 5 })

        for ticket: UInt64 in 6...200 {
            line.insert(Int(ticket), place: place(ticket))
        }
        for departed in 3...150 { // past 64 departures: the line compacts
            #expect(line.removeFirst() == departed)
            #expect(line.firstPlace == line.first?.place)
            #expect(line.firstSatisfies { $0 == departed + 1 })
        }
        while !line.isEmpty {
            _ = line.removeFirst()
        }
        #expect(line.firstPlace == nil)
        #expect(!line.firstSatisfies { _ in true })
    }
}
