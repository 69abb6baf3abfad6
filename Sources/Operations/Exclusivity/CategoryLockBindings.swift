import Foundation

/// Which `CategoryLock` names each category in this process, while operations that name it are on
/// their way or running: a category is one category whatever lock names it, so two operations
/// (or two conditions of one operation) naming it with different locks is an error, found before
/// either asks its lock. Once no operation names a category any more, it is free to be named with
/// another lock (each test of a suite its own lock directory, say).
final class CategoryLockBindings: Sendable {
    private struct Binding {
        let identity: String
        var operations: Int
    }

    private let bindings = Locked<[String: Binding]>.make([:])

    /// Binds each category to its lock for one more operation; or, if one is bound to another
    /// lock, binds none and returns that category.
    func bind(_ locks: [(category: String, lock: any CategoryLock)]) -> String? {
        let identities = locks.map { ($0.category, $0.lock.identity) } // user code: read outside the lock
        return bindings.withLock { bindings in
            if let conflict = identities.first(where: { category, identity in
                bindings[category].map { $0.identity != identity } ?? false
            }) {
                return conflict.0
            }
            for (category, identity) in identities {
                bindings[category, default: Binding(identity: identity, operations: 0)].operations += 1
            }
            return nil
        }
    }

    /// One operation that named `categories` finished.
    func unbind(_ categories: [String]) {
        bindings.withLock { bindings in
            for category in categories {
                guard var binding = bindings[category] else { continue }
                binding.operations -= 1
                bindings[category] = binding.operations > 0 ? binding : nil
            }
        }
    }
}
