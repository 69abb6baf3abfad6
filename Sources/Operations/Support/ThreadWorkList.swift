#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Runs follow-up work iteratively instead of recursively.
///
/// Finishing one operation can finish the next (a cancelled dependency fails a condition, which
/// finishes its dependent, which fails the next condition, ...). Done by plain calls, a chain of a
/// million operations would need a million stack frames. Work scheduled through the trampoline
/// while this thread is already inside it is queued and run by the outermost call in a loop.
enum Trampoline {
    static func run(_ work: @escaping () -> Void) {
        run(with: work) { $0() }
    }

    /// Runs `work(context)`; pass a closure that captures nothing, so that nothing is allocated
    /// unless the call has to be queued.
    static func run<Context>(with context: Context, _ work: @escaping (Context) -> Void) {
        let list = ThreadWorkList.current
        if list.isDraining {
            list.pending.append { work(context) }
            return
        }
        list.isDraining = true
        work(context)
        guard !list.pending.isEmpty else {
            list.isDraining = false
            return
        }
        var index = 0
        while index < list.pending.count {
            let next = list.pending[index]
            index += 1
            next()
            if index >= 1024 {
                list.pending.removeFirst(index)
                index = 0
            }
        }
        list.pending.removeAll(keepingCapacity: false)
        list.isDraining = false
    }
}

/// Releases object graphs iteratively.
///
/// An operation that is deallocated releases its dependencies, which may be released in turn;
/// for a long chain of never-run operations that recursion overflows the stack. Objects handed
/// here while the thread is already releasing are parked and dropped by the outermost call.
enum DeferredRelease {
    /// Takes the objects out of `objects` (leaving it empty, so the caller holds no reference that
    /// would outlive the loop) and releases them without recursing.
    static func release(_ objects: inout [AnyObject]) {
        guard !objects.isEmpty else { return }
        let list = ThreadWorkList.current
        list.graveyard.append(contentsOf: objects)
        objects.removeAll()
        if list.isReleasing { return }
        list.isReleasing = true
        while !list.graveyard.isEmpty {
            _ = list.graveyard.removeLast()
        }
        list.isReleasing = false
    }
}

/// Per-thread scratch state for `Trampoline`, `DeferredRelease` and `ConditionKinds`.
final class ThreadWorkList {
    var isDraining = false
    var pending: [() -> Void] = []
    var isReleasing = false
    /// The condition type `ConditionKinds` was last asked about on this thread, and its answer.
    var lastConditionType: ObjectIdentifier?
    var lastConditionTypeIsSatisfiedByConstruction = false
    var graveyard: [AnyObject] = []
    /// Set while an `AsyncOperationQueue` hands operations to Foundation's implementation, so
    /// that its overrides pass them straight through if Foundation calls back into them.
    var isForwardingToFoundation = false

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { pointer in
            #if canImport(Darwin)
            Unmanaged<ThreadWorkList>.fromOpaque(pointer).release()
            #else
            if let pointer { Unmanaged<ThreadWorkList>.fromOpaque(pointer).release() }
            #endif
        }
        precondition(status == 0, "pthread_key_create failed: \(status)")
        return key
    }()

    static var current: ThreadWorkList {
        if let existing = pthread_getspecific(key) {
            return Unmanaged<ThreadWorkList>.fromOpaque(existing).takeUnretainedValue()
        }
        let list = ThreadWorkList()
        pthread_setspecific(key, Unmanaged.passRetained(list).toOpaque())
        return list
    }
}
