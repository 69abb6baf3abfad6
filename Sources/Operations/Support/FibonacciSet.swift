/// How `FibonacciSet` tells its members apart: a 64-bit key whose bits are already spread or
/// sequential (a ticket), which one multiplication hashes well. Keys a fixed stride apart (object
/// addresses) must be mixed first: see `OperationIdentityKeying.spread(address:)`.
protocol FibonacciKeying {
    associatedtype Element
    /// The bits to hash.
    static func key(of element: Element) -> UInt64
    /// Whether two elements are the same member.
    static func same(_ element: Element, _ other: Element) -> Bool
}

/// A set for the scheduler's hot paths: a small open-addressing table (linear probing, deletion
/// by backward shift) hashed by Fibonacci hashing, a few instructions per insert and remove where
/// `Set` runs a full `Hasher`. Part of whatever state owns it: it takes no lock of its own.
struct FibonacciSet<Keying: FibonacciKeying> {
    typealias Element = Keying.Element

    /// Power-of-two sized, at most half full; `nil` marks an empty bucket.
    private var buckets: [Element?] = []
    /// How many members it has.
    private(set) var count = 0

    /// Whether it has no member.
    var isEmpty: Bool { count == 0 }

    /// How many buckets its table has (0 before the first insert, and after a burst drained).
    var tableSize: Int { buckets.count }

    /// Every member, in no particular order.
    var all: [Element] {
        buckets.compactMap { $0 }
    }

    /// Whether `element` is a member.
    func contains(_ element: Element) -> Bool {
        guard count > 0 else { return false }
        var bucket = home(of: element)
        while let occupant = buckets[bucket] {
            if Keying.same(occupant, element) { return true }
            bucket = next(bucket)
        }
        return false
    }

    /// Adds `element`, unless it is a member already.
    mutating func insert(_ element: Element) {
        if (count + 1) * 2 > buckets.count {
            grow()
        }
        var bucket = home(of: element)
        while let occupant = buckets[bucket] {
            if Keying.same(occupant, element) { return }
            bucket = next(bucket)
        }
        buckets[bucket] = element
        count += 1
    }

    /// Removes `element`; whether it was a member.
    @discardableResult
    mutating func remove(_ element: Element) -> Bool {
        guard count > 0 else { return false } // the common case: an empty set
        var bucket = home(of: element)
        while let occupant = buckets[bucket] {
            if Keying.same(occupant, element) {
                buckets[bucket] = nil
                count -= 1
                closeGap(at: bucket)
                releaseTableIfEmpty()
                return true
            }
            bucket = next(bucket)
        }
        return false
    }

    /// Makes room for `additional` more members at once: a batch added together grows the table
    /// once instead of once per doubling.
    mutating func reserveCapacity(forAdding additional: Int) {
        guard (count + additional) * 2 > buckets.count else { return }
        grow(toHold: count + additional)
    }

    /// Drops a big table once nothing is left in it (after a burst, or a reservation nobody
    /// used); a small one stays for the steady trickle.
    mutating func releaseTableIfEmpty() {
        if count == 0 && buckets.count > 2048 {
            buckets = []
        }
    }

    /// How far its members sit from their home buckets, in buckets, all together: about a
    /// fifth of `count` for well-spread keys at a third full, the usual load after growing. For
    /// tests of a keying's spread.
    var totalDisplacement: Int {
        var total = 0
        for bucket in buckets.indices {
            guard let element = buckets[bucket] else { continue }
            total += (bucket - home(of: element)) & (buckets.count - 1)
        }
        return total
    }

    // MARK: - The table

    private func home(of element: Element) -> Int {
        OpenAddressing.home(of: Keying.key(of: element), tableSize: buckets.count)
    }

    private func next(_ bucket: Int) -> Int {
        OpenAddressing.next(bucket, tableSize: buckets.count)
    }

    /// Moves later entries of the probe run back into the emptied `gap`, so that every entry
    /// stays reachable from its home bucket without tombstones.
    private mutating func closeGap(at gap: Int) {
        var gap = gap
        var bucket = next(gap)
        while let occupant = buckets[bucket] {
            if !OpenAddressing.staysAfterGap(home: home(of: occupant), gap: gap, bucket: bucket) {
                buckets[gap] = occupant
                buckets[bucket] = nil
                gap = bucket
            }
            bucket = next(bucket)
        }
    }

    private mutating func grow(toHold needed: Int = 0) {
        var size = max(16, buckets.count * 2)
        while size < needed * 2 {
            size *= 2
        }
        var old: [Element?] = Array(repeating: nil, count: size)
        swap(&old, &buckets)
        // Moves each member over rather than copying it: no retain and release per entry.
        old.withUnsafeMutableBufferPointer { entries in
            guard let base = entries.baseAddress else { return }
            for index in entries.indices {
                guard let element = (base + index).move() else {
                    (base + index).initialize(to: nil)
                    continue
                }
                (base + index).initialize(to: nil)
                var bucket = home(of: element)
                while buckets[bucket] != nil {
                    bucket = next(bucket)
                }
                buckets[bucket] = element
            }
        }
    }
}
