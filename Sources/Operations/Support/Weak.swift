/// A weak reference that can be stored in collections.
struct Weak<Object: AnyObject> {
    weak var object: Object?

    init(_ object: Object) {
        self.object = object
    }
}

extension Weak: Sendable where Object: Sendable {}
