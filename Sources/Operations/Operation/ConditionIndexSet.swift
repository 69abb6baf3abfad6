/// A set of an operation's conditions, by index: which are satisfied by construction, which answered
/// together, which are still awaited in an evaluation.
///
/// One bit each for the first 64 conditions and a flag each beyond. An operation rarely has more
/// than a few conditions, so the flags stay empty and nothing is allocated.
struct ConditionIndexSet {
    private var first: UInt64 = 0
    private var later: [Bool] = []

    /// No condition.
    init() {}

    /// Every condition below `count`.
    init(below count: Int) {
        first = count >= 64 ? .max : (1 << UInt64(count)) - 1
        later = count > 64 ? Array(repeating: true, count: count - 64) : []
    }

    /// Whether no condition is in the set.
    var isEmpty: Bool {
        first == 0 && !later.contains(true)
    }

    /// Whether the condition at `index` is in the set.
    func contains(_ index: Int) -> Bool {
        guard index >= 0 else { return false }
        guard index >= 64 else { return first & (1 << UInt64(index)) != 0 }
        return index - 64 < later.count && later[index - 64]
    }

    /// Puts the condition at `index` in the set, or takes it out.
    mutating func set(_ index: Int, to isMember: Bool) {
        precondition(index >= 0, "a condition's index is never negative")
        guard index >= 64 else {
            if isMember { first |= 1 << UInt64(index) } else { first &= ~(1 << UInt64(index)) }
            return
        }
        setLater(index - 64, to: isMember)
    }

    /// The flags beyond the first 64, out of line: inlined into a loop that sets members, the
    /// optimizer made `later` unique before the loop, allocating an array per loop even when
    /// every index was below 64.
    @inline(never)
    private mutating func setLater(_ offset: Int, to isMember: Bool) {
        if offset >= later.count {
            guard isMember else { return }
            later.append(contentsOf: repeatElement(false, count: offset - later.count + 1))
        }
        later[offset] = isMember
    }

    /// Calls `body` with each index in the set, in order.
    func forEach(_ body: (Int) -> Void) {
        var bits = first
        while bits != 0 {
            body(bits.trailingZeroBitCount)
            bits &= bits - 1
        }
        for (offset, isMember) in later.enumerated() where isMember {
            body(64 + offset)
        }
    }
}
