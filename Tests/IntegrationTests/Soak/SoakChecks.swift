import Conditions
import Foundation
import Operations
import TestSupport

// The invariants a soak round must keep. Only invariants, never time: each check reads the
// events recorded (stamped with one sequence across all threads) and the outcomes.

extension SoakReport {
    /// Every broken invariant of the round, each naming the operation and what it did.
    func violations() -> [String] {
        var problems: [String] = []
        if !unfinished.isEmpty {
            problems.append(
                "\(unfinished.count) operations never finished (waited \(Int(SoakRound.drainTimeout)) s; their events include the "
                    + "cancellation that cleared the way for the next tests): \(unfinished.prefix(12).map(describe))\n"
                    + "The queues and the stuck operations, as they described themselves:\n"
                    + stuckDescriptions.joined(separator: "\n")
            )
        }
        if !chaosDone { problems.append("the chaos threads did not finish") }
        if !queuesDrained { problems.append("a queue still counts operations after everything finished") }
        if unfinished.isEmpty, !categoriesStillFree { problems.append("a category stayed held after the round") }
        for category in categoryNames where probe.maximum(category) > 1 {
            problems.append("\(probe.maximum(category)) operations of category \(category) executed at once")
        }
        if !survivors.isEmpty, unfinished.isEmpty {
            problems.append("\(survivors.count) operations still alive after the round, with every reference dropped: \(survivors.prefix(12).map(describe)); \(survivorDescriptions)")
        }
        if survivingQueues > 0 { problems.append("\(survivingQueues) queues still alive after the round") }
        // A stuck round's operations were cancelled to clear the way for the next tests: what
        // they did afterwards says nothing about the engine.
        guard unfinished.isEmpty else { return problems }
        problems += unexpectedDiagnostics()
        problems += serialQueueOrder()
        for id in instances.indices {
            problems += check(id)
        }
        return problems
    }

    /// How many operations the round made.
    var operationCount: Int { instances.count }

    // MARK: - Describing

    func describe(_ id: Int) -> String {
        let instance = instances[id]
        let node = plan.nodes[instance.node]
        let parent = instance.parent.map { "i\($0)" } ?? "none"
        let chaos = instance.cancelRequested ? ", cancelled by chaos" : ""
        let timeout = node.timeout.map { ", timeout \(SoakPlan.timeouts[$0]) s" } ?? ""
        let conditions = node.conditions.isEmpty ? "" : ", conditions \(node.conditions)"
        let errors = instance.errorsAtFinish.map { ", errors \($0.map(describeError))" } ?? ""
        return "i\(id) (\(instance.kind) #\(instance.number), node \(instance.node), parent \(parent), \(instance.origin)\(timeout)\(conditions)\(chaos), events \(instance.events.map(\.event))\(errors))"
    }

    // MARK: - The round as a whole

    /// Diagnostics other than those chaos causes on purpose: a late child added as its group
    /// finished is reported as configured too late.
    private func unexpectedDiagnostics() -> [String] {
        diagnostics.compactMap { diagnostic in
            if diagnostic.kind == .configuredTooLate, let id = instanceID(named: diagnostic.operationName),
               instances[id].origin == .late || instances.contains(where: { $0.parent == id && $0.origin == .late }) {
                return nil
            }
            return "unexpected diagnostic: \(diagnostic)"
        }
    }

    /// Late children their group did not wait for, as the diagnostics say: one that was added
    /// as its group finished is named itself; children added after the group finished run
    /// elsewhere and are reported under the group's name (so, of its late children, those that
    /// finished after it).
    func lateChildrenNotWaitedFor() -> Set<Int> {
        var result = Set<Int>()
        for diagnostic in diagnostics where diagnostic.kind == .configuredTooLate {
            guard let id = instanceID(named: diagnostic.operationName) else { continue }
            if instances[id].origin == .late { result.insert(id) }
            let groupFinish = instances[id].finishSequence ?? .max
            for child in instances.indices where instances[child].parent == id && instances[child].origin == .late {
                if (instances[child].finishSequence ?? .max) > groupFinish { result.insert(child) }
            }
        }
        return result
    }

