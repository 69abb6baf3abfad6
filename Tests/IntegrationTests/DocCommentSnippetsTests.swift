import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// The examples of the `///` comments of Operations, Conditions and Observers, verbatim between the
// `// docs:` markers (ReadmeSnippetsTests checks that they are), so that they keep compiling. The
// values below stand for the reader's own; each test runs its example where that is quick.

struct User: Sendable {
    let name: String
}

struct Image: Sendable {
    let size: Int
}

private enum Database {}
private enum NetworkError: Error { case offline }
private enum SyncError: Error { case upToDate }

private struct UserAPI: Sendable {
    func user(_ id: Int, completion: @escaping @Sendable (Result<User, any Error>) -> Void) {
        DispatchQueue.global().async { completion(.success(User(name: "Ada"))) }
    }

    func user(id: Int) throws -> User { User(name: "Ada") }

    func user(id: Int) async throws -> User { User(name: "Ada") }
}

private let api = UserAPI()

private struct Session: Sendable {
    func download(_ url: URL, completion: @escaping @Sendable (Result<Data, any Error>) -> Void) {
        DispatchQueue.global().async { completion(.success(Data())) }
    }
}

private let session = Session()
private let url: URL = {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("doc-snippet-\(UUID()).bin")
    try? Data([1, 2, 3]).write(to: file)
    return file
}()

private struct Renderer: Sendable {
    func thumbnail(of data: Data, completion: @escaping @Sendable (Result<Image, any Error>) -> Void) {
        completion(.success(Image(size: data.count)))
    }
}

private let renderer = Renderer()

private struct Reachability: Sendable {
    let isReachable = true
}

private let reachability = Reachability()

private final class SyncContacts: AsyncOperation, @unchecked Sendable {}
private final class SyncCalendars: AsyncOperation, @unchecked Sendable {}

// docs:
final class FetchUser: ResultOperation<User>, @unchecked Sendable {
    let id: Int

    init(id: Int) {
        self.id = id
        super.init()
    }

    override func execute() {
        api.user(id) { result in self.finish(with: result) }
    }
}
// :docs

// docs:
final class DownloadOperation: AsyncOperation, @unchecked Sendable {
    override func execute() {
        session.download(url) { result in
            if case let .failure(error) = result {
                self.finish(with: error)
            } else {
                self.finish()
            }
        }
    }
}
// :docs

// docs:
struct NetworkReachable: OperationCondition {
    func evaluate(for operation: AsyncOperation,
                  completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(reachability.isReachable ? .satisfied : .failed(NetworkError.offline))
    }
}
// :docs

// docs:
final class SyncEverything: GroupOperation, @unchecked Sendable {
    override func execute() {
        addChildren([SyncContacts(), SyncCalendars()])
        super.execute()
    }
}
// :docs

@Test func docComment_subclasses_run() throws {
    let fetch = FetchUser(id: 42)
    #expect(try fetch.runAndWait(timeout: generousTimeout).name == "Ada")
    try DownloadOperation().runAndWait(timeout: generousTimeout)
    let guarded = AsyncBlockOperation {}
    guarded.addCondition(NetworkReachable())
    try guarded.runAndWait(timeout: generousTimeout)
    try SyncEverything().runAndWait(timeout: generousTimeout)
}

// docs:
final class Thumbnail: InputOperation<Data, Image>, @unchecked Sendable {
    override func execute(with data: Data) {
        renderer.thumbnail(of: data) { result in self.finish(with: result) }
    }
}
// :docs

@Test func docComment_inputOperation_thumbnail() {
    let queue = AsyncOperationQueue()
    // docs:
    let download = ResultBlockOperation { try Data(contentsOf: url) }   // ResultOperation<Data>
    let thumbnail = Thumbnail()
    thumbnail.takeInput(from: download)    // Data out, Data in: checked at compile time
    queue.addChain([download, thumbnail])
    // :docs
    #expect(waitUntilFinished([thumbnail]))
    #expect(thumbnail.output?.size == 3)
}

// docs:
struct ServiceLogger: OperationLogger {
    let write: @Sendable (OperationLogLevel, String) -> Void   // swift-log, os.Logger, ...
    var minimumLevel: OperationLogLevel { .info }
    func log(_ event: OperationLogEvent) { write(event.level, event.description) }
}
// :docs

@Test func docComment_serviceLogger() {
    let queue = AsyncOperationQueue()
    // docs:
    queue.logger = ServiceLogger { level, line in print("[\(level)] \(line)") }
    // :docs
    queue.addOperations([AsyncBlockOperation {}], waitUntilFinished: true)
}

private struct Store: Sendable {
    func save() throws {}
    func replaceFeed(with data: Data) async throws {}
}

private let store = Store()

