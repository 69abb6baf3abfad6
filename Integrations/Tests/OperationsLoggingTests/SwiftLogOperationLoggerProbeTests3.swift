import Conditions
import Foundation
import InMemoryLogging
import IntegrationsTestSupport
import Logging
import Operations
import OperationsLogging
import Testing

/// A third round of probes of documented behaviour of `SwiftLogOperationLogger` that the earlier
/// suites do not check. Each probe cites the sentence it checks.
@Suite struct SwiftLogOperationLoggerProbeTests3: LogRecording {
    // SwiftLogOperationLogger: "`queue.name` | the name the queue was given, if any (not
    // Foundation's default name)"
    @Test func aQueueNeverGivenAName_addsNoQueueNameToAnyRecord() {
        // Given a queue that was never named, logging at trace
        let (logger, handler) = logger(level: .trace)
        let queue = AsyncOperationQueue()
        queue.logger = SwiftLogOperationLogger(logger: logger)
        let operation = AsyncBlockOperation {}
        operation.name = uniqueName("anonymous")

        // When an operation runs on it
        queue.addOperation(operation)
        #expect(waitUntil { operation.isFinished })
        #expect(waitUntil { entries(handler, of: operation.name!).last?.metadata["operation.event"] == "finished" })

        // Then no record names a queue (not even Foundation's default name)
        let records = entries(handler, of: operation.name!)
        #expect(records.count >= 3, "\(records.map(\.metadata))")
        #expect(records.allSatisfy { $0.metadata["queue.name"] == nil }, "\(records.map { $0.metadata["queue.name"] })")
    }

    // SwiftLogOperationLogger: "Each record's message is the event's sentence (`charge: waiting for
    // category 'acme' (held by 'refund'; 1st in line)`)"; "`operation.waits_for` | for `waiting`:
    // what it waits for, one string per reason"; "`operation.categories` | for
    // `categories_granted`: the categories"; "`debug` for the way to execution (added, waiting,
    // conditions answered, categories granted ...)"
    @Test func aWaitForAHeldCategory_isADebugRecordInTheDocumentedSentence_andItsGrantNamesTheCategory() {
        // Given a queue logging at debug, and a category held by a running operation
        let (logger, handler) = logger(level: .debug)
        let queue = AsyncOperationQueue()
        queue.logger = SwiftLogOperationLogger(logger: logger)
        let category = uniqueName("acme")
        let held = HeldOperations()
        let refund = held.make(uniqueName("refund"))
        refund.addCondition(ExclusiveCategory(category))
        queue.addOperation(refund)
        #expect(waitUntil { held.hasStarted(refund.name!) })

        // When another operation of that category is added, then the holder finishes
        let charge = AsyncBlockOperation {}
        charge.name = uniqueName("charge")
        charge.addCondition(ExclusiveCategory(category))
        queue.addOperation(charge)
        #expect(waitUntil { entries(handler, of: charge.name!).contains { $0.metadata["operation.event"] == "waiting" } })
        held.finish(refund.name!)
        #expect(waitUntil { charge.isFinished })
        #expect(waitUntil { entries(handler, of: charge.name!).last?.metadata["operation.event"] == "finished" })

        // Then the wait is a debug record in the documented sentence, and the grant names the category
        let records = entries(handler, of: charge.name!)
        let reason = "category '\(category)' (held by '\(refund.name!)'; 1st in line)"
        let waiting = records.first { $0.metadata["operation.event"] == "waiting" }
        #expect(waiting?.level == .debug)
        #expect(waiting?.message.description == "\(charge.name!): waiting for \(reason)")
        #expect(waiting?.metadata["operation.waits_for"] == .array([.string(reason)]), "\(String(describing: waiting?.metadata))")
        let granted = records.first { $0.metadata["operation.event"] == "categories_granted" }
        #expect(granted?.level == .debug)
        #expect(granted?.metadata["operation.categories"] == .array([.string(category)]), "\(String(describing: granted?.metadata))")
    }
}

/// The multiplexer's fan-out, each logger at its own level.
@Suite struct MultiplexedSwiftLogProbeTests3: LogRecording {
    // Running operations in a service: "A queue has one logger; ``MultiplexOperationLogger`` hands
    // each event to several, each at its own level."; "Events below the `Logger`'s `logLevel` are
    // not even made."
    @Test func besideADebugLogger_aSwiftLogLoggerAtInfo_stillGetsOnlyStartsAndFinishes() {
        // Given a queue whose one logger hands events to swift-log at info and to a recorder at debug
        let (logger, handler) = logger(level: .info)
        let recorder = KindRecorder()
        let queue = AsyncOperationQueue()
        queue.logger = MultiplexOperationLogger([SwiftLogOperationLogger(logger: logger), recorder])
        let category = uniqueName("acme")
        let held = HeldOperations()
        let holder = held.make(uniqueName("holder"))
        holder.addCondition(ExclusiveCategory(category))
        let waiter = AsyncBlockOperation {}
        waiter.name = uniqueName("waiter")
        waiter.addCondition(ExclusiveCategory(category))

        // When an operation waits for a category, then runs
        queue.addOperation(holder)
        #expect(waitUntil { held.hasStarted(holder.name!) })
        queue.addOperation(waiter)
        #expect(waitUntil { recorder.kinds(of: waiter.name!).contains("waiting") })
        held.finish(holder.name!)
        #expect(waitUntil { waiter.isFinished })
        #expect(waitUntil { entries(handler, of: waiter.name!).count == 2 && recorder.kinds(of: waiter.name!).last == "finished" })

        // Then the recorder heard every event, and swift-log only the start and the finish, at info
        #expect(recorder.kinds(of: waiter.name!).contains("categories_granted"), "\(recorder.kinds(of: waiter.name!))")
        let records = entries(handler, of: waiter.name!)
        #expect(records.map { $0.metadata["operation.event"]?.description } == ["started", "finished"], "\(records.map(\.metadata))")
        #expect(records.allSatisfy { $0.level == .info })
    }
}

/// An `OperationLogger` at debug that keeps the kind of every event, by operation name.
private final class KindRecorder: OperationLogger, Sendable {
    private let events = LockedValue<[(String, String)]>([])

    var minimumLevel: OperationLogLevel { .debug }

    func log(_ event: OperationLogEvent) {
        events.withLock { $0.append((event.operationName, event.kind.name)) }
    }

    func kinds(of name: String) -> [String] {
        events.withLock { $0.filter { $0.0 == name }.map(\.1) }
    }
}
