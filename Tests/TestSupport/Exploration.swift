/// What an exhaustive exploration visited.
public struct ExplorationReport: Sendable, CustomStringConvertible {
    /// Distinct states reached (each checked against the invariants once).
    public var states = 0
    /// Reached states in which no event is possible any more.
    public var terminalStates = 0
    /// Events applied, counting those that led to a state seen before.
    public var transitions = 0

    public var description: String {
        "\(states) states, \(terminalStates) terminal, \(transitions) transitions"
    }
}

/// One event a model can take in its current state: a name for the failure trail, and the change.
public struct ExplorationEvent<Model> {
    public let name: String
    public let apply: (inout Model) -> Void

    public init(_ name: String, _ apply: @escaping (inout Model) -> Void) {
        self.name = name
        self.apply = apply
    }
}

/// Explores every order of events of a pure state machine (wrapped in `Model`) from `initial`,
/// depth first, visiting each distinct state once (states are told apart by `key`).
///
/// `events` lists what may happen in a state; `check` asserts the invariants of every reached
/// state, and `checkTerminal` those of states where nothing more can happen (everything
/// finished, say). Both get the trail of event names that led there, to print on failure.
///
/// ```swift
/// let report = exploreEveryOrder(from: Model(), events: { $0.possibleEvents },
///                                key: { $0.key }, check: { model, trail in ... })
/// #expect(report.terminalStates > 0, "explored: \(report)")   // the counts ride on the expectation
/// ```
public func exploreEveryOrder<Model>(
    from initial: Model,
    events: (Model) -> [ExplorationEvent<Model>],
    key: (Model) -> String,
    check: (Model, [String]) -> Void,
    checkTerminal: (Model, [String]) -> Void = { _, _ in }
) -> ExplorationReport {
    var report = ExplorationReport()
    var visited: Set<String> = [key(initial)]
    var stack: [(model: Model, trail: [String])] = [(initial, [])]
    while let (model, trail) = stack.popLast() {
        report.states += 1
        check(model, trail)
        let possible = events(model)
        if possible.isEmpty {
            report.terminalStates += 1
            checkTerminal(model, trail)
            continue
        }
        for event in possible {
            var next = model
            event.apply(&next)
            report.transitions += 1
            if visited.insert(key(next)).inserted {
                stack.append((next, trail + [event.name]))
            }
        }
    }
    return report
}
