@testable import Operations
import Testing

private struct Evaluated: OperationCondition {
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(.satisfied)
    }
}

private struct Constructed: OperationCondition, SatisfiedByConstruction {
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(.satisfied)
    }
}

/// A generic wrapper that answers at once only when what it wraps does, as `NegatedCondition`.
private struct Wrapper<Inner: OperationCondition>: OperationCondition {
    let inner: Inner
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        inner.evaluate(for: operation, completion: completion)
    }
}

extension Wrapper: AnswersAtOnce where Inner: AnswersAtOnce {
    func answer(for operation: AsyncOperation) -> ConditionResult {
        inner.answer(for: operation)
    }
}

private struct AtOnce: OperationCondition, AnswersAtOnce {
    let satisfied: Bool
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(answer(for: operation))
    }
    func answer(for operation: AsyncOperation) -> ConditionResult {
        satisfied ? .satisfied : .failed(ConditionKindsTests.Refused())
    }
}

@Suite struct ConditionKindsTests {
    struct Refused: Error {}

    /// Asked twice: the first answer comes from the runtime, the second from the thread's memo.
    @Test func kind_isTheSameFromTheRuntimeAndFromTheMemo() {
        PerThreadState.current.conditionKinds.removeAll() // whatever other tests left on this thread
        for _ in 0..<2 {
            #expect(isEvaluated(ConditionKinds.kind(of: Evaluated())))
            #expect(ConditionKinds.isSatisfiedByConstruction(Constructed()))
            #expect(!ConditionKinds.isSatisfiedByConstruction(AtOnce(satisfied: true)))
            guard case .answersAtOnce = ConditionKinds.kind(of: AtOnce(satisfied: true)) else {
                Issue.record("expected a condition that answers at once")
                return
            }
        }
    }

    @Test func answersAtOnce_asksTheConditionItIsGiven() {
        let operation = AsyncBlockOperation {}
        let refusing: any OperationCondition = AtOnce(satisfied: false)
        guard case let .answersAtOnce(type) = ConditionKinds.kind(of: refusing),
              case let .failed(error)? = type.answer(of: refusing, for: operation) else {
            Issue.record("expected the condition's own answer")
            return
        }
        #expect(error is Refused)
        #expect(type.answer(of: Evaluated(), for: operation) == nil, "a condition of another type is not asked")
    }

    /// Each instance of a generic wrapper is a type of its own: one that wraps a condition that
    /// answers at once is asked, one that wraps another is evaluated.
    @Test func aGenericWrapper_answersAtOnceOnlyAroundAConditionThatDoes() {
        PerThreadState.current.conditionKinds.removeAll()
        let operation = AsyncBlockOperation {}
        let asked: any OperationCondition = Wrapper(inner: AtOnce(satisfied: true))
        let evaluated: any OperationCondition = Wrapper(inner: Evaluated())
        for _ in 0..<2 {
            guard case let .answersAtOnce(type) = ConditionKinds.kind(of: asked) else {
                Issue.record("expected the wrapper of a condition that answers at once to answer at once")
                return
            }
            #expect(type.answer(of: asked, for: operation) != nil)
            #expect(type.answer(of: evaluated, for: operation) == nil)
            #expect(isEvaluated(ConditionKinds.kind(of: evaluated)))
        }
    }

    /// More types than the memo keeps: the oldest is forgotten and asked again, correctly.
    @Test func kind_staysRightBeyondTheMemo() {
        struct A: OperationCondition { func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {} }
        struct B: OperationCondition { func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {} }
        struct C: OperationCondition { func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {} }
        struct D: OperationCondition { func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {} }
        struct E: OperationCondition { func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {} }
        struct F: OperationCondition { func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {} }
        struct G: OperationCondition { func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {} }
        struct H: OperationCondition { func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {} }
        #expect(!isEvaluated(ConditionKinds.kind(of: AtOnce(satisfied: true))))
        let others: [any OperationCondition] = [A(), B(), C(), D(), E(), F(), G(), H()]
        #expect(others.count == ConditionKinds.memoSize)
        for other in others {
            #expect(isEvaluated(ConditionKinds.kind(of: other)))
        }
        #expect(!isEvaluated(ConditionKinds.kind(of: AtOnce(satisfied: true))))
        #expect(ConditionKinds.isSatisfiedByConstruction(Constructed()))
    }

    private func isEvaluated(_ kind: ConditionKinds.Kind) -> Bool {
        if case .evaluated = kind { return true }
        return false
    }
}
