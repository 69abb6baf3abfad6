import Conditions
import Foundation
import Observers
import Operations

/// The workloads W1 to W6 and W9 of the benchmark, for this framework and for the references.
enum Workloads {
    /// Every workload at its full size, by name, for `--profile NAME`.
    static let profiled: [String: @Sendable () -> String?] = [
        "w1-dispatch": { dispatchBlocks(100_000) },
        "w1-foundation": { foundationBlocks(100_000) },
        "w1-ours": { asyncBlocks(100_000) },
        "w2-reference": { serialQueues(20_000, categories: 8) },
        "w2-floor": { foundationBlocks(20_000) },
        "w2-ours": { exclusiveOperations(20_000, categories: 8) },
        "w3-reference": { foundationBatch(10_000) },
        "w3-ours": { group(10_000) },
        "w4-chain": { asyncChain(10_000) },
        "w4-plain": { asyncBlocks(10_000) },
        "w4-chain-1m": { asyncChain(1_000_000) },
        "w5-plain": { asyncBlocks(20_000) },
        "w5-ours": { observedOperations(20_000) },
        "w6-ours": { conditionedOperations(20_000) },
        "w9-reference": { foundationSerial(20_000) },
        "w9-ours": { asyncSerial(20_000) },
        "w9-conditioned": { asyncSerial(20_000, conditioned: true) },
    ]

    // MARK: W1: trivial block operations

    /// `allWaiting`: the queue is suspended while they are added, so all of them are alive at
    /// once (the memory probe's worst case, independent of how the threads happen to race).
    static func foundationBlocks(_ count: Int, allWaiting: Bool = false) -> String? {
        let tally = Tally()
        let queue = OperationQueue()
        queue.isSuspended = allWaiting
        for _ in 0..<count {
            queue.addOperation(BlockOperation { tally.add() })
        }
        queue.isSuspended = false
        queue.waitUntilAllOperationsAreFinished()
        return expect(tally.count, count, "bodies")
    }

    static func dispatchBlocks(_ count: Int) -> String? {
        let tally = Tally()
        let group = DispatchGroup()
        let queue = DispatchQueue(label: "bench", attributes: .concurrent)
        for _ in 0..<count {
            queue.async(group: group) { tally.add() }
        }
        group.wait()
        return expect(tally.count, count, "bodies")
    }

    static func asyncBlocks(_ count: Int, allWaiting: Bool = false) -> String? {
        let tally = Tally()
        let queue = AsyncOperationQueue()
        queue.isSuspended = allWaiting
        for _ in 0..<count {
            queue.addOperation(AsyncBlockOperation { tally.add() })
        }
        queue.isSuspended = false
        queue.waitUntilAllOperationsAreFinished()
        return expect(tally.count, count, "bodies")
    }

    // MARK: W2: mutual exclusion over 8 categories

    static func serialQueues(_ count: Int, categories: Int) -> String? {
        let tally = Tally()
        let check = ExclusionCheck(categories: categories)
        let queues = (0..<categories).map { _ -> OperationQueue in
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            return queue
        }
        for index in 0..<count {
            let category = index % categories
            queues[category].addOperation(BlockOperation {
                check.enter(category)
                tally.add()
                check.leave(category)
            })
        }
        for queue in queues { queue.waitUntilAllOperationsAreFinished() }
        return expect(tally.count, count, "bodies") ?? expect(check.violationCount, 0, "exclusion violations")
    }

    static func exclusiveOperations(_ count: Int, categories: Int) -> String? {
        let tally = Tally()
        let check = ExclusionCheck(categories: categories)
        let names = (0..<categories).map { "bench.category.\($0)" }
        let queue = AsyncOperationQueue()
        for index in 0..<count {
            let category = index % categories
            let operation = AsyncBlockOperation {
                check.enter(category)
                tally.add()
                check.leave(category)
            }
            operation.addCondition(ExclusiveCategory(names[category]))
            queue.addOperation(operation)
        }
        queue.waitUntilAllOperationsAreFinished()
        return expect(tally.count, count, "bodies") ?? expect(check.violationCount, 0, "exclusion violations")
    }

    // MARK: W3: a group of children

    static func foundationBatch(_ count: Int) -> String? {
        let tally = Tally()
        let queue = OperationQueue()
        let operations = (0..<count).map { _ in BlockOperation { tally.add() } }
        queue.addOperations(operations, waitUntilFinished: true)
        return expect(tally.count, count, "bodies")
    }

    static func group(_ count: Int) -> String? {
        let tally = Tally()
        let queue = AsyncOperationQueue()
        let children = (0..<count).map { _ in AsyncBlockOperation { tally.add() } }
        let group = GroupOperation(operations: children)
        queue.addOperations([group], waitUntilFinished: true)
        return expect(tally.count, count, "bodies") ?? (group.isFinished && !group.isFailed ? nil : "group did not finish cleanly")
    }

