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
        let type = typeIdentity(of: condition)
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

    /// The condition's type, read from the existential as it is opened (`type(of:)` on the
    /// existential asks the runtime for the dynamic type instead: about a hundred instructions).
    /// For a class instance this is the type it was boxed as, which may be a superclass of its
    /// own; that is enough here, as only structs are satisfied by construction.
    private static func typeIdentity<Condition: OperationCondition>(of _: Condition) -> ObjectIdentifier {
        ObjectIdentifier(Condition.self)
    }
}
