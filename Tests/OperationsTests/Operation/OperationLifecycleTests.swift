import Foundation
@testable import Operations
import Testing
import TestSupport

// The lifecycle rules, without threads: each event on the pure state machine and the action it
// asks for.

private struct Condition: OperationCondition {
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(.satisfied)
    }
}

private struct ConstructedCondition: OperationCondition, SatisfiedByConstruction {
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        completion(.satisfied)
    }
}

@Suite struct OperationLifecycleTests {
    private let queue = AsyncOperationQueue()

    /// A lifecycle on a queue whose `count` conditions (none satisfied by construction) were
    /// just handed out.
    private func evaluating(_ count: Int, categories: [String] = []) -> OperationLifecycle {
        var state = OperationLifecycle()
        for _ in 0..<count {
            _ = state.addCondition(Condition(), satisfiedByConstruction: false)
        }
        _ = state.enqueue(on: queue, ticket: 1)
        _ = state.finishEnqueuing(attached: state.conditions.count)
        _ = state.beginEvaluating(categories: categories)
        return state
    }

    @Test(arguments: [1, 3, 63, 64, 65, 130])
    func conditionEvaluation_takesEachAnswerOnce(count: Int) {
        var state = evaluating(count)
        #expect(state.unansweredConditionCount == count)
        #expect(state.unansweredConditions.map(\.index) == Array(0..<count))
        #expect(!state.isAwaitingAnswer(from: -1) && !state.isAwaitingAnswer(from: count))

        // Every other condition answers twice, the second time with a failure that is not taken
        let answered = Array(stride(from: count - 1, through: 1, by: -2))
        for index in answered {
            let wasAwaited = state.isAwaitingAnswer(from: index)
            _ = state.conditionAnswered(index: index, result: .satisfied)
            _ = state.conditionAnswered(index: index, result: .failed(StubError("second answer")))
            #expect(wasAwaited && !state.isAwaitingAnswer(from: index))
        }
        #expect(state.unansweredConditionCount == count - answered.count)
        #expect(state.unansweredConditions.map(\.index) == (0..<count).filter { !answered.contains($0) })

        // The others answer, and the evaluation passes: no second answer counted
        for index in (0..<count).filter({ !answered.contains($0) }).dropLast() {
            _ = state.conditionAnswered(index: index, result: .satisfied)
        }
        let last = (0..<count).last { !answered.contains($0) }!
        // With no categories to ask for, passing clears it to run in the same step
        guard case .cleared(logger: nil, then: .handOff(_, ticket: 1, holdsCategories: false)) = state.conditionAnswered(index: last, result: .satisfied) else {
            Issue.record("expected the evaluation to pass, clearing the operation to run")
            return
        }
        #expect(state.phase == .ready)
        #expect(state.conditionFailures.isEmpty)
    }

    /// Every third condition is satisfied by construction: those are answered without being
    /// handed out, below and beyond the 64 whose kind the lifecycle keeps in one word.
    @Test(arguments: [5, 64, 65, 130])
    func beginEvaluating_handsOutOnlyConditionsNotSatisfiedByConstruction(count: Int) {
        var state = OperationLifecycle()
        let constructed = Set(stride(from: 0, to: count, by: 3))
        for index in 0..<count {
            if constructed.contains(index) {
                _ = state.addCondition(ConstructedCondition(), satisfiedByConstruction: true)
            } else {
                _ = state.addCondition(Condition(), satisfiedByConstruction: false)
            }
        }
        _ = state.enqueue(on: queue, ticket: 1)
        _ = state.finishEnqueuing(attached: state.conditions.count)
        guard case let .handOut(awaited) = state.beginEvaluating(categories: []) else {
            Issue.record("expected conditions to hand out")
            return
        }
        let expected = (0..<count).filter { !constructed.contains($0) }
        #expect((0..<count).filter { awaited.contains($0) } == expected)
        #expect(state.unansweredConditions.map(\.index) == expected)
        guard case .alreadyHandedOut = state.beginEvaluating(categories: []) else {
            Issue.record("the conditions are handed out once")
            return
        }
    }

    @Test func beginEvaluating_withOnlyConditionsSatisfiedByConstruction_passesAtOnce() {
        var state = OperationLifecycle()
        _ = state.addCondition(ConstructedCondition(), satisfiedByConstruction: true)
        _ = state.enqueue(on: queue, ticket: 1)
        _ = state.finishEnqueuing(attached: state.conditions.count)
        guard case .settled(.passed(categories: ["a"], logger: nil)) = state.beginEvaluating(categories: ["a"]) else {
            Issue.record("expected the evaluation to pass without handing anything out")
            return
        }
    }

