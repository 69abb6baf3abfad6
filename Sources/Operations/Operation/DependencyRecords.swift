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
    /// How many attachments of conditions' dependencies (an add, or a condition added while
    /// the operation waited) were still running when the operation began finishing and have not
    /// ended since: the records are kept past the finish until the last one ends.
    let attachmentsPastTheFinish: Int32
    /// The plain operations the operation reaches through its dependencies, if any.
    let plainReach: PlainReach?

    init(cycleDependencyName: String? = nil, conditionDependencies: [Operation] = [], attachmentsPastTheFinish: Int32 = 0, plainReach: PlainReach? = nil) {
        self.cycleDependencyName = cycleDependencyName
        self.conditionDependencies = conditionDependencies
        self.attachmentsPastTheFinish = attachmentsPastTheFinish
        self.plainReach = plainReach
    }

    /// Whether a condition brought `operation`.
    func broughtByCondition(_ operation: Operation) -> Bool {
        conditionDependencies.contains { $0 === operation }
    }

    /// These records, with `name` as the dependency that closes a cycle.
    func closingCycle(through name: String) -> DependencyRecords {
        DependencyRecords(cycleDependencyName: name, conditionDependencies: conditionDependencies, attachmentsPastTheFinish: attachmentsPastTheFinish, plainReach: plainReach)
    }

    /// These records, with `operation` among the dependencies conditions brought.
    func bringing(_ operation: Operation) -> DependencyRecords {
        DependencyRecords(cycleDependencyName: cycleDependencyName, conditionDependencies: conditionDependencies + [operation], attachmentsPastTheFinish: attachmentsPastTheFinish, plainReach: plainReach)
    }

    /// These records, without `operation` among the dependencies conditions brought.
    func forgetting(_ operation: Operation) -> DependencyRecords {
        DependencyRecords(cycleDependencyName: cycleDependencyName, conditionDependencies: conditionDependencies.filter { $0 !== operation }, attachmentsPastTheFinish: attachmentsPastTheFinish, plainReach: plainReach)
    }

    /// Whether an attachment that began before the finish still runs: the records must outlive
    /// the finish.
    var areKeptPastTheFinish: Bool {
        attachmentsPastTheFinish > 0
    }

    /// These records, kept past the operation's finish until `attachments` attachments end.
    func kept(untilEndOf attachments: Int32) -> DependencyRecords {
        DependencyRecords(cycleDependencyName: cycleDependencyName, conditionDependencies: conditionDependencies, attachmentsPastTheFinish: attachments, plainReach: plainReach)
    }

    /// These records, one of the attachments that keep them past the finish ended.
    func attachmentEnded() -> DependencyRecords {
        kept(untilEndOf: max(attachmentsPastTheFinish - 1, 0))
    }

    /// These records, reaching the plain operations of `reach`.
    func reaching(_ reach: PlainReach) -> DependencyRecords {
        DependencyRecords(cycleDependencyName: cycleDependencyName, conditionDependencies: conditionDependencies, attachmentsPastTheFinish: attachmentsPastTheFinish, plainReach: reach)
    }
}