    private func instanceID(named name: String) -> Int? {
        guard let range = name.range(of: "-i", options: .backwards), let id = Int(name[range.upperBound...]),
              instances.indices.contains(id) else { return nil }
        return id
    }

    /// The serial queue keeps its width: it starts the operations without dependencies in the
    /// order they were added, across suspensions, conditions and categories included.
    private func serialQueueOrder() -> [String] {
        guard !widthChanged[SoakPlan.serialQueue] else { return [] }
        let ordered = instances.indices.compactMap { id -> (position: Int, id: Int)? in
            guard case let .topLevel(queue, position) = instances[id].origin, queue == SoakPlan.serialQueue,
                  plan.nodes[instances[id].node].dependencies.isEmpty else { return nil }
            return (position, id)
        }.sorted { $0.position < $1.position }
        return startOrder(of: ordered.map(\.id), in: "the serial queue")
    }

    /// Problems where an operation of `ids` (in the order added) started before an earlier one.
    private func startOrder(of ids: [Int], in place: String) -> [String] {
        var problems: [String] = []
        var latest: (id: Int, start: Int)?
        for id in ids {
            guard let start = startSequence(id) else { continue }
            if let latest, latest.start > start {
                problems.append("\(place) started \(describe(id)) after \(describe(latest.id)), which was added later")
            }
            if latest == nil || latest!.start < start { latest = (id, start) }
        }
        return problems
    }

    private func startSequence(_ id: Int) -> Int? {
        instances[id].isPlain ? instances[id].first(.bodyBegan) : instances[id].first(.didStart)
    }

    // MARK: - One operation

    private func check(_ id: Int) -> [String] {
        var problems: [String] = []
        func problem(_ text: String) { problems.append("\(describe(id)): \(text)") }
        let instance = instances[id]
        if instance.isPlain {
            checkPlain(instance, problem)
            checkPlacement(instance, id: id, problem)
            return problems
        }
        checkEvents(instance, problem)
        checkPlacement(instance, id: id, problem)
        checkConditions(instance, id: id, problem)
        switch instance.kind {
        case let .leaf(body):
            checkLeaf(instance, id: id, body: body, problem)
        case let .group(maxConcurrent):
            checkChildrenFinishedFirst(id, problem)
            checkGroupErrors(instance, id: id, problem)
            if maxConcurrent == 1 {
                let ordered = instances.indices.compactMap { child -> (position: Int, id: Int)? in
                    guard instances[child].parent == id, case let .child(position) = instances[child].origin,
                          plan.nodes[instances[child].node].dependencies.isEmpty else { return nil }
                    return (position, child)
                }.sorted { $0.position < $1.position }
                startOrder(of: ordered.map(\.id), in: "serial group i\(id)").forEach(problem)
            }
        case .composite:
            checkChildrenFinishedFirst(id, problem)
            checkComposite(instance, problem)
        case let .retry(maxAttempts):
            checkChildrenFinishedFirst(id, problem)
            checkRetry(instance, id: id, maxAttempts: maxAttempts, problem)
        }
        return problems
    }

