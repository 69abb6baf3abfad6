import Dispatch
import Foundation
import Operations

/// Cancels an operation with `AsyncOperationError.timedOut` if it has not finished `timeout`
/// seconds after it started.
///
/// The timer starts when the operation starts executing (time spent waiting for dependencies,
/// conditions or categories does not count) and is cancelled when it finishes; it holds the
/// operation only weakly, so nothing is kept alive afterwards. An `AsyncBlockOperation` whose
/// continuation is never called finishes when the timeout fires; a subclass decides how to react
/// to the cancellation, as with any cancellation.
///
/// One observer may be added to several operations; each gets its own timer.
public struct TimeoutObserver: OperationObserver {
    /// Seconds the operation may execute before it is cancelled.
    public let timeout: TimeInterval
    private let timers = TimerTable()

    /// Creates an observer that cancels the operation `timeout` seconds after it starts.
    public init(timeout: TimeInterval) {
        self.timeout = timeout
    }

    /// Creates an observer that cancels the operation `timeout` after it starts:
    /// `init(timeout:)` with a `Duration`.
    @available(macOS 13, iOS 16, tvOS 16, watchOS 9, *)
    public init(timeout: Duration) {
        self.timeout = timeout.timeInterval
    }

    public func operationDidStart(_ operation: AsyncOperation) {
        let timeout = self.timeout
        let timer = DispatchSource.makeTimerSource(queue: .global())
        timer.setEventHandler { [weak operation] in
            operation?.cancel(with: AsyncOperationError.timedOut(after: timeout))
        }
        timer.schedule(deadline: .now() + timeout)
        timers.insert(timer, for: operation)
        timer.resume()
    }

    public func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        timers.remove(for: operation)?.cancel()
    }
}

/// The timers a `TimeoutObserver` runs, one per operation.
// @unchecked Sendable: the table is only reached under its lock (Dispatch's timer sources are not
// marked Sendable on Linux, though Dispatch lets any thread cancel them).
private struct TimerTable: @unchecked Sendable {
    private let timers = Locked<[ObjectIdentifier: any DispatchSourceTimer]>.make([:])

    func insert(_ timer: any DispatchSourceTimer, for operation: AsyncOperation) {
        timers.withLock { $0[ObjectIdentifier(operation)] = timer }
    }

    func remove(for operation: AsyncOperation) -> (any DispatchSourceTimer)? {
        timers.withLock { $0.removeValue(forKey: ObjectIdentifier(operation)) }
    }
}
