/// The arithmetic of the engine's open-addressing tables (`FibonacciSet`, `CategoryTable`):
/// power-of-two sized, Fibonacci hashing, linear probing, and deletion by backward shift (no
/// tombstones).
enum OpenAddressing {
    /// The home bucket of `key` in a table of `size` buckets, a power of two: the top bits of
    /// Fibonacci hashing, in 64 bits on every platform (a 32-bit watch included).
    @inline(__always)
    static func home(of key: UInt64, tableSize size: Int) -> Int {
        Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> UInt64(64 - size.trailingZeroBitCount))
    }

    /// The bucket after `bucket`, wrapping around.
    @inline(__always)
    static func next(_ bucket: Int, tableSize size: Int) -> Int {
        (bucket + 1) & (size - 1)
    }

    /// Whether the entry at `bucket`, whose home bucket is `home`, stays where it is as `gap`, an
    /// earlier bucket of its probe run, empties: its home lies in the cyclic range (gap, bucket],
    /// so moving it back into the gap would put it before its home, where no probe finds it.
    @inline(__always)
    static func staysAfterGap(home: Int, gap: Int, bucket: Int) -> Bool {
        gap <= bucket ? (home > gap && home <= bucket) : (home > gap || home <= bucket)
    }
}