    /// Observers hear each event once, `operationDidFinish` last; execution follows the start.
    private func checkEvents(_ instance: SoakInstance, _ problem: (String) -> Void) {
        let finishes = instance.count(.didFinish)
        let starts = instance.count(.didStart)
        let cancels = instance.count(.didCancel)
        let produces = instance.count(.didProduce)
        if finishes != 1 { problem("operationDidFinish came \(finishes) times") }
        let observed = instance.events.map(\.event).filter { [.didStart, .didCancel, .didProduce, .didFinish].contains($0) }
        if observed.last != .didFinish { problem("operationDidFinish was not the last observer event") }
        if starts > 1 { problem("operationDidStart came \(starts) times") }
        if cancels > 1 { problem("operationDidCancel came \(cancels) times") }
        if instance.count(.execute) > 1 { problem("execute() was called \(instance.count(.execute)) times") }
        if instance.count(.bodyBegan) > 1 { problem("the block ran \(instance.count(.bodyBegan)) times") }
        if instance.count(.execute) > starts { problem("execute() was called without operationDidStart") }
        if instance.cancelledAtFinish != (cancels == 1) {
            problem("isCancelled was \(instance.cancelledAtFinish) at operationDidFinish after \(cancels) operationDidCancel")
        }
        let finish = instance.finishSequence ?? .max
        if let execute = instance.first(.execute) {
            if let start = instance.first(.didStart), start > execute { problem("execute() came before operationDidStart") }
            if finish < execute { problem("execute() came after operationDidFinish") }
        }
        if let body = instance.first(.bodyBegan) {
            if instance.first(.execute).map({ $0 > body }) ?? true { problem("the block ran without execute() before it") }
            if finish < body { problem("the block began after its operation finished") }
        }
        if plan.nodes[instance.node].hasCountingObservers {
            let expected = [starts, cancels, produces, finishes]
            if Array(instance.counted[0..<4]) != expected || Array(instance.counted[4..<8]) != expected || instance.blockObserverLast != .didFinish {
                problem("the ready-made observers counted \(instance.counted) (last \(String(describing: instance.blockObserverLast))), the recording observer \(expected)")
            }
        }
    }

    /// Never before its dependencies or its group; a group finishes after it.
    private func checkPlacement(_ instance: SoakInstance, id: Int, _ problem: (String) -> Void) {
        let began = instance.isPlain ? instance.first(.bodyBegan) : instance.first(.execute)
        guard let began else { return }
        for dependency in instance.dependencies {
            let other = instances[dependency]
            let finished = other.isPlain ? (other.first(.bodyBegan) == nil ? 0 : other.first(.bodyEnded)) : other.finishSequence
            if finished.map({ $0 > began }) ?? true {
                problem("began before its dependency i\(dependency) finished")
            }
        }
        if let parent = instance.parent, !childrenTooLate.contains(id) {
            if let parentExecute = instances[parent].first(.execute) {
                if parentExecute > began { problem("began before its group i\(parent) executed") }
            } else {
                problem("began although its group never executed: \(describe(parent))")
            }
        }
    }

    /// Conditions: evaluated after dependencies and before the finish; a failed one means no
    /// execution and one error per failed condition.
    private func checkConditions(_ instance: SoakInstance, id: Int, _ problem: (String) -> Void) {
        let node = plan.nodes[instance.node]
        let finish = instance.finishSequence ?? .max
        for evaluation in instance.events where evaluation.event == .conditionEvaluated {
            if evaluation.sequence > finish { problem("a condition was evaluated after the operation finished") }
            for dependency in instance.dependencies where !instances[dependency].isPlain {
                if instances[dependency].finishSequence.map({ $0 > evaluation.sequence }) ?? true {
                    problem("a condition was evaluated before its dependency i\(dependency) finished")
                }
            }
            if let parent = instance.parent, instances[parent].first(.execute).map({ $0 > evaluation.sequence }) ?? true {
                problem("a condition was evaluated before its group i\(parent) executed")
            }
        }
        let (least, most) = failingConditions(instance)
        let executed = instance.first(.execute) != nil
        if least > 0, executed || instance.first(.bodyBegan) != nil {
            problem("executed although \(least) of its conditions failed")
        }
        let cancelled = instance.count(.didCancel) > 0
        if !executed, !cancelled, let errors = instance.errorsAtFinish {
            let conditionErrors = errors.filter(isConditionError).count
            if !(least...max(least, most)).contains(conditionErrors) {
                problem("\(conditionErrors) condition errors, expected \(least)...\(most) for conditions \(node.conditions)")
            }
            if most == 0, isLeftAlone(id) {
                problem("not cancelled, no failed condition, but did not execute")
            }
        }
    }