    // MARK: W4: a chain of dependent operations

    static func asyncChain(_ count: Int) -> String? {
        let order = OrderCheck()
        let queue = AsyncOperationQueue()
        var operations: [AsyncBlockOperation] = []
        operations.reserveCapacity(count)
        for index in 0..<count {
            let operation = AsyncBlockOperation { order.record(index) }
            if let previous = operations.last { operation.addDependency(previous) }
            operations.append(operation)
        }
        queue.addOperations(operations, waitUntilFinished: false)
        queue.waitUntilAllOperationsAreFinished()
        operations.removeAll() // releasing the chain must not recurse
        return expect(order.count, count, "bodies") ?? (order.isInOrder ? nil : "chain ran out of order")
    }

    static func foundationChain(_ count: Int) -> String? {
        let order = OrderCheck()
        let queue = OperationQueue()
        var operations: [BlockOperation] = []
        for index in 0..<count {
            let operation = BlockOperation { order.record(index) }
            if let previous = operations.last { operation.addDependency(previous) }
            operations.append(operation)
        }
        queue.addOperations(operations, waitUntilFinished: false)
        queue.waitUntilAllOperationsAreFinished()
        return expect(order.count, count, "bodies") ?? (order.isInOrder ? nil : "chain ran out of order")
    }

    // MARK: W5: observers

    static func observedOperations(_ count: Int) -> String? {
        let tally = Tally()
        let started = Tally()
        let finished = Tally()
        let observed = Tally()
        let queue = AsyncOperationQueue()
        let startedObserver = StartedObserver { _ in started.add() }
        let finishedObserver = FinishedObserver { _, _ in finished.add() }
        let blockObserver = BlockObserver(didStart: { _ in observed.add() }, didFinish: { _, _ in observed.add() })
        for _ in 0..<count {
            let operation = AsyncBlockOperation { tally.add() }
            operation.addObserver(startedObserver)
            operation.addObserver(finishedObserver)
            operation.addObserver(blockObserver)
            queue.addOperation(operation)
        }
        queue.waitUntilAllOperationsAreFinished()
        return expect(tally.count, count, "bodies")
            ?? expect(started.count, count, "didStart calls")
            ?? expect(finished.count, count, "didFinish calls")
            ?? expect(observed.count, 2 * count, "block observer calls")
    }

    // MARK: W6: satisfied conditions

    static func conditionedOperations(_ count: Int) -> String? {
        let tally = Tally()
        let checked = Tally()
        let queue = AsyncOperationQueue()
        let first = BlockCondition { checked.add(); return true }
        let second = NoFailedDependencies()
        for _ in 0..<count {
            let operation = AsyncBlockOperation { tally.add() }
            operation.addCondition(first)
            operation.addCondition(second)
            queue.addOperation(operation)
        }
        queue.waitUntilAllOperationsAreFinished()
        return expect(tally.count, count, "bodies") ?? expect(checked.count, count, "condition evaluations")
    }

    // MARK: W9: one serial queue

    static func foundationSerial(_ count: Int) -> String? {
        let order = OrderCheck()
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        for index in 0..<count {
            queue.addOperation(BlockOperation { order.record(index) })
        }
        queue.waitUntilAllOperationsAreFinished()
        return expect(order.count, count, "bodies") ?? (order.isInOrder ? nil : "serial queue ran out of order")
    }

    /// `conditioned`: each operation has a condition that answers at once, so that each one's
    /// preparation (its evaluation, its turn) runs as the one before it starts.
    static func asyncSerial(_ count: Int, conditioned: Bool = false) -> String? {
        let order = OrderCheck()
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let condition = BlockCondition { true }
        for index in 0..<count {
            let operation = AsyncBlockOperation { order.record(index) }
            if conditioned { operation.addCondition(condition) }
            queue.addOperation(operation)
        }
        queue.waitUntilAllOperationsAreFinished()
        return expect(order.count, count, "bodies") ?? (order.isInOrder ? nil : "serial queue ran out of order")
    }

    private static func expect(_ actual: Int, _ expected: Int, _ what: String) -> String? {
        actual == expected ? nil : "\(what): \(actual), expected \(expected)"
    }
}

/// Records the order chain links ran in.
final class OrderCheck: @unchecked Sendable {
    // @unchecked Sendable: `last`, `count` and `inOrder` are only touched while holding `lock`.
    private let lock = NSLock()
    private var last = -1
    private var total = 0
    private var inOrder = true

    func record(_ index: Int) {
        lock.lock()
        if index != last + 1 { inOrder = false }
        last = index
        total += 1
        lock.unlock()
    }

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return total
    }

    var isInOrder: Bool {
        lock.lock()
        defer { lock.unlock() }
        return inOrder
    }
}
