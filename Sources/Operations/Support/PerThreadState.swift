#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Per-thread scratch state for `Trampoline`, `DeferredRelease`, `ConditionKinds`, the queue's
/// forwarding, the finishes being delivered and the progress applier.
final class PerThreadState {
    var isDraining = false
    var pending: [() -> Void] = []
    var isReleasing = false
    /// The condition types `ConditionKinds` was last asked about on this thread, and its answers.
    var conditionKinds: [(type: ObjectIdentifier, isSatisfiedByConstruction: Bool)] = []
    var graveyard: [AnyObject] = []
    /// The `AsyncOperationQueue` handing operations to Foundation's implementation on this thread
    /// right now, so that its overrides pass them straight through if Foundation calls back into
    /// them (and only its own: another queue's adds still go through that queue's scheduler).
    var queueForwardingToFoundation: ObjectIdentifier?
    /// The operations whose finish this thread is delivering right now to user code (observers,
    /// a group's progress observers), innermost last: waiting for one of them here could never end.
    var finishing: [ObjectIdentifier] = []
    /// This thread is applying progress changes (`ProgressApplier`).
    var isApplyingProgress = false
    /// Engine locks this thread holds now (debug builds count them: `LockDiscipline`).
    var locksHeld = 0
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

    static var current: PerThreadState {
        if let existing = pthread_getspecific(key) {
            return Unmanaged<PerThreadState>.fromOpaque(existing).takeUnretainedValue()
        }
        let list = PerThreadState()
        pthread_setspecific(key, Unmanaged.passRetained(list).toOpaque())
        return list
    }
}