    /// How many of the conditions must fail, and may fail, given how dependencies ended.
    private func failingConditions(_ instance: SoakInstance) -> (least: Int, most: Int) {
        let conditions = plan.nodes[instance.node].conditions
        var least = conditions.filter(\.failsByItself).count
        var most = least
        let dependencies = instance.dependencies.map { instances[$0] }
        // Each such condition fails on its own, so twice the same condition fails twice.
        let noFailed = conditions.filter { $0 == .noFailedDependencies }.count
        if dependencies.contains(where: { !($0.errorsAtFinish ?? []).isEmpty }) {
            least += noFailed
            most += noFailed
        }
        let noCancelled = conditions.filter { $0 == .noCancelledDependencies }.count
        if dependencies.contains(where: { $0.cancelledAtFinish || $0.plainCancelled }) {
            least += noCancelled
            most += noCancelled
        } else if dependencies.contains(where: \.isPlain) {
            most += noCancelled // a plain dependency released before its end was seen
        }
        return (least, most)
    }

    /// Not cancelled, and inside groups that executed: nothing stops it but its conditions.
    private func isLeftAlone(_ id: Int) -> Bool {
        guard instances[id].count(.didCancel) == 0 else { return false }
        guard let parent = instances[id].parent else { return true }
        return instances[parent].first(.execute) != nil
    }

    private func checkLeaf(_ instance: SoakInstance, id: Int, body: SoakPlan.Body, _ problem: (String) -> Void) {
        let errors = instance.errorsAtFinish ?? []
        let executed = instance.first(.execute) != nil
        let cancelled = instance.count(.didCancel) > 0
        let fails = instance.number <= body.failures
        let most = failingConditions(instance).most

        // Left alone, it runs exactly once and ends with its own outcome.
        if most == 0, !cancelled, isLeftAlone(id) {
            if executed, instance.count(.bodyBegan) != 1 { problem("not cancelled, no failed condition, but its block did not run") }
            if body == .neverContinues {
                problem("never continued, yet finished without being cancelled")
            } else {
                let expected = fails ? [describeError(StubError.soakBodyFailed(id))] : []
                if errors.map(describeError) != expected { problem("finished with \(errors.map(describeError)), expected \(expected)") }
            }
            if case .result = body, !fails, instance.outputAtFinish != id {
                problem("its output was \(String(describing: instance.outputAtFinish)), expected \(id)")
            }
        }

        // Timeouts: only one that started and carries the observer times out; one that never
        // continues, left alone by every other cancellation, ends with its timeout.
        let node = plan.nodes[instance.node]
        let ownTimeout = node.timeout.map { SoakPlan.timeouts[$0] }
        let timeouts = errors.compactMap(timeoutOf)
        if !timeouts.isEmpty, timeouts.count != 1 || timeouts.first != ownTimeout || instance.first(.didStart) == nil || !cancelled {
            problem("timed out \(timeouts) with timeout \(ownTimeout.map { "\($0)" } ?? "none"), started: \(instance.first(.didStart) != nil), cancelled: \(cancelled)")
        }
        if body == .neverContinues, executed, let ownTimeout, !wasCancelledFromElsewhere(id), !timeouts.contains(ownTimeout) {
            problem("never continued and was left alone, but did not finish with .timedOut(after: \(ownTimeout))")
        }
    }

    /// Whether something other than its own timeout may have cancelled it.
    private func wasCancelledFromElsewhere(_ id: Int) -> Bool {
        if cancelAlls > 0 || instances[id].cancelRequested { return true }
        var current = instances[id].parent
        while let parent = current {
            if instances[parent].count(.didCancel) > 0 { return true }
            current = instances[parent].parent
        }
        return false
    }

    private func children(of id: Int, tooLate: Set<Int>) -> [Int] {
        instances.indices.filter { instances[$0].parent == id && !tooLate.contains($0) }
    }

    /// A group (composite, retry) finishes only after every operation it admitted.
    private func checkChildrenFinishedFirst(_ id: Int, _ problem: (String) -> Void) {
        let finish = instances[id].finishSequence ?? .max
        for child in children(of: id, tooLate: childrenTooLate) {
            let other = instances[child]
            let childFinish: Int?
            if other.isPlain {
                guard let began = other.first(.bodyBegan) else { continue } // never ran: nothing to see
                childFinish = other.first(.bodyEnded) ?? began
            } else {
                childFinish = other.finishSequence
            }
            if childFinish.map({ $0 > finish }) ?? true {
                problem("finished before its child i\(child) (\(other.origin)) finished")
            }
        }
    }

