// docs:
import Conditions   // MutuallyExclusive, NoCancelledDependencies, NegatedCondition, ...
import Observers    // BlockObserver, TimeoutObserver, FinishedObserver, ...
import Operations   // AsyncOperation, AsyncOperationQueue, GroupOperation, ...
// :docs
import Foundation
import Testing
import TestSupport

// The "after" side of every row of the migration article (Sources/Operations/Operations.docc/
// Migration.md), and its code blocks, verbatim between the `// docs:` markers:
// ReadmeSnippetsTests checks both. The values below stand for the reader's own.

private let events = Recorder<String>()
private func doWork() { events.append("work") }
private func showResults() { events.append("results") }
private func report(_ errors: [any Error]) { events.append("report \(errors.count)") }
private func log(_ line: String) { events.append(line) }
private func compute() throws -> Int { 42 }
private let file = "report.pdf"

private struct Client: Sendable {
    func upload(_ file: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        DispatchQueue.global().async { completion(nil) }
    }
}
private let client = Client()

private struct Store: Sendable {
    func save() throws { events.append("saved") }
}
private let store = Store()

private struct FeedAPI: Sendable {
    func fetchFeed() async throws { events.append("feed") }
}
private let api = FeedAPI()

private struct Session: Sendable {
    let isLoggedIn: Bool
}
private let session = Session(isLoggedIn: true)

private enum SessionError: Error { case loggedOut }
private enum Alert {}

final class LogIn: AsyncOperation, @unchecked Sendable {}
final class Cache: AsyncOperation, @unchecked Sendable {}

// MARK: - The article's code blocks

// docs:
struct AuditObserver: OperationObserver {
    func operationDidStart(_ operation: AsyncOperation) {}
    func operationDidCancel(_ operation: AsyncOperation) {}
    func operation(_ operation: AsyncOperation, didProduce newOperation: Foundation.Operation) {}
    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {}
}

final class QueueAudit: AsyncOperationQueueDelegate {
    func operationQueue(_ queue: AsyncOperationQueue, willAdd operation: Foundation.Operation) {}
    func operationQueue(_ queue: AsyncOperationQueue, didStart operation: AsyncOperation) {}
    func operationQueue(_ queue: AsyncOperationQueue, didFinish operation: AsyncOperation, errors: [any Error]) {}
}
// :docs

// docs:
struct LoggedIn: OperationCondition {
    var mutuallyExclusiveCategories: Set<String> { ["Login"] }        // before: static var isMutuallyExclusive
    func dependency(for operation: AsyncOperation) -> Foundation.Operation? {
        session.isLoggedIn ? nil : LogIn()                            // before: dependencyForOperation(_:)
    }
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(session.isLoggedIn ? .satisfied : .failed(SessionError.loggedOut))
    }
}

final class Refresh: GroupOperation, @unchecked Sendable {
    override func childDidFinish(_ child: Foundation.Operation, errors: [any Error]) {
        if !errors.isEmpty { addChild(LogIn()) }                      // before: operationDidFinish(_:withErrors:)
    }
}
// :docs

// MARK: - The rows of the PSOperations table

// docs:
final class Download: AsyncOperation, @unchecked Sendable {
    let fails: Bool
    init(fails: Bool = false) { self.fails = fails }

    override func execute() {
        let error: (any Error)? = fails ? SessionError.loggedOut : nil
        guard let error else {
            finish()
            return
        }
        if isCancelled { cancel(with: error) }
        let operation = Cache()
        produce(operation)
        finish(with: error)
    }
}

struct NamedCondition: OperationCondition {
    var name: String { "LoggedIn" }
    var mutuallyExclusiveCategories: Set<String> { ["Login"] }
    func dependency(for operation: AsyncOperation) -> Foundation.Operation? { nil }
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        let error = SessionError.loggedOut
        if session.isLoggedIn { completion(.satisfied) } else { completion(.failed(error)) }
    }
}
// :docs

// MARK: - The rows of the ProcedureKit table

