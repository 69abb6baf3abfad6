/// The value a `ResultOperation` produced, kept by its lifecycle behind one reference (set once,
/// never changed): an existential takes four words, and only a `ResultOperation` has one.
final class ProducedOutput: Sendable {
    let value: any Sendable

    init(_ value: any Sendable) {
        self.value = value
    }
}
