/// One-category sets, as `ExclusiveCategory` reports its category: built once per name on each
/// thread, not once per condition.
///
/// Building a `Set` costs about a thousand instructions (an aligned allocation, a hash), more
/// than the rest of adding the condition. An app names a handful of categories over and over, so
/// each thread remembers the sets of the last few names it was asked for. Looking one up
/// compares names, usually the same string storage, which is one comparison.
package enum SingleCategorySets {
    /// How many names each thread remembers.
    static let memoSize = 8

    /// `[name]`, shared with earlier calls for the same name on this thread when remembered.
    package static func set(of name: String) -> Set<String> {
        let memo = PerThreadState.current
        for index in memo.singleCategorySets.indices where memo.singleCategorySets[index].name == name {
            return memo.singleCategorySets[index].set
        }
        let set: Set<String> = [name]
        if memo.singleCategorySets.count == memoSize {
            memo.singleCategorySets.removeFirst() // the oldest goes
        }
        memo.singleCategorySets.append((name, set))
        return set
    }
}
