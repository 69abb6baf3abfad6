@testable import Operations
import Testing

// The set of an operation's conditions by index: bits for the first 64, flags beyond.

@Suite struct ConditionIndexSetTests {
    private func members(_ set: ConditionIndexSet) -> [Int] {
        var indices: [Int] = []
        set.forEach { indices.append($0) }
        return indices
    }

    @Test(arguments: [0, 1, 5, 63, 64, 65, 130])
    func everyConditionBelowACount_isInTheSet_andNoOther(count: Int) {
        let set = ConditionIndexSet(below: count)
        #expect(members(set) == Array(0..<count))
        #expect(!set.contains(count) && !set.contains(count + 64) && !set.contains(-1))
    }

    @Test func settingAndClearing_onBothSidesOfTheSixtyFourth() {
        var set = ConditionIndexSet()
        for index in [0, 3, 63, 64, 70, 129] {
            set.set(index, to: true)
        }
        set.set(3, to: false)
        set.set(70, to: false)
        set.set(200, to: false) // beyond the flags: stays out, grows nothing

        #expect(members(set) == [0, 63, 64, 129])
        #expect(!set.contains(3) && !set.contains(70) && !set.contains(200))
        #expect(set.contains(129))
    }

    @Test func conditionsAddedInTurn_keepTheirKind() {
        // As `addCondition` records them: one index after the other, every third one a member.
        var set = ConditionIndexSet()
        for index in 0..<130 {
            set.set(index, to: index % 3 == 0)
        }
        #expect(members(set) == Array(stride(from: 0, to: 130, by: 3)))
    }

    /// Empty is what it holds, not what it once held: a flag beyond the 64th that was cleared
    /// leaves the set empty.
    @Test(arguments: [0, 63, 64, 130])
    func isEmpty_onceEveryMemberIsTakenOut(index: Int) {
        var set = ConditionIndexSet()
        #expect(set.isEmpty)
        set.set(index, to: true)
        #expect(!set.isEmpty)
        set.set(index, to: false)
        #expect(set.isEmpty)
        #expect(!ConditionIndexSet(below: 1).isEmpty && ConditionIndexSet(below: 0).isEmpty)
    }

    @Test func clearingTheOnlyFlag_leavesTheFirstMembersAlone() {
        var set = ConditionIndexSet(below: 2)
        set.set(66, to: true)
        set.set(66, to: false)
        #expect(members(set) == [0, 1])
    }
}