    /// A group's errors hold every child's errors, and nothing else unless cancelled or its
    /// conditions failed.
    private func checkGroupErrors(_ instance: SoakInstance, id: Int, _ problem: (String) -> Void) {
        var own = (instance.errorsAtFinish ?? []).map(describeError)
        for child in children(of: id, tooLate: childrenTooLate) where !instances[child].isPlain {
            for error in (instances[child].errorsAtFinish ?? []).map(describeError) {
                if let position = own.firstIndex(of: error) {
                    own.remove(at: position)
                } else {
                    problem("misses the error \(error) of its child i\(child)")
                }
            }
        }
        let executed = instance.first(.execute) != nil
        if executed, instance.count(.didCancel) == 0, !own.isEmpty {
            let owners = own.compactMap { error -> String? in
                guard let range = error.range(of: "(i"), let end = error[range.upperBound...].firstIndex(of: ")"),
                      let owner = Int(error[range.upperBound..<end]), instances.indices.contains(owner) else { return nil }
                return describe(owner)
            }
            problem("has errors beyond its children's: \(own); they come from \(owners)")
        }
    }

    private func checkComposite(_ instance: SoakInstance, _ problem: (String) -> Void) {
        if instance.handlerOverlapped { problem("two calls of its cancellation handler overlapped") }
        if instance.handlerCalledAfterCancelAnswer { problem("its cancellation handler was called after it answered .cancel") }
        let completions = instance.count(.completion)
        let executed = instance.first(.execute) != nil
        let cancelled = instance.count(.didCancel) > 0
        if completions > 1 { problem("its completion handler was called \(completions) times") }
        if let completion = instance.first(.completion), (instance.finishSequence ?? .max) < completion {
            problem("its completion handler was called after it finished")
        }
        if !executed, completions > 0 { problem("its completion handler was called although it never executed") }
        if executed, !cancelled {
            if completions != 1 { problem("executed and was not cancelled, yet its completion handler was called \(completions) times") }
            if !(instance.errorsAtFinish ?? []).isEmpty { problem("completed, yet finished with errors") }
        }
    }

    private func checkRetry(_ instance: SoakInstance, id: Int, maxAttempts: Int, _ problem: (String) -> Void) {
        let attempts = instances.indices.filter { instances[$0].parent == id && instances[$0].origin == .factory }
            .sorted { instances[$0].number < instances[$1].number }
        if attempts.count > maxAttempts { problem("made \(attempts.count) attempts of at most \(maxAttempts)") }
        for (earlier, later) in zip(attempts, attempts.dropFirst()) {
            let laterFirst = instances[later].events.first?.sequence ?? .max
            if (instances[earlier].finishSequence ?? .max) > laterFirst {
                problem("attempt i\(later) began before attempt i\(earlier) finished")
            }
        }
        guard instance.count(.didCancel) == 0, let last = attempts.last else { return }
        let lastErrors = (instances[last].errorsAtFinish ?? []).map(describeError)
        let errors = (instance.errorsAtFinish ?? []).map(describeError)
        if !lastErrors.isEmpty, attempts.count < maxAttempts {
            problem("gave up after \(attempts.count) of \(maxAttempts) attempts, the last failing with \(lastErrors)")
        }
        if errors != lastErrors {
            problem("finished with \(errors), its last attempt i\(last) with \(lastErrors)")
        }
    }

    private func checkPlain(_ instance: SoakInstance, _ problem: (String) -> Void) {
        if instance.count(.bodyBegan) > 1 { problem("the block ran \(instance.count(.bodyBegan)) times") }
    }
}

/// How errors are compared across operations (a group's errors against its children's).
func describeError(_ error: any Error) -> String {
    "\(type(of: error)): \(error)"
}

private func isConditionError(_ error: any Error) -> Bool {
    if error is ConditionError { return true }
    if let stub = error as? StubError { return stub.isSoakConditionFailure }
    return false
}

private func timeoutOf(_ error: any Error) -> TimeInterval? {
    if case let .timedOut(after)? = error as? AsyncOperationError { return after }
    return nil
}
