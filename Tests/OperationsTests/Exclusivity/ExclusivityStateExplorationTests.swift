import Foundation
@testable import Operations
import Testing
import TestSupport

// Every order of events for small scopes of the mutual exclusion rules, without threads:
// operations asking for their categories, stepping out of line (finished, or their queue
// suspended, and coming back) and releasing what they hold. The invariants are checked in every
// state reached. In scopes with groups, a group's child asks only while its group holds its
// categories (the group executes), and a group releases them only once its children are done, so
// the exploration also finds circles of groups and waiters that never end.

private enum Standing: Equatable, CustomStringConvertible {
    case idle
    /// In line: granted once first in all of its lines.
    case waiting
    case holding
    case done

    var description: String {
        switch self {
        case .idle: "i"
        case .waiting: "w"
        case .holding: "h"
        case .done: "d"
        }
    }
}

private struct ExclusivityModel {
    let requests: [ExclusivityState.Request]
    /// The group each operation is a child of (its index), if any.
    let parents: [Int?]
    var state = ExclusivityState()
    var standings: [Standing]
    /// Each operation may step out of line once (its queue suspended) and come back.
    var withdrawalsLeft: [Int]
    var violations: [String] = []

    init(_ scope: [(place: LinePlace, categories: [String])], parents: [Int?]? = nil) {
        requests = scope.map { ExclusivityState.Request(place: $0.place, operation: AsyncOperation(), categories: $0.categories) }
        self.parents = parents ?? Array(repeating: nil, count: scope.count)
        standings = Array(repeating: .idle, count: scope.count)
        withdrawalsLeft = Array(repeating: 1, count: scope.count)
    }

    func index(of operation: AsyncOperation) -> Int {
        requests.firstIndex { $0.operation === operation }!
    }

    mutating func granted(_ granted: Granted) {
        for operation in granted.all {
            let index = index(of: operation)
            if standings[index] != .waiting {
                violations.append("op\(index) granted while \(standings[index])")
            }
            checkNobodyAhead(of: index)
            standings[index] = .holding
        }
    }

    /// FIFO per category: nobody with an earlier place stands in a line of the granted operation,
    /// unless it is held up by the granted operation's own tree (it cannot be granted before that
    /// tree's group finishes: the tree cannot wait for it, it waits for the tree).
    mutating func checkNobodyAhead(of index: Int) {
        let heldUp = waitersHeldUp(byTreeOf: requests[index].place.root)
        for other in requests.indices where other != index && standings[other] == .waiting {
            let shared = Set(requests[other].categories).intersection(requests[index].categories)
            if !shared.isEmpty && requests[other].place < requests[index].place && !heldUp.contains(other) {
                violations.append("op\(index) granted \(shared.sorted()) ahead of op\(other)")
            }
        }
    }

    /// The waiters that cannot be granted before the tree rooted at `root` finishes, written out
    /// as the rule states it (API.md semantics 2, `LinePlace`): a waiter is held up when a category
    /// it needs is held by that tree, or by another tree one of whose waiters is held up, or when
    /// a waiter ahead of it in one of its lines is held up.
    func waitersHeldUp(byTreeOf root: UInt64) -> Set<Int> {
        var heldUp = Set<Int>()
        var trees: Set<UInt64> = [root]
        var added = true
        while added {
            added = false
            for waiter in requests.indices where standings[waiter] == .waiting && !heldUp.contains(waiter) {
                let held = requests[waiter].categories.contains { category in
                    requests.indices.contains { other in
                        guard requests[other].categories.contains(category) else { return false }
                        if standings[other] == .holding { return trees.contains(requests[other].place.root) }
                        return heldUp.contains(other) && requests[other].place < requests[waiter].place
                    }
                }
                if held {
                    heldUp.insert(waiter)
                    trees.insert(requests[waiter].place.root)
                    added = true
                }
            }
        }
        return heldUp
    }

    /// A group's child asks only while its group holds its categories (it executes).
    func mayAsk(_ index: Int) -> Bool {
        parents[index].map { standings[$0] == .holding } ?? true
    }

