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
    public var category: String { mutuallyExclusiveCategories.first ?? "" }

    /// Creates the condition for the category named `category`.
    public init(_ category: String) {
        self.mutuallyExclusiveCategories = SingleCategorySets.set(of: category)
        self.lockReference = nil
    }

    /// Creates the condition for the category named `category`, extended beyond this process by
    /// `lock`: at most one operation carrying it executes at a time in every process sharing the
    /// lock (on a host with `FileCategoryLock`, in a cluster with a database's lock).
    ///
    /// Within the process it is the same category as `ExclusiveCategory(category)`. Naming one
    /// category with two different locks fails the operation with
    /// `AsyncOperationError.categoryLockConflict`.
    ///
    /// ```swift
    /// let hostWide = try FileCategoryLock(directory: URL(fileURLWithPath: "/tmp/billing-locks"))
    /// billing.addCondition(ExclusiveCategory("billing", lock: hostWide))
    /// ```
    public init(_ category: String, lock: some CategoryLock) {
        self.mutuallyExclusiveCategories = SingleCategorySets.set(of: category)
        self.lockReference = CategoryLockReference(lock)
    }

    /// The lock that extends the category beyond this process, if any.
    public var categoryLock: (any CategoryLock)? { lockReference?.lock }

    /// The lock behind one reference, so that the condition stays small enough to be stored
    /// inline wherever it is held as `any OperationCondition` (no allocation per condition).
    private let lockReference: CategoryLockReference?

    /// "ExclusiveCategory(name)", or "ExclusiveCategory(name, lock)" with a lock.
    public var name: String {
        categoryLock.map { "ExclusiveCategory(\(category), \($0))" } ?? "ExclusiveCategory(\(category))"
    }

    /// The single category, `category` (built once, and shared by the conditions that name the
    /// same category on a thread: the queue reads it for every operation).
    public let mutuallyExclusiveCategories: Set<String>

    /// Always satisfied: the exclusion itself is the condition's effect.
    public func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(.satisfied)
    }
}