    /// Answers given at once are taken with the end of the handing out, in one step: only those
    /// still awaited, failures in the order given, beyond the 64th too.
    @Test(arguments: [3, 66])
    func conditionsHandedOut_takesTheAnswersGivenAtOnce(count: Int) {
        var state = evaluating(count, categories: ["a"])
        let first = count - 1, second = 0
        _ = state.conditionAnswered(index: 1, result: .satisfied) // answered before: not taken again

        var atOnce = AnsweredConditions()
        atOnce.add(.failed(StubError("first")), of: first)
        atOnce.add(.failed(StubError("answered before")), of: 1)
        atOnce.add(.failed(StubError("second")), of: second)
        let handedOut = state.conditionsHandedOut(answeredAtOnce: atOnce)

        let leftOut = count - 3
        #expect(handedOut.unanswered == leftOut)
        #expect(state.conditionFailures.asStubErrors == (leftOut > 0 ? [StubError("first"), StubError("second")] : []))
        guard leftOut == 0 else {
            guard case .none = handedOut.settled else { Issue.record("settled with answers left to come"); return }
            return
        }
        guard case let .failed(errors) = handedOut.settled else {
            Issue.record("expected the evaluation to fail in the same step")
            return
        }
        #expect(errors.asStubErrors == [StubError("first"), StubError("second")])
    }

    @Test func conditionsAnswered_afterACancel_takesNothing() {
        var state = evaluating(1)
        _ = state.cancel(error: nil)
        var atOnce = AnsweredConditions()
        atOnce.add(.failed(StubError("late")), of: 0)
        guard case .none = state.conditionsAnswered(atOnce) else {
            Issue.record("a cancelled operation takes no answer")
            return
        }
        #expect(state.conditionFailures.isEmpty)
    }

    @Test func enqueue_withNothingToWaitFor_handsOffAtOnce() {
        var state = OperationLifecycle()
        guard case .handOffNow = state.enqueue(on: queue, ticket: 1) else {
            Issue.record("expected a direct hand-off")
            return
        }
        #expect(state.phase == .ready && state.wasHandedOff && state.isReadyForFoundation)
    }

    @Test func enqueue_twice_isRejected() {
        var state = OperationLifecycle()
        _ = state.enqueue(on: queue, ticket: 1)
        guard case .reject(.addedTwice, _) = state.enqueue(on: queue, ticket: 2) else {
            Issue.record("expected a rejection")
            return
        }
    }

    @Test func pendingOperation_waitsForItsLastDependency_thenEvaluatesConditions() {
        var state = OperationLifecycle()
        let firstDependency = BlockOperation {}
        let secondDependency = BlockOperation {}
        let first = ObjectIdentifier(firstDependency)
        let second = ObjectIdentifier(secondDependency)
        _ = state.addDependency(firstDependency)
        _ = state.addDependency(secondDependency)
        _ = state.addCondition(Condition(), satisfiedByConstruction: false)
        guard case .runPipeline = state.enqueue(on: queue, ticket: 1) else {
            Issue.record("expected the pipeline")
            return
        }
        guard case .advance(.none) = state.finishEnqueuing(attached: state.conditions.count) else {
            Issue.record("must wait for dependencies")
            return
        }
        guard case .none = state.dependencyFinished(first) else {
            Issue.record("one dependency is still out")
            return
        }
        guard case .advance(.evaluateConditions) = state.dependencyFinished(second) else {
            Issue.record("expected condition evaluation")
            return
        }
        #expect(state.phase == .evaluatingConditions && !state.isReadyForFoundation)
    }

    /// Two steps that advance a pending operation at once (a dependency's finish and the end of
    /// its add, say) both find the cycle; only the first finish counts, and the second is no
    /// duplicate (which would report `.finishedTwice`).
    @Test func pendingOperationClosingACycle_finishesOnce_howeverManyStepsAdvanceIt() {
        // Given a pending operation, waiting for a dependency
        var state = OperationLifecycle()
        _ = state.addDependency(BlockOperation {})
        _ = state.enqueue(on: queue, ticket: 1)
        _ = state.finishEnqueuing(attached: 0)

        // When the cycle is recorded, and a dependency's finish advances it at the same time
        guard case .recorded(.finishClosingCycle) = state.recordCycle(through: ObjectIdentifier(BlockOperation.self), name: "loop", wasCounted: false),
              case .finishClosingCycle = state.advanceIfDependenciesFinished() else {
            Issue.record("both steps must see the cycle")
            return
        }
        // Then the first finish is delivered, with the cycle's error, and the second is nothing
        guard case let .deliver(_, errors, _) = state.finishClosingCycle(operationName: "op") else {
            Issue.record("the first finish must be delivered")
            return
        }
        #expect(errors.map { "\($0)" } == ["\(AsyncOperationError.dependencyCycle(operation: "op", dependency: "loop"))"])
        guard case .none = state.finishClosingCycle(operationName: "op") else {
            Issue.record("the second finish must change nothing, and report nothing")
            return
        }
    }

    @Test func enqueue_asksForTheTurnAsHeld_onlyWhenItWaitsForNothingKnown() {
        // Given operations with a condition: one with a dependency, one cancelled, one free
        var waiting = OperationLifecycle()
        _ = waiting.addDependency(BlockOperation {})
        _ = waiting.addCondition(Condition(), satisfiedByConstruction: false)
        var cancelled = OperationLifecycle()
        _ = cancelled.cancel(error: nil)
        _ = cancelled.addCondition(Condition(), satisfiedByConstruction: false)
        var free = OperationLifecycle()
        _ = free.addCondition(Condition(), satisfiedByConstruction: false)

        // When they are added, then only the free one asks for its turn as it is held
        guard case .runPipeline(_, turn: .onceReady) = waiting.enqueue(on: queue, ticket: 1),
              case .runPipeline(_, turn: .onceReady) = cancelled.enqueue(on: queue, ticket: 2),
              case .runPipeline(_, turn: .asHeld) = free.enqueue(on: queue, ticket: 3) else {
            Issue.record("only an operation that waits for nothing known asks as it is held")
            return
        }
    }

