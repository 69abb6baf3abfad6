/// What kind of condition a condition is, as the queue needs to know it.
///
/// Swift's dynamic protocol checks (`condition is any SatisfiedByConstruction`) cost about a
/// thousand instructions each, more than the rest of answering such a condition. An app uses a
/// handful of condition types over and over (often several on one operation, in turn), so each
/// thread remembers its answers for the last few types it was asked about.
enum ConditionKinds {
    /// How many condition types each thread remembers.
    static let memoSize = 8

    static func isSatisfiedByConstruction(_ condition: any OperationCondition) -> Bool {
        let type = ObjectIdentifier(Swift.type(of: condition))
        let memo = PerThreadState.current
        if let known = memo.conditionKinds.first(where: { $0.type == type }) {
            return known.isSatisfiedByConstruction
        }
        let answer = condition is any SatisfiedByConstruction
        if memo.conditionKinds.count == memoSize {
            memo.conditionKinds.removeFirst() // the oldest goes
        }
        memo.conditionKinds.append((type, answer))
        return answer
    }
}
