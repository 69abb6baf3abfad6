import Conditions
import Foundation
import Operations
import Testing
import TestSupport

@Suite("ExclusiveCategory")
struct ExclusiveCategoryTests {
    @Test func category_isTheGivenString() {
        // Given
        let condition = ExclusiveCategory("network.upload")

        // Then
        #expect(condition.category == "network.upload")
        #expect(condition.mutuallyExclusiveCategories == ["network.upload"])
        #expect(condition.name == "ExclusiveCategory(network.upload)")
    }

    @Test func isAlwaysSatisfied() {
        // Given
        let queue = AsyncOperationQueue()
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }
        operation.addCondition(ExclusiveCategory(uniqueName("category")))

        // When
        queue.addOperations([operation], waitUntilFinished: false)

        // Then
        #expect(waitUntilFinished([operation]))
        #expect(ran.current == 1)
        #expect(operation.errors.isEmpty)
    }

    @Test func operationsWithTheSameName_neverExecuteTogether() {
        let category = uniqueName("category")
        let overlapped = startsWhileAnotherExecutes(
            first: [ExclusiveCategory(category)],
            second: [ExclusiveCategory(category)],
            patience: 0.3
        )
        #expect(overlapped == false)
    }

    @Test func operationsWithDifferentNames_executeTogether() {
        let overlapped = startsWhileAnotherExecutes(
            first: [ExclusiveCategory(uniqueName("category"))],
            second: [ExclusiveCategory(uniqueName("category"))],
            patience: generousTimeout
        )
        #expect(overlapped == true)
    }

    @Test func operationInTwoCategories_excludesOperationsOfEither() {
        let (first, second) = (uniqueName("category"), uniqueName("category"))
        let both: [any OperationCondition] = [ExclusiveCategory(first), ExclusiveCategory(second)]
        #expect(startsWhileAnotherExecutes(first: both, second: [ExclusiveCategory(first)], patience: 0.3) == false)
        #expect(startsWhileAnotherExecutes(first: both, second: [ExclusiveCategory(second)], patience: 0.3) == false)
    }
}
