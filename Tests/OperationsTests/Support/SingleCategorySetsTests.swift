@testable import Operations
import Testing

// The one-category sets `ExclusiveCategory` reports, remembered per thread by name. Each test runs
// on one thread from start to end (none suspends), so it sees that thread's memo throughout.

@Suite struct SingleCategorySetsTests {
    private var remembered: [String] {
        PerThreadState.current.singleCategorySets.map(\.name)
    }

    @Test func theSet_holdsTheNameAlone() {
        #expect(SingleCategorySets.set(of: "single.a") == ["single.a"])
    }

    @Test func aNameAskedAgain_isServedFromTheMemo() {
        let name = "single.category.served.from.the.memo" // too long to be stored inline
        _ = SingleCategorySets.set(of: name)
        let before = remembered

        let again = SingleCategorySets.set(of: String(name.reversed().reversed())) // other storage, same bytes

        #expect(again == [name])
        #expect(remembered == before, "a hit adds nothing and moves nothing")
        #expect(remembered.filter { $0 == name }.count == 1)
    }

    @Test func aNameChangedInPlaceAfterItWasRemembered_getsTheSetOfItsNewSpelling() {
        // A buffer of its own with room to spare, which a change of one character at the end
        // would reuse were it not shared: the memo must not be fooled by the same buffer and count.
        var name = String(repeating: "n", count: 40)
        name.reserveCapacity(100)
        #expect(SingleCategorySets.set(of: name) == [String(repeating: "n", count: 40)])
        name.removeLast()
        name.append("m") // same count
        #expect(SingleCategorySets.set(of: name) == [String(repeating: "n", count: 39) + "m"])
        #expect(SingleCategorySets.set(of: String(repeating: "n", count: 40)) == [String(repeating: "n", count: 40)])
    }

    @Test func canonicallyEquivalentSpellings_eachKeepTheirOwnBytes() throws {
        let composed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        #expect(composed == decomposed) // one category for `String`, two spellings

        let first = try #require(SingleCategorySets.set(of: composed).first)
        let second = try #require(SingleCategorySets.set(of: decomposed).first)

        #expect(first.utf8.elementsEqual(composed.utf8))
        #expect(second.utf8.elementsEqual(decomposed.utf8))
    }

    @Test func moreNamesThanAreRemembered_eachGetsItsOwnSet_andTheMemoStaysSmall() {
        let names = (0..<(SingleCategorySets.memoSize * 3)).map { "single.many.\($0)" }
        for _ in 0..<2 {
            for name in names {
                #expect(SingleCategorySets.set(of: name) == [name])
            }
        }
        #expect(remembered.count == SingleCategorySets.memoSize)
        #expect(remembered == Array(names.suffix(SingleCategorySets.memoSize)), "the first met goes first")
    }
}
