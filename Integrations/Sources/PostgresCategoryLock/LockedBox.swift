import Foundation

/// A value reached only while holding its lock.
final class LockedBox<Value: Sendable>: @unchecked Sendable { // @unchecked: `value` is only touched while holding `lock`
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// An answer given once, by whichever of several tasks comes first; the later ones are ignored.
final class FirstAnswer: Sendable {
    private struct State: Sendable {
        var answer: Bool?
        var handler: (@Sendable (Bool) -> Void)?
    }

    private let state = LockedBox(State())

    /// Calls `handler` with the answer, at once if it was given already.
    func onFirst(_ handler: @escaping @Sendable (Bool) -> Void) {
        let given = state.withLock { state -> Bool? in
            if state.answer == nil { state.handler = handler }
            return state.answer
        }
        if let given { handler(given) }
    }

    /// Gives the answer, unless one was given before.
    func give(_ answer: Bool) {
        let handler = state.withLock { state -> (@Sendable (Bool) -> Void)? in
            guard state.answer == nil else { return nil }
            state.answer = answer
            defer { state.handler = nil }
            return state.handler
        }
        handler?(answer)
    }
}
