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
import Synchronization

// What the signal handler touches: atomics only. The flag, and the handlers it chains to (by bit
// pattern, and whether each takes the three-argument form), stored before it is installed.
private let signalArrived = Atomic<Int32>(0)
private let previousTermHandler = Atomic<UInt>(0)
private let previousIntHandler = Atomic<UInt>(0)
private let previousTermTakesInfo = Atomic<Bool>(false)
private let previousIntTakesInfo = Atomic<Bool>(false)

private func immediateSignalArrived() -> Bool {
    signalArrived.load(ordering: .relaxed) != 0
}

private func installImmediateHandlers() {
    for signal in [SIGTERM, SIGINT] {
        var previous = sigaction()
        sigaction(signal, nil, &previous)
        let takesInfo = previous.sa_flags & SA_SIGINFO != 0
        let pattern = takesInfo
            ? unsafeBitCast(previous.__sigaction_handler.sa_sigaction, to: UInt.self)
            : unsafeBitCast(previous.__sigaction_handler.sa_handler, to: UInt.self)
        if signal == SIGTERM {
            previousTermHandler.store(pattern, ordering: .releasing)
            previousTermTakesInfo.store(takesInfo, ordering: .releasing)
        } else {
            previousIntHandler.store(pattern, ordering: .releasing)
            previousIntTakesInfo.store(takesInfo, ordering: .releasing)
        }
        var action = sigaction()
        action.__sigaction_handler.sa_sigaction = { signal, info, context in
            signalArrived.store(1, ordering: .relaxed)
            let isTerm = signal == SIGTERM
            let pattern = isTerm ? previousTermHandler.load(ordering: .acquiring) : previousIntHandler.load(ordering: .acquiring)
            // 0 is no handler (SIG_DFL), 1 is SIG_IGN: nothing to chain to.
            guard pattern > 1 else { return }
            if isTerm ? previousTermTakesInfo.load(ordering: .acquiring) : previousIntTakesInfo.load(ordering: .acquiring) {
                typealias Handler = @convention(c) (Int32, UnsafeMutablePointer<siginfo_t>?, UnsafeMutableRawPointer?) -> Void
                unsafeBitCast(pattern, to: Handler.self)(signal, info, context)
            } else {
                typealias Handler = @convention(c) (Int32) -> Void
                unsafeBitCast(pattern, to: Handler.self)(signal)
            }
        }
        action.sa_flags = SA_SIGINFO | SA_RESTART
        sigemptyset(&action.sa_mask)
        sigaction(signal, &action, nil)
    }
}
#else
private func immediateSignalArrived() -> Bool { false }
#endif
