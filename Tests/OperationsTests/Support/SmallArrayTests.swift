@testable import Operations
import Testing

// An array that keeps its first element inline: it must behave as an array whatever it holds.

@Suite struct SmallArrayTests {
    private func make(_ elements: [Int]) -> SmallArray<Int> {
        var array = SmallArray<Int>()
        for element in elements {
            array.append(element)
        }
        return array
    }

    @Test(arguments: [0, 1, 2, 3, 17])
    func appending_keepsEveryElementInOrder(count: Int) {
        let array = make(Array(0..<count))
        #expect(Array(array) == Array(0..<count))
        #expect(array.array == Array(0..<count))
        #expect(array.count == count && array.isEmpty == (count == 0))
    }

    @Test func removingAll_whereAPredicateHolds_keepsTheOthersInOrder() {
        var many = make([1, 2, 3, 4, 5, 6])
        many.removeAll { $0.isMultiple(of: 2) }
        #expect(Array(many) == [1, 3, 5])
        many.removeAll { _ in true }
        #expect(many.isEmpty)

        var one = make([7])
        one.removeAll { $0 == 8 }
        #expect(Array(one) == [7])
        one.removeAll { $0 == 7 }
        #expect(one.isEmpty)
    }

    @Test func removeFirstOccurrence_takesOnlyTheFirstEqualElement() {
        var array = make([4, 2, 4])
        let removedFour = array.removeFirstOccurrence(of: 4)
        #expect(removedFour && Array(array) == [2, 4])
        let removedNine = array.removeFirstOccurrence(of: 9)
        #expect(!removedNine && Array(array) == [2, 4])
        let removedBoth = array.removeFirstOccurrence(of: 2) && array.removeFirstOccurrence(of: 4)
        #expect(removedBoth && array.isEmpty)
        array.append(5) // back to one inline element after a buffer
        #expect(Array(array) == [5])
    }

    @Test(arguments: [0, 1, 2, 5])
    func madeFromAnArray_holdsItsElementsInOrder(count: Int) {
        let array = SmallArray(Array(0..<count))
        #expect(Array(array) == Array(0..<count))
        #expect(array.array == Array(0..<count))
    }

    @Test func arrayLiterals_holdTheirElementsInOrder() {
        let none: SmallArray<Int> = []
        let one: SmallArray<Int> = [1]
        let two: SmallArray<Int> = [1, 2]
        #expect(none.isEmpty && Array(one) == [1] && Array(two) == [1, 2])
    }

    /// Room made ahead, or kept while emptying, changes nothing a reader can see.
    @Test(arguments: [0, 1, 2, 9])
    func reservingAndKeepingCapacity_changeNoElement(count: Int) {
        var array = SmallArray<Int>()
        array.reserveCapacity(count)
        #expect(array.isEmpty)
        var holdingOne: SmallArray<Int> = [42]
        holdingOne.reserveCapacity(count)
        #expect(Array(holdingOne) == [42])
        for element in 0..<count { array.append(element) }
        #expect(Array(array) == Array(0..<count))
        array.removeAll(keepingCapacity: true)
        #expect(array.isEmpty && array.array.isEmpty)
        array.append(7)
        #expect(Array(array) == [7] && array.count == 1)
        array.append(8)
        #expect(Array(array) == [7, 8])
        array.removeAll(keepingCapacity: false)
        #expect(array.isEmpty)
    }

    /// A copy is a value: appending to one leaves the other as it was.
    @Test func copies_areIndependent() {
        var original = make([1, 2])
        let copy = original
        original.append(3)
        original.removeAll { $0 == 1 }
        #expect(Array(copy) == [1, 2])
        #expect(Array(original) == [2, 3])
    }

    @Test func theElements_areReleasedWithTheArray() {
        final class Probe {}
        weak var first: Probe?
        weak var second: Probe?
        do {
            var array = SmallArray<Probe>()
            let probes = (Probe(), Probe())
            first = probes.0
            second = probes.1
            array.append(probes.0)
            array.append(probes.1)
            array.removeAll()
            #expect(array.isEmpty)
        }
        #expect(first == nil && second == nil)
    }
}
