@testable import Operations

// The answers to adding a dependency carry the dependents read in the step, which are not
// comparable: tests compare what the answer was.

/// What adding a dependency came to, without what it carries.
enum DependencyAdditionKind: Equatable {
    /// `.added`, whatever dependents it carries.
    case added
    /// `.alreadyThere`.
    case alreadyThere
    /// `.broughtBefore` (a condition's dependency only).
    case broughtBefore
    /// `.tooLate`.
    case tooLate
}

extension OperationLifecycle.DependencyAddition {
    /// What the answer was.
    var kind: DependencyAdditionKind {
        switch self {
        case .added: .added
        case .alreadyThere: .alreadyThere
        case .tooLate: .tooLate
        }
    }
}

extension OperationLifecycle.ConditionDependencyAddition {
    /// What the answer was.
    var kind: DependencyAdditionKind {
        switch self {
        case .added: .added
        case .alreadyThere: .alreadyThere
        case .broughtBefore: .broughtBefore
        case .tooLate: .tooLate
        }
    }
}