    @Test func finishEnqueuingHoldingTurn_beginsTheEvaluationInTheSameStep() {
        // Given an operation with a condition, being added
        var state = OperationLifecycle()
        _ = state.addCondition(Condition(), satisfiedByConstruction: false)
        _ = state.enqueue(on: queue, ticket: 1)

        // When its add ends with the turn its queue gave it as it held it
        let end = state.finishEnqueuing(holdingTurnWith: 1)

        // Then the condition is handed out in that same step
        guard case .evaluate(.handOut) = end else {
            Issue.record("expected the conditions to be handed out")
            return
        }
        #expect(state.phase == .evaluatingConditions && state.conditionsDispatched)
    }

    /// Something stands in the way of an operation given its turn as it was held: it gives the
    /// turn back while it is still being added, so that nothing (a dependency's finish) lets it
    /// on before the turn is back; then its add ends as usual.
    enum Obstacle: CaseIterable, Sendable {
        case dependency, condition, cancel, finish
    }

    @Test(arguments: Obstacle.allCases)
    func finishEnqueuingHoldingTurn_givesTheTurnBackFirst_whenSomethingStandsInTheWay(obstacle: Obstacle) {
        // Given an operation with a condition, being added
        var state = OperationLifecycle()
        _ = state.addCondition(Condition(), satisfiedByConstruction: false)
        _ = state.enqueue(on: queue, ticket: 7)
        let dependency = BlockOperation {}

        // When, before its add ends, the obstacle comes
        switch obstacle {
        case .dependency: _ = state.addDependency(dependency) // a condition's, say
        case .condition: _ = state.addCondition(Condition(), satisfiedByConstruction: false) // may name a category
        case .cancel: _ = state.cancel(error: nil)
        case .finish: _ = state.finish(errors: [StubError()])
        }
        let phase = state.phase

        // Then it gives the turn back, still where it was
        guard case .giveBackTurn(ticket: 7) = state.finishEnqueuing(holdingTurnWith: 1) else {
            Issue.record("the turn goes back first")
            return
        }
        #expect(state.phase == phase && !state.conditionsDispatched)
        guard obstacle == .dependency else { return }
        switch state.dependencyFinished(ObjectIdentifier(dependency)) {
        case .none, .advance(.none):
            break // nothing lets it on while it is being added
        default:
            Issue.record("a dependency's finish let it on while it was being added")
        }
        guard case .advance(.evaluateConditions) = state.finishEnqueuing(attached: state.conditions.count) else {
            Issue.record("its add ends as usual: nothing to wait for any more")
            return
        }
    }

    /// A finish from elsewhere while the operation is being added may be heard by its queue
    /// before the queue holds it: the end of the add lets the queue go of it (and of any turn).
    @Test(arguments: [false, true])
    func finishEnqueuing_afterAFinishFromElsewhere_letsTheQueueGoOfIt(holdingTurn: Bool) {
        // Given an operation being added, finished from elsewhere, its queue told
        var state = OperationLifecycle()
        _ = state.addCondition(Condition(), satisfiedByConstruction: false)
        _ = state.enqueue(on: queue, ticket: 9)
        guard case .deliver = state.finish(errors: [StubError()]) else {
            Issue.record("a finish while it is being added is delivered at once")
            return
        }
        _ = state.completeFinish()

        // When its add ends (giving back the turn it was given as it was held, if it was)
        if holdingTurn {
            guard case .giveBackTurn(ticket: 9) = state.finishEnqueuing(holdingTurnWith: 1) else {
                Issue.record("the turn goes back first")
                return
            }
        }

        // Then the queue lets go of it
        guard case .finishedWhileAdded(turnToForget: 9, _) = state.finishEnqueuing(attached: state.conditions.count) else {
            Issue.record("the queue must let go of it")
            return
        }
    }

    @Test func cancelWhilePending_finishesOnceTheCancelNotificationIsDelivered() {
        var state = OperationLifecycle()
        _ = state.addDependency(BlockOperation {})
        _ = state.enqueue(on: queue, ticket: 1)
        _ = state.finishEnqueuing(attached: state.conditions.count)
        guard case .cancel(_, .none) = state.cancel(error: StubError()) else {
            Issue.record("expected a cancellation")
            return
        }
        #expect(state.phase == .finishing && state.errors.count == 1)
        guard case .deliver(_, let errors, _) = state.notificationDelivered() else {
            Issue.record("the held-back finish must be delivered now")
            return
        }
        #expect(errors.count == 1)
    }

    @Test func finishAfterHandOff_waitsForFoundationToStartIt() {
        var state = OperationLifecycle()
        _ = state.enqueue(on: queue, ticket: 1)
        guard case .none = state.finish(errors: [StubError()]) else {
            Issue.record("Foundation holds it: it finishes when started")
            return
        }
        #expect(state.phase == .ready && state.finishRequestedBeforeStart)
        guard case .finish(.deliver) = state.start() else {
            Issue.record("start must finish it without executing")
            return
        }
        #expect(!state.executionBegan)
    }

