import Foundation
import Testing

// Every type the README and the DocC articles name must be one a reader can use: a public type of
// this package (declared `public` or `open` under Sources/), a type of the standard library,
// Foundation or Dispatch, one the snippet itself declares, or one of the few the examples
// treat as the reader's own (listed below, each a stand-in declared by the tests). A name the
// documentation uses as if the library had it, such as a logger defined only in a test, fails
// here, naming the file and the line.

private let packageRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent()
    .deletingLastPathComponent()
    .deletingLastPathComponent()

/// Types of the standard library, Foundation, Dispatch and Swift concurrency the documentation
/// names.
private let platformTypes: Set<String> = [
    "Any", "AnyObject", "Bool", "CancellationError", "CheckedContinuation", "Data", "Date",
    "DispatchQueue", "DispatchSemaphore", "DispatchTime", "Double", "Duration", "Equatable", "Error",
    "Foundation", "Hashable", "Int", "JSONDecoder", "NSError", "NSLock", "Never", "Operation",
    "OperationQueue", "BlockOperation", "Progress", "ProgressReporting", "Result", "Self", "Sendable",
    "Set", "String", "Task", "TaskPriority", "Thread", "TimeInterval", "Type", "UInt", "UInt64", "URL",
    "URLSession", "Void",
    // Modules and the test library, named in imports and manifests.
    "Conditions", "Observers", "Operations", "Testing", "XCTest", "Xcode", "PackageDescription",
    "Package",
    // The Integrations package and its modules, and the server-side libraries its adapters wrap.
    "Integrations", "OperationsLogging", "OperationsMetrics", "OperationsTracing",
    "OperationsServiceLifecycle", "PostgresCategoryLock", "ServiceGroup", "Service", "Logger",
    "Logging", "Metrics", "Tracing", "ServiceLifecycle", "Hummingbird", "Prometheus",
    "PrometheusCollectorRegistry", "PrometheusMetricsFactory", "MetricsSystem", "LoggingSystem",
    "InstrumentationSystem", "InMemoryTracer", "NoOpTracer", "ServiceContext", "PostgresClient", "PostgresNIO",
    // The example service: its folder and target, and the HTTP methods of its routes.
    "Sources", "JobService", "GET", "POST",
    // Generic parameters, as the declarations spell them.
    "Input", "Output", "Attempt",
]

/// The reader's own types in the examples: what a reader's app would declare (the tests declare
/// stand-ins). None of them may be a name the library is expected to provide.
private let readersOwnTypes: Set<String> = [
    "Alert", "Database", "Image", "Profile", "Report", "SessionError", "User", "NetworkError",
    "LogIn", "Cache", "App", "SignUpError", "ServerBusy",
]

/// The other frameworks' names, which only the migration article may mention.
private let otherFrameworksTypes: Set<String> = [
    "PSOperations", "ProcedureKit", "CompositeOperations", "ExclusivityController",
    "OperationCondition", "OperationObserver", "OperationConditionResult", "OperationQueueDelegate",
    "URLSessionTaskOperation", "ProcedureKitError", "LogManager",
]

/// The public and open types declared under Sources/, nested ones included, by name.
private func publicTypeNames() throws -> Set<String> {
    let declaration = try NSRegularExpression(
        pattern: #"(?:public|open)\s+(?:final\s+)?(?:class|struct|enum|protocol|typealias|actor)\s+([A-Z][A-Za-z0-9]*)"#
    )
    var names: Set<String> = []
    for file in files(under: "Sources", endingWith: ".swift") + files(under: "Integrations/Sources", endingWith: ".swift") {
        let text = try String(contentsOf: file, encoding: .utf8)
        for match in declaration.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
            if let range = Range(match.range(at: 1), in: text) { names.insert(String(text[range])) }
        }
    }
    return names
}

private func files(under folder: String, endingWith suffix: String) -> [URL] {
    let root = packageRoot.appendingPathComponent(folder)
    guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else { return [] }
    return walker.compactMap { $0 as? URL }.filter { $0.lastPathComponent.hasSuffix(suffix) }.sorted { $0.path < $1.path }
}

/// A piece of code the documentation shows: a line of a ```swift block or an inline code span.
private struct ShownCode {
    let line: Int
    let text: String
    /// The types the block it belongs to declares (`struct Download`, `enum Database {}`); a
    /// document's examples may use the types any of its blocks declares.
    var declared: Set<String> = []
}