// docs:
final class Fetch: AsyncOperation, @unchecked Sendable {
    override func execute() {
        let cache = Cache()
        produce(cache)
        finish()
    }
}
// :docs

@Suite struct MigrationDocsTests {
    @Test func theContinuationTakesAnError() throws {
        // docs:
        let op = AsyncBlockOperation { finish in
            doWork()
            finish(nil)                            // before: finish()
        }
        let upload = AsyncBlockOperation { finish in
            client.upload(file) { error in finish(error) }   // the error, if any, becomes the operation's
        }
        let save = AsyncBlockOperation { try store.save() }   // or a throwing block, finished when it returns
        // :docs
        for operation in [op, upload, save] {
            try operation.runAndWait(timeout: generousTimeout)
        }
    }

    @Test func observerLabels() throws {
        let op = AsyncBlockOperation { finish in finish(nil) }
        // docs:
        op.addObserver(BlockObserver(didFinish: { operation, errors in print(errors) }))
        op.addObserver(BlockObserver(
            didStart: { operation in print("started \(operation.name ?? "")") },
            didProduce: { operation, produced in print("produced \(produced.name ?? "")") },
            didFinish: { operation, errors in print("finished, \(errors.count) errors") }
        ))
        op.addObserver(FinishedObserver { operation, errors in print(errors) })   // one event, one closure
        // :docs
        try op.runAndWait(timeout: generousTimeout)
    }

    @Test func protocolsUnderTheirNewNames_areCalled() throws {
        let queue = AsyncOperationQueue()
        let audit = QueueAudit()
        queue.delegate = audit
        let refresh = Refresh(operations: [AsyncBlockOperation { throw SessionError.loggedOut }])
        refresh.addObserver(AuditObserver())
        refresh.addCondition(LoggedIn())
        #expect(throws: SessionError.loggedOut) { try refresh.runAndWait(on: queue, timeout: generousTimeout) }
    }

    @Test func groupsAndProducedOperations() throws {
        let download = AsyncBlockOperation {}
        let parse = AsyncBlockOperation {}
        let cleanUp = AsyncBlockOperation {}
        // docs:
        let group = GroupOperation(operations: [download, parse])   // before: GroupOperation(operations: download, parse)
        group.addChild(cleanUp)                                      // before: group.addOperation(cleanUp)

        final class Parse: AsyncOperation, @unchecked Sendable {
            override func execute() {
                produce(Cache())                                     // before: produceOperation(Cache())
                finish()
            }
        }
        // :docs
        group.addChild(Parse())
        try group.runAndWait(timeout: generousTimeout)
        #expect([download, parse, cleanUp].allSatisfy { $0.isFinished })
    }

    @Test func psOperationsRows() throws {
        let audit = QueueAudit()
        let cleanUp = AsyncBlockOperation {}
        let parse = AsyncBlockOperation {}
        let download = Download()
        // docs:
        let op = AsyncBlockOperation { finish in doWork(); finish(nil) }
        let onMain = AsyncBlockOperation { finish in DispatchQueue.main.async { showResults(); finish(nil) } }
        op.addObserver(BlockObserver(didFinish: { operation, errors in print(errors) }))
        op.addObserver(FinishedObserver { operation, errors in report(errors) })
        let queue = AsyncOperationQueue()
        queue.delegate = audit
        let group = GroupOperation(operations: [download, parse])
        group.addChild(cleanUp)
        group.addCondition(MutuallyExclusive<Alert>())
        group.addCondition(NoCancelledDependencies())
        group.addCondition(NegatedCondition(NamedCondition()))
        op.addCondition(NegatedCondition(LoggedIn()))
        op.addObserver(TimeoutObserver(timeout: 10))
        let wait = DelayOperation(5)
        let operation = AsyncBlockOperation {}
        operation.qualityOfService = .userInitiated
        try operation.runAndWait(timeout: 10)
        let task = AsyncTaskOperation { try await api.fetchFeed() }
        // :docs
        #expect(onMain.isReady && wait.isReady)
        queue.addOperations([op, group, task], waitUntilFinished: true)
        #expect(op.errors.count == 1 && group.errors.count == 1) // the negated conditions failed
        #expect(task.isFinished && !task.isFailed)
    }

