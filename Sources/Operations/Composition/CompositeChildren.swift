import Foundation

/// The children of a composite, declared in order inside its declaration closure.
///
/// Each child is declared by a factory: a closure that returns a new operation. The composite
/// calls it when the child is due to run, and again each time its cancellation handler answers
/// `.rerun`, since a finished operation cannot run twice.
///
/// ```swift
/// let publish = CascadeOperation { children in
///     children.add { RenderPage(draft) }
///     children.add { UploadPage(draft) }
///     children.add { TransactionOperation { notifications in
///         notifications.add { NotifyFollowers() }
///         notifications.add { NotifyEditors() }
///     } }
/// }
/// ```
public struct CompositeChildren: Sendable {
    /// The factories, in the order declared.
    private(set) var factories: [@Sendable () -> Foundation.Operation] = []

    init() {}

    /// Declares the next child. `makeChild` must return a new operation each time it is called
    /// (never one that was already queued or run); it is called on an arbitrary thread.
    public mutating func add(_ makeChild: @escaping @Sendable () -> Foundation.Operation) {
        factories.append(makeChild)
    }

    /// How many children are declared so far.
    public var count: Int { factories.count }
}
