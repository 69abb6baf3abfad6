import Foundation
@testable import Operations
import Testing

// The set a queue holds its waiting operations in, by identity.

@Suite struct HeldOperationsTests {
    @Test func insertAndRemove_keepCountAndContents() {
        var held = HeldOperations()
        let operations = (0..<5).map { _ in AsyncBlockOperation {} }
        operations.forEach { held.insert($0) }
        held.insert(operations[0]) // twice: still once
        #expect(held.count == 5)

        held.remove(operations[1])
        held.remove(operations[3])
        held.remove(operations[3]) // twice: nothing more
        #expect(held.count == 3)
        #expect(Set(held.all.map(ObjectIdentifier.init)) == Set([0, 2, 4].map { ObjectIdentifier(operations[$0]) }))
    }

    @Test func freedSlots_areReused_andAnOperationNotHeldIsLeftAlone() {
        var held = HeldOperations()
        let first = AsyncBlockOperation {}
        let second = AsyncBlockOperation {}
        let stranger = AsyncBlockOperation {}
        held.insert(first)
        held.insert(second)
        held.remove(first)
        let third = AsyncBlockOperation {}
        held.insert(third)
        held.remove(stranger)
        #expect(held.count == 2)
        #expect(Set(held.all.map(ObjectIdentifier.init)) == [ObjectIdentifier(second), ObjectIdentifier(third)])
    }

    @Test func reservedAndGrownTables_keepEveryOperation_andReleaseThemOnce() {
        weak var released: AsyncBlockOperation?
        var held = HeldOperations()
        do {
            let operations = (0..<40).map { _ in AsyncBlockOperation {} }
            released = operations[7]
            operations.prefix(10).forEach { held.insert($0) }
            held.reserveCapacity(forAdding: 1_000) // one grow, far past the doublings
            operations.dropFirst(10).forEach { held.insert($0) } // and a few more
            #expect(held.count == 40)
            #expect(Set(held.all.map(ObjectIdentifier.init)) == Set(operations.map(ObjectIdentifier.init)))
            operations.forEach { held.remove($0) }
            #expect(held.isEmpty)
        }
        #expect(released == nil, "moving entries to a bigger table neither leaks nor over-releases them")
    }

    @Test func randomInsertsAndRemoves_agreeWithASet() {
        // Many collisions and backward shifts: the table must always agree with a plain Set.
        var held = HeldOperations()
        var expected = Set<ObjectIdentifier>()
        let operations = (0..<300).map { _ in AsyncBlockOperation {} }
        var random = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let operation = operations.randomElement(using: &random)!
            if Bool.random(using: &random) {
                held.insert(operation)
                expected.insert(ObjectIdentifier(operation))
            } else {
                held.remove(operation)
                expected.remove(ObjectIdentifier(operation))
            }
            guard held.count == expected.count else {
                Issue.record("count \(held.count), expected \(expected.count)")
                return
            }
        }
        #expect(Set(held.all.map(ObjectIdentifier.init)) == expected)
        operations.forEach { held.remove($0) }
        #expect(held.isEmpty && held.all.isEmpty)
    }

    @Test func emptied_holdsNothing() {
        var held = HeldOperations()
        let operations = (0..<2_000).map { _ in AsyncBlockOperation {} }
        operations.forEach { held.insert($0) }
        operations.forEach { held.remove($0) }
        #expect(held.isEmpty)
        #expect(held.all.isEmpty)
        held.insert(operations[7])
        #expect(held.all.map(ObjectIdentifier.init) == [ObjectIdentifier(operations[7])])
    }
}