    /// A group releases its categories only once its children are done.
    func mayRelease(_ index: Int) -> Bool {
        !requests.indices.contains { parents[$0] == index && standings[$0] != .done }
    }

    var possibleEvents: [ExplorationEvent<ExclusivityModel>] {
        var events: [ExplorationEvent<ExclusivityModel>] = []
        for index in requests.indices {
            switch standings[index] {
            case .idle:
                if mayAsk(index) {
                    events.append(ExplorationEvent("acquire op\(index)") { $0.acquire(index) })
                }
            case .waiting:
                events.append(ExplorationEvent("finish op\(index)") { $0.withdraw(index, comingBack: false) })
                if withdrawalsLeft[index] > 0 {
                    events.append(ExplorationEvent("suspend op\(index)") { $0.withdraw(index, comingBack: true) })
                }
            case .holding:
                if mayRelease(index) {
                    events.append(ExplorationEvent("release op\(index)") { model in
                        model.standings[index] = .done
                        model.granted(model.state.release(model.requests[index].categories))
                    })
                }
            case .done:
                break
            }
        }
        return events
    }

    mutating func acquire(_ index: Int) {
        standings[index] = .waiting
        switch state.acquire(requests[index]) {
        case let .granted(letIn):
            checkNobodyAhead(of: index)
            standings[index] = .holding
            granted(letIn)
        case let .waits(letIn):
            granted(letIn)
        }
    }

    mutating func withdraw(_ index: Int, comingBack: Bool) {
        let request = requests[index]
        var granted = Granted.none
        switch state.withdraw(place: request.place, from: request.categories) {
        case .notInLine:
            violations.append("op\(index) was not in line")
        case let .withdrew(letIn):
            granted = letIn
        }
        if comingBack {
            withdrawalsLeft[index] -= 1
            standings[index] = .idle
        } else {
            standings[index] = .done
            finishChildren(of: index) // a group that never executed never runs its children
        }
        self.granted(granted)
    }

    mutating func finishChildren(of group: Int) {
        for child in requests.indices where parents[child] == group && standings[child] == .idle {
            standings[child] = .done
            finishChildren(of: child)
        }
    }

    var key: String {
        standings.map(\.description).joined() + "|" + withdrawalsLeft.map(String.init).joined() + "|\(violations.count)"
    }

    func checkInvariants(_ trail: [String]) {
        #expect(violations.isEmpty, "\(violations) after \(trail)")
        var holders: [String: Int] = [:]
        for index in requests.indices where standings[index] == .holding {
            for category in requests[index].categories {
                #expect(holders[category] == nil, "op\(index) and op\(holders[category] ?? -1) both hold \(category) after \(trail)")
                holders[category] = index
            }
        }
        #expect(state.heldCategories == Set(holders.keys), "held \(state.heldCategories), holders \(holders) after \(trail)")
        // Never stuck: an eligible waiter whose categories are all free has someone ahead of it.
        for index in requests.indices where standings[index] == .waiting {
            let blocked = requests[index].categories.contains { holders[$0] != nil }
            let someoneAhead = requests.indices.contains { other in
                other != index && standings[other] == .waiting
                    && requests[other].place < requests[index].place
                    && !Set(requests[other].categories).isDisjoint(with: requests[index].categories)
            }
            #expect(blocked || someoneAhead, "op\(index) waits for free categories with nobody ahead after \(trail)")
        }
        // Never a circle: while anyone waits, someone can still ask or release (a cancel, which is
        // always possible, is not progress).
        if standings.contains(.waiting) {
            let progress = requests.indices.contains { index in
                switch standings[index] {
                case .idle: mayAsk(index)
                case .holding: mayRelease(index)
                case .waiting, .done: false
                }
            }
            #expect(progress, "deadlock: \(standings) with nobody able to ask or release after \(trail)")
        }
    }

    func checkTerminal(_ trail: [String]) {
        #expect(standings.allSatisfy { $0 == .done }, "stuck: \(standings) after \(trail)")
        #expect(state.heldCategories.isEmpty)
    }
}

