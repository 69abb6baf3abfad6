/// What kind of condition a condition is, as the queue needs to know it.
///
/// Swift's dynamic protocol checks (`condition is any SatisfiedByConstruction`) cost about a
/// thousand instructions each, more than the rest of answering such a condition. An app uses a
/// handful of condition types over and over, so each thread remembers its last answer.
enum ConditionKinds {
    static func isSatisfiedByConstruction(_ condition: any OperationCondition) -> Bool {
        let type = ObjectIdentifier(Swift.type(of: condition))
        let memo = PerThreadState.current
        if memo.lastConditionType == type {
            return memo.lastConditionTypeIsSatisfiedByConstruction
        }
        let answer = condition is any SatisfiedByConstruction
        memo.lastConditionType = type
        memo.lastConditionTypeIsSatisfiedByConstruction = answer
        return answer
    }
}
