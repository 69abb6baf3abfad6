import Foundation
@testable import Operations
import Testing

// The open-addressing set of the scheduler's hot paths, keyed by value (the tickets under way)
// and by address (the held operations).

/// Addresses, spread as the held operations' addresses are.
private enum AddressKeying: FibonacciKeying {
    static func key(of address: UInt) -> UInt64 { OperationIdentityKeying.spread(address: address) }
    static func same(_ address: UInt, _ other: UInt) -> Bool { address == other }
}

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

    /// Objects allocated one after another sit a fixed stride apart. Under Fibonacci hashing
    /// alone some strides piled up in long probe runs (63 units of 16 bytes: 43,117 buckets of
    /// displacement for 10,000 members; 13 units made a chain's removals cost 1,300 instructions).
    @Test(arguments: [16, 208, 336, 528, 880, 1_008, 1_424, 4_096] as [UInt])
    func addressesAFixedStrideApart_spreadOverTheTable(stride: UInt) {
        var addresses = FibonacciSet<AddressKeying>()
        let base = UInt(truncatingIfNeeded: 0x7F3A_1C20_4000 as UInt64) // a heap address, on 32 bits too
        for index in 0..<10_000 {
            addresses.insert(base + UInt(index) * stride)
        }
        #expect(addresses.count == 10_000)
        #expect(addresses.totalDisplacement < 2 * addresses.count, "probe runs too long: \(addresses.totalDisplacement) for \(addresses.count) members")
        let removed = (0..<10_000).filter { index in addresses.remove(base + UInt(index) * stride) }
        #expect(removed.count == 10_000 && addresses.isEmpty)
    }
}
