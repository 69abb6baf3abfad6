/// One async wait for an operation's finish: ended once, by the finish or by giving up, and
/// resumed once, whichever of `suspend(_:)` and `end(finished:)` comes second.
final class FinishWait: Sendable {
    private enum State {
        case waiting
        case suspended(CheckedContinuation<Void, Never>)
        case ended(finished: Bool)
    }

    private let state = Locked<State>.make(.waiting)

    /// The waiting task suspends; resumed at once if the wait has already ended.
    func suspend(_ continuation: CheckedContinuation<Void, Never>) {
        let endedAlready = state.withLock { state -> Bool in
            guard case .waiting = state else { return true }
            state = .suspended(continuation)
            return false
        }
        if endedAlready { continuation.resume() }
    }

    /// Ends the wait: `finished` if the operation finished, `false` if the waiter gave up.
    /// Returns whether this call ended it (only the first does).
    @discardableResult
    func end(finished: Bool) -> Bool {
        let (ended, continuation) = state.withLock { state -> (Bool, CheckedContinuation<Void, Never>?) in
            switch state {
            case .ended:
                return (false, nil)
            case .waiting:
                state = .ended(finished: finished)
                return (true, nil)
            case let .suspended(continuation):
                state = .ended(finished: finished)
                return (true, continuation)
            }
        }
        continuation?.resume()
        return ended
    }

    /// Whether the wait has ended, either way.
    var hasEnded: Bool {
        state.withLock { if case .ended = $0 { true } else { false } }
    }

    /// Whether the wait ended because the operation finished.
    var endedWithFinish: Bool {
        state.withLock { if case .ended(true) = $0 { true } else { false } }
    }
}
