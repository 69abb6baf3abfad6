@testable import Operations
import Testing

// The one-category sets `ExclusiveCategory` reports, remembered per thread by name.

@Suite struct SingleCategorySetsTests {
    @Test func theSet_holdsTheNameAlone() {
        #expect(SingleCategorySets.set(of: "single.a") == ["single.a"])
    }

    @Test func aRememberedName_givesTheSameSet_andAnotherNameItsOwn() {
        let first = SingleCategorySets.set(of: "single.b")
        let again = SingleCategorySets.set(of: String("single.b".reversed().reversed())) // other storage, same name
        let other = SingleCategorySets.set(of: "single.c")

        #expect(again == first)
        #expect(other == ["single.c"])
    }

    @Test func moreNamesThanAreRemembered_eachStillGetsItsOwnSet() {
        let names = (0..<(SingleCategorySets.memoSize * 3)).map { "single.many.\($0)" }
        for _ in 0..<2 {
            for name in names {
                #expect(SingleCategorySets.set(of: name) == [name])
            }
        }
    }
}
