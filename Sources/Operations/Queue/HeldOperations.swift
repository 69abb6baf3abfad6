/// The operations a queue holds in its own scheduler (waiting for dependencies, conditions,
/// categories, a resume or their turn), as a set by identity. Part of the scheduler's state: only
/// touched under the owning queue's lock.
///
/// Every operation with dependencies or conditions passes through it, so it is a small
/// open-addressing table hashed on the object's address (linear probing, deletion by backward
/// shift): a few instructions per add and remove, where `Set` would run a full `Hasher`.
struct HeldOperations {
    /// Power-of-two sized, at most half full; `nil` marks an empty bucket.
    private var buckets: [AsyncOperation?] = []
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// Every held operation, in no particular order.
    var all: [AsyncOperation] {
        buckets.compactMap { $0 }
    }

    mutating func insert(_ operation: AsyncOperation) {
        if (count + 1) * 2 > buckets.count {
            grow()
        }
        var bucket = home(of: operation)
        while let occupant = buckets[bucket] {
            if occupant === operation { return }
            bucket = next(bucket)
        }
        buckets[bucket] = operation
        count += 1
    }

    /// Removes `operation`; whether it was held.
    @discardableResult
    mutating func remove(_ operation: AsyncOperation) -> Bool {
        guard count > 0 else { return false } // the common case: nothing held
        var bucket = home(of: operation)
        while let occupant = buckets[bucket] {
            if occupant === operation {
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

    // MARK: - The table

    private func home(of operation: AsyncOperation) -> Int {
        // In 64 bits on every platform (a 32-bit watch included): Fibonacci hashing's top bits.
        let address = UInt64(UInt(bitPattern: Int(bitPattern: ObjectIdentifier(operation))))
        let mixed = (address >> 4) &* 0x9E37_79B9_7F4A_7C15
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

    /// Makes room for `additional` more operations at once: a batch held together (the lines of
    /// a suspended or serial queue) grows the table once instead of once per doubling.
    mutating func reserveCapacity(forAdding additional: Int) {
        guard (count + additional) * 2 > buckets.count else { return }
        grow(toHold: count + additional)
    }

    private mutating func grow(toHold needed: Int = 0) {
        var size = max(16, buckets.count * 2)
        while size < needed * 2 {
            size *= 2
        }
        var old: [AsyncOperation?] = Array(repeating: nil, count: size)
        swap(&old, &buckets)
        // Moves each operation over rather than copying it: no retain and release per entry.
        old.withUnsafeMutableBufferPointer { entries in
            guard let base = entries.baseAddress else { return }
            for index in entries.indices {
                guard let operation = (base + index).move() else {
                    (base + index).initialize(to: nil)
                    continue
                }
                (base + index).initialize(to: nil)
                var bucket = home(of: operation)
                while buckets[bucket] != nil {
                    bucket = next(bucket)
                }
                buckets[bucket] = operation
            }
        }
    }
}
