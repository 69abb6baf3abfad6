/// How `FibonacciSet` tells its members apart: a 64-bit key whose bits are already spread or
/// sequential (an object's address, a ticket), which one multiplication hashes well.
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
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// Every member, in no particular order.
    var all: [Element] {
        buckets.compactMap { $0 }
    }

    func contains(_ element: Element) -> Bool {
        guard count > 0 else { return false }
        var bucket = home(of: element)
        while let occupant = buckets[bucket] {
            if Keying.same(occupant, element) { return true }
            bucket = next(bucket)
        }
        return false
    }

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
                if count == 0 && buckets.count > 2048 {
                    buckets = [] // drop the table after a burst; keep a small one for the steady trickle
                }
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

    // MARK: - The table

    private func home(of element: Element) -> Int {
        // In 64 bits on every platform (a 32-bit watch included): Fibonacci hashing's top bits.
        let mixed = Keying.key(of: element) &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: mixed >> UInt64(64 - buckets.count.trailingZeroBitCount))
    }

    private func next(_ bucket: Int) -> Int {
        (bucket + 1) & (buckets.count - 1)
    }

    /// Moves later entries of the probe run back into the emptied `gap`, so that every entry
    /// stays reachable from its home bucket without tombstones.
    private mutating func closeGap(at gap: Int) {
        var gap = gap
        var bucket = next(gap)
        while let occupant = buckets[bucket] {
            let home = home(of: occupant)
            // Move it if its home is not in the cyclic range (gap, bucket].
            let homeIsAfterGap = gap <= bucket ? (home > gap && home <= bucket) : (home > gap || home <= bucket)
            if !homeIsAfterGap {
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

/// Operations by identity, hashed on their address.
enum ByIdentity: FibonacciKeying {
    static func key(of operation: AsyncOperation) -> UInt64 {
        UInt64(UInt(bitPattern: Int(bitPattern: ObjectIdentifier(operation)))) >> 4 // allocations are 16-byte aligned
    }

    static func same(_ operation: AsyncOperation, _ other: AsyncOperation) -> Bool {
        operation === other
    }
}

/// Tickets, which are sequential: Fibonacci hashing spreads them evenly.
enum ByTicket: FibonacciKeying {
    static func key(of ticket: UInt64) -> UInt64 {
        ticket
    }

    static func same(_ ticket: UInt64, _ other: UInt64) -> Bool {
        ticket == other
    }
}

/// The operations a queue holds in its own scheduler (waiting for dependencies, conditions,
/// categories, a resume or their turn), as a set by identity. Every operation with dependencies
/// or conditions passes through it.
typealias HeldOperations = FibonacciSet<ByIdentity>
