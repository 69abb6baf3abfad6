import Foundation

/// An `InputOperation` built from a block that turns its input into its output (or throws).
///
/// ```swift
/// let fetch = ResultBlockOperation { try api.user(id: 42) }           // ResultOperation<User>
/// let greet = InputBlockOperation { (user: User) in "Hello, \(user.name)" }
/// greet.takeInput(from: fetch)
/// queue.addChain([fetch, greet])
/// // later: greet.output == "Hello, Ada"
/// ```
// @unchecked Sendable: `work` lives in a `Locked` value and is released once the operation finished.
open class InputBlockOperation<Input: Sendable, Output: Sendable>: InputOperation<Input, Output>, @unchecked Sendable {
    private let work: Locked<(@Sendable (Input) throws -> Output)?>

    /// Creates an operation whose output is what `block` returns for the input it takes from an
    /// upstream operation (see `takeInput(from:)`); an error it throws becomes the operation's
    /// error.
    public init(_ block: @escaping @Sendable (Input) throws -> Output) {
        work = Locked.make(block)
        super.init()
    }

    /// Creates an operation whose output is what `block` returns for `input`.
    public init(input: Input, _ block: @escaping @Sendable (Input) throws -> Output) {
        work = Locked.make(block)
        super.init(input: input)
    }

    /// Runs the block on `input`.
    open override func execute(with input: Input) {
        guard let block = work.withLock({ $0 }) else {
            finish()
            return
        }
        do {
            finishProducing(try block(input))
        } catch {
            finish(with: error)
        }
    }

    override func releaseResources() {
        let released = work.withLock { $0.take() }
        _ = released // the block's captures are released outside the lock
        super.releaseResources()
    }
}