    @Test func cancelAfterAFinishWasRequestedBeforeTheStart_changesNothing() {
        var state = OperationLifecycle()
        _ = state.enqueue(on: queue, ticket: 1)
        let first = StubError("finish")
        _ = state.finish(errors: [first])
        guard case .none = state.cancel(error: StubError("cancel")) else {
            Issue.record("the finish came first: the cancel must neither add its error nor be heard")
            return
        }
        #expect(!state.isCancelled)
        #expect(state.errors.asStubErrors == [first])
    }

    @Test func finishDuringStartNotification_isHeldBack_andExecutionSkipped() {
        var state = OperationLifecycle()
        _ = state.enqueue(on: queue, ticket: 1)
        guard case .execute = state.start() else {
            Issue.record("expected execution")
            return
        }
        guard case .none = state.finish(errors: []) else {
            Issue.record("held back while didStart is being delivered")
            return
        }
        guard case .deliver = state.notificationDelivered() else {
            Issue.record("delivered once didStart is")
            return
        }
    }

    /// An executing lifecycle, asking to be offered any finish if `offersHold` (a group).
    private func executing(offersHold: Bool) -> OperationLifecycle {
        var state = OperationLifecycle()
        if offersHold { state.offerHoldAfterExecution() }
        _ = state.enqueue(on: queue, ticket: 1)
        _ = state.start()
        _ = state.startDelivered()
        return state
    }

    @Test func afterExecuting_aFinishIsOfferedToBeHeld_onlyIfTheOperationAsked() {
        var plain = executing(offersHold: false)
        var group = executing(offersHold: true)

        guard case .deliver(_, _, mayBeHeld: false) = plain.finish(errors: []),
              case .deliver(_, _, mayBeHeld: true) = group.finish(errors: []) else {
            Issue.record("expected only the group's finish to be offered")
            return
        }
        #expect(group.offerToHoldFinish() == .offer)
    }

    /// A group's own finish (its last child's) is not offered to be held; a finish by hand that
    /// began before it takes the children's errors first.
    @Test func aGroupsOwnFinish_isNotOffered_andAFinishByHandRacingItKeepsTheChildrensErrors() {
        var ownFinish = executing(offersHold: true)
        guard case let .deliver(_, errors, mayBeHeld: false) = ownFinish.finish(afterChildren: [StubError("child")]) else {
            Issue.record("expected the group's own finish, not offered")
            return
        }
        #expect(errors.asStubErrors == [StubError("child")])
        #expect(ownFinish.offerToHoldFinish() == .deliver)

        var byHand = executing(offersHold: true)
        guard case .deliver(_, _, mayBeHeld: true) = byHand.finish(errors: [StubError("own")]) else {
            Issue.record("expected the finish by hand to be offered")
            return
        }
        guard case .none = byHand.finish(afterChildren: [StubError("child")]) else {
            Issue.record("the children's finish came second: no duplicate, no second delivery")
            return
        }
        #expect(byHand.offerToHoldFinish() == .offer)
        guard case let .deliver(_, delivered, _) = byHand.takeHeldFinish() else {
            Issue.record("expected the finish, declined by the group, to be delivered")
            return
        }
        #expect(delivered.asStubErrors == [StubError("child"), StubError("own")])
    }

    @Test func secondFinish_isReportedAsDuplicate_unlessCancelled() {
        var state = OperationLifecycle()
        _ = state.finish(errors: [])
        guard case .reportDuplicate = state.finish(errors: []) else {
            Issue.record("a second finish is a misuse")
            return
        }
        var cancelled = OperationLifecycle()
        _ = cancelled.cancel(error: nil)
        _ = cancelled.notificationDelivered()
        _ = cancelled.finish(errors: [])
        guard case .none = cancelled.finish(errors: []) else {
            Issue.record("a late finish after cancelling is expected, not reported")
            return
        }
    }

    @Test func completeFinish_letsGoOfWhatTheOperationOwned() {
        var state = OperationLifecycle()
        _ = state.addDependency(BlockOperation {})
        _ = state.addCondition(Condition(), satisfiedByConstruction: false)
        _ = state.finish(errors: [])
        var remains = state.completeFinish()
        #expect(state.phase == .finished)
        #expect(state.dependencies.isEmpty && state.conditions.isEmpty && state.observers.isEmpty && state.queue == nil)
        #expect(remains.released.count == 1)
        remains.released.removeAll()
    }

    /// A condition added while the operation is being added is left to the add, which attaches
    /// its dependency before it ends (as part of it); one added once it waits attaches its own.
    @Test func conditionAddedDuringTheAdd_isAttachedByTheAddBeforeItEnds() {
        var state = OperationLifecycle()
        _ = state.addDependency(BlockOperation {}) // keeps it waiting once the add ends
        _ = state.addCondition(Condition(), satisfiedByConstruction: false)
        _ = state.enqueue(on: queue, ticket: 1)
        guard case .added = state.addCondition(Condition(), satisfiedByConstruction: false) else {
            Issue.record("expected the add to attach it")
            return
        }
        guard case let .attachConditions(added, attached) = state.finishEnqueuing(attached: 1) else {
            Issue.record("expected the add to attach the condition added meanwhile")
            return
        }
        #expect(added.count == 1 && attached == 2)
        #expect(state.phase == .enqueuing, "still being added until the dependencies are attached")
        guard case .advance(.none) = state.finishEnqueuing(attached: attached) else {
            Issue.record("expected the add to end, waiting for its dependency")
            return
        }
        guard case .addedWhileWaiting = state.addCondition(Condition(), satisfiedByConstruction: false) else {
            Issue.record("expected the one who adds it to attach it")
            return
        }
    }

