/// Operations by identity, hashed on their address.
enum OperationIdentityKeying: FibonacciKeying {
    static func key(of operation: AsyncOperation) -> UInt64 {
        UInt64(UInt(bitPattern: Int(bitPattern: ObjectIdentifier(operation)))) >> 4 // allocations are 16-byte aligned
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
