import Foundation

/// What some operations record about their dependencies, behind one reference so that every
/// other operation's lifecycle carries a single word for it: the dependency that closes a cycle,
/// the dependencies its conditions brought, and the plain operations it reaches (so every
/// operation downstream of a plain one carries a record).
///
/// Immutable: the lifecycle is a value (the explorations copy it to try each next step), so a
/// change makes a new record rather than changing one that a copy shares.
final class DependencyRecords: Sendable {
    /// The dependency that closes a dependency cycle, if one was detected.
    let cycleDependencyName: String?
    /// The dependencies the operation's conditions brought. Held, not only identified: a
    /// dependency freed meanwhile could leave its address to the next one a condition brings.
    let conditionDependencies: [Operation]
    /// Kept past the operation's finish, until it is deallocated: the finish began while a
    /// condition's dependency may have been being attached.
    let outlivesTheFinish: Bool
    /// The plain operations the operation reaches through its dependencies, if any.
    let plainReach: PlainReach?

    init(cycleDependencyName: String? = nil, conditionDependencies: [Operation] = [], outlivesTheFinish: Bool = false, plainReach: PlainReach? = nil) {
        self.cycleDependencyName = cycleDependencyName
        self.conditionDependencies = conditionDependencies
        self.outlivesTheFinish = outlivesTheFinish
        self.plainReach = plainReach
    }

    /// Whether a condition brought `operation`.
    func broughtByCondition(_ operation: Operation) -> Bool {
        conditionDependencies.contains { $0 === operation }
    }

    /// These records, with `name` as the dependency that closes a cycle.
    func closingCycle(through name: String) -> DependencyRecords {
        DependencyRecords(cycleDependencyName: name, conditionDependencies: conditionDependencies, outlivesTheFinish: outlivesTheFinish, plainReach: plainReach)
    }

    /// These records, with `operation` among the dependencies conditions brought.
    func bringing(_ operation: Operation) -> DependencyRecords {
        DependencyRecords(cycleDependencyName: cycleDependencyName, conditionDependencies: conditionDependencies + [operation], outlivesTheFinish: outlivesTheFinish, plainReach: plainReach)
    }

    /// These records, without `operation` among the dependencies conditions brought.
    func forgetting(_ operation: Operation) -> DependencyRecords {
        DependencyRecords(cycleDependencyName: cycleDependencyName, conditionDependencies: conditionDependencies.filter { $0 !== operation }, outlivesTheFinish: outlivesTheFinish, plainReach: plainReach)
    }

    /// These records, kept past the operation's finish.
    func keptPastTheFinish() -> DependencyRecords {
        DependencyRecords(cycleDependencyName: cycleDependencyName, conditionDependencies: conditionDependencies, outlivesTheFinish: true, plainReach: plainReach)
    }

    /// These records, reaching the plain operations of `reach`.
    func reaching(_ reach: PlainReach) -> DependencyRecords {
        DependencyRecords(cycleDependencyName: cycleDependencyName, conditionDependencies: conditionDependencies, outlivesTheFinish: outlivesTheFinish, plainReach: reach)
    }
}
