import Foundation
import Operations
import TestSupport

/// What happened to one operation of a soak round, as its observers, its overrides, its blocks
/// and its conditions reported it.
enum SoakEvent: Equatable, CustomStringConvertible {
    /// Heard by the recording observer.
    case didStart, didCancel, didProduce, didFinish
    /// `execute()` was entered (for composites and retries, whose `execute()` is final: their
    /// start).
    case execute
    /// The block (or a subclass's work) began, and for throwing blocks, returned.
    case bodyBegan, bodyEnded
    /// One of its conditions was asked to evaluate.
    case conditionEvaluated
    /// A composite's completion handler, or its cancellation handler, was called.
    case completion, handlerCalled

    var description: String {
        switch self {
        case .didStart: return "didStart"
        case .didCancel: return "didCancel"
        case .didProduce: return "didProduce"
        case .didFinish: return "didFinish"
        case .execute: return "execute"
        case .bodyBegan: return "bodyBegan"
        case .bodyEnded: return "bodyEnded"
        case .conditionEvaluated: return "condition"
        case .completion: return "completion"
        case .handlerCalled: return "handler"
        }
    }
}

/// Where an operation of a round came from.
enum SoakOrigin: Equatable {
    /// Added to queue `queue` as the `position`th operation of the round.
    case topLevel(queue: Int, position: Int)
    /// A group's child known from the start, the `position`th added.
    case child(position: Int)
    /// Made by a composite's factory or a retry's attempt maker.
    case factory
    /// Produced by an operation through `produce(_:)`.
    case produced
    /// Added to a group by a chaos thread.
    case late
}

/// The kind of a round's operation, as the checks need it.
enum SoakKind: Equatable {
    case leaf(SoakPlan.Body)
    case group(maxConcurrent: Int)
    case composite
    case retry(maxAttempts: Int)
}

/// One operation of a round: its place in the plan and everything recorded about it.
struct SoakInstance {
    struct Stamped {
        var event: SoakEvent
        var sequence: Int
    }

    let node: Int
    /// The instance of the enclosing group, composite or retry.
    let parent: Int?
    /// Which operation of its node this is, counting from 1 (factories make several).
    let number: Int
    let kind: SoakKind
    let origin: SoakOrigin
    let categories: [String]
    var dependencies: [Int] = []
    var events: [Stamped] = []
    /// What the ready-made observers counted: BlockObserver's start, cancel, produce, finish,
    /// then StartedObserver, CancelledObserver, ProducedObserver and FinishedObserver.
    var counted = [Int](repeating: 0, count: 8)
    var blockObserverLast: SoakEvent?
    var errorsAtFinish: [any Error]?
    var cancelledAtFinish = false
    var outputAtFinish: Int?
    var cancelRequested = false
    var isInsideProbe = false
    var handlerRunning = false
    var handlerOverlapped = false
    var answeredCancel = false
    var handlerCalledAfterCancelAnswer = false
    var plainFinished = false
    var plainCancelled = false

    var isPlain: Bool { if case let .leaf(body) = kind { return body.isPlain }; return false }

    func count(_ event: SoakEvent) -> Int { events.reduce(0) { $0 + ($1.event == event ? 1 : 0) } }
    func first(_ event: SoakEvent) -> Int? { events.first { $0.event == event }?.sequence }
    var finishSequence: Int? { first(.didFinish) }
}

/// Everything a round records, under one lock, stamped with one sequence so that events of
/// different operations can be ordered. Holds operations only weakly.
final class SoakLedger: @unchecked Sendable {
    // @unchecked Sendable: every `var` is only touched while holding `lock`; `probe` is
    // thread-safe and the `let`s are immutable.
    private struct Reference {
        weak var operation: Operation?
    }

    private let lock = NSLock()
    private var sequence = 0
    private var instances: [SoakInstance] = []
    private var references: [Reference] = []
    private var instancesOfNode: [Int: [Int]] = [:]
    private var finishedCount = 0
    private var cancelAllCount = 0
    let probe: ConcurrencyProbe

    init(probe: ConcurrencyProbe) {
        self.probe = probe
    }

    // MARK: - Registering operations

    /// A new operation of `node`; returns its instance number and which operation of its node it is.
    func register(node: Int, parent: Int?, kind: SoakKind, origin: SoakOrigin, categories: [String]) -> (id: Int, number: Int) {
        lock.lock()
        defer { lock.unlock() }
        let id = instances.count
        var ofNode = instancesOfNode[node, default: []]
        ofNode.append(id)
        instancesOfNode[node] = ofNode
        instances.append(SoakInstance(node: node, parent: parent, number: ofNode.count, kind: kind, origin: origin, categories: categories))
        references.append(Reference())
        return (id, ofNode.count)
    }

    func attach(_ operation: Operation, to id: Int, dependencies: [Int]) {
        lock.lock()
        defer { lock.unlock() }
        references[id].operation = operation
        instances[id].dependencies = dependencies
    }

