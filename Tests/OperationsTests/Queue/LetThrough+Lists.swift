@testable import Operations

// The two kinds of what a `LetThrough` lets go on, each listed apart, for the scheduler's tests.
extension QueueScheduler.LetThrough {
    /// The operations that go on with their conditions or categories, in order.
    var proceed: [AsyncOperation] {
        onward.compactMap { if case let .proceed(operation) = $0 { operation } else { nil } }
    }

    /// The gates that open, in order.
    var gatesToOpen: [GateOperation] {
        onward.compactMap { if case let .openGate(gate) = $0 { gate } else { nil } }
    }
}