private struct Feed: Sendable {
    func download() async throws -> Data { Data() }
}

private let feed = Feed()

private struct FetchClient: Sendable {
    func fetch(_ completion: @escaping @Sendable ((any Error)?) -> Void) {
        DispatchQueue.global().async { completion(nil) }
    }
}

private let client = FetchClient()

@Test func docComment_kindsOfOperation() async throws {
    let queue = AsyncOperationQueue()
    do {
        // docs:
        // Finishes when the block returns; a thrown error becomes the operation's error.
        let save = AsyncBlockOperation { try store.save() }

        // Finishes when the block calls `finish`, from any thread, with an optional error.
        let fetch = AsyncBlockOperation { finish in
            client.fetch { error in finish(error) }
        }
        // :docs
        queue.addOperations([save, fetch], waitUntilFinished: true)
        #expect(!save.isFailed && !fetch.isFailed)
    }
    do {
        // docs:
        let refresh = AsyncTaskOperation {
            let data = try await feed.download()
            try await store.replaceFeed(with: data)
        }
        refresh.addCondition(MutuallyExclusive<Store>())
        queue.addOperation(refresh)
        // :docs
        try await refresh.finished()
    }
    do {
        // docs:
        let fetch = ResultTaskOperation { try await api.user(id: 42) }
        queue.addOperation(fetch)
        let user = try await fetch.value
        // :docs
        #expect(user.name == "Ada")
    }
    do {
        // docs:
        let fetch = FetchUser(id: 42)
        queue.addOperation(fetch)
        let user = try await fetch.value
        // :docs
        #expect(user.name == "Ada")
    }
    do {
        let upload = AsyncBlockOperation {}
        // docs:
        queue.addOperation(upload)
        try await upload.finished()
        // :docs
    }
    do {
        let upload = AsyncBlockOperation {}
        // docs:
        try await queue.run(upload)
        // :docs
        #expect(upload.isFinished)
    }
    do {
        // docs:
        let user = try await queue.run(FetchUser(id: 42))
        // :docs
        #expect(user.name == "Ada")
    }
    do {
        let upload = AsyncBlockOperation {}
        let midnight = Date(timeIntervalSinceNow: 3600)
        // docs:
        let pause = DelayOperation(2)                        // two seconds once it starts
        let nightly = DelayOperation(until: midnight)        // a wall-clock date
        upload.addDependency(pause)
        queue.addOperations([pause, upload], waitUntilFinished: false)
        // :docs
        pause.cancel()
        nightly.cancel()
        try? await upload.finished()
        #expect(upload.isFinished)
    }
}

@Test func docComment_waiting() throws {
    // docs:
    let sync = AsyncBlockOperation { finish in
        DispatchQueue.global().async { finish(nil) }   // finished from anywhere, later
    }
    try sync.runAndWait(timeout: 5)
    // :docs
}

private struct Record: Sendable {
    let version: Int
    let payload: String
    func isNewer(than other: Int) -> Bool { version > other }
}

@Test func docComment_chains() {
    let queue = AsyncOperationQueue()
    do {
        // docs:
        let fetch = ResultBlockOperation { try api.user(id: 42) }
        let greet = InputBlockOperation { (user: User) in "Hello, \(user.name)" }
        greet.takeInput(from: fetch)
        let report = BlockOperation { print(greet.result ?? .failure(CancellationError())) }
        queue.addChain([fetch, greet, report])
        // :docs
        #expect(waitUntilFinished([greet, report]))
    }
    do {
        // docs:
        let fetch = ResultBlockOperation { try api.user(id: 42) }           // ResultOperation<User>
        let greet = InputBlockOperation { (user: User) in "Hello, \(user.name)" }
        greet.takeInput(from: fetch)
        queue.addChain([fetch, greet])
        // :docs
        #expect(waitUntilFinished([greet]))
        #expect(greet.output == "Hello, Ada")
    }
    do {
        let local = 1
        let fetch = ResultBlockOperation { Record(version: 2, payload: "new") }
        let save = InputBlockOperation { (payload: String) in payload.count }
        // docs:
        save.takeInput(from: fetch) { record in
            guard record.isNewer(than: local) else { throw SyncError.upToDate }
            return record.payload
        }
        // :docs
        queue.addOperations([fetch, save], waitUntilFinished: true)
        #expect(save.output == 3)
    }
}

private struct SignUpForm: Sendable {
    let avatar = Data()
    let email = "ada@example.com"
}

private final class CreateAccount: AsyncOperation, @unchecked Sendable {
    init(_ form: SignUpForm) { super.init() }
}

private final class UploadAvatar: AsyncOperation, @unchecked Sendable {
    init(_ avatar: Data) { super.init() }
}

