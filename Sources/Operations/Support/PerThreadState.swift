#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Per-thread scratch state for `Trampoline`, `DeferredRelease`, `ConditionKinds`,
/// `SingleCategorySets`, the queue's forwarding, the finishes being delivered and the progress
/// applier.
///
/// Only its own thread ever touches an instance (`current` is per thread), so the properties that
/// hold plain values opt out of Swift's dynamic exclusivity checks, which would cost more than most
/// of their uses. Those that hold closures or objects keep the checks: releasing one can run user
/// code (a `deinit`) that comes back here on the same thread while the property is being changed,
/// and the check turns that into a clear crash instead of corrupt memory.
final class PerThreadState {
    @exclusivity(unchecked) var isDraining = false
    var pending: [() -> Void] = []
    @exclusivity(unchecked) var isReleasing = false
    /// The condition types `ConditionKinds` was last asked about on this thread, and its answers.
    @exclusivity(unchecked) var conditionKinds: [(type: ObjectIdentifier, kind: ConditionKinds.Kind)] = []
    /// The one-category sets `SingleCategorySets` built last on this thread, by name (strings
    /// only: releasing them runs no user code).
    @exclusivity(unchecked) var singleCategorySets: [SingleCategorySets.Entry] = []
    var graveyard: [AnyObject] = []
    /// The `AsyncOperationQueue` handing operations to Foundation's implementation on this thread
    /// right now, so that its overrides pass them straight through if Foundation calls back into
    /// them (and only its own: another queue's adds still go through that queue's scheduler).
    @exclusivity(unchecked) var queueForwardingToFoundation: ObjectIdentifier?
    /// The operations whose finish this thread is delivering right now to user code (observers,
    /// a group's progress observers), innermost last: waiting for one of them here could never end.
    @exclusivity(unchecked) var finishing: [ObjectIdentifier] = []
    /// This thread is applying progress changes (`ProgressApplier`).
    @exclusivity(unchecked) var isApplyingProgress = false
    /// Engine locks this thread holds now (debug builds count them: `LockDiscipline`).
    @exclusivity(unchecked) var locksHeld = 0
    /// Who hears this thread's lock violations, if not the default (`LockDiscipline`).
    var lockViolationHandler: LockDiscipline.ViolationHandler?

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { pointer in
            #if canImport(Darwin)
            Unmanaged<PerThreadState>.fromOpaque(pointer).release()
            #else
            if let pointer { Unmanaged<PerThreadState>.fromOpaque(pointer).release() }
            #endif
        }
        precondition(status == 0, "pthread_key_create failed: \(status)")
        return key
    }()

    /// Calls `body` with this thread's state without retaining it: for the hottest reads, where a
    /// retain and release would cost more than the read. Sound because nothing replaces the state
    /// once set and only the key's destructor, at thread exit, releases it; keep it so.
    static func withCurrent<Result>(_ body: (PerThreadState) -> Result) -> Result {
        guard let existing = pthread_getspecific(key) else { return body(current) }
        return Unmanaged<PerThreadState>.fromOpaque(existing)._withUnsafeGuaranteedRef(body)
    }

    static var current: PerThreadState {
        if let existing = pthread_getspecific(key) {
            return Unmanaged<PerThreadState>.fromOpaque(existing).takeUnretainedValue()
        }
        let list = PerThreadState()
        pthread_setspecific(key, Unmanaged.passRetained(list).toOpaque())
        return list
    }
}