@Suite struct ExclusivityStateExplorationTests {
    private static func place(_ ticket: UInt64, inGroup root: UInt64? = nil) -> LinePlace {
        LinePlace(root: root ?? ticket, ticket: ticket)
    }

    private static let scopes: [(name: String, scope: [(place: LinePlace, categories: [String])])] = [
        ("one category", [(place(1), ["a"]), (place(2), ["a"]), (place(3), ["a"])]),
        ("overlapping", [(place(1), ["a"]), (place(2), ["a", "b"]), (place(3), ["b"])]),
        ("crossed pairs", [(place(1), ["a", "b"]), (place(2), ["a", "b"]), (place(3), ["b"])]),
        ("a group's child", [(place(1), ["a"]), (place(3), ["a", "b"]), (place(4, inGroup: 2), ["b"])]),
        ("four", [(place(1), ["a"]), (place(2), ["b"]), (place(3), ["a", "b"]), (place(4), ["a"])]),
        ("five", [(place(1), ["a"]), (place(2), ["b"]), (place(3), ["a", "b"]), (place(4), ["a"]), (place(5), ["b"])]),
        ("two groups' children", [(place(1), ["a", "b"]), (place(3, inGroup: 2), ["a"]), (place(4, inGroup: 2), ["b"]),
                                  (place(6, inGroup: 5), ["a", "b"]), (place(7), ["b"])]),
        // A waiter added before a group that holds "a" (the group stands at 2, its child at 3):
        // the child must get "b" whatever the order they ask in.
        ("a group holding what an earlier waiter needs", [(place(1), ["a", "b"]), (place(2), ["a"]), (place(3, inGroup: 2), ["b"])]),
    ]

    /// Scopes with groups: each entry's `parent` is the index of its group. A group's children
    /// stand at the group's root.
    private static let treeScopes: [(name: String, scope: [(place: LinePlace, categories: [String])], parents: [Int?])] = [
        // Soak rounds 11988551622358359245 and 8784536130811637276: W needs A and E; G1 holds A and
        // its child needs D; G2 holds D and its child needs E. Whatever order the children line
        // up in, the second group's child must go ahead of W.
        ("two groups waiting for each other through a waiter",
         [(place(1), ["a", "e"]), (place(2), ["a"]), (place(3, inGroup: 2), ["d"]), (place(4), ["d"]), (place(5, inGroup: 4), ["e"])],
         [nil, nil, 1, nil, 3]),
        // A group's child waits behind an earlier waiter for a category its own group needs
        // nothing of; the waiter needs the group's category.
        ("a group holding what an earlier waiter needs, its child asking last",
         [(place(1), ["a", "b"]), (place(2), ["a"]), (place(3, inGroup: 2), ["b"]), (place(4), ["b"])],
         [nil, nil, 1, nil]),
    ]

    @Test func everyOrderOfEvents_withGroups_neverCloseACircle() async {
        let total = await offThePool {
            Self.treeScopes.reduce(0) { total, entry in
                total + Self.exploreEveryOrder(of: ExclusivityModel(entry.scope, parents: entry.parents), named: "with groups, \(entry.name)")
            }
        }
        #expect(total > 1_000)
    }

    @Test func everyOrderOfEvents_keepsTheExclusionInvariants() async {
        let total = await offThePool {
            Self.scopes.reduce(0) { total, entry in
                total + Self.exploreEveryOrder(of: ExclusivityModel(entry.scope), named: entry.name)
            }
        }
        #expect(total > 5_000) // the scopes really branch
    }

    /// Explores every order of events from `model`, checking the invariants in every state;
    /// returns how many states it visited.
    private static func exploreEveryOrder(of model: ExclusivityModel, named name: String) -> Int {
        let report = TestSupport.exploreEveryOrder(
            from: model,
            events: \.possibleEvents,
            key: \.key,
            check: { $0.checkInvariants($1) },
            checkTerminal: { $0.checkTerminal($1) }
        )
        #expect(report.terminalStates > 0, "ExclusivityState exploration, \(name): \(report)")
        return report.states
    }
}
