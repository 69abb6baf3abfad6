import Foundation

/// What some operations record about their dependencies, behind one reference so that every
/// other operation's lifecycle carries a single word for it: the dependencies that close a
/// cycle, the dependencies its conditions brought, and the plain operations it reaches (so every
/// operation downstream of a plain one carries a record).
///
/// Immutable: the lifecycle is a value (the explorations copy it to try each next step), so a
/// change makes a new record rather than changing one that a copy shares.
final class DependencyRecords: Sendable {
    /// A dependency that closes a dependency cycle: its identity (it stays among the
    /// operation's dependencies, which hold it, until removed) and its name, for the error.
    struct ClosedCycle: Sendable {
        let dependency: ObjectIdentifier
        let name: String
    }

    /// The dependencies that close a dependency cycle, in the order they were detected.
    let closedCycles: [ClosedCycle]
    /// The dependencies the operation's conditions brought. Held, not only identified: a
    /// dependency freed meanwhile could leave its address to the next one a condition brings.
    let conditionDependencies: [Operation]
    /// How many attachments of conditions' dependencies (an add, or a condition added while
    /// the operation waited) were still running when the operation began finishing and have not
    /// ended since: the records are kept past the finish until the last one ends.
    let attachmentsPastTheFinish: Int32
    /// The plain operations the operation reaches through its dependencies, if any.
    let plainReach: PlainReach?

    init(closedCycles: [ClosedCycle] = [], conditionDependencies: [Operation] = [], attachmentsPastTheFinish: Int32 = 0, plainReach: PlainReach? = nil) {
        self.closedCycles = closedCycles
        self.conditionDependencies = conditionDependencies
        self.attachmentsPastTheFinish = attachmentsPastTheFinish
        self.plainReach = plainReach
    }

    /// The name of the last dependency found to close a cycle that is still a dependency.
    var cycleDependencyName: String? {
        closedCycles.last?.name
    }

    /// Whether the dependency `id` is recorded as closing a cycle.
    func closesCycle(through id: ObjectIdentifier) -> Bool {
        closedCycles.contains { $0.dependency == id }
    }

    /// Whether a condition brought `operation`.
    func broughtByCondition(_ operation: Operation) -> Bool {
        conditionDependencies.contains { $0 === operation }
    }

    /// These records, with `dependency`, named `name`, among those that close a cycle.
    func closingCycle(through dependency: ObjectIdentifier, name: String) -> DependencyRecords {
        let cycle = ClosedCycle(dependency: dependency, name: name)
        return DependencyRecords(closedCycles: closedCycles + [cycle], conditionDependencies: conditionDependencies, attachmentsPastTheFinish: attachmentsPastTheFinish, plainReach: plainReach)
    }

    /// Whether `dependency` closes a cycle or was brought by a condition: removing it changes
    /// these records.
    func involves(_ dependency: Operation) -> Bool {
        closesCycle(through: ObjectIdentifier(dependency)) || broughtByCondition(dependency)
    }

    /// These records, `dependency` removed: it no longer closes a cycle, nor counts as one a
    /// condition brought.
    func removing(_ dependency: Operation) -> DependencyRecords {
        let id = ObjectIdentifier(dependency)
        return DependencyRecords(closedCycles: closedCycles.filter { $0.dependency != id }, conditionDependencies: conditionDependencies.filter { $0 !== dependency }, attachmentsPastTheFinish: attachmentsPastTheFinish, plainReach: plainReach)
    }

    /// These records, with `operation` among the dependencies conditions brought.
    func bringing(_ operation: Operation) -> DependencyRecords {
        DependencyRecords(closedCycles: closedCycles, conditionDependencies: conditionDependencies + [operation], attachmentsPastTheFinish: attachmentsPastTheFinish, plainReach: plainReach)
    }

    /// Whether an attachment that began before the finish still runs: the records must outlive
    /// the finish.
    var areKeptPastTheFinish: Bool {
        attachmentsPastTheFinish > 0
    }

    /// These records, kept past the operation's finish until `attachments` attachments end.
    func kept(untilEndOf attachments: Int32) -> DependencyRecords {
        DependencyRecords(closedCycles: closedCycles, conditionDependencies: conditionDependencies, attachmentsPastTheFinish: attachments, plainReach: plainReach)
    }

    /// These records, one of the attachments that keep them past the finish ending.
    func endingAnAttachment() -> DependencyRecords {
        kept(untilEndOf: attachmentsPastTheFinish - 1) // counted: see `endAttachmentPastTheFinish()`
    }

    /// These records, reaching the plain operations of `reach`.
    func reaching(_ reach: PlainReach) -> DependencyRecords {
        DependencyRecords(closedCycles: closedCycles, conditionDependencies: conditionDependencies, attachmentsPastTheFinish: attachmentsPastTheFinish, plainReach: reach)
    }
}
