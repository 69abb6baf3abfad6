/// A value that can only be reached while holding its lock: a small, public lock box for the
/// mutable state of your own operations, conditions and observers (Swift's `Mutex` needs
/// macOS 15 / iOS 18; this works wherever the package does).
///
/// ```swift
/// final class CountingOperation: AsyncOperation, @unchecked Sendable {
///     // @unchecked Sendable: `pages` lives in a LockedValue.
///     private let pages = LockedValue(0)
///
///     override func execute() {
///         pages.withLock { $0 += 1 }
///         finish()
///     }
///
///     var pageCount: Int { pages.withLock { $0 } }
/// }
/// ```
///
/// Keep the closure short, and never call out to other code from it (observers, completion
/// handlers, other locks): return what must be called and call it after `withLock` returns.
/// The box is `Sendable` when its value is.
public struct LockedValue<Value> {
    private let locked: Locked<Value>

    /// Creates a box holding `value`.
    public init(_ value: Value) {
        locked = Locked.make(value)
    }

    /// Runs `body` with exclusive access to the value, and returns what it returns.
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try locked.withLock(body)
    }
}

extension LockedValue: Sendable where Value: Sendable {}
