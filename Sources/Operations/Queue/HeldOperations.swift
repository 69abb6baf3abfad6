/// The operations a queue holds in its own scheduler, each in a numbered slot that the operation
/// remembers (`AsyncOperation.heldSlot`): adding and removing are array writes, with no hashing
/// on the path every operation takes. Only touched under the owning queue's lock.
struct HeldOperations {
    private var slots: [AsyncOperation?] = []
    private var freeSlots: [Int] = []
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// Every held operation, in no particular order.
    var all: [AsyncOperation] {
        slots.compactMap { $0 }
    }

    mutating func insert(_ operation: AsyncOperation) {
        guard !contains(operation) else { return }
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            slots[slot] = operation
        } else {
            slot = slots.count
            slots.append(operation)
        }
        operation.heldSlot = slot
        count += 1
    }

    mutating func remove(_ operation: AsyncOperation) {
        guard contains(operation) else { return }
        let slot = operation.heldSlot
        slots[slot] = nil
        operation.heldSlot = -1
        count -= 1
        if count == 0 {
            // Drop the slots after a burst; keep a small table for the steady trickle.
            let keep = slots.count <= 1024
            slots.removeAll(keepingCapacity: keep)
            freeSlots.removeAll(keepingCapacity: keep)
        } else {
            freeSlots.append(slot)
        }
    }

    private func contains(_ operation: AsyncOperation) -> Bool {
        let slot = operation.heldSlot
        return slot >= 0 && slot < slots.count && slots[slot] === operation
    }
}
