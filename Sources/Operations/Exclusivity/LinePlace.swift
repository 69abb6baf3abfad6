/// Where an operation stands in a category's line: after everything added before the top-level
/// operation it belongs to (itself, or the outermost group it is a child of), then by its own
/// ticket. A group's children thus stand where their group stands, ahead of operations added after
/// it: one of those waiting for the group's category must not also keep the group's children out
/// of another category, or the group would wait forever for them.
struct LinePlace: Comparable, Hashable, Sendable {
    var root: UInt64
    var ticket: UInt64

    /// It stands where a group stands: it is (inside) a group's child, not a top-level operation.
    var isInAGroup: Bool { root != ticket }

    static func < (lhs: LinePlace, rhs: LinePlace) -> Bool {
        (lhs.root, lhs.ticket) < (rhs.root, rhs.ticket)
    }
}
