import Foundation

/// The categories' table of `ExclusivityState`: a value per category name, found by a quick hash
/// of the name's bytes (`NameFingerprint`) where a `Dictionary` runs a full `Hasher` over them.
///
/// Every exclusive operation looks its category up twice (as it asks, as it gives it back), and a
/// `Dictionary<String, _>` lookup cost about 440 instructions; this one costs the hash and
/// usually one comparison. It is an open-addressing table (`OpenAddressing`), as `FibonacciSet`.
///
/// Names compare as `String`s do, by canonical equivalence (`"caf\u{E9}"` and `"cafe\u{301}"` are
/// one category, and so are the Kelvin sign and `"K"`). A name is hashed in its canonical
/// composition (NFC, `CategoryName.canonical`): an ASCII name is its own, and equivalent names
/// share it. A name that is not ASCII, not to depend on Foundation's normalization agreeing with
/// the standard library's in every case, is also compared with every entry before a lookup
/// concludes that it is absent (such names are rare, and their lookups slower).
struct CategoryTable<Value> {
    // Three parallel arrays, rather than one array of entries: reading a fingerprint then copies
    // no name and no value.
    /// 0 marks an empty bucket (a fingerprint of 0 is stored as 1).
    private var fingerprints: [UInt64] = []
    private var names: [String] = []
    /// `nil` in an empty bucket, and for the moment a change empties an entry, which then leaves.
    private var values: [Value?] = []
    private(set) var count = 0

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
    struct Key {
        let name: String
        /// The hash of the name's canonical composition; never 0.
        let fingerprint: UInt64
        let isASCII: Bool

        init(_ name: String) {
            self.name = name
            var bytes = name // `withUTF8` may make it contiguous first
            var (hash, isASCII) = bytes.withUTF8 { NameFingerprint.of($0) }
            if !isASCII {
                var canonical = CategoryName.canonical(name)
                hash = canonical.withUTF8 { NameFingerprint.of($0).hash }
            }
            self.fingerprint = hash == 0 ? 1 : hash // 0 marks an empty bucket
            self.isASCII = isASCII
        }
    }

    // MARK: - The table

    /// The bucket of the entry named `key`'s name (compared as `String`s), if there is one.
    private func find(_ key: Key) -> Int? {
        guard count > 0 else { return nil }
        var bucket = OpenAddressing.home(of: key.fingerprint, tableSize: fingerprints.count)
        while fingerprints[bucket] != 0 {
            if fingerprints[bucket] == key.fingerprint && names[bucket] == key.name { return bucket }
            bucket = OpenAddressing.next(bucket, tableSize: fingerprints.count)
        }
        guard !key.isASCII else { return nil }
        return names.indices.first { fingerprints[$0] != 0 && names[$0] == key.name } // see the type's comment
    }

    private mutating func insert(_ key: Key, _ value: Value) {
        if (count + 1) * 2 > fingerprints.count {
            grow()
        }
        place(key.fingerprint, key.name, value)
        count += 1
    }

    private mutating func place(_ fingerprint: UInt64, _ name: String, _ value: Value?) {
        var bucket = OpenAddressing.home(of: fingerprint, tableSize: fingerprints.count)
        while fingerprints[bucket] != 0 {
            bucket = OpenAddressing.next(bucket, tableSize: fingerprints.count)
        }
        fingerprints[bucket] = fingerprint
        names[bucket] = name
        values[bucket] = value
    }

    private mutating func remove(at bucket: Int) {
        fingerprints[bucket] = 0
        names[bucket] = ""
        values[bucket] = nil
        count -= 1
        closeGap(at: bucket)
        if count == 0 && fingerprints.count > 1024 {
            self = CategoryTable() // after a burst of names: the walks over every bucket stay short
        }
    }

    /// Moves later entries of the probe run back into the emptied `gap`, so that every entry stays
    /// reachable from its home bucket.
    private mutating func closeGap(at gap: Int) {
        var gap = gap
        var bucket = OpenAddressing.next(gap, tableSize: fingerprints.count)
        while fingerprints[bucket] != 0 {
            let home = OpenAddressing.home(of: fingerprints[bucket], tableSize: fingerprints.count)
            if !OpenAddressing.staysAfterGap(home: home, gap: gap, bucket: bucket) {
                fingerprints.swapAt(gap, bucket)
                names.swapAt(gap, bucket)
                values.swapAt(gap, bucket)
                gap = bucket
            }
            bucket = OpenAddressing.next(bucket, tableSize: fingerprints.count)
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
