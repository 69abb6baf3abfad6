import Foundation
@testable import Operations
import Testing
import TestSupport

// The categories' table of the exclusion rules: names compared as Swift compares strings.

@Suite struct CategoryTableTests {
    @Test func insertsUpdatesAndRemoves_asADictionaryWould() {
        var table = CategoryTable<Int>()
        var expected: [String: Int] = [:]
        var random = SplitMix64(seed: 14)
        let names = (0..<300).map { "db.\($0)" } + ["", "a", "exactly8", "sixteen.bytes.ok", String(repeating: "long", count: 40)]
        for step in 0..<30_000 {
            let name = names[Int(random.next() % UInt64(names.count))]
            let newValue: Int? = random.next() % 3 == 0 ? nil : step
            table.update(name) { $0 = newValue }
            expected[name] = newValue
            guard table.count == expected.count, table[name] == expected[name] else {
                Issue.record("disagrees with a Dictionary at step \(step), on '\(name)'")
                return
            }
        }
        for name in names {
            #expect(table[name] == expected[name], "'\(name)'")
        }
        #expect(Set(table.names { _ in true }) == Set(expected.keys))
    }

    @Test func update_changesTheValueInPlace_andReturnsTheBodysResult() {
        var table = CategoryTable<[Int]>()
        table.update("x") { $0 = [1] }
        let count = table.update("x") { value -> Int in
            value?.append(2)
            return value?.count ?? 0
        }
        #expect(count == 2)
        #expect(table["x"] == [1, 2])
        #expect(table.update("absent") { $0 == nil }) // an absent name reads as nil, and stays out
        #expect(table.count == 1)
    }

    @Test func canonicallyEquivalentNames_areOneEntry() {
        var table = CategoryTable<Int>()
        table.update("caf\u{E9}") { $0 = 1 }
        #expect(table["cafe\u{301}"] == 1)
        table.update("cafe\u{301}") { $0 = 2 }
        #expect(table.count == 1)
        #expect(table["caf\u{E9}"] == 2)
    }

    @Test func aNonASCIINameEqualToAnASCIIOne_isTheSameEntry() {
        // The Kelvin sign decomposes canonically to "K", so Swift holds the two names equal.
        let kelvin = "\u{212A}elvin"
        #expect(kelvin == "Kelvin")
        var table = CategoryTable<Int>()
        table.update("Kelvin") { $0 = 1 }
        #expect(table[kelvin] == 1)
        table.update(kelvin) { $0 = nil }
        #expect(table.count == 0 && table["Kelvin"] == nil)
        table.update(kelvin) { $0 = 2 }
        #expect(table["Kelvin"] == 2)
    }

    /// Spellings Swift holds equal: composed and decomposed, singletons that decompose to ASCII,
    /// combining marks in either order.
    private static let equivalentSpellings: [[String]] = [
        ["caf\u{E9}", "cafe\u{301}"],
        ["\u{212A}", "K"], // Kelvin sign
        ["\u{212B}", "\u{C5}", "A\u{30A}"], // Angstrom sign
        ["a\u{37E}", "a;"], // Greek question mark
        ["e\u{301}\u{327}", "e\u{327}\u{301}", "\u{E9}\u{327}", "\u{229}\u{301}"],
        ["\u{65E5}\u{672C}"], // not ASCII, nothing equivalent
    ]

    @Test func equivalentSpellings_haveOneFingerprint() {
        for spellings in Self.equivalentSpellings {
            let fingerprints = Set(spellings.map { CategoryTable<Int>.Key($0).fingerprint })
            #expect(fingerprints.count == 1, "\(spellings.map { Array($0.unicodeScalars) })")
        }
    }

    @Test func mixedSpellings_insertedUpdatedAndRemoved_agreeWithADictionary() {
        var table = CategoryTable<Int>()
        var expected: [String: Int] = [:]
        var random = SplitMix64(seed: 50)
        let names = Self.equivalentSpellings.flatMap { $0 } + (0..<40).map { "ascii.\($0)" }
        for step in 0..<20_000 {
            let name = names[Int(random.next() % UInt64(names.count))]
            let newValue: Int? = random.next() % 3 == 0 ? nil : step
            table.update(name) { $0 = newValue }
            expected[name] = newValue
            guard table.count == expected.count, table[name] == expected[name] else {
                Issue.record("disagrees with a Dictionary at step \(step), on \(Array(name.unicodeScalars))")
                return
            }
        }
        for name in names {
            #expect(table[name] == expected[name], "\(Array(name.unicodeScalars))")
        }
    }

    @Test func removingFromALongProbeRun_keepsEveryOtherEntryReachable() {
        var table = CategoryTable<Int>()
        let names = (0..<2_000).map { "category-\($0)" }
        for (index, name) in names.enumerated() {
            table.update(name) { $0 = index }
        }
        for (index, name) in names.enumerated() where index % 3 == 0 {
            table.update(name) { $0 = nil }
        }
        for (index, name) in names.enumerated() {
            #expect(table[name] == (index % 3 == 0 ? nil : index), "'\(name)'")
        }
        #expect(table.containsValue { $0 == 1 } && !table.containsValue { $0 == 3 })
    }
}
