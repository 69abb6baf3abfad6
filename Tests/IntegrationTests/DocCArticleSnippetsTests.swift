import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// The examples of the DocC catalogs (Sources/*/*.docc) that no other test quotes, verbatim between
// the `// docs:` markers (ReadmeSnippetsTests checks that they are). The values below stand for
// the reader's own.

private let uploads = Recorder<String>()
private func uploadReport() throws { uploads.append("report") }
private func migrateDatabase() throws {}

// docs:
struct LoggingObserver: OperationObserver {
    func operationDidStart(_ operation: AsyncOperation) {
        print("started \(operation.name ?? "an operation")")
    }

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        print("finished with \(errors.count) errors")
    }
}
// :docs

@Suite struct DocCArticleSnippetsTests {
    @Test func loggingObserver_hearsStartAndFinish() throws {
        let operation = AsyncBlockOperation {}
        operation.addObserver(LoggingObserver())
        try operation.runAndWait(timeout: generousTimeout)
    }

    @Test func observersLandingPage_example() throws {
        // docs:
        let upload = AsyncBlockOperation { try uploadReport() }
        upload.addObserver(TimeoutObserver(timeout: 30))    // cancelled with a timeout error after 30 s
        upload.addObserver(StartedObserver { _ in print("uploading") })
        upload.addObserver(FinishedObserver { _, errors in print(errors.isEmpty ? "uploaded" : "failed: \(errors)") })
        // :docs
        try upload.runAndWait(timeout: generousTimeout)
        #expect(uploads.all == ["report"])
    }

    @Test func conditionsLandingPage_example() throws {
        // docs:
        enum Database {}

        let migrate = AsyncBlockOperation { try migrateDatabase() }
        migrate.addCondition(MutuallyExclusive<Database>())   // never alongside another Database operation
        migrate.addCondition(NoFailedDependencies())           // only if its dependencies succeeded
        // :docs
        try migrate.runAndWait(timeout: generousTimeout)
    }
}
