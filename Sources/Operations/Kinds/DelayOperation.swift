import Dispatch
import Foundation

/// An operation that does nothing but take time: it finishes a given interval after it starts
/// executing, or at a given date.
///
/// Make other operations depend on it to hold them back, or put it in a group between two steps.
/// Cancelled while it waits, it finishes at once; cancelled before, it finishes without waiting.
/// It holds no thread while it waits, and nothing once it has finished (its timer is cancelled,
/// so a long delay that was cancelled leaves nothing behind).
///
/// ```swift
/// let pause = DelayOperation(2)                        // two seconds once it starts
/// let nightly = DelayOperation(until: midnight)        // a wall-clock date
/// upload.addDependency(pause)
/// queue.addOperations([pause, upload], waitUntilFinished: false)
/// ```
// @unchecked Sendable: `timer` lives in a `Locked` value; the rest is `AsyncOperation`'s.
public final class DelayOperation: AsyncOperation, @unchecked Sendable {
    private enum Deadline {
        /// Counted from the start of execution, on a clock that does not jump.
        case interval(TimeInterval)
        /// A wall-clock date.
        case date(Date)
    }

    private struct TimerSlot {
        var timer: (any DispatchSourceTimer)?
        var isReleased = false
    }

    private let deadline: Deadline
    private let timer = Locked.make(TimerSlot())

    /// Creates an operation that finishes `interval` seconds after it starts executing. Zero, a
    /// negative interval or NaN finishes at once; an infinite one only when cancelled.
    public init(_ interval: TimeInterval) {
        deadline = .interval(interval.isNaN ? 0 : interval)
        super.init()
    }

    /// Creates an operation that finishes `interval` after it starts executing:
    /// `init(_:)` with a `Duration`.
    @available(macOS 13, iOS 16, tvOS 16, watchOS 9, *)
    public convenience init(_ interval: Duration) {
        self.init(interval.timeInterval)
    }

    /// Creates an operation that finishes at `date` (at once if it has passed when the operation
    /// starts executing). The wait follows the wall clock, so it honours changes of the system time.
    public init(until date: Date) {
        deadline = .date(date)
        super.init()
    }

    /// Starts waiting.
    public override func execute() {
        let remaining: TimeInterval
        switch deadline {
        case let .interval(interval): remaining = interval
        case let .date(date): remaining = date.timeIntervalSinceNow
        }
        guard !isCancelled, remaining > 0 else {
            finish()
            return
        }
        // Beyond ~30 years is forever: only a cancellation ends the wait.
        guard remaining < 1e9 else { return }

        let source = DispatchSource.makeTimerSource(queue: .global())
        switch deadline {
        case .interval: source.schedule(deadline: .now() + remaining)
        case .date: source.schedule(wallDeadline: .now() + remaining)
        }
        source.setEventHandler { [weak self] in
            self?.finish()
        }
        let kept = timer.withLock { slot -> Bool in
            guard !slot.isReleased else { return false }
            slot.timer = source
            return true
        }
        source.resume()
        if !kept {
            source.cancel() // finished (cancelled) while the timer was being made
        }
    }

    override func cancellationDuringExecution() {
        finish()
    }

    override func releaseResources() {
        let source = timer.withLock { slot -> (any DispatchSourceTimer)? in
            slot.isReleased = true
            return slot.timer.take()
        }
        source?.cancel()
    }
}
