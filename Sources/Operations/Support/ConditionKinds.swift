/// What kind of condition a condition is, as the queue needs to know it.
///
/// Swift's dynamic protocol checks (`condition is any SatisfiedByConstruction`) cost about a
/// thousand instructions each, more than the rest of answering such a condition. An app uses a
/// handful of condition types over and over (often several on one operation, in turn), so each
/// thread remembers its answers for the last few types it was asked about.
enum ConditionKinds {
    /// How many condition types each thread remembers.
    static let memoSize = 8

    /// What the queue makes of a condition of some type.
    enum Kind {
        /// Evaluated with a completion handler, which may answer at any time.
        case evaluated
        /// Answered without being evaluated (`SatisfiedByConstruction`).
        case satisfiedByConstruction
        /// Asked, and answers on the spot (`AnswersAtOnce`): `type` asks it.
        case answersAtOnce(type: any AnswersAtOnce.Type)
    }

    static func isSatisfiedByConstruction(_ condition: any OperationCondition) -> Bool {
        if case .satisfiedByConstruction = kind(of: condition) { return true }
        return false
    }

    static func kind(of condition: any OperationCondition) -> Kind {
        let type = typeIdentity(of: condition)
        let known = PerThreadState.withCurrent { memo in
            memo.conditionKinds.first(where: { $0.type == type })?.kind
        }
        if let known {
            return known
        }
        let kind = dynamicKind(of: condition)
        let memo = PerThreadState.current
        if memo.conditionKinds.count == memoSize {
            memo.conditionKinds.removeFirst() // the oldest goes
        }
        memo.conditionKinds.append((type, kind))
        return kind
    }

    /// Asks the runtime (the expensive part).
    private static func dynamicKind<Condition: OperationCondition>(of _: Condition) -> Kind {
        if Condition.self is any SatisfiedByConstruction.Type { return .satisfiedByConstruction }
        if let answering = Condition.self as? any AnswersAtOnce.Type { return .answersAtOnce(type: answering) }
        return .evaluated
    }

    /// The condition's type, read from the existential as it is opened (`type(of:)` on the
    /// existential asks the runtime for the dynamic type instead: about a hundred instructions).
    /// For a class instance this is the type it was boxed as, which may be a superclass of its
    /// own; that is enough here, as only structs of this package are satisfied by construction or
    /// answer at once.
    private static func typeIdentity<Condition: OperationCondition>(of _: Condition) -> ObjectIdentifier {
        ObjectIdentifier(Condition.self)
    }
}
