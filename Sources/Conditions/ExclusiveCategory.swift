import Foundation
import Operations

/// Lets at most one operation carrying a category of the same name execute at a time,
/// process-wide: `MutuallyExclusive` for categories named by a string.
///
/// ```swift
/// upload.addCondition(ExclusiveCategory("network.upload"))
/// ```
public struct ExclusiveCategory: OperationCondition, SatisfiedByConstruction {
    /// The category's name.
    public let category: String

    /// Creates the condition for the category named `category`.
    public init(_ category: String) {
        self.category = category
        self.mutuallyExclusiveCategories = [category]
    }

    /// "ExclusiveCategory(name)".
    public var name: String { "ExclusiveCategory(\(category))" }

    /// The single category, `category` (built once: the queue reads it for every operation).
    public let mutuallyExclusiveCategories: Set<String>

    /// Always satisfied: the exclusion itself is the condition's effect.
    public func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(.satisfied)
    }
}
