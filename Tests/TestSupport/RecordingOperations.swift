import Foundation
import Operations

/// Makes operations for tests of execution order and diagnostics: each records its label in
/// `executed` when it executes, and is named after it with a prefix no other test uses
/// (`uniqueName`), so that the diagnostics about it are its own.
///
/// ```swift
/// let operations = RecordingOperations("cycle")
/// let a = operations.make("a")
/// // …
/// #expect(operations.executed.all == ["a"])
/// #expect(DiagnosticsLog.shared.kinds(about: operations.name("a")).isEmpty)
/// ```
public struct RecordingOperations: Sendable {
    /// The labels of the operations that executed, in the order they did.
    public let executed = Recorder<String>()
    private let prefix: String

    /// Operations whose names begin with `uniqueName(prefix)`.
    public init(_ prefix: String) {
        self.prefix = uniqueName(prefix)
    }

    /// The name of the operation labelled `label`.
    public func name(_ label: String) -> String {
        "\(prefix)-\(label)"
    }

    /// An `AsyncBlockOperation` named `name(label)` that records `label` when it executes.
    public func make(_ label: String) -> AsyncBlockOperation {
        let executed = executed
        let operation = AsyncBlockOperation { executed.append(label) }
        operation.name = name(label)
        return operation
    }

    /// A plain `BlockOperation` named `name(label)` that records `label` when it executes.
    public func makePlain(_ label: String) -> BlockOperation {
        let executed = executed
        let operation = BlockOperation { executed.append(label) }
        operation.name = name(label)
        return operation
    }
}
