import Foundation
import Operations
import Testing
import TestSupport

/// The events a logger hears say who they are about: the operation, its group, its
/// dependencies, its errors; and several loggers can hear one queue.
@Suite struct OperationLogIdentityTests {
    private func named<Operation: Foundation.Operation>(_ operation: Operation, _ prefix: String) -> Operation {
        operation.name = uniqueName(prefix)
        return operation
    }

    @Test func everyEventOfAnOperation_carriesItsID_andOperationsDiffer() {
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let first = named(AsyncBlockOperation {}, "first")
        let second = named(AsyncBlockOperation {}, "second")
        queue.addOperations([first, second], waitUntilFinished: true)
        #expect(waitUntil { logger.events(of: second.name!).count == 3 && logger.events(of: first.name!).count == 3 })

        let firstIDs = Set(logger.events(of: first.name!).map(\.operationID))
        let secondIDs = Set(logger.events(of: second.name!).map(\.operationID))
        #expect(firstIDs.count == 1 && secondIDs.count == 1 && firstIDs != secondIDs)
        #expect(firstIDs.first! < secondIDs.first!)
    }

    @Test func aGroupsChildren_carryTheGroupsID_whenAddedBeforeOrWhileItRuns_andNested() {
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let early = named(AsyncBlockOperation {}, "early")
        let grandchild = named(AsyncBlockOperation {}, "grandchild")
        let inner = named(GroupOperation(operations: [grandchild]), "inner")
        let group = named(GroupOperation(operations: [early, inner]), "group")
        let late = named(AsyncBlockOperation {}, "late")
        group.addObserver(BlockingStartObserver { group.addChild(late) })
        queue.addOperations([group], waitUntilFinished: true)
        #expect(waitUntil { logger.events(of: group.name!).last?.kind == .finished(errors: []) })

        let groupID = logger.id(of: group.name!)
        #expect(groupID != nil)
        for child in [early, inner, late] {
            let events = logger.events(of: child.name!)
            #expect(events.first?.kind == .added, "\(child.name!): \(events.map(\.kind))")
            #expect(events.last?.kind == .finished(errors: []), "\(child.name!): \(events.map(\.kind))")
            #expect(events.allSatisfy { $0.groupID == groupID })
        }
        #expect(logger.events(of: grandchild.name!).allSatisfy { $0.groupID == logger.id(of: inner.name!) })
        #expect(logger.events(of: grandchild.name!).contains { $0.kind == .started })
    }

    @Test func aChainsLink_namesTheLinkBeforeIt() {
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let fetch = named(AsyncBlockOperation {}, "fetch")
        let parse = named(AsyncBlockOperation {}, "parse")
        let store = named(AsyncBlockOperation {}, "store")
        queue.addChain([fetch, parse, store], waitUntilFinished: true)
        #expect(waitUntil { logger.events(of: store.name!).last?.kind == .finished(errors: []) })

        #expect(logger.events(of: fetch.name!).allSatisfy { $0.dependencyIDs.isEmpty })
        #expect(logger.events(of: parse.name!).allSatisfy { $0.dependencyIDs == [logger.id(of: fetch.name!)!] })
        #expect(logger.events(of: store.name!).allSatisfy { $0.dependencyIDs == [logger.id(of: parse.name!)!] })
    }

    @Test func cancelledAndFinishedEvents_carryTheErrorsThemselves() {
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        queue.isSuspended = true
        let cancelled = named(AsyncBlockOperation {}, "cancelled")
        let failing = named(AsyncBlockOperation { throw StubError("broken") }, "failing")
        queue.addOperations([cancelled, failing], waitUntilFinished: false)
        cancelled.cancel(with: StubError("no longer needed"))
        queue.isSuspended = false
        #expect(waitUntilFinished([cancelled, failing]))
        #expect(waitUntil { logger.events(of: failing.name!).count == 4 && logger.events(of: cancelled.name!).count == 4 }) // added, waiting, ...

        let cancellation = logger.events(of: cancelled.name!).first { $0.kind == .cancelled }
        #expect((cancellation?.errors.first as? StubError) == StubError("no longer needed"))
        let finish = logger.events(of: failing.name!).last
        #expect((finish?.errors.first as? StubError) == StubError("broken"))
        #expect(logger.events(of: failing.name!).first?.errors.isEmpty == true)
    }

    @Test func aPlainFoundationOperation_isHeardWhenAdded_andSaysSo() {
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let plain = named(BlockOperation {}, "plain")
        let async = named(AsyncBlockOperation {}, "async")
        queue.addOperations([plain, async], waitUntilFinished: true)
        #expect(waitUntil { logger.events(of: async.name!).count == 3 })
        #expect(logger.events(of: plain.name!).map(\.kind) == [.added])
        #expect(logger.events(of: plain.name!).first?.isFoundationOperation == true)
        #expect(logger.events(of: async.name!).allSatisfy { !$0.isFoundationOperation })
    }

    @Test func aPlainDependencyWhoseAddWasHeard_isNamedByItsDependents_withTheIDItWasHeardWith() {
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let fetch = named(BlockOperation {}, "fetch")
        let parse = named(AsyncBlockOperation {}, "parse")
        parse.addDependency(fetch)
        let unheard = named(BlockOperation {}, "unheard")
        OperationQueue().addOperation(unheard) // on a queue with no logger: nobody hears of it
        let store = named(AsyncBlockOperation {}, "store")
        store.addDependency(unheard)
        queue.addOperations([fetch, parse, store], waitUntilFinished: true)
        #expect(waitUntil { logger.events(of: parse.name!).last?.kind == .finished(errors: []) })

        let fetchID = logger.id(of: fetch.name!)
        #expect(fetchID != nil)
        #expect(logger.events(of: parse.name!).allSatisfy { $0.dependencyIDs == [fetchID!] })
        #expect(waitUntil { logger.events(of: store.name!).last?.kind == .finished(errors: []) })
        #expect(logger.events(of: store.name!).allSatisfy { $0.dependencyIDs.isEmpty })
    }

