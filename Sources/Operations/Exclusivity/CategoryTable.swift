import Foundation

/// The categories' table of `ExclusivityState`: a value per category name, found by a hash of the
/// name's bytes where a `Dictionary` runs a full `Hasher` over them.
///
/// Every exclusive operation looks its category up twice (as it asks, as it gives it back), and a
/// `Dictionary<String, _>` lookup cost about 440 instructions of W2's; this one costs a fingerprint
/// of the bytes (FNV-1a) and usually one comparison. It is an open-addressing table, linear
/// probing, deletion by backward shift, like `FibonacciSet`.
///
/// Names compare as `String`s do, by canonical equivalence (`"caf\u{E9}"` and `"cafe\u{301}"` are
/// one category, and so are the Kelvin sign and `"K"`). An ASCII name is its own canonical form,
/// so two ASCII names are equal exactly when their bytes are: their fingerprints then agree. A
/// name with other bytes is fingerprinted in canonical composition (NFC); and, not to depend on
/// Foundation's normalization agreeing with the standard library's, a lookup that misses while
/// either side is not ASCII compares with every entry before it concludes.
struct CategoryTable<Value> {
    // Three parallel arrays, power-of-two sized and at most half full, rather than one array of
    // entries: reading a fingerprint then copies no name and no value.
    /// 0 marks an empty bucket (a fingerprint of 0 is stored as 1).
    private var fingerprints: [UInt64] = []
    private var names: [String] = []
    /// `nil` in an empty bucket, and for the moment a change empties an entry, which then leaves.
    private var values: [Value?] = []
    private(set) var count = 0
    /// How many entries have a name that is not ASCII: while there are none, a miss of an ASCII
    /// name needs no look beyond its probe run.
    private var nonASCIICount = 0

    /// The value of the category `name`, if it has one.
    subscript(name: String) -> Value? {
        find(Key(name)).flatMap { values[$0] }
    }

    /// Calls `body` with the value of `name` (`nil` if it has none), in place: a value it sets
    /// goes in, a value it sets to `nil` leaves the table.
    mutating func update<Result>(_ name: String, _ body: (inout Value?) -> Result) -> Result {
        let key = Key(name)
        guard let bucket = find(key) else {
            var value: Value?
            let result = body(&value)
            if let value {
                insert(key, value)
            }
            return result
        }
        let result = body(&values[bucket])
        if values[bucket] == nil {
            remove(at: bucket)
        }
        return result
    }

    /// The names whose values satisfy `predicate`, in no particular order.
    func names(where predicate: (Value) -> Bool) -> [String] {
        values.indices.compactMap { index in
            guard let value = values[index], predicate(value) else { return nil }
            return names[index]
        }
    }

    /// Whether some value satisfies `predicate`.
    func containsValue(where predicate: (Value) -> Bool) -> Bool {
        values.contains { value in value.map(predicate) ?? false }
    }

    /// Calls `body` with every value, in no particular order.
    func forEachValue(_ body: (Value) -> Void) {
        for case let value? in values {
            body(value)
        }
    }

    // MARK: - Keys

    /// A name with its fingerprint.
    private struct Key {
        let name: String
        let fingerprint: UInt64
        let isASCII: Bool

        init(_ name: String) {
            self.name = name
            var bytes = name
            let (fingerprint, isASCII) = bytes.withUTF8 { Key.fingerprint(of: $0) }
            var hash = fingerprint
            if !isASCII {
                var canonical = name.precomposedStringWithCanonicalMapping
                hash = canonical.withUTF8 { Key.fingerprint(of: $0).hash }
            }
            self.fingerprint = hash == 0 ? 1 : hash // 0 marks an empty bucket
            self.isASCII = isASCII
        }

        static func isASCII(_ name: String) -> Bool {
            name.utf8.allSatisfy { $0 < 0x80 }
        }

        /// A hash of the bytes, eight at a time (a multiply and a shift each), and whether every
        /// byte is ASCII.
        private static func fingerprint(of bytes: UnsafeBufferPointer<UInt8>) -> (hash: UInt64, isASCII: Bool) {
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

    // MARK: - The table

    /// The bucket of the entry named `key`'s name (compared as `String`s), if there is one.
    private func find(_ key: Key) -> Int? {
        guard count > 0 else { return nil }
        var bucket = home(of: key.fingerprint)
        while fingerprints[bucket] != 0 {
            if fingerprints[bucket] == key.fingerprint && hasName(key.name, at: bucket) { return bucket }
            bucket = next(bucket)
        }
        guard !key.isASCII || nonASCIICount > 0 else { return nil }
        return names.indices.first { fingerprints[$0] != 0 && names[$0] == key.name } // see the type's comment
    }

    /// Whether the entry at `bucket` is named `name`, read in place (no copy of the name).
    private func hasName(_ name: String, at bucket: Int) -> Bool {
        names.withUnsafeBufferPointer { $0[bucket] == name }
    }

    private mutating func insert(_ key: Key, _ value: Value) {
        if (count + 1) * 2 > fingerprints.count {
            grow()
        }
        place(key.fingerprint, key.name, value)
        count += 1
        if !key.isASCII { nonASCIICount += 1 }
    }

    private mutating func place(_ fingerprint: UInt64, _ name: String, _ value: Value?) {
        var bucket = home(of: fingerprint)
        while fingerprints[bucket] != 0 {
            bucket = next(bucket)
        }
        fingerprints[bucket] = fingerprint
        names[bucket] = name
        values[bucket] = value
    }

    private mutating func remove(at bucket: Int) {
        if !Key.isASCII(names[bucket]) { nonASCIICount -= 1 }
        fingerprints[bucket] = 0
        names[bucket] = ""
        values[bucket] = nil
        count -= 1
        closeGap(at: bucket)
    }

    private func home(of fingerprint: UInt64) -> Int {
        Int(truncatingIfNeeded: (fingerprint &* 0x9E37_79B9_7F4A_7C15) >> UInt64(64 - fingerprints.count.trailingZeroBitCount))
    }

    private func next(_ bucket: Int) -> Int {
        (bucket + 1) & (fingerprints.count - 1)
    }

    /// Moves later entries of the probe run back into the emptied `gap`, so that every entry stays
    /// reachable from its home bucket without tombstones.
    private mutating func closeGap(at gap: Int) {
        var gap = gap
        var bucket = next(gap)
        while fingerprints[bucket] != 0 {
            let home = home(of: fingerprints[bucket])
            let homeIsAfterGap = gap <= bucket ? (home > gap && home <= bucket) : (home > gap || home <= bucket)
            if !homeIsAfterGap {
                fingerprints.swapAt(gap, bucket)
                names.swapAt(gap, bucket)
                values.swapAt(gap, bucket)
                gap = bucket
            }
            bucket = next(bucket)
        }
    }

    private mutating func grow() {
        let size = max(16, fingerprints.count * 2)
        var (oldFingerprints, oldNames, oldValues) = (Array(repeating: UInt64(0), count: size), Array(repeating: "", count: size), [Value?](repeating: nil, count: size))
        swap(&oldFingerprints, &fingerprints)
        swap(&oldNames, &names)
        swap(&oldValues, &values)
        for index in oldFingerprints.indices where oldFingerprints[index] != 0 {
            place(oldFingerprints[index], oldNames[index], oldValues[index].take()) // the value moved, not copied
        }
    }
}

extension CategoryTable: Sendable where Value: Sendable {}
