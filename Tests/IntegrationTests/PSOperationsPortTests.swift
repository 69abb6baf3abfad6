import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// A feed service written for PSOperations (Apple's Advanced NSOperations sample grown into a
// library), in the sample's style: a login condition that produces its own dependency, a group of
// a download and a parse, an alert that must never overlap another, a produced operation,
// observers and a queue delegate. It was ported with the migration article alone: the types and
// protocol methods renamed as its tables say, and the one-to-one spellings left as they were
// (`finishWithError`, `produceOperation`, `cancelWithError`, `BlockObserver(startHandler:...)`,
// `NegatedCondition(condition:)`, a continuation without an error), which still compile,
// deprecated. The service is marked deprecated for that reason only: the compiler warns about
// deprecated calls only outside deprecated code, so the build stays free of warnings.

private enum FeedError: Error, Equatable { case offline, notLoggedIn }

/// The server the service talks to: it answers on another thread, a moment later.
private final class FeedServer: @unchecked Sendable {
    // @unchecked Sendable: every property is read and written under `lock`.
    private let lock = NSLock()
    private var loggedIn = false
    private var feeds: [String]
    private(set) var logins = 0

    init(feeds: [String]) { self.feeds = feeds }

    var isLoggedIn: Bool { lock.withLock { loggedIn } }
    var isOffline: Bool { false }

    func logIn(_ done: @escaping @Sendable ((any Error)?) -> Void) {
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.01) { [self] in
            lock.withLock { loggedIn = true; logins += 1 }
            done(nil)
        }
    }

    func download(_ done: @escaping @Sendable (Result<String, any Error>) -> Void) {
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.01) { [self] in
            let feed = lock.withLock { feeds.isEmpty ? nil : feeds.removeFirst() }
            done(feed.map { .success($0) } ?? .failure(FeedError.offline))
        }
    }
}

/// What the service shows: the items parsed, and alerts, which must never overlap.
private final class Screen: @unchecked Sendable {
    let items = Recorder<String>()
    let alerts = Recorder<String>()
    let probe = ConcurrencyProbe()
}

// MARK: - The ported service

@available(*, deprecated, message: "keeps PSOperations' spellings on purpose")
private struct LoginRequired: OperationCondition {                    // was: struct LoginCondition: OperationCondition
    let server: FeedServer
    var name: String { "Login" }                                      // was: static let name = "Login"
    var mutuallyExclusiveCategories: Set<String> { ["Login"] }       // was: static let isMutuallyExclusive = true

    func dependency(for operation: AsyncOperation) -> Foundation.Operation? {   // was: dependencyForOperation(_:)
        server.isLoggedIn ? nil : LoginOperation(server: server)
    }

    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {   // was: evaluateForOperation(_:completion:)
        completion(server.isLoggedIn ? .satisfied : .failed(FeedError.notLoggedIn))
    }
}

@available(*, deprecated, message: "keeps PSOperations' spellings on purpose")
private final class LoginOperation: AsyncOperation, @unchecked Sendable {   // was: class LoginOperation: Operation
    let server: FeedServer
    init(server: FeedServer) { self.server = server }

    override func execute() {
        server.logIn { error in self.finishWithError(error) }
    }
}

@available(*, deprecated, message: "keeps PSOperations' spellings on purpose")
private final class DownloadFeedOperation: AsyncOperation, @unchecked Sendable {
    let server: FeedServer
    let feed = Recorder<String>()
    init(server: FeedServer) { self.server = server }

    override func execute() {
        if server.isOffline { cancelWithError(FeedError.offline) }
        server.download { result in
            switch result {
            case let .success(feed): self.feed.append(feed); self.finish()
            case let .failure(error): self.finish(with: error)             // was: finishWithError(error as NSError)
            }
        }
    }
}

@available(*, deprecated, message: "keeps PSOperations' spellings on purpose")
private final class ParseFeedOperation: AsyncOperation, @unchecked Sendable {
    let download: DownloadFeedOperation
    let screen: Screen
    init(download: DownloadFeedOperation, screen: Screen) { self.download = download; self.screen = screen }

    override func execute() {
        let items = download.feed.all.flatMap { $0.split(separator: ",").map(String.init) }
        items.forEach(screen.items.append)
        if items.isEmpty { produceOperation(AlertOperation(message: "the feed is empty", screen: screen)) }
        finish()
    }
}

@available(*, deprecated, message: "keeps PSOperations' spellings on purpose")
private final class AlertOperation: AsyncOperation, @unchecked Sendable {
    let message: String
    let screen: Screen
    init(message: String, screen: Screen) {
        self.message = message
        self.screen = screen
        super.init()
        addCondition(MutuallyExclusive<AlertOperation>())            // unchanged, from module Conditions
    }

    override func execute() {
        screen.probe.enter("alert")
        screen.alerts.append(message)
        Thread.sleep(forTimeInterval: 0.005)
        screen.probe.leave("alert")
        finish()
    }
}

