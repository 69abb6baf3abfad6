import Foundation
import Operations

/// How long tests wait for something that should happen quickly: generous, so that a test fails
/// only when the event never comes.
public let generousTimeout: TimeInterval = 30

/// Waits until `condition` holds, checking every millisecond; `false` if `timeout` passed first.
@discardableResult
public func waitUntil(timeout: TimeInterval = generousTimeout, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        if Date() > deadline { return false }
        usleep(1_000)
    }
    return true
}

/// Waits, suspending, until `condition` holds; `false` if `timeout` passed first.
public func eventually(timeout: TimeInterval = generousTimeout, _ condition: @Sendable () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        if Date() > deadline { return false }
        try? await Task.sleep(nanoseconds: 1_000_000)
    }
    return true
}

/// A name no other test uses, for operations and categories.
public func uniqueName(_ prefix: String) -> String {
    "\(prefix)-\(UUID().uuidString.prefix(8))"
}

/// An error a test throws.
public struct TestFailure: Error, Equatable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { "TestFailure(\(reason))" }
}

/// Operations a test finishes by hand: each runs until `finish(name)`.
public final class HeldOperations: Sendable {
    private let continuations = LockedValue<[String: AsyncBlockOperation.Continuation]>([:])

    public init() {}

    /// An operation named `name` that runs until `finish(name)`.
    public func make(_ name: String) -> AsyncBlockOperation {
        let operation = AsyncBlockOperation { [continuations] finish in
            continuations.withLock { $0[name] = finish }
        }
        operation.name = name
        return operation
    }

    /// Whether the operation named `name` has started (and not been finished by the test).
    public func hasStarted(_ name: String) -> Bool {
        continuations.withLock { $0[name] != nil }
    }

    /// Finishes the operation named `name`, with `error` if any.
    public func finish(_ name: String, with error: (any Error)? = nil) {
        continuations.withLock { $0.removeValue(forKey: name) }?(error)
    }
}
