import Foundation

/// The scheduler's slot line: operations waiting for a free slot on their queue, let through in
/// the order Foundation starts ready operations: the highest `queuePriority` first, and in add
/// order (by ticket) within one priority. Each ticket stands in it at most once.
///
/// Its priority is read when an operation joins (outside the queue's lock: `queuePriority` may be
/// a subclass's code), and kept with its ticket, so that it can be found again by ticket alone.
struct SlotLine {
    private var waiting = TicketLine<QueueScheduler.Waiter>()
    /// The rank each waiting ticket joined with.
    private var ranks: [UInt64: UInt64] = [:]

    var isEmpty: Bool { waiting.isEmpty }

    /// The waiters, in the order they will be let through.
    var waiters: [QueueScheduler.Waiter] { waiting.elements }

    func contains(ticket: UInt64) -> Bool {
        ranks[ticket] != nil
    }

    /// Puts `waiter` in line by its priority and ticket, unless its ticket already stands in it
    /// (an operation that parks twice keeps its first place).
    mutating func insert(_ waiter: QueueScheduler.Waiter, priority: Operation.QueuePriority) {
        let ticket = waiter.ticket
        guard ranks[ticket] == nil else { return }
        let rank = Self.rank(of: priority)
        ranks[ticket] = rank
        waiting.insert(waiter, place: LinePlace(root: rank, ticket: ticket))
    }

    /// The waiter with `ticket`, if it waits, takes its place for `priority` now (it was changed).
    mutating func reprioritize(ticket: UInt64, priority: Operation.QueuePriority) {
        guard let rank = ranks[ticket], rank != Self.rank(of: priority),
              let waiter = remove(ticket: ticket) else { return }
        insert(waiter, priority: priority)
    }

    /// Takes the waiter with `ticket` out of line, wherever it stands.
    @discardableResult
    mutating func remove(ticket: UInt64) -> QueueScheduler.Waiter? {
        guard let rank = ranks.removeValue(forKey: ticket) else { return nil }
        return waiting.remove(place: LinePlace(root: rank, ticket: ticket))
    }

    /// Puts every waiter back in add order, as if all had joined with the same priority (the
    /// queue became serial).
    mutating func forgetPriorities() {
        guard ranks.values.contains(where: { $0 != Self.rank(of: .normal) }) else { return }
        let all = waiters
        self = SlotLine()
        for waiter in all.sorted(by: { $0.ticket < $1.ticket }) {
            insert(waiter, priority: .normal)
        }
    }

    /// Takes the first waiter out of line.
    mutating func removeFirst() -> QueueScheduler.Waiter? {
        guard !waiting.isEmpty else { return nil }
        let waiter = waiting.removeFirst()
        ranks[waiter.ticket] = nil
        return waiter
    }

    /// Where `priority` stands: 0 for `.veryHigh` up to 16 for `.veryLow`, values between
    /// Foundation's named ones rounded as Foundation rounds them.
    static func rank(of priority: Operation.QueuePriority) -> UInt64 {
        let named: Operation.QueuePriority = switch priority.rawValue {
        case 8...: .veryHigh
        case 4..<8: .high
        case -3..<4: .normal
        case -7 ... -4: .low
        default: .veryLow
        }
        return UInt64(8 - named.rawValue)
    }
}