@available(*, deprecated, message: "keeps PSOperations' spellings on purpose")
private final class GetFeedOperation: GroupOperation, @unchecked Sendable {
    let screen: Screen

    init(server: FeedServer, screen: Screen, completion: @escaping @Sendable () -> Void) {
        self.screen = screen
        let download = DownloadFeedOperation(server: server)
        let parse = ParseFeedOperation(download: download, screen: screen)
        parse.addDependency(download)
        parse.addCondition(NoFailedDependencies())
        let done = AsyncBlockOperation { (finish: @escaping () -> Void) in completion(); finish() }
        done.addDependency(parse)
        super.init(operations: [download, parse, done])               // was: super.init(operations: download, parse, done)
        name = "Get Feed"
        addCondition(LoginRequired(server: server))
        addCondition(NegatedCondition(condition: BlockCondition { server.isOffline }))
        addCondition(MutuallyExclusive<GetFeedOperation>())
        addObserver(TimeoutObserver(timeout: 30))
    }

    override func childDidFinish(_ child: Foundation.Operation, errors: [any Error]) {   // was: operationDidFinish(_:withErrors:)
        if child is DownloadFeedOperation, !errors.isEmpty {
            produce(AlertOperation(message: "could not load the feed", screen: screen))
        }
    }
}

/// Hears the queue: was an `OperationQueueDelegate` set as the queue's delegate.
private final class ServiceAudit: AsyncOperationQueueDelegate {
    let finished = Recorder<String>()

    func operationQueue(_ queue: AsyncOperationQueue, didFinish operation: AsyncOperation, errors: [any Error]) {   // was: operationQueue(_:operationDidFinish:withErrors:)
        finished.append(operation.name ?? "\(type(of: operation))")
    }
}

@available(*, deprecated, message: "keeps PSOperations' spellings on purpose")
private final class FeedService: Sendable {
    let queue = AsyncOperationQueue()                                  // was: OperationQueue()
    let audit = ServiceAudit()
    let server: FeedServer
    let screen = Screen()
    let events = Recorder<String>()

    init(server: FeedServer) {
        self.server = server
        queue.name = "feed"
        queue.delegate = audit
    }

    @discardableResult
    func refresh(completion: @escaping @Sendable () -> Void = {}) -> GetFeedOperation {
        let get = GetFeedOperation(server: server, screen: screen, completion: completion)
        get.addObserver(BlockObserver(
            startHandler: { [events] _ in events.append("started") },
            produceHandler: { [events] _, produced in events.append("produced \(type(of: produced))") },
            finishHandler: { [events] _, errors in events.append("finished with \(errors.count) errors") }
        ))
        queue.addOperation(get)
        return get
    }
}

// MARK: - Running it

@Suite struct PSOperationsPortTests {
    @available(*, deprecated, message: "runs the port, which keeps PSOperations' spellings on purpose")
    @Test func thePortedService_runsAsItDidOnPSOperations() throws {
        let service = FeedService(server: FeedServer(feeds: ["a,b", ""]))
        let first = service.refresh()
        let second = service.refresh()
        let third = service.refresh()

        #expect(waitUntilFinished([first, second, third]))
        #expect(waitUntil { service.queue.allOperationCount == 0 })
        #expect((1...3).contains(service.server.logins)) // each refresh added while logged out asks
        #expect(service.screen.items.all == ["a", "b"])
        // Each refresh waits for its own login, and only operations free to run take the exclusive
        // category in add order (API.md): whichever login finishes last, its refresh finds the
        // feeds used up. So which refresh fails depends on the logins' race, not how many do.
        let refreshes = [first, second, third]
        #expect(refreshes.filter(\.errors.isEmpty).count == 2)
        #expect(refreshes.contains { $0.errors.count == 2 && $0.errors.first as? FeedError == .offline }) // and the parse's failed condition
        #expect(service.screen.alerts.all.sorted() == ["could not load the feed", "the feed is empty"])
        #expect(service.screen.probe.maximum("alert") == 1)
        #expect(service.events.all.filter { $0 == "started" }.count == 3)
        #expect(service.events.all.contains("produced AlertOperation"))
        #expect(service.audit.finished.all.filter { $0 == "Get Feed" }.count == 3)
    }

    /// The two lines of the issue that found the migration guide lacking, ported by renaming
    /// `BlockOperation` to `AsyncBlockOperation` only.
    @available(*, deprecated, message: "runs PSOperations' spellings on purpose")
    @Test func theIssuesSnippet_compilesAndRuns() throws {
        let heard = Recorder<Int>()
        let doWork: @Sendable () -> Void = { heard.append(0) }
        let op = AsyncBlockOperation { (finish: @escaping () -> Void) in doWork(); finish() }
        op.addObserver(BlockObserver(startHandler: nil, produceHandler: nil, finishHandler: { op, errors in print(errors) }))
        op.addObserver(BlockObserver { _, errors in heard.append(errors.count + 1) })
        try op.runAndWait(timeout: generousTimeout)
        #expect(heard.all == [0, 1])
    }
}
