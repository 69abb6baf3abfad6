import Foundation
import Operations

/// Lets at most one operation carrying this condition execute at a time, process-wide, for the
/// category named after `Category`.
///
/// Operations of a category that are otherwise free to run (dependencies finished, conditions
/// passed, their queue's turn and a free slot) get it in the order they were added to their
/// queues, on every `AsyncOperationQueue`: an operation still waiting for anything else does not
/// hold up later ones, and is never granted a category it could not use at once. (A group's
/// children may go ahead of an earlier operation that could not run before their group finishes
/// anyway; see the article "Conditions and mutual exclusion".) An operation
/// with several mutually exclusive conditions holds all of their categories at once; overlapping
/// categories never deadlock. Cancelling or failing an operation frees its categories. A waiting
/// operation occupies no concurrency slot.
///
/// ```swift
/// enum Database {}
/// migrate.addCondition(MutuallyExclusive<Database>())
/// backup.addCondition(MutuallyExclusive<Database>())   // never runs alongside `migrate`
/// ```
public struct MutuallyExclusive<Category>: OperationCondition, SatisfiedByConstruction {
    /// Creates the condition for the category named after `Category`.
    public init() {
        lockReference = nil
    }

    /// Creates the condition for the category named after `Category`, extended beyond this
    /// process by `lock` (see `ExclusiveCategory.init(_:lock:)`).
    ///
    /// ```swift
    /// enum Billing {}
    /// let hostWide = try FileCategoryLock(directory: URL(fileURLWithPath: "/tmp/billing-locks"))
    /// nightlyRun.addCondition(MutuallyExclusive<Billing>(lock: hostWide))
    /// ```
    public init(lock: some CategoryLock) {
        lockReference = CategoryLockReference(lock)
    }

    /// The lock that extends the category beyond this process, if any.
    public var categoryLock: (any CategoryLock)? { lockReference?.lock }

    /// The lock behind one reference (see `ExclusiveCategory`).
    private let lockReference: CategoryLockReference?

    /// "MutuallyExclusive<Category>".
    public var name: String { "MutuallyExclusive<\(String(describing: Category.self))>" }

    /// The single category, named after `Category` (its full type name).
    public var mutuallyExclusiveCategories: Set<String> { CategoryNames.categories(of: Category.self) }

    /// Always satisfied: the exclusion itself is the condition's effect.
    public func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(.satisfied)
    }
}

/// The category set of each `MutuallyExclusive` type, built once: spelling out a type's name is
/// slow, and the queue asks for it for every operation.
private enum CategoryNames {
    private static let cache = Locked<[ObjectIdentifier: Set<String>]>.make([:])

    static func categories(of type: Any.Type) -> Set<String> {
        let key = ObjectIdentifier(type)
        if let known = cache.withLock({ $0[key] }) { return known }
        let categories: Set<String> = [String(reflecting: type)]
        cache.withLock { $0[key] = categories }
        return categories
    }
}