    /// A condition added while the operation waits holds it until its dependency is attached:
    /// its last dependency finishing meanwhile does not let it on to evaluate the condition.
    @Test func conditionAddedWhileWaiting_holdsTheOperationUntilItsDependencyIsAttached() {
        // Given an operation waiting on a queue for one dependency
        var state = OperationLifecycle()
        let dependency = BlockOperation {}
        _ = state.addDependency(dependency)
        _ = state.enqueue(on: queue, ticket: 1)
        _ = state.finishEnqueuing(attached: 0)

        // When a condition is added, and the dependency finishes before the condition's is attached
        guard case let .addedWhileWaiting(attachment) = state.addCondition(Condition(), satisfiedByConstruction: false) else {
            Issue.record("expected the condition's dependency to be attached by the one who adds it")
            return
        }
        #expect(attachment.queue === queue && attachment.barriers.isEmpty)
        guard case .advance(.none) = state.dependencyFinished(ObjectIdentifier(dependency)) else {
            Issue.record("expected it to wait for the condition's dependency to be attached")
            return
        }
        #expect(state.phase == .pending)

        // Then it goes on to its conditions once the dependency is attached
        guard case let .advance(.evaluateConditions(conditions, _, ticket)) = state.conditionDependencyAttached() else {
            Issue.record("expected it to evaluate its conditions")
            return
        }
        #expect(conditions.count == 1 && ticket == 1)
    }

    /// A dependency conditions bring is added once, however many bring it, until it is removed;
    /// the lifecycle holds it until it finishes after executing, then lets go of it.
    @Test func conditionDependency_isAddedOnce_untilRemoved_andLetGoOfAtTheFinish() {
        // Given a lifecycle whose condition brought a dependency
        var state = OperationLifecycle()
        let dependency = BlockOperation {}
        #expect(state.addConditionDependency(dependency).kind == .added)

        // Then another condition bringing it leaves it, until it is removed
        #expect(state.addConditionDependency(dependency).kind == .broughtBefore)
        #expect(state.addConditionDependency(BlockOperation {}).kind == .added)
        _ = state.removeDependency(dependency)
        #expect(state.addConditionDependency(dependency).kind == .added)

        // And one the user added is there already, but not brought before
        let usersOwn = BlockOperation {}
        _ = state.addDependency(usersOwn)
        #expect(state.addConditionDependency(usersOwn).kind == .alreadyThere)

        // And once it finishes after executing, it lets go of all of them, with its own
        _ = state.enqueue(on: AsyncOperationQueue(), ticket: 1)
        _ = state.finishEnqueuing(attached: 0)
        var lastFinished = OperationLifecycle.DependencyAction.none
        for finished in state.dependencies {
            lastFinished = state.dependencyFinished(ObjectIdentifier(finished))
        }
        guard case .advance(.proceedWithoutConditions) = lastFinished else {
            Issue.record("expected it to go on once its dependencies finished, not \(state.phase)")
            return
        }
        _ = state.proceedWithoutCategories()
        _ = state.start()
        _ = state.startDelivered()
        _ = state.finish(errors: [])
        let remains = state.completeFinish()
        #expect(remains.released.count == 6, "the three it depends on, each also as conditions brought it")
        #expect(state.takeDependencies().isEmpty)
    }

    /// A lifecycle waiting on a queue, whose condition brought `dependency`, with
    /// `conditionsAttaching` conditions added since whose dependencies are being attached; `nil`
    /// (with an issue recorded) if a step went otherwise.
    private func waitingLifecycle(bringing dependency: Operation, conditionsAttaching: Int) -> OperationLifecycle? {
        var state = OperationLifecycle()
        guard state.addConditionDependency(dependency).kind == .added else {
            Issue.record("expected the dependency to be added")
            return nil
        }
        _ = state.enqueue(on: AsyncOperationQueue(), ticket: 1)
        _ = state.finishEnqueuing(attached: 0)
        for _ in 0..<conditionsAttaching {
            guard case .addedWhileWaiting = state.addCondition(Condition(), satisfiedByConstruction: false) else {
                Issue.record("expected each condition's dependency to be attached by the one who adds it")
                return nil
            }
        }
        return state
    }

