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
        let list = PerThreadState.current
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
                // Released after the list is changed: a release may run a deinit that schedules work.
                withExtendedLifetime(Array(list.pending[..<index])) {
                    list.pending.removeFirst(index)
                }
                index = 0
            }
        }
        let ran = list.pending
        list.pending = []
        list.isDraining = false
        withExtendedLifetime(ran) {} // released last, as above, with nothing draining

    }
}
