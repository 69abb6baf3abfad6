import Foundation
@testable import Operations
import Testing
import TestSupport

// Every order of events for small scopes of the mutual exclusion rules, without threads:
// operations asking for their categories, stepping out of line (finished, or their queue
// suspended, and coming back) and releasing what they hold. The invariants are checked in every
// state reached.

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
    var state = ExclusivityState()
    var standings: [Standing]
    /// Each operation may step out of line once (its queue suspended) and come back.
    var withdrawalsLeft: [Int]
    var violations: [String] = []

    init(_ scope: [(place: LinePlace, categories: [String])]) {
        requests = scope.map { ExclusivityState.Request(place: $0.place, operation: AsyncOperation(), categories: $0.categories) }
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
    /// unless it is held up by the granted operation's own tree (a category it needs is held by
    /// an operation with the same root: the tree cannot wait for it, it waits for the tree).
    mutating func checkNobodyAhead(of index: Int) {
        for other in requests.indices where other != index && standings[other] == .waiting {
            let shared = Set(requests[other].categories).intersection(requests[index].categories)
            if !shared.isEmpty && requests[other].place < requests[index].place && !isHeldUp(other, byTreeOf: index) {
                violations.append("op\(index) granted \(shared.sorted()) ahead of op\(other)")
            }
        }
    }

    func isHeldUp(_ waiter: Int, byTreeOf index: Int) -> Bool {
        requests.indices.contains { holder in
            standings[holder] == .holding && requests[holder].place.root == requests[index].place.root
                && !Set(requests[holder].categories).isDisjoint(with: requests[waiter].categories)
        }
    }

    var possibleEvents: [ExplorationEvent<ExclusivityModel>] {
        var events: [ExplorationEvent<ExclusivityModel>] = []
        for index in requests.indices {
            switch standings[index] {
            case .idle:
                events.append(ExplorationEvent("acquire op\(index)") { $0.acquire(index) })
            case .waiting:
                events.append(ExplorationEvent("finish op\(index)") { $0.withdraw(index, comingBack: false) })
                if withdrawalsLeft[index] > 0 {
                    events.append(ExplorationEvent("suspend op\(index)") { $0.withdraw(index, comingBack: true) })
                }
            case .holding:
                events.append(ExplorationEvent("release op\(index)") { model in
                    model.standings[index] = .done
                    model.granted(model.state.release(model.requests[index].categories))
                })
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
        }
        self.granted(granted)
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

    @Test func everyOrderOfEvents_keepsTheExclusionInvariants() {
        var total = 0
        for (name, scope) in Self.scopes {
            let report = exploreEveryOrder(
                from: ExclusivityModel(scope),
                events: \.possibleEvents,
                key: \.key,
                check: { $0.checkInvariants($1) },
                checkTerminal: { $0.checkTerminal($1) }
            )
            #expect(report.terminalStates > 0, "ExclusivityState exploration, \(name): \(report)")
            total += report.states
        }
        #expect(total > 5_000) // the scopes really branch
    }
}
