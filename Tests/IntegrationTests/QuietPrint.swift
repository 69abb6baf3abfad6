import TestSupport

/// Shadows the standard library's `print` in this test module: the documentation's examples print
/// as a reader's code does, and a test run prints nothing unless a test fails. What was printed
/// is in `printedLines`.
func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
    printedLines.append(printedLine(items, separator: separator))
}
