import Foundation

/// The one spelling of a category's name beyond the process.
///
/// Within a process, categories are `String`s, and Swift holds canonically equivalent spellings
/// equal (`"caf\u{E9}" == "cafe\u{301}"`): they are one category. A lock beyond the process
/// compares bytes (a file name, a hash), so it must see one spelling of them: their canonical
/// composition (NFC).
enum CategoryName {
    /// `category` in canonical composition (NFC); ASCII is its own.
    static func canonical(_ category: String) -> String {
        category.utf8.allSatisfy { $0 < 0x80 } ? category : category.precomposedStringWithCanonicalMapping
    }
}
