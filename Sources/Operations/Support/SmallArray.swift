/// An array that holds its first element inline and allocates only from the second on (or when
/// room is reserved for more than one).
///
/// For lists that nearly always hold at most one element, such as an operation's unfinished
/// dependencies and its dependents in a chain: an `Array` allocates a buffer for the first
/// element, which cost a chain two allocations per link. Once it has a buffer it keeps the
/// elements there, whatever their number.
struct SmallArray<Element>: RandomAccessCollection {
    fileprivate enum Storage {
        case empty
        case one(Element)
        case many([Element])
    }

    private var storage = Storage.empty

    init() {}

    /// The elements of `elements`, in order, sharing its buffer when it has two or more.
    init(_ elements: [Element]) {
        switch elements.count {
        case 0: storage = .empty
        case 1: storage = .one(elements[0])
        default: storage = .many(elements)
        }
    }

    var startIndex: Int { 0 }

    /// Told from the case alone where it can be: the defaults go through `endIndex`, and copy an
    /// inline element on the way (for a weak reference, a call into the runtime each time).
    var isEmpty: Bool {
        switch storage {
        case .empty: return true
        case .one: return false
        case let .many(elements): return elements.isEmpty
        }
    }

    var count: Int {
        switch storage {
        case .empty: return 0
        case .one: return 1
        case let .many(elements): return elements.count
        }
    }

    var endIndex: Int {
        switch storage {
        case .empty: return 0
        case .one: return 1
        case let .many(elements): return elements.count
        }
    }

    subscript(position: Int) -> Element {
        switch storage {
        case let .one(element) where position == 0:
            return element
        case let .many(elements):
            return elements[position]
        default:
            preconditionFailure("index \(position) out of range of a SmallArray of \(count)")
        }
    }

    mutating func append(_ element: Element) {
        switch storage {
        case .empty:
            storage = .one(element)
        case let .one(first):
            storage = .many([first, element])
        case var .many(elements):
            storage = .empty // let go of the buffer here, so that appending does not copy it
            elements.append(element)
            storage = .many(elements)
        }
    }

    /// Removes every element that satisfies `shouldBeRemoved`, keeping the others in order.
    mutating func removeAll(where shouldBeRemoved: (Element) -> Bool) {
        switch storage {
        case .empty:
            break
        case let .one(element):
            if shouldBeRemoved(element) { storage = .empty }
        case var .many(elements):
            storage = .empty
            elements.removeAll(where: shouldBeRemoved)
            storage = elements.isEmpty ? .empty : .many(elements)
        }
    }

    /// Removes every element; with `keepingCapacity`, a buffer already allocated stays for
    /// the elements appended next.
    mutating func removeAll(keepingCapacity: Bool = false) {
        guard keepingCapacity, case var .many(elements) = storage else {
            storage = .empty
            return
        }
        storage = .empty // let go of the buffer here, so that emptying it does not copy it
        elements.removeAll(keepingCapacity: true)
        storage = .many(elements)
    }

    /// Makes room for `minimumCapacity` elements at once when more than one is expected, so that
    /// a list filled one by one allocates once, as an `Array` would.
    mutating func reserveCapacity(_ minimumCapacity: Int) {
        guard minimumCapacity > 1 else { return }
        var elements: [Element] = []
        elements.reserveCapacity(minimumCapacity)
        elements.append(contentsOf: self)
        storage = .many(elements)
    }

    /// The elements as an `Array`: the stored one from the second element on, so that reading
    /// it allocates only for a single element.
    var array: [Element] {
        switch storage {
        case .empty: return []
        case let .one(element): return [element]
        case let .many(elements): return elements
        }
    }
}

extension SmallArray: ExpressibleByArrayLiteral {
    init(arrayLiteral elements: Element...) {
        self.init(elements)
    }
}

extension SmallArray: Sendable where Element: Sendable {}
extension SmallArray.Storage: Sendable where Element: Sendable {}

extension SmallArray where Element: Equatable {
    /// Removes the first element equal to `element`; whether there was one.
    mutating func removeFirstOccurrence(of element: Element) -> Bool {
        var found = false
        removeAll { candidate in
            guard !found, candidate == element else { return false }
            found = true
            return true
        }
        return found
    }
}