    /// An operation cancelled while a condition added as it waited is attaching its dependency
    /// keeps what its conditions brought until that attachment ends: that condition may be
    /// bringing one of them again, and must find it brought before. Then it lets go of them: a
    /// dependency that waits for the operation (which Foundation keeps for good) would otherwise
    /// keep both alive for ever.
    @Test func conditionDependency_outlivesAFinishDuringAnAttachment_untilTheAttachmentEnds() {
        // Given a waiting operation whose condition brought a dependency, and a condition added
        // since, whose dependency is being attached
        let dependency = BlockOperation {}
        guard var state = waitingLifecycle(bringing: dependency, conditionsAttaching: 1) else { return }

        // When it is cancelled, and its finish completes
        _ = state.cancel(error: nil)
        _ = state.notificationDelivered()
        let remains = state.completeFinish()
        #expect(state.phase == .finished)

        // Then the attaching condition finds the dependency brought before, and records what it
        // brings first
        #expect(remains.released.count == 1, "the dependency, as one the operation waited for")
        #expect(state.addConditionDependency(dependency).kind == .broughtBefore)
        let another = BlockOperation {}
        #expect(state.addConditionDependency(another).kind == .tooLate)
        #expect(state.addConditionDependency(another).kind == .broughtBefore)

        // And the end of the attachment lets go of both
        guard case let .release(released) = state.conditionDependencyAttached() else {
            Issue.record("expected the end of the attachment to let go of what the conditions brought")
            return
        }
        #expect(released.count == 2)
        #expect(state.addConditionDependency(dependency).kind == .tooLate)
        #expect(state.takeDependencies().isEmpty)
    }

    /// Removing the dependency that closed a cycle undoes the cycle; removing another leaves it.
    @Test func removingTheDependencyThatClosedACycle_undoesIt() {
        // Given an operation two of whose dependencies closed a cycle
        var state = OperationLifecycle()
        let first = BlockOperation {}
        let second = BlockOperation {}
        for (dependency, name) in [(first, "first"), (second, "second")] {
            _ = state.addDependency(dependency)
            _ = state.recordCycle(through: ObjectIdentifier(dependency), name: name, wasCounted: true)
        }
        let unrelated = BlockOperation {}
        _ = state.addDependency(unrelated)
        #expect(state.cycleDependencyName == "second")

        // When they are removed, one after the other, after one that closed no cycle
        _ = state.removeDependency(unrelated)
        #expect(state.cycleDependencyName == "second", "removing another leaves the cycle")
        _ = state.removeDependency(second)
        #expect(state.cycleDependencyName == "first", "the other still closes a cycle")
        _ = state.removeDependency(first)

        // Then no cycle is left
        #expect(state.cycleDependencyName == nil)
    }

    /// A plain dependency that closed a cycle is no longer counted, but its watcher still
    /// listens: removing it hands the watcher out to be stopped, and keeps none.
    @Test func removingAPlainDependencyThatClosedACycle_handsOutItsWatcher() {
        // Given an operation whose plain dependency, watched, closed a cycle
        var state = OperationLifecycle()
        let dependency = BlockOperation {}
        let watcher = DependencyWatcher.Subscription(watched: ObjectIdentifier(dependency), key: 1, watcher: DependencyWatcher())
        _ = state.addDependency(dependency)
        _ = state.watch(ObjectIdentifier(dependency), with: watcher)
        _ = state.recordCycle(through: ObjectIdentifier(dependency), name: "plain", wasCounted: true)

        // When it is removed
        let removal = state.removeDependency(dependency)

        // Then its watcher is handed out, and none is kept
        switch removal {
        case let .removed(stopWatching, _):
            #expect(stopWatching === watcher)
        }
        #expect(state.dependencyWatchers.isEmpty)
    }

    /// A plain dependency removed (on another thread) between its add and its watcher's keeping
    /// is no longer waited for: the watcher is handed back to be stopped, and none is kept.
    @Test func aWatcherForADependencyRemovedMeanwhile_isHandedBack() {
        // Given a plain dependency added, then removed before its watcher is kept
        var state = OperationLifecycle()
        let dependency = BlockOperation {}
        let watcher = DependencyWatcher.Subscription(watched: ObjectIdentifier(dependency), key: 1, watcher: DependencyWatcher())
        _ = state.addDependency(dependency)
        _ = state.removeDependency(dependency)

        // When its watcher is to be kept
        let keeping = state.watch(ObjectIdentifier(dependency), with: watcher)

        // Then it is handed back to be stopped, and none is kept
        guard case let .stop(handedBack) = keeping else {
            Issue.record("expected the watcher of a removed dependency to be handed back")
            return
        }
        #expect(handedBack === watcher)
        #expect(state.dependencyWatchers.isEmpty)

        // And a dependency still waited for keeps its watcher
        let waitedFor = BlockOperation {}
        _ = state.addDependency(waitedFor)
        guard case .kept = state.watch(ObjectIdentifier(waitedFor), with: watcher) else {
            Issue.record("expected the watcher of a dependency waited for to be kept")
            return
        }
        #expect(state.dependencyWatchers.count == 1)
    }

    /// An operation made to depend on itself closes a cycle while it takes dependencies (once,
    /// however often), and records nothing once it no longer does.
    @Test func selfDependency_closesACycleUntilTheOperationStopsTakingDependencies() {
        let id = ObjectIdentifier(BlockOperation {})
        var waiting = OperationLifecycle()
        guard case .cycleRecorded(.none) = waiting.addSelfDependency(id, name: "itself") else {
            Issue.record("expected the cycle to be recorded, nothing to do before the add")
            return
        }
        #expect(waiting.cycleDependencyName == "itself")
        guard case .alreadyThere = waiting.addSelfDependency(id, name: "itself") else {
            Issue.record("expected a second self-dependency to change nothing, as any dependency added twice")
            return
        }

        var pastWaiting = OperationLifecycle()
        guard case .handOffNow = pastWaiting.enqueue(on: AsyncOperationQueue(), ticket: 1) else {
            Issue.record("expected an operation that waits for nothing to be handed off at once")
            return
        }
        #expect(!pastWaiting.acceptsConfiguration)
        guard case .tooLate = pastWaiting.addSelfDependency(id, name: "itself") else {
            Issue.record("expected an operation past waiting for its dependencies to ignore it")
            return
        }
        #expect(pastWaiting.cycleDependencyName == nil)
    }

