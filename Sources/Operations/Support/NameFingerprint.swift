/// A quick hash of a name's bytes, for the engine's tables of category names (`CategoryTable`,
/// `SingleCategorySets`): eight bytes at a time, a multiply and a shift each, where `Hasher`
/// would run SipHash over them.
enum NameFingerprint {
    /// The hash of `bytes`, and whether every byte is ASCII.
    static func of(_ bytes: UnsafeBufferPointer<UInt8>) -> (hash: UInt64, isASCII: Bool) {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325 ^ UInt64(bytes.count)
        var union: UInt64 = 0
        guard let base = bytes.baseAddress else { return (hash, true) }
        var offset = 0
        while offset + 8 <= bytes.count {
            let word = UnsafeRawPointer(base + offset).loadUnaligned(as: UInt64.self)
            union |= word
            hash = mix(hash, word)
            offset += 8
        }
        if offset < bytes.count {
            var word: UInt64 = 0
            for index in offset..<bytes.count {
                word = word << 8 | UInt64(bytes[index])
            }
            union |= word
            hash = mix(hash, word)
        }
        return (hash, union & 0x8080_8080_8080_8080 == 0)
    }

    private static func mix(_ hash: UInt64, _ word: UInt64) -> UInt64 {
        let mixed = (hash ^ word) &* 0x9E37_79B9_7F4A_7C15
        return mixed ^ (mixed >> 29)
    }
}
