import Foundation
import Operations

// Composition: publishing an article. A cascade runs the steps one after another; its first step
// is a transaction that gathers the sources at once, runs a flaky download again and carries on
// without an optional one. A chain then passes typed results from one operation to the next, and
// a second chain shows a failure travelling forward.

/// Prints one line of the composition tour, indented under its heading.
private func tell(_ line: String) {
    print("  " + line)
}

/// Work that takes a few milliseconds, fails with `error` if given one.
private func work(_ name: String, milliseconds: Int = 20, error: (any Error)? = nil) -> AsyncBlockOperation {
    let operation = AsyncBlockOperation { finish in
        tell("\(name): started")
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(milliseconds)) {
            tell(error.map { "\(name): failed, \($0)" } ?? "\(name): done")
            finish(error)
        }
    }
    operation.name = name
    return operation
}

private struct TourError: Error, CustomStringConvertible {
    let description: String
}

private struct Author: Sendable {
    let name: String
    let email: String
}

/// Runs the composition tour: a cascade of a transaction and two steps, then two chains.
func runCompositionTour() {
    let tourQueue = AsyncOperationQueue()

    print("\nComposition: a cascade whose first step is a transaction.\n")
    let imageAttempts = TourCounter()
    let publish = CascadeOperation { steps in
        steps.add {
            TransactionOperation { sources in
                sources.add { work("fetch text") }
                sources.add {
                    let attempt = imageAttempts.increment()
                    return work("fetch images (attempt \(attempt))", error: attempt == 1 ? TourError(description: "connection reset") : nil)
                }
                sources.add { work("fetch related links", milliseconds: 5, error: TourError(description: "not found")) }
            } completion: {
                tell("sources: all gathered")
            } cancellation: { failure in
                if failure.index == 2 {
                    tell("sources: related links are optional, carrying on")
                    return .carryOn
                }
                tell("sources: child \(failure.index) failed on attempt \(failure.attempt), running it again in 50 ms")
                return failure.attempt < 3 ? .rerun(after: 0.05) : .cancel
            }
        }
        steps.add { work("render page") }
        steps.add { work("upload page") }
    } completion: {
        tell("publish: the article is online")
    } cancellation: { failure in
        tell("publish: step \(failure.index) failed, giving up")
        return .cancel
    }
    tourQueue.addOperations([publish], waitUntilFinished: true)
    tell("publish finished \(publish.isFailed ? "with errors" : "without errors")")

    print("\nComposition: a chain passing typed results forward.\n")
    let findAuthor = ResultBlockOperation { Author(name: "Ada", email: "ada@example.org") }
    findAuthor.name = "find author"
    let compose = InputBlockOperation { (author: Author) in "Dear \(author.name), your article is live." }
    compose.name = "compose mail"
    compose.takeInput(from: findAuthor)
    let send = InputBlockOperation { (mail: String) -> Int in
        tell("send mail: \"\(mail)\"")
        return mail.utf8.count
    }
    send.name = "send mail"
    send.takeInput(from: compose) { mail in
        guard !mail.isEmpty else { throw TourError(description: "empty mail") } // an adapter can veto
        return mail
    }
    tourQueue.addChain([findAuthor, compose, send], waitUntilFinished: true)
    tell("sent \(send.output ?? 0) bytes")

    print("\nComposition: a chain stopping at its first failure.\n")
    let findEditor = ResultBlockOperation<Author> { throw TourError(description: "no editor on duty") }
    findEditor.name = "find editor"
    let composeAgain = InputBlockOperation { (author: Author) in "Dear \(author.name)" }
    composeAgain.name = "compose review request"
    composeAgain.takeInput(from: findEditor)
    let sendAgain = InputBlockOperation { (mail: String) in mail.utf8.count }
    sendAgain.name = "send review request"
    sendAgain.takeInput(from: composeAgain)
    tourQueue.addChain([findEditor, composeAgain, sendAgain], waitUntilFinished: true)
    for operation in [findEditor, composeAgain, sendAgain] as [AsyncOperation] {
        tell("\(operation.name ?? "?"): \(operation.errors.map { "\($0)" }.joined(separator: "; "))")
    }
}

/// A counter shared by the tour's closures.
private final class TourCounter: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched while holding `lock`.
    private let lock = NSLock()
    private var value = 0

    func increment() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }
}