    /// A dependency removed on another thread between its add and the cycle search is not
    /// recorded as closing a cycle: none is left, and its identity is no longer held.
    @Test func aCycleFoundThroughADependencyRemovedMeanwhile_isNotRecorded() {
        var state = OperationLifecycle()
        let dependency = BlockOperation {}
        _ = state.addDependency(dependency)
        _ = state.removeDependency(dependency)
        guard case .dependencyRemoved = state.recordCycle(through: ObjectIdentifier(dependency), name: "gone", wasCounted: true) else {
            Issue.record("expected the removal to be seen")
            return
        }
        #expect(state.cycleDependencyName == nil)
    }

    /// Two conditions added while the operation waited are attaching when it is cancelled: what
    /// the conditions brought is kept until the second attachment ends, not the first.
    @Test func conditionDependency_outlivesAFinishUntilTheLastOfTwoAttachmentsEnds() {
        // Given a waiting operation whose condition brought a dependency, and two conditions
        // added since, both attaching
        let dependency = BlockOperation {}
        guard var state = waitingLifecycle(bringing: dependency, conditionsAttaching: 2) else { return }

        // When it is cancelled, its finish completes, and the first attachment ends
        _ = state.cancel(error: nil)
        _ = state.notificationDelivered()
        _ = state.completeFinish()
        guard case .advance(.none) = state.conditionDependencyAttached() else {
            Issue.record("the first attachment to end must let go of nothing: the second may still bring the dependency")
            return
        }

        // Then the second attachment finds the dependency brought before, and its end lets go of it
        #expect(state.addConditionDependency(dependency).kind == .broughtBefore)
        guard case let .release(released) = state.conditionDependencyAttached() else {
            Issue.record("expected the last attachment to let go of what the conditions brought")
            return
        }
        #expect(released.count == 1)
    }

    /// An operation finished while it is being added (from a condition's `dependency(for:)`,
    /// say) keeps what its conditions brought until the add ends, then lets go of it.
    @Test func conditionDependency_outlivesAFinishDuringTheAdd_untilTheAddEnds() {
        // Given an operation being added, whose condition brought a dependency
        var state = OperationLifecycle()
        let dependency = BlockOperation {}
        _ = state.addCondition(Condition(), satisfiedByConstruction: false)
        _ = state.enqueue(on: AsyncOperationQueue(), ticket: 1)
        #expect(state.addConditionDependency(dependency).kind == .added)

        // When it finishes during the add
        _ = state.finish(errors: [])
        let remains = state.completeFinish()
        #expect(remains.released.count == 1, "the dependency, as one the operation waited for")
        #expect(state.addConditionDependency(dependency).kind == .broughtBefore)

        // Then the end of the add lets go of it
        guard case let .finishedWhileAdded(_, released) = state.finishEnqueuing(attached: state.conditions.count) else {
            Issue.record("expected the add to end as a finished operation's")
            return
        }
        #expect(released.count == 1)
        #expect(state.takeDependencies().isEmpty)
    }

    /// An operation cancelled while nothing is being attached lets go of what its conditions
    /// brought at its finish: a dependency that waits for the operation (which Foundation keeps
    /// for good) would otherwise keep both alive for ever.
    @Test func conditionDependency_isLetGoOfAtAFinishWithoutAttachment() {
        // Given a waiting operation whose condition brought a dependency
        var state = OperationLifecycle()
        let dependency = BlockOperation {}
        _ = state.addConditionDependency(dependency)
        _ = state.enqueue(on: AsyncOperationQueue(), ticket: 1)
        _ = state.finishEnqueuing(attached: 0)

        // When it is cancelled, and its finish completes
        _ = state.cancel(error: nil)
        _ = state.notificationDelivered()
        let remains = state.completeFinish()

        // Then it holds nothing more
        #expect(remains.released.count == 2, "the dependency, as one waited for and as one brought")
        #expect(state.takeDependencies().isEmpty)
    }

    /// Every operation carries a lifecycle (a chain of a million of them included), and its size
    /// depends on the order its fields are declared in: a field moved carelessly adds padding.
    @Test func theLifecycle_staysSmall() {
        guard MemoryLayout<Int>.size == 8 else { return } // the sizes below are those of 64-bit platforms
        #expect(MemoryLayout<OperationLifecycle.Placement>.size == 18)
        #expect(MemoryLayout<OperationLifecycle.ConditionEvaluation>.size == 8)
        #expect(MemoryLayout<OperationLifecycle>.size <= 256)
    }