    /// The newest operation of `node` still alive, with its instance.
    func liveOperation(of node: Int) -> (operation: Operation, id: Int)? {
        lock.lock()
        defer { lock.unlock() }
        for id in (instancesOfNode[node] ?? []).reversed() {
            if let operation = references[id].operation { return (operation, id) }
        }
        return nil
    }

    func operation(_ id: Int) -> Operation? {
        lock.lock()
        defer { lock.unlock() }
        return references[id].operation
    }

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return instances.count
    }

    // MARK: - Recording

    func record(_ event: SoakEvent, for id: Int) {
        lock.lock()
        defer { lock.unlock() }
        stamp(event, id)
    }

    private func stamp(_ event: SoakEvent, _ id: Int) {
        sequence += 1
        instances[id].events.append(SoakInstance.Stamped(event: event, sequence: sequence))
    }

    /// The operation executes from now on, holding its categories until it finishes.
    func executeBegan(_ id: Int) {
        lock.lock()
        stamp(.execute, id)
        let enters = !instances[id].isInsideProbe && instances[id].finishSequence == nil
        if enters { instances[id].isInsideProbe = true }
        let categories = instances[id].categories
        lock.unlock()
        if enters { categories.forEach(probe.enter) }
    }

    /// Its observers are told it finished (its categories are still held).
    func didFinish(_ id: Int, errors: [any Error], isCancelled: Bool, output: Int?) {
        lock.lock()
        stamp(.didFinish, id)
        if instances[id].errorsAtFinish == nil {
            instances[id].errorsAtFinish = errors
            instances[id].cancelledAtFinish = isCancelled
            instances[id].outputAtFinish = output
            finishedCount += 1
        }
        let leaves = instances[id].isInsideProbe
        instances[id].isInsideProbe = false
        let categories = instances[id].categories
        lock.unlock()
        if leaves { categories.forEach(probe.leave) }
    }

    /// A ready-made observer heard event number `slot` (see `SoakInstance.counted`).
    func counted(_ slot: Int, for id: Int, blockObserverEvent: SoakEvent? = nil) {
        lock.lock()
        defer { lock.unlock() }
        instances[id].counted[slot] += 1
        if let blockObserverEvent { instances[id].blockObserverLast = blockObserverEvent }
    }

    /// A composite's cancellation handler began; returns the number of its call (from 0).
    func handlerBegan(_ id: Int) -> Int {
        lock.lock()
        defer { lock.unlock() }
        stamp(.handlerCalled, id)
        if instances[id].handlerRunning { instances[id].handlerOverlapped = true }
        if instances[id].answeredCancel { instances[id].handlerCalledAfterCancelAnswer = true }
        instances[id].handlerRunning = true
        return instances[id].count(.handlerCalled) - 1
    }

    func handlerEnded(_ id: Int, answeredCancel: Bool) {
        lock.lock()
        defer { lock.unlock() }
        instances[id].handlerRunning = false
        if answeredCancel { instances[id].answeredCancel = true }
    }

    func cancelRequested(_ id: Int) {
        lock.lock()
        defer { lock.unlock() }
        instances[id].cancelRequested = true
    }

    func cancelAllRequested() {
        lock.lock()
        defer { lock.unlock() }
        cancelAllCount += 1
    }

    // MARK: - Reading

    /// The operations not known to have finished: every `AsyncOperation` without
    /// `operationDidFinish`, every plain one still alive and not finished. Releases nothing
    /// under the lock.
    func unfinished() -> [Int] {
        lock.lock()
        let allFinished = finishedCount == instances.count
        var candidates: [(Int, Operation?)] = []
        if !allFinished {
            for id in instances.indices where !instances[id].plainFinished {
                if instances[id].isPlain {
                    candidates.append((id, references[id].operation))
                } else if instances[id].errorsAtFinish == nil {
                    candidates.append((id, nil))
                }
            }
        }
        lock.unlock()
        var result: [Int] = []
        var finishedPlain: [(Int, Bool)] = []
        for (id, operation) in candidates {
            guard isPlain(id) else {
                result.append(id)
                continue
            }
            // A plain operation released by everything has finished (queues hold the rest).
            if operation == nil || operation!.isFinished {
                finishedPlain.append((id, operation?.isCancelled ?? false))
            } else {
                result.append(id)
            }
        }
        if !finishedPlain.isEmpty {
            lock.lock()
            for (id, cancelled) in finishedPlain where !instances[id].plainFinished {
                instances[id].plainFinished = true
                instances[id].plainCancelled = cancelled
                finishedCount += 1
            }
            lock.unlock()
        }
        return result
    }

    private func isPlain(_ id: Int) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return instances[id].isPlain
    }

    /// The operations still alive.
    func survivors() -> [Int] {
        lock.lock()
        defer { lock.unlock() }
        return references.indices.filter { references[$0].operation != nil }
    }

    var snapshot: (instances: [SoakInstance], cancelAlls: Int) {
        lock.lock()
        defer { lock.unlock() }
        return (instances, cancelAllCount)
    }
}
