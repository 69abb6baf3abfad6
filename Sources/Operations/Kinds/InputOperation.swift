import Foundation

/// A `ResultOperation` that works on an input: a value given up front, or the output of an
/// operation before it, with the types checked by the compiler.
///
/// Subclass it and override `execute(with:)`, or build one from a block with
/// `InputBlockOperation`. Connect it with `takeInput(from:)`:
///
/// ```swift
/// final class Thumbnail: InputOperation<Data, Image>, @unchecked Sendable {
///     override func execute(with data: Data) {
///         renderer.thumbnail(of: data) { result in self.finish(with: result) }
///     }
/// }
///
/// let download = ResultBlockOperation { try Data(contentsOf: url) }   // ResultOperation<Data>
/// let thumbnail = Thumbnail()
/// thumbnail.takeInput(from: download)    // Data out, Data in: checked at compile time
/// queue.addChain([download, thumbnail])
/// ```
///
/// The input is read after the upstream operation finished and before this one executes. If the
/// upstream failed or was cancelled, this operation finishes without executing, with
/// `AsyncOperationError.upstreamFailed` or `.upstreamCancelled`, naming the first operation
/// that failed along the chain; its own dependents then do the same. If the upstream finished
/// without an output, it fails with `.missingInput`.
///
/// Chained operations form no retain cycle: an operation holds the one before it only through
/// its dependency, which it lets go of when it finishes.
// @unchecked Sendable: `storedInput` lives in a `Locked` value; the rest is `ResultOperation`'s.
open class InputOperation<Input: Sendable, Output: Sendable>: ResultOperation<Output>, @unchecked Sendable {
    private let storedInput: Locked<Input?>

    /// Creates an operation whose input comes from an operation before it: see `takeInput(from:)`.
    public override init() {
        storedInput = Locked.make(nil)
        super.init()
    }

    /// Creates an operation that works on `input`.
    public init(input: Input) {
        storedInput = Locked.make(input)
        super.init()
    }

    /// The value the operation works on: given to `init(input:)`, or read from the upstream
    /// operation once it finished. `nil` until then.
    public final var input: Input? {
        storedInput.withLock { $0 }
    }

    /// Takes `upstream`'s output as this operation's input, and waits for `upstream` to finish.
    ///
    /// Call it before the operation is added to a queue. If `upstream` fails or is cancelled,
    /// this operation finishes without executing (see the type's documentation).
    public final func takeInput(from upstream: ResultOperation<Input>) {
        takeInput(from: upstream) { $0 }
    }

    /// Takes `upstream`'s output, passed through `adapter`, as this operation's input.
    ///
    /// The adapter runs after `upstream` succeeded and before this operation executes, on an
    /// arbitrary thread. It can transform the value, or veto it by throwing: this operation then
    /// finishes without executing, with the thrown error, and the operations after it finish
    /// with `AsyncOperationError.upstreamFailed`.
    ///
    /// ```swift
    /// save.takeInput(from: fetch) { record in
    ///     guard record.isNewer(than: local) else { throw SyncError.upToDate }
    ///     return record.payload
    /// }
    /// ```
    public final func takeInput<Upstream: Sendable>(
        from upstream: ResultOperation<Upstream>,
        adapter: @escaping @Sendable (Upstream) throws -> Input
    ) {
        addDependency(upstream)
        addCondition(UpstreamCondition(upstream: upstream) { upstream, operation in
            guard let output = (upstream as? ResultOperation<Upstream>)?.output else {
                throw AsyncOperationError.missingInput(operation: operation.displayName, upstream: upstream.displayName)
            }
            let input = try adapter(output)
            (operation as? InputOperation<Input, Output>)?.storedInput.withLock { $0 = input }
        })
    }

    /// Executes with the input; subclasses override `execute(with:)` instead.
    public final override func execute() {
        guard !isCancelled else {
            finish()
            return
        }
        guard let input else {
            finish(with: AsyncOperationError.missingInput(operation: displayName, upstream: nil))
            return
        }
        execute(with: input)
    }

    /// Does the operation's work on `input`. Override it, and call `finish(producing:)` or
    /// `finish(with:)` when the work is done, from any thread. The default finishes without an
    /// output.
    open func execute(with input: Input) {
        finish()
    }
}
