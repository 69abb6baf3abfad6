/// A weak reference that can be stored in collections.
struct Weak<Object: AnyObject> {
    weak var object: Object?

    init(_ object: Object) {
        self.object = object
    }
}

extension Weak: Sendable where Object: Sendable {}

/// A weak reference to a finish watcher (a dependent operation or a finish listener).
struct WeakFinishWatcher: Sendable {
    weak var object: (any FinishWatcher)?

    init(_ object: any FinishWatcher) {
        self.object = object
    }
}
