/// A small, fast, seedable random number generator (SplitMix64), for reproducible stress runs.
///
/// The same seed always yields the same sequence, so a failing run can be replayed by seed:
///
/// ```swift
/// var random = SplitMix64(seed: seed)
/// let count = Int.random(in: 1...10, using: &random)
/// ```
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Creates a generator whose sequence is determined by `seed`.
    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}
