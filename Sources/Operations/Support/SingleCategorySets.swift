/// One-category sets, as `ExclusiveCategory` reports its category: built once per name on each
/// thread, not once per condition.
///
/// Building a `Set` costs about a thousand instructions (an aligned allocation, a hash), more
/// than the rest of adding the condition. An app names a handful of categories over and over, so
/// each thread remembers the sets of a few names; when it has eight, the first it met goes.
///
/// A name matches byte for byte: `String`'s `==` would also take a canonically equivalent
/// spelling ("é" composed or not), and the condition must report the spelling it was given (a
/// `FileCategoryLock` names its files after it). Names often differ in one character only
/// ("db.0", "db.1"), so each remembered name keeps a fingerprint of its bytes, and only a name
/// with the same fingerprint is compared in full. Before that, the very string met before (the
/// usual call passes a constant or a stored name) is found by its storage alone: the memo keeps
/// the caller's own string, so it keeps that string's buffer alive while it remembers it.
package enum SingleCategorySets {
    /// How many names each thread remembers.
    static let memoSize = 8

    /// A remembered name, its fingerprint and its set.
    struct Entry {
        let fingerprint: UInt64
        let name: String
        let set: Set<String>
    }

    /// `[name]`, shared with earlier calls for the same name on this thread when remembered.
    package static func set(of name: String) -> Set<String> {
        // The usual call passes the very string met before (a constant, a stored name): found by
        // its storage, without reading its bytes.
        if let known = PerThreadState.withCurrent({ memo in rememberedByStorage(name, in: memo) }) {
            return known
        }
        var name = name // `withUTF8` may make it contiguous first
        let (fingerprint, index) = name.withUTF8 { bytes in
            let fingerprint = NameFingerprint.of(bytes).hash
            return (fingerprint, PerThreadState.withCurrent { memo in rememberedIndex(bytes, fingerprint: fingerprint, in: memo) })
        }
        let memo = PerThreadState.current
        if let index {
            // The same bytes in other storage: remembered with this storage from now on.
            let set = memo.singleCategorySets[index].set
            memo.singleCategorySets[index] = Entry(fingerprint: fingerprint, name: name, set: set)
            return set
        }
        let set: Set<String> = [name]
        if memo.singleCategorySets.count == memoSize {
            memo.singleCategorySets.removeFirst() // the first met goes
        }
        memo.singleCategorySets.append(Entry(fingerprint: fingerprint, name: name, set: set))
        return set
    }

    /// The set this thread remembers for a name with the same storage as `name`, if any: the
    /// same two words (its bytes inline, or the same buffer and count) are the same bytes, as a
    /// string's buffer never changes while the memo shares it.
    private static func rememberedByStorage(_ name: String, in memo: PerThreadState) -> Set<String>? {
        guard MemoryLayout<String>.size == MemoryLayout<(UInt, UInt)>.size else { return nil } // 64-bit platforms
        let words = unsafeBitCast(name, to: (UInt, UInt).self)
        for index in memo.singleCategorySets.indices {
            let known = unsafeBitCast(memo.singleCategorySets[index].name, to: (UInt, UInt).self)
            if known == words {
                return memo.singleCategorySets[index].set
            }
        }
        return nil
    }

    /// Where this thread remembers the name spelled `bytes`, if it does.
    private static func rememberedIndex(_ bytes: UnsafeBufferPointer<UInt8>, fingerprint: UInt64, in memo: PerThreadState) -> Int? {
        for index in memo.singleCategorySets.indices where memo.singleCategorySets[index].fingerprint == fingerprint {
            var candidate = memo.singleCategorySets[index].name
            if candidate.withUTF8({ same($0, bytes) }) {
                return index
            }
        }
        return nil
    }

    /// Byte for byte (`elementsEqual` goes through iterators: several times slower).
    private static func same(_ some: UnsafeBufferPointer<UInt8>, _ other: UnsafeBufferPointer<UInt8>) -> Bool {
        guard some.count == other.count else { return false }
        for index in some.indices where some[index] != other[index] {
            return false
        }
        return true
    }
}
