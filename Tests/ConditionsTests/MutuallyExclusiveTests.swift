import Conditions
import Foundation
import Operations
import Testing
import TestSupport

// Category types, one set per test, so that tests running in parallel never share a category.
private enum Printer {}
private enum Scanner {}
private enum SharedDevice {}
private enum FirstDevice {}
private enum SecondDevice {}
private enum InOrder {}
private enum Satisfied {}
private enum Kitchen { enum Device {} }
private enum Garage { enum Device {} }

@Suite("MutuallyExclusive")
struct MutuallyExclusiveTests {
    @Test func category_isNamedAfterTheType() {
        // Given
        let condition = MutuallyExclusive<Printer>()

        // Then
        #expect(condition.mutuallyExclusiveCategories == [String(reflecting: Printer.self)])
        #expect(condition.mutuallyExclusiveCategories.first?.hasSuffix("Printer") == true)
        #expect(condition.name == "MutuallyExclusive<Printer>")
    }

    @Test func sameType_givesTheSameCategory_differentTypesDifferentOnes() {
        #expect(MutuallyExclusive<Printer>().mutuallyExclusiveCategories == MutuallyExclusive<Printer>().mutuallyExclusiveCategories)
        #expect(MutuallyExclusive<Printer>().mutuallyExclusiveCategories != MutuallyExclusive<Scanner>().mutuallyExclusiveCategories)
    }

    @Test func typesOfTheSameNameInDifferentScopes_giveDifferentCategories() {
        #expect(MutuallyExclusive<Kitchen.Device>().mutuallyExclusiveCategories != MutuallyExclusive<Garage.Device>().mutuallyExclusiveCategories)
    }

    @Test func isAlwaysSatisfied() {
        // Given
        let queue = AsyncOperationQueue()
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.addCondition(MutuallyExclusive<Satisfied>())

        // When
        queue.addOperations([operation], waitUntilFinished: false)

        // Then
        #expect(waitUntilFinished([operation]))
        #expect(ran.current == 1)
        #expect(operation.errors.isEmpty)
    }

    @Test func operationsWithTheSameType_neverExecuteTogether() {
        let overlapped = startsWhileAnotherExecutes(
            first: [MutuallyExclusive<SharedDevice>()],
            second: [MutuallyExclusive<SharedDevice>()],
            patience: 0.3
        )
        #expect(overlapped == false)
    }

    @Test func operationsWithDifferentTypes_executeTogether() {
        let overlapped = startsWhileAnotherExecutes(
            first: [MutuallyExclusive<FirstDevice>()],
            second: [MutuallyExclusive<SecondDevice>()],
            patience: generousTimeout
        )
        #expect(overlapped == true)
    }

    @Test func operationsWithTheSameType_startInTheOrderTheyWereAdded() {
        // Given
        let queue = AsyncOperationQueue()
        let order = Recorder<Int>()
        let operations = (0..<20).map { index in
            let operation = AsyncBlockOperation { order.append(index) }
            operation.addCondition(MutuallyExclusive<InOrder>())
            return operation
        }

        // When
        queue.addOperations(operations, waitUntilFinished: false)

        // Then
        #expect(waitUntilFinished(operations))
        #expect(order.all == Array(0..<20))
    }
}
