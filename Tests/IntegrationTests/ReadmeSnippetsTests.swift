import Foundation
import Operations
import Testing

// Every Swift snippet a reader sees is compiled by some test: the ```swift blocks of README.md,
// of the DocC articles (Sources/*/*.docc/**/*.md) and of the `///` comments of the library
// modules must each appear in a test file, between a `// docs:` and a `// :docs` marker comment.
// Lines that are only comments are skipped on both sides, a trailing `// comment` is ignored and
// runs of spaces compare equal; the regions of one test file are read as one text, so a test can
// interrupt a snippet with its checks by closing and reopening a region. A block whose first line
// is `// Package.swift` is for the reader's manifest and is skipped. See CONTRIBUTING.md.

/// The package's root folder, found from this file's path (Tests/IntegrationTests/<this file>).
private let packageRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent()
    .deletingLastPathComponent()
    .deletingLastPathComponent()

/// The marker comment that exempts a block: lines a user pastes into their own `Package.swift`.
private let manifestMarker = "// Package.swift"

/// A ```swift block, where it was found and its code lines, normalized.
private struct Snippet: CustomStringConvertible {
    let file: String
    let line: Int
    let text: [String]
    let code: [String]

    var description: String {
        "\(file):\(line): \(code.first ?? "")"
    }
}

