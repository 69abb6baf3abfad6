import Foundation
import Operations
import Testing
import TestSupport

/// A queue's `logger` hears each operation's lifecycle, in order and exactly once.
@Suite struct OperationLoggerTests {
    @Test func lifecycleEvents_comeInOrder_andOnce() {
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.name = "jobs"
        queue.logger = logger
        let category = uniqueName("Files")
        let held = HeldOperations()
        let holder = held.make(uniqueName("holder"))
        holder.addCondition(ExclusiveStub(category))
        let answer = HeldCallback<ConditionResult>()
        let operation = AsyncBlockOperation {}
        operation.name = uniqueName("save")
        operation.addCondition(StubCondition(name: "Ready") { _, completion in answer.hold(completion) })
        operation.addCondition(ExclusiveStub(category))

        queue.addOperation(holder)
        #expect(held.waitUntilStarted(holder.name!))
        queue.addOperation(operation)
        #expect(answer.waitUntilHeld())
        answer.call(.satisfied)
        #expect(waitUntil { logger.kinds(of: operation.name!).count == 4 }) // now waiting for the category
        held.finish(holder.name!)
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { logger.kinds(of: operation.name!).last == .finished(errors: []) })

        #expect(logger.kinds(of: operation.name!) == [
            .added,
            .waiting([.condition("Ready")]),
            .conditionsAnswered(failures: 0),
            .waiting([.category(category, heldBy: holder.name!, waitersAhead: 0)]),
            .categoriesGranted([category]),
            .started,
            .finished(errors: []),
        ])
        #expect(logger.events.all.first { $0.operationName == operation.name! }?.queueName == "jobs")
        #expect(logger.kinds(of: holder.name!) == [.added, .conditionsAnswered(failures: 0), .categoriesGranted([category]), .started, .finished(errors: [])])
    }

    /// Holds the worker in the logger while it hears `.started`, so that the test can make
    /// another event of the operation meanwhile.
    private struct StartHoldingLogger: OperationLogger {
        let events = Recorder<(kind: OperationLogEvent.Kind, thread: Thread)>()
        let startHeard = Signal()
        let letStartEnd = Signal()

        func log(_ event: OperationLogEvent) {
            if event.kind == .started {
                startHeard.signal()
                _ = letStartEnd.wait()
            }
            events.append((event.kind, Thread.current))
        }
    }

    @Test func anEventMadeWhileAnotherIsHeard_comesRightAfterIt_onTheHearingThread() {
        let logger = StartHoldingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let operation = AsyncBlockOperation {}
        queue.addOperation(operation)
        #expect(logger.startHeard.wait())

        operation.cancel() // returns at once: the worker, still hearing `.started`, hears it next
        logger.letStartEnd.signal()
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { logger.events.all.last?.kind == .finished(errors: []) })

        let events = logger.events.all
        #expect(events.map(\.kind) == [.added, .started, .cancelled, .finished(errors: [])])
        let started = events.first { $0.kind == .started }
        #expect(events.first { $0.kind == .cancelled }?.thread === started?.thread)
        #expect(started?.thread !== Thread.current)
    }

    /// A dependency whose name, read by the thread it was armed for, blocks until released: the
    /// adding thread reads it as it snapshots what a newly added dependent waits for.
    private final class NameHoldingDependency: AsyncOperation, @unchecked Sendable {
        // @unchecked Sendable: `armedThread` is only touched while holding `lock`.
        private let lock = NSLock()
        private var armedThread: Thread?
        let nameRead = Signal()
        let releaseName = Signal()
        let finishNow = Signal()

        func arm(for thread: Thread) {
            lock.withLock { armedThread = thread }
        }

        override var name: String? {
            get {
                let isArmed = lock.withLock {
                    defer { if armedThread === Thread.current { armedThread = nil } }
                    return armedThread === Thread.current
                }
                if isArmed {
                    nameRead.signal()
                    _ = releaseName.wait()
                }
                return super.name
            }
            set { super.name = newValue }
        }

        override func execute() {
            _ = finishNow.wait()
            finish()
        }
    }

    @Test func aWaitThatEndedBeforeItWasHeard_isLeftOut() {
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let dependency = NameHoldingDependency()
        dependency.name = uniqueName("fetch")
        let operation = AsyncBlockOperation {}
        operation.name = uniqueName("parse")
        operation.addDependency(dependency)
        queue.addOperation(dependency)

        let added = Signal()
        let adder = Thread {
            dependency.arm(for: Thread.current)
            queue.addOperation(operation) // snapshots "waits for fetch", then blocks reading its name
            added.signal()
        }
        adder.start()
        #expect(dependency.nameRead.wait())
        dependency.finishNow.signal()
        #expect(waitUntilFinished([operation]))
        #expect(waitUntil { logger.kinds(of: operation.name!).last == .finished(errors: []) })
        dependency.releaseName.signal()
        #expect(added.wait())

        #expect(logger.kinds(of: operation.name!) == [.added, .started, .finished(errors: [])])
    }

    /// The adding thread snapshots what a chain's link waits for while the links before it may
    /// already run: a wait that ended meanwhile is not heard after what ended it. (Under load this
    /// failed before the snapshot was checked against the events made since.)
    @Test func manyChains_neverHearAWaitAfterItEnded() {
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let prefix = uniqueName("link")
        var links: [Operation] = []
        for chain in 0..<3_000 {
            let chainLinks = (0..<3).map { link in
                let operation = AsyncBlockOperation {}
                operation.name = "\(prefix)-\(chain)-\(link)"
                return operation
            }
            links += chainLinks
            queue.addChain(chainLinks, waitUntilFinished: false)
        }
        #expect(waitUntilFinished(links))
        #expect(waitUntil { logger.events.all.filter { $0.kind == .finished(errors: []) }.count == links.count })

        let kindsByLink = Dictionary(grouping: logger.events.all, by: \.operationName).mapValues { $0.map(\.kind) }
        let disordered = kindsByLink.filter { _, kinds in
            let afterStarting = kinds.drop { $0 != .started }
            let waitedAfterStarting = afterStarting.contains { if case .waiting = $0 { true } else { false } }
            return kinds.first != .added || kinds.last != .finished(errors: []) || afterStarting.isEmpty || waitedAfterStarting
        }
        #expect(disordered.isEmpty, "\(disordered.prefix(3))")
    }

    @Test func cancelledAndFailedOperations_areLoggedWithTheirLevels() {
        let logger = RecordingLogger()
        let queue = AsyncOperationQueue()
        queue.logger = logger
        queue.isSuspended = true
        let cancelled = AsyncBlockOperation {}
        cancelled.name = uniqueName("cancelled")
        let failing = AsyncBlockOperation { throw StubError("broken") }
        failing.name = uniqueName("failing")
        queue.addOperations([cancelled, failing], waitUntilFinished: false)
        cancelled.cancel()
        queue.isSuspended = false
        #expect(waitUntilFinished([cancelled, failing]))
        #expect(waitUntil { logger.kinds(of: failing.name!).count == 4 && logger.kinds(of: cancelled.name!).count == 4 })

        let suspended = OperationLogEvent.Kind.waiting([.suspendedQueue(queue.name)]) // held in line as they were added
        #expect(logger.kinds(of: cancelled.name!) == [.added, suspended, .cancelled, .finished(errors: [])])
        #expect(logger.kinds(of: failing.name!) == [.added, suspended, .started, .finished(errors: ["StubError(broken)"])])
        let levels = logger.events.all.filter { $0.operationName == failing.name! }.map(\.level)
        #expect(levels == [.debug, .debug, .info, .warning])
        #expect(logger.events.all.first { $0.kind == .cancelled && $0.operationName == cancelled.name! }?.level == .notice)
    }

    @Test func minimumLevel_dropsQuieterEvents() {
        var logger = RecordingLogger()
        logger.minimumLevel = .info
        let queue = AsyncOperationQueue()
        queue.logger = logger
        let operation = AsyncBlockOperation {}
        operation.name = uniqueName("quiet")
        operation.addCondition(StubCondition.satisfied())
        queue.addOperations([operation], waitUntilFinished: true)
        #expect(waitUntil { logger.kinds(of: operation.name!).count == 2 })
        #expect(logger.kinds(of: operation.name!) == [.started, .finished(errors: [])])
    }

    /// Foundation names every queue after its address: events name a queue only once it was
    /// given a name, so that unnamed queues do not each get a log field or metrics label.
    @Test func events_nameTheQueueOnlyOnceItWasGivenAName() {
        let logger = RecordingLogger()
        final class SelfNamingQueue: AsyncOperationQueue, @unchecked Sendable {
            // @unchecked Sendable: no state of its own.
            override init() {
                super.init()
                name = "self-named"
            }
        }
        final class NameOverridingQueue: AsyncOperationQueue, @unchecked Sendable {
            // @unchecked Sendable: no state of its own.
            override var name: String? {
                get { "overriding" }
                set {}
            }
        }
        let unnamed = AsyncOperationQueue()
        let named = AsyncOperationQueue()
        named.name = "jobs"
        let selfNamed = SelfNamingQueue()
        let overriding = NameOverridingQueue()
        #expect(unnamed.name != nil) // Foundation's default name
        var operations: [String: Operation] = [:]
        for (label, queue) in [("unnamed", unnamed), ("named", named), ("self-named", selfNamed), ("overriding", overriding)] {
            queue.logger = logger
            let operation = AsyncBlockOperation {}
            operation.name = uniqueName(label)
            let plain = BlockOperation {}
            plain.name = uniqueName("plain on \(label)")
            queue.addOperations([operation, plain], waitUntilFinished: true)
            operations[label] = operation
            operations["plain on \(label)"] = plain
        }
        func queueNames(_ label: String) -> Set<String?> {
            #expect(waitUntil { !logger.events(of: operations[label]!.name!).isEmpty })
            return Set(logger.events(of: operations[label]!.name!).map(\.queueName))
        }
        #expect(queueNames("unnamed") == [nil])
        #expect(queueNames("plain on unnamed") == [nil])
        #expect(queueNames("named") == ["jobs"])
        #expect(queueNames("plain on named") == ["jobs"])
        #expect(queueNames("self-named") == ["self-named"])
        #expect(queueNames("overriding") == ["overriding"])
        #expect(queueNames("plain on overriding") == ["overriding"])
    }

    @Test func queueWithoutALogger_logsNothing() {
        let queue = AsyncOperationQueue()
        #expect(queue.logger == nil)
    }
}