    /// Taking the turn and beginning the evaluation are one step: the conditions are handed out
    /// once, and an operation that finished before it asked gives the turn back instead.
    @Test func turnTakenToEvaluate_beginsTheEvaluation_orGivesBackTheTurnOfAFinishedOperation() {
        var state = OperationLifecycle()
        _ = state.addCondition(Condition(), satisfiedByConstruction: false)
        _ = state.enqueue(on: queue, ticket: 7)
        _ = state.finishEnqueuing(attached: state.conditions.count)
        var finished = state
        guard case let .evaluate(.handOut(awaited)) = state.turnTakenToEvaluate(categories: []) else {
            Issue.record("expected the turn taken and the condition handed out")
            return
        }
        #expect(awaited.contains(0))
        guard case .evaluate(.alreadyHandedOut) = state.turnTakenToEvaluate(categories: []) else {
            Issue.record("the conditions are handed out once")
            return
        }

        _ = finished.cancel(error: nil)
        _ = finished.notificationDelivered() // the cancel's notification: the finish goes on
        _ = finished.completeFinish()
        #expect(finished.phase == .finished)
        guard case .giveBack(ticket: 7) = finished.turnTakenToEvaluate(categories: []) else {
            Issue.record("a finished operation gives its turn back")
            return
        }
    }

    /// Adding a dependency hands out, from the same step, what waits for the operation: only
    /// if one of them is alive can the new dependency lead back to it.
    @Test func addDependency_handsOutWhatWaitsForThisOne() {
        var state = OperationLifecycle()
        let first = BlockOperation {}
        guard case let .added(dependents) = state.addDependency(first), dependents.isEmpty else {
            Issue.record("nothing waits for it yet")
            return
        }
        let dependent = AsyncBlockOperation {}
        _ = state.addDependent(dependent)
        withExtendedLifetime(dependent) {
            guard case let .added(dependents) = state.addDependency(BlockOperation {}), dependents.first?.object === dependent else {
                Issue.record("a live dependent waits for it")
                return
            }
            #expect(state.addDependency(first).kind == .alreadyThere)
        }
    }

    /// The plain operations an operation reaches are told to each dependent as it registers, or,
    /// once it comes to reach more, returned with the dependents to tell; a reach changed since
    /// the caller read it is not overwritten, and a finishing operation widens nothing.
    @Test func widenReach_tellsDependents_unlessTheReachChangedMeanwhile() {
        // Given a lifecycle with a dependent, reaching no plain operation
        var state = OperationLifecycle()
        let early = AsyncBlockOperation {}
        guard case .willTell(reaching: nil) = state.addDependent(early) else {
            Issue.record("it reaches nothing yet")
            return
        }

        // When it comes to reach a plain operation
        let plain = BlockOperation {}
        let reached = PlainReach(plain)
        guard case let .widened(told) = state.widenReach(to: reached, from: nil) else {
            Issue.record("expected the reach to widen")
            return
        }

        // Then the dependent is returned to be told, and a later dependent reads it as it registers
        #expect(told.count == 1 && told.first?.object === early)
        let late = AsyncBlockOperation {}
        guard case let .willTell(reaching?) = state.addDependent(late) else {
            Issue.record("a later dependent reads what it reaches")
            return
        }
        #expect(reaching === reached)
        withExtendedLifetime(early) {}

        // And a widening built from what it reached before is refused
        guard case .changedMeanwhile = state.widenReach(to: PlainReach(BlockOperation {}), from: nil) else {
            Issue.record("expected a widening from an old reach to be refused")
            return
        }

        // And a finishing one widens nothing
        _ = state.finish(errors: [])
        guard case .finishing = state.widenReach(to: PlainReach(plain), from: reached) else {
            Issue.record("expected a finishing operation to widen nothing")
            return
        }
    }

    /// A reach names up to `PlainReach.capacity` plain operations, each once; past that it only
    /// says there are more, and a search covers the whole graph.
    @Test func plainReach_namesEachOperationOnce_upToItsCapacity() {
        // Given a reach of as many plain operations as it can name, each added once
        let operations = (0...PlainReach.capacity).map { _ in BlockOperation {} }
        var reach = PlainReach(operations[0])
        #expect(reach.adding(PlainReach(operations[0])) == nil)
        for operation in operations[1..<PlainReach.capacity] {
            reach = reach.adding(PlainReach(operation)) ?? reach
        }
        #expect(reach.operations.count == PlainReach.capacity && !reach.isUnbounded)

        // When one more is added, or an unbounded reach
        let past = reach.adding(PlainReach(operations[PlainReach.capacity]))

        // Then it only says there are more, and nothing widens it further
        #expect(past?.isUnbounded == true)
        #expect(past?.adding(reach) == nil, "nothing widens an unbounded reach")
        #expect(reach.adding(.unbounded)?.isUnbounded == true)
    }

    /// Plain operations that are gone wait for nothing: a reach drops them, and they count toward
    /// no capacity.
    @Test func plainReach_dropsOperationsThatAreGone() {
        // Given a reach full of plain operations that are gone
        var reach: PlainReach
        do {
            let gone = (0..<PlainReach.capacity).map { _ in BlockOperation {} }
            reach = PlainReach(gone[0])
            for operation in gone.dropFirst() {
                reach = reach.adding(PlainReach(operation)) ?? reach
            }
            #expect(reach.operations.count == PlainReach.capacity)
        }
        #expect(reach.operations.allSatisfy { $0.object == nil })

        // When a live one is added
        let live = BlockOperation {}
        let widened = reach.adding(PlainReach(live))

        // Then it names that one alone
        #expect(widened?.isUnbounded == false)
        #expect(widened?.operations.compactMap(\.object) == [live])
    }
}