private final class SendWelcomeMail: AsyncOperation, @unchecked Sendable {
    init(_ email: String) { super.init() }
}

private final class FetchInbox: AsyncOperation, @unchecked Sendable {}
private final class FetchCalendar: AsyncOperation, @unchecked Sendable {}
private final class FetchContacts: AsyncOperation, @unchecked Sendable {}
private final class DownloadChanges: AsyncOperation, @unchecked Sendable {}
private final class ApplyChanges: AsyncOperation, @unchecked Sendable {}
private final class NotifyFollowers: AsyncOperation, @unchecked Sendable {}
private final class NotifyEditors: AsyncOperation, @unchecked Sendable {}

private final class RenderPage: AsyncOperation, @unchecked Sendable {
    init(_ draft: String) { super.init() }
}

private final class UploadPage: AsyncOperation, @unchecked Sendable {
    init(_ draft: String) { super.init() }
}

private final class FetchFeed: ResultOperation<String>, @unchecked Sendable {
    let url: URL

    init(url: URL) {
        self.url = url
        super.init()
    }

    override func execute() { finish(producing: url.lastPathComponent) }
}

@Test func docComment_composition() async throws {
    let queue = AsyncOperationQueue()
    do {
        let form = SignUpForm()
        // docs:
        let signUp = CascadeOperation { children in
            children.add { CreateAccount(form) }
            children.add { UploadAvatar(form.avatar) }
            children.add { SendWelcomeMail(form.email) }
        } completion: {
            print("signed up")
        } cancellation: { failure in
            failure.attempt < 3 ? .rerun(after: 1) : .cancel
        }
        queue.addOperation(signUp)
        // :docs
        try await signUp.finished()
    }
    do {
        // docs:
        let refresh = TransactionOperation { children in
            children.add { FetchInbox() }
            children.add { FetchCalendar() }
            children.add { FetchContacts() }
        } completion: {
            print("everything is fresh")
        } cancellation: { failure in
            failure.index == 2 ? .carryOn : .cancel     // contacts are optional
        }
        queue.addOperation(refresh)
        // :docs
        try await refresh.finished()
    }
    do {
        // docs:
        let sync = CascadeOperation { children in
            children.add { DownloadChanges() }
            children.add { ApplyChanges() }
        } cancellation: { failure in
            failure.attempt < 3 ? .rerun(after: 0.5) : .cancel
        }
        // :docs
        queue.addOperation(sync)
        try await sync.finished()
    }
    do {
        // docs:
        let sync = CascadeOperation { children in
            children.add { DownloadChanges() }
            children.add { ApplyChanges() }
        } cancellation: { failure in
            if failure.isCancelled { return .cancel }
            return failure.attempt < 3 ? .rerun : .carryOn
        }
        // :docs
        queue.addOperation(sync)
        try await sync.finished()
    }
    do {
        let draft = "draft"
        // docs:
        let publish = CascadeOperation { children in
            children.add { RenderPage(draft) }
            children.add { UploadPage(draft) }
            children.add { TransactionOperation { notifications in
                notifications.add { NotifyFollowers() }
                notifications.add { NotifyEditors() }
            } }
        }
        // :docs
        queue.addOperation(publish)
        try await publish.finished()
    }
    do {
        // docs:
        let atOnce = BackoffPolicy.none                                       // retry at once
        let steady = BackoffPolicy.fixed(1)                                   // 1 s before every retry
        let growing = BackoffPolicy.exponential(initial: 0.5, maximum: 30)    // 0.5 s, 1 s, 2 s, 4 s, ... at most 30 s
        let spread = growing.withJitter()                                     // each of those, times a random 0...1
        // :docs
        #expect(atOnce.delay(beforeAttempt: 2) == 0)
        #expect(steady.delay(beforeAttempt: 2) == 1)
        #expect(spread.delay(beforeAttempt: 2) <= 0.5)
    }
    do {
        let feedURL = URL(fileURLWithPath: "/feeds/news")
        // docs:
        let fetch = RetryOperation(maxAttempts: 4, backoff: .exponential(initial: 0.5).withJitter()) { _ in
            FetchFeed(url: feedURL)
        }
        queue.addOperation(fetch)
        try await fetch.finished()
        let feed = fetch.lastAttempt?.output
        // :docs
        #expect(feed == "news")
    }
    do {
        let fetchUser = AsyncBlockOperation {}
        let fetchSettings = AsyncBlockOperation {}
        // docs:
        let group = GroupOperation(operations: [fetchUser, fetchSettings])
        group.maxConcurrentOperationCount = 1     // one after another, in the order added
        group.addObserver(FinishedObserver { _, errors in print(errors) })
        queue.addOperation(group)
        // :docs
        try await group.finished()
        // docs:
        let overall = Progress(totalUnitCount: 1)                   // say, the one a progress bar shows
        overall.addChild(group.progress, withPendingUnitCount: 1)
        print("\(Int(group.progress.fractionCompleted * 100)) %")  // or observe it with key-value observing
        // :docs
        #expect(overall.fractionCompleted == 1)
    }
}

