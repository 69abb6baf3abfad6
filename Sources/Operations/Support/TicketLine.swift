/// A line of waiters kept in ticket order, cheap to pop from the front.
///
/// Waiters almost always arrive in ticket order, so insertion is usually an append; an
/// operation whose conditions took longer is slotted in by binary search.
struct TicketLine<Element> {
    private var storage: [(ticket: UInt64, element: Element)] = []
    private var head = 0

    var isEmpty: Bool { head == storage.count }
    var count: Int { storage.count - head }
    var first: (ticket: UInt64, element: Element)? { isEmpty ? nil : storage[head] }

    mutating func insert(_ element: Element, ticket: UInt64) {
        if isEmpty || storage[storage.count - 1].ticket < ticket {
            storage.append((ticket, element))
        } else {
            storage.insert((ticket, element), at: insertionIndex(for: ticket))
        }
    }

    mutating func removeFirst() {
        precondition(!isEmpty, "removeFirst() on an empty line")
        head += 1
        compactIfWasteful()
    }

    /// Removes the waiter with `ticket`; `false` if there is none.
    @discardableResult
    mutating func remove(ticket: UInt64) -> Bool {
        let index = insertionIndex(for: ticket)
        guard index < storage.count, storage[index].ticket == ticket else { return false }
        if index == head {
            removeFirst()
        } else {
            storage.remove(at: index)
        }
        return true
    }

    private func insertionIndex(for ticket: UInt64) -> Int {
        var low = head
        var high = storage.count
        while low < high {
            let middle = (low + high) / 2
            if storage[middle].ticket < ticket { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private mutating func compactIfWasteful() {
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
    }
}
