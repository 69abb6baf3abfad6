/// A line of waiters kept in `LinePlace` order, cheap to pop from the front: the engine's one
/// ordered line, for the categories' lines and the queues' lines alike.
///
/// Waiters almost always arrive in order, so insertion is usually an append; an operation whose
/// conditions took longer is slotted in by binary search. Popping hands the waiter back and
/// leaves an empty slot (compacted later), so the line never keeps a departed waiter alive: its
/// last reference goes wherever the caller takes it, outside any lock.
struct TicketLine<Element> {
    fileprivate struct Slot {
        var place: LinePlace
        var element: Element?
    }

    private var storage: [Slot] = []
    private var head = 0

    var isEmpty: Bool { head == storage.count }
    var count: Int { storage.count - head }

    var first: (place: LinePlace, element: Element)? {
        guard !isEmpty, let element = storage[head].element else { return nil }
        return (storage[head].place, element)
    }

    /// The place of the first waiter, if any.
    var firstPlace: LinePlace? {
        isEmpty ? nil : storage[head].place
    }

    /// Whether there is a first waiter and it satisfies `predicate`: unlike `first`, hands out no
    /// copy of the waiter (the optimizer reads it in place).
    func firstSatisfies(_ predicate: (Element) -> Bool) -> Bool {
        guard !isEmpty, let element = storage[head].element else { return false }
        return predicate(element)
    }

    /// The position of the waiter at `place`, if it is in line. Positions stay valid until the
    /// line next changes; the first waiter's position is `firstPosition`.
    func position(of place: LinePlace) -> Int? {
        let index = insertionIndex(for: place)
        return index < storage.count && storage[index].place == place ? index : nil
    }

    var firstPosition: Int { head }

    /// The waiters, in order.
    var elements: [Element] {
        storage[head...].compactMap(\.element)
    }

    /// Whether every waiter ahead of `place` satisfies `predicate` (true if none is ahead).
    func allAhead(of place: LinePlace, satisfy predicate: (Element) -> Bool) -> Bool {
        storage[head..<insertionIndex(for: place)].allSatisfy { slot in slot.element.map(predicate) ?? true }
    }

    /// The first waiter, in order, that satisfies `predicate`.
    func first(where predicate: (LinePlace, Element) -> Bool) -> (place: LinePlace, element: Element)? {
        for slot in storage[head...] {
            if let element = slot.element, predicate(slot.place, element) {
                return (slot.place, element)
            }
        }
        return nil
    }

    /// How many waiters stand ahead of the one at `place`; `nil` if it is not in line.
    func countAhead(of place: LinePlace) -> Int? {
        position(of: place).map { $0 - head }
    }

    /// The waiter at `position` (from `position(of:)`).
    func element(at position: Int) -> Element? {
        storage[position].element
    }

    /// Changes the waiter at `position` (from `position(of:)`) in place.
    mutating func update(at position: Int, _ change: (inout Element) -> Void) {
        change(&storage[position].element!)
    }

    /// Puts the waiter `element` in line at `place`, unless a waiter already stands there (an
    /// operation that asks twice stays where it was); `false` then. `element` is made only if it
    /// goes in. The usual arrival, behind everyone, needs no search.
    @discardableResult
    mutating func insert(_ element: @autoclosure () -> Element, place: LinePlace) -> Bool {
        if isEmpty || storage[storage.count - 1].place < place {
            storage.append(Slot(place: place, element: element()))
            return true
        }
        let index = insertionIndex(for: place)
        guard storage[index].place != place else { return false }
        storage.insert(Slot(place: place, element: element()), at: index)
        return true
    }

    /// Takes the first waiter out of line and returns it.
    @discardableResult
    mutating func removeFirst() -> Element {
        precondition(!isEmpty, "removeFirst() on an empty line")
        var departed: Element?
        swap(&departed, &storage[head].element)
        head += 1
        compactIfWasteful()
        return departed!
    }

    /// Takes the waiter at `place` out of line and returns it; `nil` if there is none.
    @discardableResult
    mutating func remove(place: LinePlace) -> Element? {
        guard let index = position(of: place) else { return nil }
        if index == head {
            return removeFirst()
        }
        return storage.remove(at: index).element
    }

    private func insertionIndex(for place: LinePlace) -> Int {
        var low = head
        var high = storage.count
        while low < high {
            let middle = (low + high) / 2
            if storage[middle].place < place { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private mutating func compactIfWasteful() {
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= storage.count {
            storage.removeFirst(head) // empty slots only
            head = 0
        }
    }
}

extension TicketLine: Sendable where Element: Sendable {}
extension TicketLine.Slot: Sendable where Element: Sendable {}
