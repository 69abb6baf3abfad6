import Foundation

/// How long a `RetryOperation` waits before each retry: not at all, a fixed time, or a time that
/// grows exponentially; optionally shortened by a random jitter so that many clients retrying the
/// same service do not retry in step.
///
/// ```swift
/// let atOnce = BackoffPolicy.none                                       // retry at once
/// let steady = BackoffPolicy.fixed(1)                                   // 1 s before every retry
/// let growing = BackoffPolicy.exponential(initial: 0.5, maximum: 30)    // 0.5 s, 1 s, 2 s, 4 s, ... at most 30 s
/// let spread = growing.withJitter()                                     // each of those, times a random 0...1
/// ```
public struct BackoffPolicy: Sendable {
    private enum Growth: Sendable {
        case none
        case fixed(TimeInterval)
        case exponential(initial: TimeInterval, multiplier: Double, maximum: TimeInterval)
    }

    private let growth: Growth
    private let jitter: Double
    private let random: @Sendable () -> Double

    private init(_ growth: Growth, jitter: Double = 0, random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }) {
        self.growth = growth
        self.jitter = jitter
        self.random = random
    }

    /// Retry at once.
    public static let none = BackoffPolicy(.none)

    /// Wait `seconds` before every retry.
    public static func fixed(_ seconds: TimeInterval) -> BackoffPolicy {
        BackoffPolicy(.fixed(seconds))
    }

    /// Wait `initial` seconds before the first retry, and `multiplier` times longer before each
    /// one after that, never more than `maximum` seconds.
    public static func exponential(initial: TimeInterval, multiplier: Double = 2, maximum: TimeInterval = .infinity) -> BackoffPolicy {
        BackoffPolicy(.exponential(initial: initial, multiplier: multiplier, maximum: maximum))
    }

    /// Wait `delay` before every retry: `fixed(_:)` with a `Duration`.
    @available(macOS 13, iOS 16, tvOS 16, watchOS 9, *)
    public static func fixed(_ delay: Duration) -> BackoffPolicy {
        fixed(delay.timeInterval)
    }

    /// `exponential(initial:multiplier:maximum:)` with `Duration`s; `maximum` `nil` is no maximum.
    @available(macOS 13, iOS 16, tvOS 16, watchOS 9, *)
    public static func exponential(initial: Duration, multiplier: Double = 2, maximum: Duration? = nil) -> BackoffPolicy {
        exponential(initial: initial.timeInterval, multiplier: multiplier, maximum: maximum?.timeInterval ?? .infinity)
    }

    /// The same policy with each delay shortened by a random part of up to `fraction` of it: a
    /// delay `d` becomes a value between `d * (1 - fraction)` and `d`. A `fraction` of 1 (the
    /// default) is "full jitter", 0.5 "equal jitter".
    ///
    /// - Parameters:
    ///   - fraction: how much of each delay the jitter may take away, from 0 (none) to 1 (all).
    ///   - random: returns a number in `0..<1` for each delay; the system's random numbers by
    ///     default. Pass a fixed sequence to make delays predictable in tests.
    public func withJitter(_ fraction: Double = 1, random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }) -> BackoffPolicy {
        BackoffPolicy(growth, jitter: fraction, random: random)
    }

    /// How long to wait before attempt number `attempt` (the first attempt is 1, so the first
    /// retry is 2). Never negative; 0 for the first attempt.
    public func delay(beforeAttempt attempt: Int) -> TimeInterval {
        guard attempt > 1 else { return 0 }
        let base: TimeInterval
        switch growth {
        case .none:
            return 0
        case let .fixed(seconds):
            base = seconds
        case let .exponential(initial, multiplier, maximum):
            // From zero nothing grows: 0 × an overflowed power would read as NaN, not 0.
            let grown = initial == 0 ? 0 : initial * pow(multiplier, Double(attempt - 2))
            base = min(grown.isNaN ? maximum : grown, maximum)
        }
        let delay = Self.clamped(base)
        guard jitter > 0, delay > 0 else { return delay }
        let fraction = min(jitter, 1)
        let draw = min(max(random(), 0), 1)
        return Self.clamped(delay * (1 - fraction * draw))
    }

    private static func clamped(_ seconds: TimeInterval) -> TimeInterval {
        seconds.isNaN || seconds < 0 ? 0 : seconds
    }
}
