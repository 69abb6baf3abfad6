import Foundation

extension AsyncOperationQueue {
    /// A picture of the queue now: whether it is suspended, and every unfinished operation on it
    /// (those still held in its scheduler included, and the operation behind a barrier block,
    /// named `barrier`), in add order, each with what it waits for.
    ///
    /// Safe to call from any thread at any time, while the queue runs.
    public func snapshot() -> QueueSnapshot {
        let operations = allOperations(includingBarriers: true).map { operation -> OperationSnapshot in
            if let operation = operation as? AsyncOperation {
                return operation.snapshot()
            }
            return snapshot(ofPlain: operation)
        }
        return QueueSnapshot(name: name, isSuspended: isSuspended, maxConcurrentOperationCount: maxConcurrentOperationCount, operations: operations)
    }

    /// What an operation's reasons call the queue: its `name`, but a group's own queue after its
    /// group ("children of refresh"), as messages do.
    var nameInReasons: String? {
        mention.groupQueueName ?? name
    }

    /// Why `operation` (added with `ticket`) waits in one of the scheduler's lines, if it does.
    func reasonForWaitingInLine(_ operation: Operation, ticket: UInt64?) -> OperationSnapshot.Reason? {
        guard let ticket, ticket != 0 else { return nil }
        let wait = lineWait(ticket: ticket)
        guard let reason = wait.reason else { return nil }
        if reason == .suspended, let group = wait.group, !group.isExecuting, !group.isFinished {
            return .groupToStart(group.displayName) // a group's queue is suspended until it executes
        }
        let queueName = nameInReasons
        switch reason {
        case .suspended:
            return .suspendedQueue(queueName)
        case .turn:
            return .turnOnSerialQueue(queueName)
        case .slot:
            return .freeSlot(onQueue: queueName)
        }
    }

    func snapshot(ofPlain operation: Operation) -> OperationSnapshot {
        var state: OperationSnapshot.State
        var reasons: [OperationSnapshot.Reason] = []
        if let lineReason = reasonForWaitingInLine(operation, ticket: PlainOperationRegistry.ticket(of: operation)) {
            state = .waitingInLine
            reasons.append(lineReason)
            reasons += operation.dependencies.filter { !$0.isFinished && !($0 is GateOperation) }.map { .dependency($0.displayName) } // as an AsyncOperation's
        } else if operation.isFinished {
            state = .finished
        } else if operation.isExecuting {
            state = .executing
        } else {
            let unfinished = operation.dependencies.filter { !$0.isFinished && !($0 is GateOperation) }
            state = unfinished.isEmpty ? .ready : .waitingForDependencies
            reasons += unfinished.map { .dependency($0.displayName) }
            if state == .ready && isSuspended { reasons.append(.suspendedQueue(nameInReasons)) }
        }
        return OperationSnapshot(name: operation.displayName, state: state, isCancelled: operation.isCancelled, waitsFor: reasons)
    }
}
