// docs:
import Conditions
import Observers
import Operations
// :docs
import Foundation
import Testing
import TestSupport

// The examples of the README's "Adding it to your package" and "A tour of the core" sections,
// verbatim between the `// docs:` markers (ReadmeSnippetsTests checks that they are), so that
// they keep compiling and doing what the text says. The values below stand for the reader's own.

struct Profile: Sendable {
    let name: String
}

private struct ProfileAPI: Sendable {
    func fetchProfile(_ completion: @escaping @Sendable (Result<Profile, any Error>) -> Void) {
        DispatchQueue.global().async { completion(.success(Profile(name: "Ada"))) }
    }
}

private let api = ProfileAPI()

private struct Store: Sendable {
    func save() throws {}
}

private let store = Store()

private struct UploadClient: Sendable {
    func upload(_ file: URL, completion: @escaping @Sendable ((any Error)?) -> Void) {
        DispatchQueue.global().async { completion(nil) }
    }
}

private let client = UploadClient()
private let file = URL(fileURLWithPath: "/tmp/report.pdf")

private struct Report: Decodable {
    let title: String
}

private struct Database_: Sendable {
    func migrate() throws {}
}

private let database = Database_()
private let reported = Recorder<Int>()
private func report(_ errors: [any Error]) { reported.append(errors.count) }

// docs:
final class FetchProfile: AsyncOperation, @unchecked Sendable {
    private(set) var profile: Profile?

    override func execute() {
        api.fetchProfile { result in
            do {
                self.profile = try result.get()
                self.finish()
            } catch {
                self.finish(with: error)
            }
        }
    }
}
// :docs

@Suite struct ReadmeDocsTests {
    @Test func subclassExample_finishesWithTheProfile() throws {
        let fetch = FetchProfile()
        try fetch.runAndWait(timeout: generousTimeout)
        #expect(fetch.profile?.name == "Ada")
    }

    @Test func blockExamples_finish() {
        // docs:
        // Finishes when the block returns; a thrown error is the operation's error.
        let save = AsyncBlockOperation { try store.save() }

        // Finishes when the block calls `finish`, with an optional error.
        let upload = AsyncBlockOperation { finish in
            client.upload(file) { error in finish(error) }
        }
        // :docs
        AsyncOperationQueue().addOperations([save, upload], waitUntilFinished: true)
        #expect(!save.isFailed && !upload.isFailed)
    }

    @Test func resultExample_decodes() {
        let queue = AsyncOperationQueue()
        let data = Data(#"{"title": "Q3"}"#.utf8)
        // docs:
        let parse = ResultBlockOperation { try JSONDecoder().decode(Report.self, from: data) }
        queue.addOperations([parse], waitUntilFinished: true)
        print(parse.output?.title ?? "failed: \(parse.errors)")
        // :docs
        #expect(parse.output?.title == "Q3")
    }

    @Test func queueExample_runsBothAndReports() {
        let download = AsyncBlockOperation {}
        // docs:
        enum Database {}

        let queue = AsyncOperationQueue()
        let migrate = AsyncBlockOperation { try database.migrate() }
        migrate.addCondition(MutuallyExclusive<Database>())          // never alongside another Database operation
        migrate.addCondition(NoFailedDependencies())                  // only if its dependencies succeeded
        migrate.addObserver(TimeoutObserver(timeout: 30))             // cancelled with a timeout error after 30 s
        migrate.addObserver(FinishedObserver { _, errors in report(errors) })
        migrate.addDependency(download)
        queue.addOperations([download, migrate], waitUntilFinished: false)
        // :docs
        #expect(waitUntilFinished([download, migrate]))
        #expect(waitUntil { reported.all == [0] })
    }

    @Test func groupExample_runsEveryChild() {
        let queue = AsyncOperationQueue()
        let fetchUser = AsyncBlockOperation {}
        let fetchSettings = AsyncBlockOperation {}
        let fetchInbox = AsyncBlockOperation {}
        // docs:
        let refresh = GroupOperation(operations: [fetchUser, fetchSettings, fetchInbox])
        refresh.maxConcurrentOperationCount = 1          // one after another, in the order added
        refresh.addObserver(FinishedObserver { _, errors in print("refresh done, \(errors.count) errors") })
        queue.addOperation(refresh)
        // :docs
        #expect(waitUntilFinished([refresh]))
        #expect(fetchUser.isFinished && fetchSettings.isFinished && fetchInbox.isFinished)
    }
}
