/// What the tests' `print` calls wrote. Each test module that prints (the documentation's
/// examples print, as a reader's code does) declares a `print` of its own that appends here
/// instead of writing to standard output, so that a test run prints nothing unless a test fails.
public let printedLines = Recorder<String>()

/// The line `print(items, separator:)` would write, without its terminator.
public func printedLine(_ items: [Any], separator: String) -> String {
    items.map { "\($0)" }.joined(separator: separator)
}