/// The line without a trailing `//` comment (one outside a string literal), trimmed, with runs
/// of white space made one space; nil for a line that is empty or only a comment.
private func normalized(_ line: String) -> String? {
    var code = ""
    var inString = false
    var escaped = false
    var previous: Character?
    for character in line {
        if inString {
            if escaped {
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "\"" {
                inString = false
            }
        } else if character == "\"" {
            inString = true
        } else if character == "/", previous == "/" {
            code.removeLast()
            break
        }
        code.append(character)
        previous = character
    }
    let words = code.split(whereSeparator: { $0 == " " || $0 == "\t" })
    return words.isEmpty ? nil : words.joined(separator: " ")
}

/// The ```swift blocks of a Markdown text (or of the text of `///` comments).
private func swiftBlocks(in lines: [(number: Int, text: String)], file: String) -> [Snippet] {
    var snippets: [Snippet] = []
    var current: (start: Int, lines: [String])?
    for (number, text) in lines {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let block = current {
            if trimmed.hasPrefix("```") {
                let code = block.lines.compactMap(normalized)
                let firstLine = block.lines.first { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
                if firstLine?.trimmingCharacters(in: .whitespaces) != manifestMarker {
                    snippets.append(Snippet(file: file, line: block.start, text: block.lines, code: code))
                }
                current = nil
            } else {
                current = (block.start, block.lines + [text])
            }
        } else if trimmed == "```swift" {
            current = (number + 1, [])
        }
    }
    return snippets
}

private func numberedLines(of url: URL) throws -> [(number: Int, text: String)] {
    let text = try String(contentsOf: url, encoding: .utf8)
    return text.split(separator: "\n", omittingEmptySubsequences: false)
        .enumerated().map { ($0.offset + 1, String($0.element)) }
}

private func relativePath(_ url: URL) -> String {
    String(url.standardizedFileURL.path.dropFirst(packageRoot.standardizedFileURL.path.count + 1))
}

/// Every file under `folder` whose name ends with `suffix`, in a stable order.
private func files(under folder: String, endingWith suffix: String) -> [URL] {
    let root = packageRoot.appendingPathComponent(folder)
    guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else { return [] }
    return walker.compactMap { $0 as? URL }
        .filter { $0.lastPathComponent.hasSuffix(suffix) }
        .sorted { $0.path < $1.path }
}

/// The snippets of a Markdown file.
private func markdownSnippets(_ url: URL) throws -> [Snippet] {
    swiftBlocks(in: try numberedLines(of: url), file: relativePath(url))
}

/// The snippets of a Swift file's `///` comments, each comment's text with the `///` taken off.
private func docCommentSnippets(_ url: URL) throws -> [Snippet] {
    let comments = try numberedLines(of: url).compactMap { line -> (number: Int, text: String)? in
        let trimmed = line.text.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasPrefix("///") else { return nil }
        var text = trimmed.dropFirst(3)
        if text.first == " " { text = text.dropFirst() }
        return (line.number, String(text))
    }
    return swiftBlocks(in: comments, file: relativePath(url))
}

/// The normalized lines of a test file's `// docs:` … `// :docs` regions, one after another.
private func docsRegions(_ url: URL) throws -> [String] {
    var lines: [String] = []
    var inside = false
    for (_, text) in try numberedLines(of: url) {
        switch text.trimmingCharacters(in: .whitespaces) {
        case "// docs:": inside = true
        case "// :docs": inside = false
        default:
            if inside, let code = normalized(text) { lines.append(code) }
        }
    }
    return lines
}

/// How many of `snippet`'s lines `region` holds, next to each other, from the first on: the best
/// start anywhere in `region`.
private func longestMatch(of snippet: [String], in region: [String]) -> Int {
    guard !snippet.isEmpty, region.count >= 1 else { return 0 }
    var best = 0
    for start in region.indices {
        var matched = 0
        while matched < snippet.count, start + matched < region.count, region[start + matched] == snippet[matched] {
            matched += 1
        }
        best = max(best, matched)
        if best == snippet.count { break }
    }
    return best
}

private func allSnippets() throws -> [Snippet] {
    var snippets = try markdownSnippets(packageRoot.appendingPathComponent("README.md"))
    for module in ["Operations", "Conditions", "Observers"] {
        for article in files(under: "Sources/\(module)/\(module).docc", endingWith: ".md") {
            snippets += try markdownSnippets(article)
        }
        for source in files(under: "Sources/\(module)", endingWith: ".swift") {
            snippets += try docCommentSnippets(source)
        }
    }
    // The Integrations package: its README and its adapters' `///` comments, compiled by its own
    // tests (and the example's source).
    let integrationsReadme = packageRoot.appendingPathComponent("Integrations/README.md")
    if FileManager.default.fileExists(atPath: integrationsReadme.path) {
        snippets += try markdownSnippets(integrationsReadme)
    }
    for source in files(under: "Integrations/Sources", endingWith: ".swift") {
        snippets += try docCommentSnippets(source)
    }
    return snippets
}

/// The files whose `// docs:` regions compile snippets: this package's tests, and the
/// Integrations package's tests and sources (its example's code is shown in the docs).
private func filesWithDocsRegions() -> [URL] {
    ["Tests", "Integrations/Tests", "Integrations/Sources"].flatMap { files(under: $0, endingWith: ".swift") }
}

/// The code spans of the "after" column of each `| before | after | notes |` table of a Markdown
/// file, with where each row is; a row whose "after" has no code (such as "(internal)") has none.
private func afterColumns(in lines: [(number: Int, text: String)]) -> [(line: Int, spans: [String])] {
    var rows: [(line: Int, spans: [String])] = []
    var afterColumn: Int?
    for (number, text) in lines {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasPrefix("|") else {
            afterColumn = nil
            continue
        }
        let cells = trimmed.split(separator: "|", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        if let index = cells.firstIndex(of: "after"), cells.contains("before") {
            afterColumn = index
        } else if let index = afterColumn, index < cells.count, !cells[index].hasPrefix("---") {
            let spans = cells[index].split(separator: "`", omittingEmptySubsequences: true)
                .enumerated().filter { $0.offset % 2 == (cells[index].hasPrefix("`") ? 0 : 1) }
                .map { $0.element.split(whereSeparator: \.isWhitespace).joined(separator: " ") }
            rows.append((number, spans))
        }
    }
    return rows
}

@Suite struct ReadmeSnippetsTests {
    @Test func everySnippet_isCompiledInADocsRegion() throws {
        let snippets = try allSnippets()
        let regions = try filesWithDocsRegions().map { (relativePath($0), try docsRegions($0)) }
        #expect(snippets.filter { $0.file == "README.md" }.count >= 10, "README.md was not found or has lost its examples")
        #expect(regions.contains { !$0.1.isEmpty }, "no test file has a `// docs:` region")

        for snippet in snippets where !snippet.code.isEmpty {
            let best = regions
                .map { (file: $0.0, matched: longestMatch(of: snippet.code, in: $0.1)) }
                .max { $0.matched < $1.matched }
            guard let best, best.matched < snippet.code.count else { continue }
            let missing = snippet.code[best.matched]
            let closest = best.matched == 0
                ? "no test file has its first line"
                : "closest: \(best.file), which has its first \(best.matched) lines but not `\(missing)`"
            Issue.record(
                """
                \(snippet.file):\(snippet.line): this snippet is not compiled by any test; copy it \
                verbatim between `// docs:` and `// :docs` in a test (\(closest)):
                \(snippet.text.joined(separator: "\n"))
                """
            )
        }
    }

    @Test func everyRowOfTheMigrationGuide_hasItsAfterSideCompiled() throws {
        let guide = "Sources/Operations/Operations.docc/Migration.md"
        let rows = afterColumns(in: try numberedLines(of: packageRoot.appendingPathComponent(guide)))
        let compiled = try files(under: "Tests", endingWith: ".swift").flatMap(docsRegions)
        #expect(rows.count >= 60, "\(guide) was not found or has lost its tables")
        for (line, spans) in rows {
            for span in spans where !compiled.contains(where: { $0.contains(span) }) {
                Issue.record("\(guide):\(line): the \"after\" side `\(span)` is not compiled by any test; copy it into a `// docs:` region")
            }
        }
    }

    @Test func theMisuseTable_namesEveryDiagnosticKind() throws {
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        for kind in OperationDiagnostic.Kind.allCases {
            #expect(readme.contains("`.\(kind.rawValue)`"), "README.md's misuse table does not list `.\(kind.rawValue)`")
        }
    }

    @Test func theErrorTable_namesEveryAsyncOperationErrorCase() throws {
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let source = packageRoot.appendingPathComponent("Sources/Operations/Diagnostics/AsyncOperationError.swift")
        let cases = try numberedLines(of: source).compactMap { line -> String? in
            // `case name(label: Type, ...)` declares a case; `case let .name(...)` in a switch does not.
            let words = line.text.trimmingCharacters(in: .whitespaces).split(separator: " ", maxSplits: 1)
            guard words.count == 2, words[0] == "case", let name = words[1].split(separator: "(").first,
                  name.allSatisfy({ $0.isLetter || $0.isNumber }) else { return nil }
            return String(name)
        }
        #expect(cases.contains("timedOut"), "could not read the cases of AsyncOperationError.swift")
        for name in cases {
            // A case with context is listed as `name(label:...)`, one without as `name`.
            #expect(readme.contains("`\(name)(") || readme.contains("`\(name)`"), "README.md's error table does not list `\(name)`")
        }
    }
}