    @Test func anOperationCancelledBeforeItsAdd_isHeardCancelledOnce_rightAfterItsAdd() {
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let superseded = named(AsyncBlockOperation {}, "superseded")
        superseded.cancel(with: StubError("superseded"))
        queue.addOperations([superseded], waitUntilFinished: true)
        #expect(waitUntil { logger.events(of: superseded.name!).last?.kind == .finished(errors: ["StubError(superseded)"]) })

        let events = logger.events(of: superseded.name!)
        #expect(Array(events.map(\.kind).prefix(2)) == [.added, .cancelled], "\(events.map(\.kind))")
        #expect(events.filter { $0.kind == .cancelled }.count == 1, "\(events.map(\.kind))")
        #expect((events.first { $0.kind == .cancelled }?.errors.first as? StubError) == StubError("superseded"))
    }

    @Test func aCancelRacingTheAdd_isHeardExactlyOnce() {
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        queue.isSuspended = true // none runs before its cancel
        let operations = (0..<200).map { named(AsyncBlockOperation {}, "raced-\($0)") }
        DispatchQueue.concurrentPerform(iterations: operations.count * 2) { index in
            let operation = operations[index / 2]
            if index % 2 == 0 {
                queue.addOperation(operation)
            } else {
                operation.cancel()
            }
        }
        queue.isSuspended = false
        #expect(waitUntilFinished(operations))
        #expect(waitUntil { operations.allSatisfy { logger.events(of: $0.name!).last?.kind == .finished(errors: []) } })

        for operation in operations {
            let kinds = logger.kinds(of: operation.name!)
            #expect(kinds.first == .added && kinds.filter { $0 == .cancelled }.count == 1, "\(operation.name!): \(kinds)")
        }
    }

    @Test func anOperationCancelledBeforeItsAdd_whoseFinishRacesTheAdd_isHeardAddedCancelledThenFinished() {
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let operations = (0..<200).map { named(AsyncBlockOperation {}, "finish-raced-\($0)") }
        for operation in operations {
            operation.cancel(with: StubError("superseded"))
        }
        DispatchQueue.concurrentPerform(iterations: operations.count * 2) { index in
            let operation = operations[index / 2]
            if index % 2 == 0 {
                queue.addOperation(operation)
            } else {
                operation.finish()
            }
        }
        #expect(waitUntilFinished(operations))
        // One whose finish came before its add was refused by the queue: heard of not at all, or,
        // if the logger had joined, without `added` (what the logger kept is let go of).
        let added = operations.filter { logger.kinds(of: $0.name!).contains(.added) }
        #expect(!added.isEmpty)
        #expect(waitUntil { added.allSatisfy { logger.kinds(of: $0.name!).last.map(\.isFinished) == true } })

        for operation in added {
            let kinds = logger.kinds(of: operation.name!)
            #expect(Array(kinds.prefix(2)) == [.added, .cancelled], "\(operation.name!): \(kinds)")
            #expect(kinds.filter { $0 == .cancelled }.count == 1 && kinds.filter(\.isFinished).count == 1, "\(operation.name!): \(kinds)")
        }
    }

    @Test func theAddedEvent_isHeardOnTheAddingThread() {
        let threads = Recorder<Bool>()
        let name = uniqueName("here")
        let logger = ClosureLogger { event in
            if event.kind == .added && event.operationName == name {
                threads.append(Thread.current.threadDictionary["adding"] as? Bool ?? false)
            }
        }
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let operation = AsyncBlockOperation {}
        operation.name = name
        operation.addCondition(StubCondition.satisfied())
        Thread.current.threadDictionary["adding"] = true
        queue.addOperation(operation)
        Thread.current.threadDictionary["adding"] = nil
        #expect(threads.all == [true])
        #expect(waitUntilFinished([operation]))
    }

    @Test func aMultiplexLogger_givesEachLoggerTheEventsAtItsLevel() {
        var quiet = RecordingLogger()
        quiet.minimumLevel = .info
        let chatty = RecordingLogger()
        let multiplex = MultiplexOperationLogger([quiet, chatty])
        #expect(multiplex.minimumLevel == .trace)
        let queue = AsyncOperationQueue()
        queue.logger = multiplex
        let operation = named(AsyncBlockOperation {}, "both")
        queue.addOperations([operation], waitUntilFinished: true)
        #expect(waitUntil { chatty.events(of: operation.name!).count == 3 && quiet.events(of: operation.name!).count == 2 })
        #expect(chatty.events(of: operation.name!).map(\.kind) == [.added, .started, .finished(errors: [])])
        #expect(quiet.events(of: operation.name!).map(\.kind) == [.started, .finished(errors: [])])
        #expect(MultiplexOperationLogger([]).minimumLevel == .error)
    }
}

/// Calls `body` before the group executes: to add a child while it runs.
private struct BlockingStartObserver: OperationObserver {
    let body: @Sendable () -> Void

    func operationDidStart(_ operation: AsyncOperation) {
        body()
    }
}

private extension OperationLogEvent.Kind {
    var isFinished: Bool {
        if case .finished = self { return true }
        return false
    }
}
