import Dispatch
import Foundation
import Operations

/// Becomes true as soon as one of `signals` arrives (heard through a dispatch source, beside the
/// service group's own handling of the same signals). Keep it alive as long as it should listen;
/// hand `isRaised` to the code that asks.
final class SignalFlag {
    private let raised = LockedValue(false)
    private let sources: [any DispatchSourceSignal]

    init(signals: [Int32]) {
        let raised = self.raised
        sources = signals.map { signal in
            Foundation.signal(signal, SIG_IGN) // delivered to the dispatch sources instead
            let source = DispatchSource.makeSignalSource(signal: signal, queue: .global())
            source.setEventHandler { raised.withLock { $0 = true } }
            source.resume()
            return source
        }
    }

    /// Whether one of the signals arrived, readable from any thread.
    var isRaised: @Sendable () -> Bool {
        { [raised] in raised.withLock { $0 } }
    }
}