private struct Settings: Sendable {
    let syncEnabled = true
}

private let settings = Settings()
private let alerts = Recorder<Int>()
private func alert(_ errors: [any Error]) { alerts.append(errors.count) }
private func log(_ line: String) { print(line) }

private struct RecordStore: Sendable {
    func save(_ record: String) throws {}
}

@Test func docComment_conditionsAndObservers() {
    let database = RecordStore()
    let record = "record"
    do {
        // docs:
        let queue = AsyncOperationQueue()
        let save = AsyncBlockOperation { try database.save(record) }
        save.addCondition(MutuallyExclusive<Database>())
        save.addObserver(TimeoutObserver(timeout: 10))
        queue.addOperation(save)
        // :docs
        #expect(waitUntilFinished([save]))
        // docs:
        print(save.snapshot())
        // :docs
    }
    do {
        let operation = AsyncBlockOperation {}
        let upload = AsyncBlockOperation {}
        let sync = AsyncBlockOperation {}
        let save = AsyncBlockOperation { throw NetworkError.offline }
        // docs:
        operation.addCondition(MutuallyExclusive<Database>())
        // :docs
        // docs:
        upload.addCondition(ExclusiveCategory("network.upload"))
        // :docs
        // docs:
        sync.addCondition(BlockCondition { settings.syncEnabled })
        // :docs
        // docs:
        save.addObserver(FinishedObserver { _, errors in
            if !errors.isEmpty { alert(errors) }
        })
        // :docs
        // docs:
        operation.addObserver(BlockObserver(
            didStart: { op in log("started \(op.name ?? "")") },
            didFinish: { op, errors in log("finished with \(errors.count) errors") }
        ))
        // :docs
        let queue = AsyncOperationQueue()
        queue.isSuspended = true
        queue.addOperations([operation, upload, sync, save], waitUntilFinished: false)
        // docs:
        print(queue.snapshot())
        // :docs
        queue.isSuspended = false
        #expect(waitUntilFinished([operation, upload, sync, save]))
        #expect(waitUntil { alerts.all == [1] })
    }
    do {
        let migrate = AsyncBlockOperation {}
        let backup = AsyncBlockOperation {}
        // docs:
        enum Database {}
        migrate.addCondition(MutuallyExclusive<Database>())
        backup.addCondition(MutuallyExclusive<Database>())   // never runs alongside `migrate`
        // :docs
        AsyncOperationQueue().addOperations([migrate, backup], waitUntilFinished: true)
    }
}

private struct WarningLogger: Sendable {
    func warning(_ message: String) { print(message) }
}

/// Compiled, never run: it replaces the process-wide handler, which other tests listen to.
private func docComment_diagnosticsHandler() {
    let logger = WarningLogger()
    // docs:
    OperationDiagnostics.handler = { diagnostic in logger.warning("\(diagnostic)") }
    // :docs
}

// docs:
final class CountingOperation: AsyncOperation, @unchecked Sendable {
    // @unchecked Sendable: `pages` lives in a LockedValue.
    private let pages = LockedValue(0)

    override func execute() {
        pages.withLock { $0 += 1 }
        finish()
    }

    var pageCount: Int { pages.withLock { $0 } }
}
// :docs

@Test func docComment_lockedValue() {
    let operation = CountingOperation()
    AsyncOperationQueue().addOperations([operation], waitUntilFinished: true)
    #expect(operation.pageCount == 1)
}

@Test func docComment_shutDown() async {
    // docs:
    let queue = AsyncOperationQueue()
    queue.addOperation(AsyncBlockOperation { try store.save() })
    await queue.shutDown(gracePeriod: 10)    // on SIGTERM, say
    // :docs
    #expect(queue.isShutDown && queue.allOperationCount == 0)
}

private struct CountingLogger: OperationLogger {
    let count = Counter()
    var minimumLevel: OperationLogLevel = .trace

    func log(_ event: OperationLogEvent) {
        count.increment()
    }
}

@Test func docComment_multiplexLogger() {
    let queue = AsyncOperationQueue()
    let auditLog = CountingLogger(minimumLevel: .info)
    let metricsLog = CountingLogger()
    // docs:
    queue.logger = MultiplexOperationLogger([auditLog, metricsLog])   // each hears every event it wants
    // :docs
    queue.addOperations([AsyncBlockOperation {}], waitUntilFinished: true)
    #expect(waitUntil { auditLog.count.current == 2 && metricsLog.count.current == 3 })
}
