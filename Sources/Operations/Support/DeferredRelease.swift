/// Releases object graphs iteratively.
///
/// An operation that is deallocated releases its dependencies, which may be released in turn;
/// for a long chain of never-run operations that recursion overflows the stack. Objects handed
/// here while the thread is already releasing are parked and dropped by the outermost call.
enum DeferredRelease {
    /// Takes the objects out of `objects` (leaving it empty, so the caller holds no reference that
    /// would outlive the loop) and releases them without recursing. `objects` must be the
    /// caller's own (a local): the deinits of the objects it releases must not reach it.
    static func release<Object: AnyObject>(_ objects: inout SmallArray<Object>) {
        guard !objects.isEmpty else { return }
        let list = PerThreadState.current
        if list.isReleasing {
            for object in objects {
                list.graveyard.append(object)
            }
            objects.removeAll()
            return
        }
        list.isReleasing = true
        // Released here, one level down: whatever their deinits release is parked in the
        // graveyard meanwhile, and dropped by the loop below.
        objects.removeAll()
        while !list.graveyard.isEmpty {
            _ = list.graveyard.removeLast()
        }
        list.isReleasing = false
    }
}