    @Test func procedureKitRows_operations() throws {
        let audit = QueueAudit()
        let login = AsyncBlockOperation {}
        // docs:
        let operation = AsyncBlockOperation { try store.save() }
        operation.addCondition(NoFailedDependencies())
        operation.addObserver(TimeoutObserver(timeout: 10))
        operation.addDependency(login)
        operation.addObserver(FinishedObserver { operation, errors in report(errors) })
        operation.addObserver(StartedObserver { operation in log("starting") })
        operation.addObserver(CancelledObserver { operation in log("cancelled") })
        let queue = AsyncOperationQueue()
        queue.delegate = audit
        queue.logger = PrintLogger(minimumLevel: .info)
        // :docs
        let lines = Recorder<String>()
        queue.logger = PrintLogger(minimumLevel: .info) { line in lines.append(line) } // quiet: captured
        queue.addOperations([login, operation], waitUntilFinished: true)
        #expect(!operation.isFailed)
        #expect(lines.count == 4) // started and finished, twice
    }

    @Test func procedureKitRows_queue() {
        let parse = AsyncBlockOperation {}
        let fetch = Fetch()
        let queue = AsyncOperationQueue()
        // docs:
        queue.addOperation(fetch)
        // :docs
        let other = (fetch: Fetch(), parse: AsyncBlockOperation {})
        do {
            let (fetch, parse) = other
            // docs:
            queue.addOperations([fetch, parse], waitUntilFinished: false)
            // :docs
        }
        #expect(waitUntilFinished([fetch, other.fetch, other.parse]))
        let chained = (fetch: Fetch(), parse: AsyncBlockOperation {})
        do {
            let (fetch, parse) = chained
            // docs:
            queue.addChain([fetch, parse])
            // :docs
        }
        #expect(waitUntilFinished([chained.fetch, chained.parse]))
        #expect(!parse.isFinished) // never added: the rows above use their own
    }

    @Test func procedureKitRows_group() throws {
        let parse = AsyncBlockOperation {}
        let fetch = Fetch()
        let cleanUp = AsyncBlockOperation {}
        // docs:
        let group = GroupOperation(operations: [fetch, parse])
        group.addChild(cleanUp)
        // :docs
        try group.runAndWait(timeout: generousTimeout)
        #expect([fetch, parse, cleanUp].allSatisfy { $0.isFinished })
    }

    @Test func procedureKitRows_kinds() throws {
        let fetchUser = ResultBlockOperation { User(name: "Ada") }
        let queue = AsyncOperationQueue()
        // docs:
        let save = AsyncBlockOperation { try store.save() }
        let upload = AsyncBlockOperation { finish in client.upload(file) { error in finish(error) } }
        let answer = ResultBlockOperation { try compute() }
        let greet = InputBlockOperation { (user: User) in user.name }
        greet.takeInput(from: fetchUser)
        let retry = RetryOperation(maxAttempts: 3) { _ in Fetch() }
        let pause = DelayOperation(5)
        let conditions: [any OperationCondition] = [MutuallyExclusive<Alert>(), NoFailedDependencies(), NegatedCondition(LoggedIn()), SilentCondition(LoggedIn()), BlockCondition { true }]
        let expected: AsyncOperationError? = nil
        // :docs
        #expect(pause.isReady && conditions.count == 5 && expected == nil)
        queue.addOperations([fetchUser, greet], waitUntilFinished: false)
        for operation in [save, upload, answer, retry] as [AsyncOperation] {
            try operation.runAndWait(timeout: generousTimeout)
        }
        #expect(waitUntilFinished([greet]))
        #expect(greet.output == "Ada")
        #expect(answer.output == 42)
    }
}
