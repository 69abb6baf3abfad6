import Foundation
@testable import Operations
import Testing

// The open-addressing set of the scheduler's hot paths, keyed by value (the tickets under way).

@Suite struct FibonacciSetTests {
    @Test func tickets_sequentialAndScattered_agreeWithASet() {
        var tickets = FibonacciSet<TicketKeying>()
        var expected = Set<UInt64>()
        var random = SystemRandomNumberGenerator()
        for step in 0..<20_000 {
            // Mostly the next tickets in order, as a queue hands them out, some far apart.
            let ticket = Bool.random(using: &random) ? UInt64(step / 2) : UInt64.random(in: 0...UInt64(step + 10), using: &random)
            if Int.random(in: 0..<3, using: &random) < 2 {
                tickets.insert(ticket)
                expected.insert(ticket)
            } else {
                #expect(tickets.remove(ticket) == (expected.remove(ticket) != nil))
            }
            guard tickets.count == expected.count, tickets.contains(ticket) == expected.contains(ticket) else {
                Issue.record("disagrees with a Set at step \(step)")
                return
            }
        }
        #expect(tickets.all.sorted() == expected.sorted())
        for ticket in expected {
            tickets.remove(ticket)
        }
        #expect(tickets.isEmpty && !tickets.contains(0))
    }

    @Test func aCopy_keepsItsMembers_whenTheOriginalGrows() {
        var original = FibonacciSet<TicketKeying>()
        (0..<6).forEach { original.insert(UInt64($0)) }
        let copy = original
        (6..<100).forEach { original.insert(UInt64($0)) } // grows several times past the copy's table
        #expect(copy.all.sorted() == (0..<6).map(UInt64.init))
        #expect(original.all.sorted() == (0..<100).map(UInt64.init))
    }

    @Test func aReservedTableNobodyUsed_isReleased() {
        var tickets = FibonacciSet<TicketKeying>()
        tickets.reserveCapacity(forAdding: 10_000)
        #expect(tickets.tableSize >= 20_000)
        tickets.releaseTableIfEmpty()
        #expect(tickets.tableSize == 0)
        tickets.insert(1)
        tickets.releaseTableIfEmpty() // not empty: kept
        #expect(tickets.contains(1))
    }
}
