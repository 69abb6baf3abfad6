import Foundation
import Operations
import Testing
import TestSupport

// The examples of the README's "Composing operations" section, verbatim between the `// docs:` markers, so that
// they keep compiling and doing what the text says. The functions below stand for the reader's own.

private struct User: Sendable {
    let name: String
}

// Stays its own type: the README's example throws `SignUpError.missingName`, quoted verbatim below.
private enum SignUpError: Error {
    case missingName
}

private let signUpSteps = Recorder<String>()
private func createAccount() throws { signUpSteps.append("create account") }
private func uploadAvatar() throws { signUpSteps.append("upload avatar") }
private func sendWelcomeMail() throws { signUpSteps.append("send welcome mail") }
private func fetchInbox() throws {}
private func fetchCalendar() throws {}
private func fetchWeather() throws { throw URLError(.notConnectedToInternet) }
private func fetchText() throws {}
private func fetchImages() throws {}
private func renderPage() throws {}
private func fetchUser(id: Int) throws -> User { User(name: "ada") }
private func store(_ name: String) throws {}

@Suite(.serialized) struct CompositionDocsTests {
    @Test func cascadeExample() {
        let queue = AsyncOperationQueue()
        // docs:
        let signUp = CascadeOperation { steps in
            steps.add { AsyncBlockOperation { try createAccount() } }
            steps.add { AsyncBlockOperation { try uploadAvatar() } }
            steps.add { AsyncBlockOperation { try sendWelcomeMail() } }
        } completion: {
            print("signed up")
        } cancellation: { failure in
            print("step \(failure.index) failed on attempt \(failure.attempt): \(failure.errors)")
            return failure.attempt < 3 ? .rerun(after: 0.5) : .cancel
        }
        queue.addOperation(signUp)
        // :docs

        #expect(waitUntilFinished([signUp]))
        #expect(signUpSteps.all == ["create account", "upload avatar", "send welcome mail"])
    }

    @Test func transactionExample() {
        // docs:
        let refresh = TransactionOperation { parts in
            parts.add { AsyncBlockOperation { try fetchInbox() } }
            parts.add { AsyncBlockOperation { try fetchCalendar() } }
            parts.add { AsyncBlockOperation { try fetchWeather() } }
        } completion: {
            print("everything is fresh")
        } cancellation: { failure in
            failure.index == 2 ? .carryOn : .cancel     // the weather is optional
        }
        refresh.maxConcurrentOperationCount = 2           // at most two downloads at once
        // :docs

        AsyncOperationQueue().addOperations([refresh], waitUntilFinished: true)
        #expect(!refresh.isFailed)
    }

    @Test func nestingExample() {
        // docs:
        let publish = CascadeOperation { steps in
            steps.add {
                TransactionOperation { sources in
                    sources.add { AsyncBlockOperation { try fetchText() } }
                    sources.add { AsyncBlockOperation { try fetchImages() } }
                }
            }
            steps.add { AsyncBlockOperation { try renderPage() } }
        } cancellation: { failure in
            failure.index == 0 && failure.attempt == 1 ? .rerun : .cancel   // gather every source again, once
        }
        // :docs

        AsyncOperationQueue().addOperations([publish], waitUntilFinished: true)
        #expect(!publish.isFailed)
    }

    @Test func chainExamples() {
        let queue = AsyncOperationQueue()
        let download = AsyncBlockOperation {}
        let unzip = AsyncBlockOperation {}
        let importRecords = AsyncBlockOperation {}
        // docs:
        queue.addChain([download, unzip, importRecords])
        // :docs

        // docs:
        let fetch = ResultBlockOperation { try fetchUser(id: 42) }                  // ResultOperation<User>
        let greet = InputBlockOperation { (user: User) in "Hello, \(user.name)" }   // InputOperation<User, String>
        greet.takeInput(from: fetch)       // taking input from a ResultOperation<Int> would not compile
        let report = BlockOperation { print(greet.output ?? "no greeting") }
        queue.addChain([fetch, greet, report])
        // :docs

        // docs:
        let save = InputBlockOperation { (name: String) in try store(name) }
        save.takeInput(from: fetch) { user in
            guard !user.name.isEmpty else { throw SignUpError.missingName }   // veto
            return user.name.capitalized                                      // transform
        }
        // :docs
        queue.addOperation(save)

        #expect(waitUntilFinished([importRecords, report, save]))
        #expect(greet.output == "Hello, ada")
        #expect(save.input == "Ada")
    }
}
