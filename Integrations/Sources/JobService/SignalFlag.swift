import Dispatch
import Foundation
import Operations

/// Becomes true as soon as SIGTERM or SIGINT arrives, so that `POST /jobs` answers 503 from that
/// moment, before the service group (which handles the same signals) has relayed the shutdown to
/// the queue. Keep it alive as long as it should listen; hand `isRaised` to the code that asks.
///
/// Two ways hear the signal: dispatch sources (everywhere), and, on Linux, a signal handler that
/// runs the moment the signal is delivered and then calls the handler it replaced (libdispatch's,
/// through which the service group hears it too). Install the latter with
/// `hearSignalsImmediately()` once the service group has set up its own handling.
final class SignalFlag {
    private let raised = LockedValue(false)
    private let sources: [any DispatchSourceSignal]

    init() {
        let raised = self.raised
        sources = [SIGTERM, SIGINT].map { signal in
            Foundation.signal(signal, SIG_IGN) // delivered to the dispatch sources instead
            let source = DispatchSource.makeSignalSource(signal: signal, queue: .global())
            source.setEventHandler { raised.withLock { $0 = true } }
            source.resume()
            return source
        }
    }

    /// Whether SIGTERM or SIGINT arrived, readable from any thread.
    var isRaised: @Sendable () -> Bool {
        { [raised] in raised.withLock { $0 } || immediateSignalArrived() }
    }

    /// On Linux, chains a handler that notes the signal the moment it is delivered in front of
    /// the one installed now. Elsewhere the dispatch sources alone tell.
    static func hearSignalsImmediately() {
        #if os(Linux)
        installImmediateHandlers()
        #endif
    }
}

#if os(Linux)
// What a signal handler may touch: a sig_atomic_t it writes, and the handlers it chains to, written
// once before it is installed.
nonisolated(unsafe) private var signalArrived: sig_atomic_t = 0
nonisolated(unsafe) private var previousTerm = sigaction()
nonisolated(unsafe) private var previousInt = sigaction()

private func immediateSignalArrived() -> Bool {
    signalArrived != 0
}

private func installImmediateHandlers() {
    var action = sigaction()
    action.__sigaction_handler.sa_sigaction = { signal, info, context in
        signalArrived = 1
        let previous = signal == SIGTERM ? previousTerm : previousInt
        if previous.sa_flags & SA_SIGINFO != 0 {
            previous.__sigaction_handler.sa_sigaction?(signal, info, context)
        } else if let handler = previous.__sigaction_handler.sa_handler,
                  unsafeBitCast(handler, to: Int.self) != unsafeBitCast(SIG_IGN, to: Int.self),
                  unsafeBitCast(handler, to: Int.self) != unsafeBitCast(SIG_DFL, to: Int.self) {
            handler(signal)
        }
    }
    action.sa_flags = SA_SIGINFO | SA_RESTART
    sigemptyset(&action.sa_mask)
    sigaction(SIGTERM, nil, &previousTerm)
    sigaction(SIGINT, nil, &previousInt)
    sigaction(SIGTERM, &action, nil)
    sigaction(SIGINT, &action, nil)
}
#else
private func immediateSignalArrived() -> Bool { false }
#endif
