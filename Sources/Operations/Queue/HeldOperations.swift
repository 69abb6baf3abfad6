/// Operations by identity, hashed on their address.
enum OperationIdentityKeying: FibonacciKeying {
    static func key(of operation: AsyncOperation) -> UInt64 {
        spread(address: UInt(bitPattern: Int(bitPattern: ObjectIdentifier(operation))))
    }

    /// An address's bits, mixed (MurmurHash3's 64-bit finalizer) before Fibonacci hashing.
    /// Operations allocated one after another often sit a fixed stride apart, and Fibonacci
    /// hashing alone piles a stride near a Fibonacci number of 16-byte units (208 bytes is 13 of
    /// them) into long probe runs: a chain of 10,000 spent 1,300 instructions per removal.
    static func spread(address: UInt) -> UInt64 {
        var bits = UInt64(address)
        bits ^= bits >> 33
        bits &*= 0xFF51_AFD7_ED55_8CCD
        bits ^= bits >> 33
        bits &*= 0xC4CE_B9FE_1A85_EC53
        bits ^= bits >> 33
        return bits
    }

    static func same(_ operation: AsyncOperation, _ other: AsyncOperation) -> Bool {
        operation === other
    }
}

/// The operations a queue holds in its own scheduler (waiting for dependencies, conditions,
/// categories, a resume or their turn), as a set by identity. Part of the scheduler's state: only
/// touched under the owning queue's lock. Every operation with dependencies or conditions passes
/// through it.
typealias HeldOperations = FibonacciSet<OperationIdentityKeying>
