/// Answers of several of an operation's conditions, taken by its lifecycle in one step: those that
/// answered at once while they were handed out, or those a timeout failed.
struct AnsweredConditions {
    /// Which conditions answered, satisfied or not.
    private(set) var indices = ConditionIndexSet()
    /// The errors of those that failed, in the order they answered.
    private(set) var failures: [(index: Int, error: any Error)] = []

    init() {}

    /// Every one of `failures` failed.
    init(failing failures: [(index: Int, error: any Error)]) {
        for failure in failures {
            add(.failed(failure.error), of: failure.index)
        }
    }

    /// The condition at `index` answered `result`.
    mutating func add(_ result: ConditionResult, of index: Int) {
        indices.set(index, to: true)
        if case let .failed(error) = result {
            failures.append((index, error))
        }
    }

    /// Whether none answered.
    var isEmpty: Bool { indices.isEmpty }
}
