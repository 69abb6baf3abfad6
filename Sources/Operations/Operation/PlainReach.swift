import Foundation

/// The plain operations (not `AsyncOperation`s) that an operation reaches first through its
/// dependencies: those it waits for, and those the `AsyncOperation`s it waits for reach in turn,
/// up to `capacity` of them; past that, only that there are more (`isUnbounded`).
///
/// A plain operation that waits for an `AsyncOperation` is invisible to it. So when no
/// `AsyncOperation` waits for an operation, a new dependency can only lead back to it (a cycle)
/// through a plain operation it reaches: the search for a cycle starts from those, not from the
/// whole graph behind the dependency (a chain whose head waits for a plain operation would make
/// that quadratic).
///
/// A reach only grows: a dependency removed, or finished, leaves what it reached, so a search
/// from a reach may find a way back that no longer exists, and a hit is confirmed from the
/// dependency itself (`waitForNewDependency(_:dependents:)`).
///
/// Immutable, as the lifecycle is a value: a change makes a new one. The operations are held
/// weakly: one that is gone waits for nothing, so no cycle runs through it, and letting go of a
/// reach never frees an operation (reading one may, so reaches are built outside locks).
final class PlainReach: Sendable {
    /// How many plain operations a reach names before it only says there are more.
    static let capacity = 8
    /// A reach past `capacity`.
    static let unbounded = PlainReach(operations: [], isUnbounded: true)

    /// The plain operations reached, unless `isUnbounded`.
    let operations: [Weak<Operation>]
    /// More than `capacity` plain operations are reached: a search covers the whole graph.
    let isUnbounded: Bool

    private init(operations: [Weak<Operation>], isUnbounded: Bool) {
        self.operations = operations
        self.isUnbounded = isUnbounded
    }

    /// The reach of a plain operation waited for directly: itself.
    convenience init(_ operation: Operation) {
        self.init(operations: [Weak(operation)], isUnbounded: false)
    }

    /// This reach with `other`'s added, or `nil` if `other` adds nothing to it. Those gone are
    /// dropped (they count toward no capacity). Loads weak references: call it outside locks.
    func adding(_ other: PlainReach) -> PlainReach? {
        guard !isUnbounded else { return nil }
        if other.isUnbounded { return .unbounded }
        let kept = operations.filter { $0.object != nil }
        let new = other.operations.filter { candidate in
            guard let operation = candidate.object else { return false } // gone: it waits for nothing
            return !kept.contains { $0.object === operation }
        }
        guard !new.isEmpty else { return nil }
        guard kept.count + new.count <= Self.capacity else { return .unbounded }
        return PlainReach(operations: kept + new, isUnbounded: false)
    }

    /// Whether `dependent`, which no `AsyncOperation` waits for, can be reached through this
    /// reach from `dependency`, which it has just come to wait for (a cycle).
    func leadsBack(to dependent: AsyncOperation, from dependency: Operation) -> Bool {
        guard !isUnbounded else { return dependent.dependencyWouldCloseCycle(dependency) }
        return operations.contains { reached in
            reached.object.map(dependent.dependencyWouldCloseCycle) ?? false
        }
    }
}
