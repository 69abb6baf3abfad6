import Foundation

/// A weak reference a test fills in later, for closures that must reach an object created after
/// them (a composite from inside its own children or handlers).
public final class WeakBox<Object: AnyObject>: @unchecked Sendable {
    // @unchecked Sendable: `storedObject` is only touched while holding `lock`.
    private let lock = NSLock()
    private weak var storedObject: Object?

    public init() {}

    /// The object, while something else keeps it alive.
    public var object: Object? {
        get {
            lock.lock()
            defer { lock.unlock() }
            return storedObject
        }
        set {
            lock.lock()
            defer { lock.unlock() }
            storedObject = newValue
        }
    }
}