/// The code a Markdown file shows, leaving out the "before" column of the migration tables (the
/// other frameworks' spellings) and the blocks that are not Swift.
private func shownCode(in text: String) -> [ShownCode] {
    var shown: [ShownCode] = []
    var block: [ShownCode]?
    var isSwiftBlock = false
    var beforeColumn: Int?
    for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        if trimmed.hasPrefix("```") {
            if var lines = block {
                let declared = Set(lines.flatMap { declaredTypes(in: $0.text) })
                for index in lines.indices { lines[index].declared = declared }
                if isSwiftBlock { shown += lines }
                block = nil
            } else {
                block = []
                isSwiftBlock = trimmed == "```swift"
            }
            continue
        }
        if block != nil {
            block?.append(ShownCode(line: index + 1, text: String(line)))
            continue
        }
        var prose = String(line)
        if trimmed.hasPrefix("|") {
            var cells = trimmed.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            if let column = cells.firstIndex(where: { $0.trimmingCharacters(in: .whitespaces) == "before" }) {
                beforeColumn = column
            } else if let column = beforeColumn, column < cells.count {
                cells[column] = ""
            }
            prose = cells.joined(separator: "|")
        } else {
            beforeColumn = nil
        }
        for (offset, span) in prose.split(separator: "`", omittingEmptySubsequences: false).enumerated() where offset % 2 == 1 {
            shown.append(ShownCode(line: index + 1, text: String(span), declared: Set(declaredTypes(in: String(span)))))
        }
    }
    return shown
}

/// The names `code` declares as types.
private func declaredTypes(in code: String) -> [String] {
    let words = code.split(whereSeparator: { !$0.isLetter && !$0.isNumber && $0 != "_" }).map(String.init)
    return zip(words, words.dropFirst()).compactMap { keyword, name in
        ["struct", "class", "enum", "protocol", "typealias", "actor"].contains(keyword) ? name : nil
    }
}

/// The capitalised identifiers of `code` that name a type: not a member (`x.Foo`), not in a
/// string literal or a comment, not a one-letter generic parameter.
private func typeNames(in code: String) -> [String] {
    var text = code
    if let comment = text.range(of: "//") { text = String(text[..<comment.lowerBound]) }
    text = text.split(separator: "\"", omittingEmptySubsequences: false).enumerated()
        .map { $0.offset % 2 == 0 ? String($0.element) : "" }.joined()
    var names: [String] = []
    var current = ""
    var previous: Character = " "
    var memberAccess = false
    for character in text + " " {
        if character.isLetter || character.isNumber || character == "_" {
            if current.isEmpty { memberAccess = previous == "." || previous == "#" || previous == "@" }
            current.append(character)
        } else {
            if let first = current.first, first.isUppercase, current.count > 1, !memberAccess {
                names.append(current)
            }
            current = ""
        }
        previous = character
    }
    return names
}

@Suite struct DocumentedNamesTests {
    @Test func everyTypeTheDocumentationNames_existsForTheReader() throws {
        let publicTypes = try publicTypeNames()
        #expect(publicTypes.contains("AsyncOperation") && publicTypes.contains("PrintLogger"))
        var documents = [packageRoot.appendingPathComponent("README.md")]
        for module in ["Operations", "Conditions", "Observers"] {
            documents += files(under: "Sources/\(module)/\(module).docc", endingWith: ".md")
        }
        var checked = 0
        for document in documents {
            let path = String(document.path.dropFirst(packageRoot.path.count + 1))
            let isMigration = document.lastPathComponent == "Migration.md"
            let shown = shownCode(in: try String(contentsOf: document, encoding: .utf8))
            let declaredByTheExamples = shown.reduce(into: Set<String>()) { $0.formUnion($1.declared) }
            for code in shown {
                for name in typeNames(in: code.text) {
                    checked += 1
                    let known = publicTypes.contains(name) || platformTypes.contains(name)
                        || readersOwnTypes.contains(name) || declaredByTheExamples.contains(name)
                        || (isMigration && otherFrameworksTypes.contains(name))
                    if !known {
                        Issue.record("\(path):\(code.line): `\(name)` is neither a public type of the package, nor a platform type, nor declared by the example: \(code.text)")
                    }
                }
            }
        }
        #expect(checked > 200, "the documentation was not found")
    }

    @Test func theReadersOwnTypes_areNotTheLibrarys() throws {
        let publicTypes = try publicTypeNames()
        #expect(readersOwnTypes.isDisjoint(with: publicTypes))
    }
}
