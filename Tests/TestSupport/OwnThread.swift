import Foundation

/// Runs `body` on a thread of its own, and returns a signal that fires once `body` has returned.
///
/// For test drivers that sleep between actions (cancelling operations at chosen moments, say):
/// sleeping on one of Dispatch's or Swift's shared threads would hold up the very work under
/// test, as Linux adds threads to those pools only after a delay.
///
/// ```swift
/// let done = runOnOwnThread { sleep(until: start, plusMicroseconds: 500); operation.cancel() }
/// #expect(done.wait())
/// ```
public func runOnOwnThread(_ body: @escaping @Sendable () -> Void) -> Signal {
    let done = Signal()
    let thread = Thread {
        body()
        done.signal()
    }
    thread.start()
    return done
}

/// Sleeps until `microseconds` after `start`; returns at once if that moment has passed.
public func sleep(until start: DispatchTime, plusMicroseconds microseconds: UInt32) {
    let deadline = start.uptimeNanoseconds + UInt64(microseconds) * 1_000
    let now = DispatchTime.now().uptimeNanoseconds
    if deadline > now {
        usleep(UInt32(min((deadline - now) / 1_000, UInt64(UInt32.max))))
    }
}
