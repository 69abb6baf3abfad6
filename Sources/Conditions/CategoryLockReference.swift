import Operations

/// A `CategoryLock` behind one reference: a condition that stores it stays within the three
/// words that an existential (`any OperationCondition`) holds inline, so conditions without a
/// lock cost no allocation for the feature.
final class CategoryLockReference: Sendable {
    let lock: any CategoryLock

    init(_ lock: any CategoryLock) {
        self.lock = lock
    }
}
