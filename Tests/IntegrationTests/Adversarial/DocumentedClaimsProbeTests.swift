import Conditions
import Foundation
import Observers
import Operations
import Testing
import TestSupport

// Round 13 of the adversarial probes: the DocC articles ConditionsAndMutualExclusion,
// ObserversAndTimeouts, Composition, GettingStarted and Migration, taken sentence by sentence,
// each behavioural claim turned into a probe, preferably one that combines features (a condition
// with a category, a timeout on a group's child or on a retry, a negated or silent condition
// around one with a dependency or a category, composites holding categories). Each probe quotes
// the sentence it checks. Waits for what must happen are bounded and generous; the few short
// waits check that something does not happen, and say so.
// One probe failed as written and is kept as a known issue: a group's child waits for ever behind
// an earlier operation that needs a category held by another group, when that other group waits
// for this one through a dependency rather than in a category's line (the article names both).

/// How long a probe watches for something that must not happen. Short on purpose: such a check
/// can only show the absence for this long, and a longer wait would slow the suite for nothing.
private let briefly: TimeInterval = 0.2

/// A condition that implements only `evaluate(for:completion:)`, and releases its completion
/// handler without calling it.
private struct DropsItsAnswer: OperationCondition {
    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {}
}

/// An object whose release a probe watches (captured by a closure it gives the library).
private final class Token: Sendable {}

/// An error whose description is the doc's example reason.
private struct Offline: Error, CustomStringConvertible {
    var description: String { "offline" }
}

/// Whether `error` is `categoryHeldByEnclosingGroup` for `category`.
private func isHeldByEnclosingGroup(_ error: any Error, _ category: String) -> Bool {
    guard case let .categoryHeldByEnclosingGroup(held, _)? = error as? AsyncOperationError else { return false }
    return held == category
}

/// An operation that counts its executions in `executed`, in the category `category`, if any.
private func counting(_ executed: Counter, name: String = uniqueName("counted"), category: String? = nil) -> AsyncBlockOperation {
    let operation = AsyncBlockOperation { _ = executed.increment() }
    operation.name = name
    if let category {
        operation.addCondition(ExclusiveCategory(category))
    }
    return operation
}

/// An operation that records `label` in `order` as it executes, in the categories `categories`.
private func recording(_ label: String, in order: Recorder<String>, categories: [String] = []) -> AsyncBlockOperation {
    let operation = AsyncBlockOperation { order.append(label) }
    operation.name = uniqueName(label)
    for category in categories {
        operation.addCondition(ExclusiveCategory(category))
    }
    return operation
}

/// Whether `operation` waits for mutually exclusive categories, as its snapshot says.
private func waitsForCategories(_ operation: AsyncOperation) -> Bool {
    operation.debugDescription.contains("waiting for categories")
}

@Suite
struct DocumentedClaimsProbeTests {
    // MARK: - Conditions

    // Conditions' NegatedCondition: "The inner condition's dependency is kept; its mutually
    // exclusive categories are not (a negated exclusion makes no sense)."
    @Test
    func givenANegatedConditionWhoseInnerFailsAndNeedsAHeldCategory_whenAdded_thenTheOperationExecutesWhileTheHolderStillRuns() {
        let (x, held, holderName, holder, queue) = startHoldingACategory()
        let inner = StubCondition(name: "NeedsX", categories: [x]) { _, completion in
            completion(.failed(StubError("inner")))
        }
        let executed = Counter()
        let operation = counting(executed)
        operation.addCondition(NegatedCondition(inner))

        queue.addOperation(operation)

        #expect(waitUntilFinished([operation]))
        #expect(!holder.isFinished, "the holder was expected to still run")
        #expect(executed.current == 1)
        #expect(operation.errors.isEmpty, "\(operation.errors)")
        held.finish(holderName)
    }

    // ConditionsAndMutualExclusion.md: "A condition that releases its completion handler without
    // calling it fails the operation with conditionNeverAnswered(condition:)"; NegatedCondition's
    // name is "Not<inner name>".
    @Test
    func givenANegatedConditionWhoseInnerDropsItsCompletion_whenEvaluated_thenTheOperationFailsWithConditionNeverAnswered_namingTheNegation() {
        let executed = Counter()
        let operation = counting(executed)
        operation.addCondition(NegatedCondition(DropsItsAnswer()))

        AsyncOperationQueue().addOperation(operation)

        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 0)
        #expect(operation.errors.asOperationErrors == [.conditionNeverAnswered(condition: "Not<DropsItsAnswer>")], "\(operation.errors)")
    }

    // ConditionsAndMutualExclusion.md: "`NegatedCondition(condition)` | the wrapped condition
    // fails"; "`NoCancelledDependencies()` | none of its dependencies was cancelled".
    @Test
    func givenNegatedNoCancelledDependencies_whenTheDependencyWasCancelled_thenTheOperationExecutes_andWhenItWasNot_thenItFails() {
        let queue = AsyncOperationQueue()
        let cancelledDependency = AsyncBlockOperation {}
        cancelledDependency.cancel()
        let ranDependency = AsyncBlockOperation {}
        let executed = Counter()
        let afterCancelled = counting(executed)
        afterCancelled.addDependency(cancelledDependency)
        afterCancelled.addCondition(NegatedCondition(NoCancelledDependencies()))
        let afterRan = counting(executed)
        afterRan.addDependency(ranDependency)
        afterRan.addCondition(NegatedCondition(NoCancelledDependencies()))

        queue.addOperations([cancelledDependency, ranDependency, afterCancelled, afterRan], waitUntilFinished: false)

        #expect(waitUntilFinished([afterCancelled, afterRan]))
        #expect(afterCancelled.errors.isEmpty, "\(afterCancelled.errors)")
        #expect(executed.current == 1)
        #expect(afterRan.errors.compactMap { $0 as? ConditionError } == [.negatedConditionSatisfied("NoCancelledDependencies")], "\(afterRan.errors)")
    }

    // GettingStarted.md: "2. evaluates its conditions, and if any fails, finishes it without
    // executing ... 3. acquires its mutually exclusive categories". BlockCondition: "when it
    // throws, the thrown error is the failure."
    @Test
    func givenAnOperationInAHeldCategoryWithAThrowingBlockCondition_whenAdded_thenItFinishesWithTheThrownErrorAlone_whileTheHolderStillRuns() {
        let (x, held, holderName, holder, queue) = startHoldingACategory()
        let error = StubError("thrown")
        let executed = Counter()
        let operation = counting(executed, category: x)
        operation.addCondition(BlockCondition { () throws -> Bool in throw error })

        queue.addOperation(operation)

        #expect(waitUntilFinished([operation]))
        #expect(!holder.isFinished, "the holder was expected to still run")
        #expect(executed.current == 0)
        #expect(operation.errors.asStubErrors == [error])
        held.finish(holderName)
    }

    // GettingStarted.md: "1. waits for the operation's dependencies ... 2. evaluates its
    // conditions ... 3. acquires its mutually exclusive categories ... 4. only then hands it to
    // Foundation's queue".
    @Test
    func givenAnOperationInAHeldCategoryWithACondition_whenAdded_thenTheConditionIsEvaluatedWhileTheCategoryIsHeld_andItExecutesOnlyOnceFree() {
        let (x, held, holderName, holder, queue) = startHoldingACategory()
        let evaluated = Counter()
        let executed = Counter()
        let operation = counting(executed, category: x)
        operation.addCondition(StubCondition(name: "Recorded") { _, completion in
            _ = evaluated.increment()
            completion(.satisfied)
        })

        queue.addOperation(operation)

        #expect(waitUntil { evaluated.current == 1 })
        #expect(!holder.isFinished && executed.current == 0)
        held.finish(holderName)
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 1 && evaluated.current == 1)
    }

    // Migration.md: the `LoggedIn` condition with `mutuallyExclusiveCategories` and
    // `dependency(for:)`; ConditionsAndMutualExclusion.md: "A condition can also return an
    // operation from `dependency(for:)`, which the queue runs first and waits for" ... "An
    // operation takes its place in its categories' lines once it is otherwise free to run: its
    // dependencies have finished, its conditions have passed".
    @Test
    func givenAConditionWithACategoryAndADependency_whenTheCategoryIsHeldElsewhere_thenTheDependencyRunsMeanwhile_andTheOperationWaitsForTheCategory() {
        let (x, held, holderName, holder, queue) = startHoldingACategory()
        let dependencyRan = Counter()
        let dependency = AsyncBlockOperation { _ = dependencyRan.increment() }
        let executed = Counter()
        let operation = counting(executed)
        operation.addCondition(StubCondition(name: "LoggedIn", categories: [x], dependency: { _ in dependency }) { _, completion in
            completion(dependencyRan.current == 1 ? .satisfied : .failed(StubError("not logged in")))
        })

        queue.addOperation(operation)

        #expect(waitUntilFinished([dependency]))
        #expect(!holder.isFinished && executed.current == 0)
        held.finish(holderName)
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 1)
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    // SilentCondition: "Evaluates a condition without producing its dependency"; NegatedCondition:
    // "satisfied when the inner condition fails".
    @Test
    func givenASilentNegationOfAFailingConditionWithADependency_whenAdded_thenTheDependencyNeverRuns_andTheOperationExecutes() {
        let dependencyRan = Counter()
        let dependency = AsyncBlockOperation { _ = dependencyRan.increment() }
        let inner = StubCondition(name: "Inner", dependency: { _ in dependency }) { _, completion in
            completion(.failed(StubError("inner")))
        }
        let executed = Counter()
        let operation = counting(executed)
        operation.addCondition(SilentCondition(NegatedCondition(inner)))

        AsyncOperationQueue().addOperation(operation)

        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 1)
        #expect(operation.errors.isEmpty, "\(operation.errors)")
        #expect(dependencyRan.current == 0 && !dependency.isFinished)
    }

    // OperationCondition.dependency(for:): "A dependency is not added again if ... another
    // condition of `operation` brought it (added with this one or before it), so one dependency may
    // serve several conditions of an operation"; NegatedCondition: "The inner condition's
    // dependency is kept".
    @Test
    func givenAConditionAndANegatedOneBringingTheSameDependency_whenAdded_thenItRunsOnce_beforeBothAreEvaluated_andTheOperationExecutes() {
        let dependencyRan = Counter()
        let dependency = AsyncBlockOperation { _ = dependencyRan.increment() }
        let sawItFinished = Recorder<Bool>()
        let satisfied = StubCondition(name: "Plain", dependency: { _ in dependency }) { _, completion in
            sawItFinished.append(dependency.isFinished)
            completion(.satisfied)
        }
        let failing = StubCondition(name: "Failing", dependency: { _ in dependency }) { _, completion in
            sawItFinished.append(dependency.isFinished)
            completion(.failed(StubError("inner")))
        }
        let executed = Counter()
        let operation = counting(executed)
        operation.addCondition(satisfied)
        operation.addCondition(NegatedCondition(failing))

        AsyncOperationQueue().addOperation(operation)

        #expect(waitUntilFinished([operation, dependency]))
        #expect(dependencyRan.current == 1)
        #expect(sawItFinished.all == [true, true])
        #expect(executed.current == 1)
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    // AsyncOperation.addCondition: "Add conditions before the operation is added to a queue (or
    // while it still waits for its dependencies) ... A condition added while the operation waits
    // brings its dependency at once"; NegatedCondition: "The inner condition's dependency is kept".
    @Test
    func givenAnOperationWaitingForADependency_whenANegatedConditionWithAFailingDependencyIsAdded_thenThatDependencyRuns_andTheOperationExecutesAfterBoth() {
        let held = HeldOperations()
        let firstName = uniqueName("first")
        let first = held.make(firstName)
        let brought = AsyncBlockOperation { throw StubError("brought fails") }
        let executed = Counter()
        let operation = counting(executed)
        operation.addDependency(first)
        AsyncOperationQueue().addOperations([first, operation], waitUntilFinished: false)
        #expect(held.waitUntilStarted(firstName))

        operation.addCondition(NegatedCondition(StubCondition(name: "BroughtSucceeded", dependency: { _ in brought }) { _, completion in
            completion(brought.isFailed ? .failed(StubError("brought failed")) : .satisfied)
        }))

        #expect(waitUntilFinished([brought]))
        #expect(executed.current == 0)
        held.finish(firstName)
        #expect(waitUntilFinished([operation]))
        #expect(executed.current == 1)
        #expect(operation.errors.isEmpty, "\(operation.errors)")
    }

    // MARK: - Mutual exclusion

    // ConditionsAndMutualExclusion.md: "An operation takes its place in its categories' lines once
    // it is otherwise free to run ... Among those, a category goes in the order the operations were
    // added, on every queue." ... "Everyone else gets the category in add order."
    @Test
    func givenAnEarlierOperationWaitingForXAndY_whenALaterOneNeedsOnlyTheFreeY_thenTheLaterOneWaitsBehindIt() {
        let (x, held, holderName, _, _) = startHoldingACategory()
        let y = uniqueName("Y")
        let order = Recorder<String>()
        let both = AsyncBlockOperation { order.append("both") }
        both.name = uniqueName("both")
        both.addCondition(ExclusiveCategory(x))
        both.addCondition(ExclusiveCategory(y))
        let onlyY = AsyncBlockOperation { order.append("onlyY") }
        onlyY.name = uniqueName("onlyY")
        onlyY.addCondition(ExclusiveCategory(y))
        let queue = AsyncOperationQueue()

        queue.addOperation(both)
        queue.addOperation(onlyY)

        // Watching briefly for a start that must not come: Y's line has `both` first.
        #expect(!waitUntil(timeout: briefly) { order.count > 0 }, "\(order.all)")
        held.finish(holderName)
        #expect(waitUntilFinished([both, onlyY]))
        #expect(order.all == ["both", "onlyY"])
    }

    // ConditionsAndMutualExclusion.md: "a group's child may go ahead of an operation added earlier
    // that cannot run before the group finishes anyway: one that needs a category the group (or one
    // of its children) holds".
    @Test
    func givenAnEarlierOperationWaitingForTheGroupsCategoryAndY_whenTheGroupsChildAsksForY_thenTheChildGoesAhead_andTheEarlierOneRunsOnceTheGroupFinished() {
        let x = uniqueName("X")
        let y = uniqueName("Y")
        let held = HeldOperations()
        let order = Recorder<String>()
        let gateName = uniqueName("dependency")
        let gate = held.make(gateName)
        let earlier = recording("earlier", in: order, categories: [x, y])
        earlier.addDependency(gate)
        AsyncOperationQueue().addOperations([gate, earlier], waitUntilFinished: false)
        let childGateName = uniqueName("childGate")
        let childGate = held.make(childGateName)
        let child = recording("child", in: order, categories: [y])
        child.addDependency(childGate)
        let group = GroupOperation(operations: [childGate, child])
        group.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted(childGateName))

        held.finish(gateName)
        #expect(waitUntil { waitsForCategories(earlier) }, "\(earlier.debugDescription)")
        held.finish(childGateName)

        #expect(waitUntilFinished([group, earlier]))
        #expect(order.all == ["child", "earlier"])
        [group, earlier].forEach { $0.cancel() } // ends a deadlock, if any, so the run goes on
    }

    // ConditionsAndMutualExclusion.md: "a group's child may go ahead of an operation added earlier
    // that cannot run before the group finishes anyway: ... one that stands in another category's
    // line behind such an operation".
    @Test
    func givenAnEarlierOperationNeedingYStandingInLineBehindOneThatNeedsTheGroupsCategory_whenTheGroupsChildAsksForY_thenTheChildGoesAhead() {
        let x = uniqueName("X")
        let w = uniqueName("W")
        let y = uniqueName("Y")
        let held = HeldOperations()
        let order = Recorder<String>()
        let gateName = uniqueName("dependency")
        let gate = held.make(gateName)
        let first = recording("first", in: order, categories: [x, w])
        first.addDependency(gate)
        let second = recording("second", in: order, categories: [w, y])
        second.addDependency(gate)
        AsyncOperationQueue().addOperations([gate, first, second], waitUntilFinished: false)
        let childGateName = uniqueName("childGate")
        let childGate = held.make(childGateName)
        let child = recording("child", in: order, categories: [y])
        child.addDependency(childGate)
        let group = GroupOperation(operations: [childGate, child])
        group.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted(childGateName))

        held.finish(gateName)
        #expect(waitUntil { waitsForCategories(first) && waitsForCategories(second) }, "\(first.debugDescription) | \(second.debugDescription)")
        held.finish(childGateName)

        #expect(waitUntilFinished([group, first, second]))
        #expect(order.all == ["child", "first", "second"])
        [group, first, second].forEach { $0.cancel() } // ends a deadlock, if any, so the run goes on
    }

    // ConditionsAndMutualExclusion.md: "a group's child may go ahead of an operation added earlier
    // that cannot run before the group finishes anyway: one that needs a category the group (or one
    // of its children) holds".
    @Test
    func givenAnEarlierOperationWaitingForACategoryASiblingHolds_whenTheGroupsOtherChildAsksForY_thenThatChildGoesAheadWhileTheSiblingStillRuns() {
        let w = uniqueName("W")
        let y = uniqueName("Y")
        let held = HeldOperations()
        let order = Recorder<String>()
        let gateName = uniqueName("dependency")
        let gate = held.make(gateName)
        let earlier = recording("earlier", in: order, categories: [w, y])
        earlier.addDependency(gate)
        AsyncOperationQueue().addOperations([gate, earlier], waitUntilFinished: false)
        let siblingName = uniqueName("sibling")
        let sibling = held.make(siblingName)
        sibling.addCondition(ExclusiveCategory(w))
        let childGateName = uniqueName("childGate")
        let childGate = held.make(childGateName)
        let child = recording("child", in: order, categories: [y])
        child.addDependency(childGate)
        let group = GroupOperation(operations: [sibling, childGate, child])
        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted(siblingName) && held.waitUntilStarted(childGateName))
        held.finish(gateName)
        #expect(waitUntil { waitsForCategories(earlier) }, "\(earlier.debugDescription)")

        held.finish(childGateName)

        #expect(waitUntilFinished([child]))
        #expect(order.all == ["child"])
        held.finish(siblingName)
        #expect(waitUntilFinished([group, earlier]))
        #expect(order.all == ["child", "earlier"])
        [group, earlier].forEach { $0.cancel() } // ends a deadlock, if any, so the run goes on
    }

    // ConditionsAndMutualExclusion.md: "a group's child may go ahead of an operation added earlier
    // that cannot run before the group finishes anyway: ... or one that needs a category held by
    // another group that is itself waiting, in a category's line, for this one. ... The exception
    // sees the categories' lines, not dependencies".
    @Test
    func givenAnEarlierOperationNeedingZHeldByAGroupWaitingForThisGroup_whenThisGroupsChildAsksForY_thenTheChildGoesAhead_andEveryoneFinishes() {
        let z = uniqueName("Z")
        let y = uniqueName("Y")
        let held = HeldOperations()
        let order = Recorder<String>()
        let gateName = uniqueName("dependency")
        let gate = held.make(gateName)
        let earlier = recording("earlier", in: order, categories: [z, y])
        earlier.addDependency(gate)
        AsyncOperationQueue().addOperations([gate, earlier], waitUntilFinished: false)
        let childGateName = uniqueName("childGate")
        let childGate = held.make(childGateName)
        let child = recording("child", in: order, categories: [y])
        child.addDependency(childGate)
        let thisGroup = GroupOperation(operations: [childGate, child])
        let waitingChild = recording("waitingChild", in: order)
        waitingChild.addDependency(thisGroup)
        let otherGroup = GroupOperation(operations: [waitingChild])
        otherGroup.addCondition(ExclusiveCategory(z))
        AsyncOperationQueue().addOperation(otherGroup)
        #expect(waitUntil { otherGroup.isExecuting })
        AsyncOperationQueue().addOperation(thisGroup)
        #expect(held.waitUntilStarted(childGateName))
        held.finish(gateName)
        #expect(waitUntil { waitsForCategories(earlier) }, "\(earlier.debugDescription)")

        held.finish(childGateName)

        // The exception only looks at groups waiting in a category's line, not at a group whose
        // child depends on this group: the child waits behind `earlier` in Y's line, `earlier` for
        // Z, held by the other group, which waits for this one, which waits for its child. The
        // article names this circle as one the queue does not break (a short bound: it never ends).
        withKnownIssue("documented limitation: a wait through a dependency from another group's child closes a circle the exception does not see") {
            #expect(waitUntilFinished([thisGroup, otherGroup, earlier], timeout: 3))
            #expect(order.all == ["child", "waitingChild", "earlier"])
        }
        [thisGroup, otherGroup, earlier].forEach { $0.cancel() } // ends the deadlock, so the run goes on
    }

    // ConditionsAndMutualExclusion.md: "... or one that needs a category held by another group that
    // is itself waiting for this one" (the other group waiting in the line of a category this group
    // holds).
    @Test
    func givenAnEarlierOperationNeedingZHeldByAGroupWhoseChildWaitsForThisGroupsCategory_whenThisGroupsChildAsksForY_thenTheChildGoesAhead() {
        let x = uniqueName("X")
        let z = uniqueName("Z")
        let y = uniqueName("Y")
        let held = HeldOperations()
        let order = Recorder<String>()
        let gateName = uniqueName("dependency")
        let gate = held.make(gateName)
        let earlier = recording("earlier", in: order, categories: [z, y])
        earlier.addDependency(gate)
        AsyncOperationQueue().addOperations([gate, earlier], waitUntilFinished: false)
        let childGateName = uniqueName("childGate")
        let childGate = held.make(childGateName)
        let child = recording("child", in: order, categories: [y])
        child.addDependency(childGate)
        let thisGroup = GroupOperation(operations: [childGate, child])
        thisGroup.addCondition(ExclusiveCategory(x))
        AsyncOperationQueue().addOperation(thisGroup)
        #expect(held.waitUntilStarted(childGateName))
        let waitingChild = recording("waitingChild", in: order, categories: [x])
        let otherGroup = GroupOperation(operations: [waitingChild])
        otherGroup.addCondition(ExclusiveCategory(z))
        AsyncOperationQueue().addOperation(otherGroup)
        #expect(waitUntil { waitsForCategories(waitingChild) }, "\(waitingChild.debugDescription)")
        held.finish(gateName)
        #expect(waitUntil { waitsForCategories(earlier) }, "\(earlier.debugDescription)")

        held.finish(childGateName)

        #expect(waitUntilFinished([thisGroup, otherGroup, earlier]))
        #expect(order.all == ["child", "waitingChild", "earlier"])
        [thisGroup, otherGroup, earlier].forEach { $0.cancel() } // ends a deadlock, if any, so the run goes on
    }

    // ConditionsAndMutualExclusion.md: "Everyone else gets the category in add order. This is the
    // one exception to that order".
    @Test
    func givenAnEarlierOperationWaitingForYHeldElsewhere_whenALaterGroupsChildAlsoWaitsForY_thenTheEarlierOneGetsYFirst() {
        let (y, held, holderName, _, queue) = startHoldingACategory()
        let order = Recorder<String>()
        let earlier = recording("earlier", in: order, categories: [y])
        queue.addOperation(earlier)
        #expect(waitUntil { waitsForCategories(earlier) }, "\(earlier.debugDescription)")
        let child = recording("child", in: order, categories: [y])
        let group = GroupOperation(operations: [child])
        AsyncOperationQueue().addOperation(group)
        #expect(waitUntil { waitsForCategories(child) }, "\(child.debugDescription)")

        held.finish(holderName)

        #expect(waitUntilFinished([earlier, group]))
        #expect(order.all == ["earlier", "child"])
    }

    // ConditionsAndMutualExclusion.md: "no operation is granted a category while it could not start
    // at once: one whose queue's slots are all taken waits for a slot first, holding nothing, so a
    // group busy in that slot can still give the category to its own children."
    @Test
    func givenAQueueWhoseSlotsAreTakenByAGroupAndAnother_whenAnOperationNeedingXWaitsThere_thenTheGroupsChildGetsXFirst_andTheWaiterRunsAfter() {
        let x = uniqueName("X")
        let held = HeldOperations()
        let order = Recorder<String>()
        let childGateName = uniqueName("childGate")
        let childGate = held.make(childGateName)
        let child = recording("child", in: order, categories: [x])
        child.addDependency(childGate)
        let group = GroupOperation(operations: [childGate, child])
        let blockerName = uniqueName("blocker")
        let queue = AsyncOperationQueue()
        queue.maxConcurrentOperationCount = 2
        queue.addOperations([group, held.make(blockerName)], waitUntilFinished: false)
        #expect(held.waitUntilStarted(childGateName) && held.waitUntilStarted(blockerName))
        let waiter = recording("waiter", in: order, categories: [x])
        queue.addOperation(waiter)

        held.finish(childGateName)

        #expect(waitUntilFinished([group, waiter]))
        #expect(order.all == ["child", "waiter"])
        held.finish(blockerName)
        [group, waiter].forEach { $0.cancel() } // ends a deadlock, if any, so the run goes on
    }

    // ConditionsAndMutualExclusion.md: "A child that needs a category its enclosing group already
    // holds could never run, so it fails at once with categoryHeldByEnclosingGroup"; SilentCondition:
    // "Keeps the inner condition's categories".
    @Test
    func givenAGroupInCategoryX_whenItsChildNeedsXThroughASilentCondition_thenTheChildFailsAtOnceWithCategoryHeldByEnclosingGroup() {
        let x = uniqueName("X")
        let executed = Counter()
        let child = counting(executed)
        child.addCondition(SilentCondition(ExclusiveCategory(x)))
        let group = GroupOperation(operations: [child])
        group.addCondition(ExclusiveCategory(x))

        AsyncOperationQueue().addOperation(group)

        #expect(waitUntilFinished([group, child]))
        #expect(executed.current == 0)
        #expect(child.errors.count == 1 && child.errors.allSatisfy { isHeldByEnclosingGroup($0, x) }, "\(child.errors)")
        #expect(group.errors.count == 1 && group.errors.allSatisfy { isHeldByEnclosingGroup($0, x) }, "\(group.errors)")
    }

    // ConditionsAndMutualExclusion.md: "A child that needs a category its enclosing group already
    // holds ... fails at once"; Composition.md: "The cancellation handler is called when a child
    // finishes failed or cancelled" ... "`.carryOn` | goes on as if the child had succeeded; the
    // completion handler still comes".
    @Test
    func givenACascadeInCategoryX_whenItsFirstStepNeedsX_thenTheHandlerSeesThatStepFailWithCategoryHeldByEnclosingGroup_andCarryOnCompletes() {
        let x = uniqueName("X")
        let executed = Counter()
        let seen = Recorder<(index: Int, errors: [any Error])>()
        let completed = Counter()
        let cascade = CascadeOperation { steps in
            steps.add { counting(executed, category: x) }
            steps.add { counting(executed) }
        } completion: {
            _ = completed.increment()
        } cancellation: { failure in
            seen.append((failure.index, failure.errors))
            return .carryOn
        }
        cascade.addCondition(ExclusiveCategory(x))

        AsyncOperationQueue().addOperation(cascade)

        #expect(waitUntilFinished([cascade]))
        #expect(seen.count == 1)
        #expect(seen.all.first?.index == 0)
        #expect(seen.all.first.map { $0.errors.count == 1 && isHeldByEnclosingGroup($0.errors[0], x) } == true, "\(seen.all.map(\.errors))")
        #expect(executed.current == 1, "only the second step was expected to execute")
        #expect(completed.current == 1)
        #expect(cascade.errors.isEmpty && !cascade.isCancelled, "\(cascade.errors)")
    }

    // Composition.md: "`.cancel` ... cancels itself: children still running are cancelled ... it
    // finishes cancelled, with the child's errors"; ConditionsAndMutualExclusion.md: "Finishing,
    // failing or being cancelled frees its categories."
    @Test
    func givenATransactionWhosePartHoldsACategory_whenAnotherPartFailsAndTheHandlerCancels_thenThePartIsCancelled_andTheCategoryGoesToTheOutsider() {
        let x = uniqueName("X")
        let held = HeldOperations()
        let holderName = uniqueName("holdingPart")
        let failingName = uniqueName("failingPart")
        let error = StubError("part failed")
        let completed = Counter()
        let handled = Counter()
        let transaction = TransactionOperation { parts in
            parts.add {
                let part = held.make(holderName)
                part.addCondition(ExclusiveCategory(x))
                return part
            }
            parts.add { held.make(failingName) }
        } completion: {
            _ = completed.increment()
        } cancellation: { _ in
            _ = handled.increment()
            return .cancel
        }
        AsyncOperationQueue().addOperation(transaction)
        #expect(held.waitUntilStarted(holderName) && held.waitUntilStarted(failingName))
        let executed = Counter()
        let outsider = counting(executed, category: x)
        AsyncOperationQueue().addOperation(outsider)

        held.finish(failingName, with: error)

        #expect(waitUntilFinished([transaction, outsider]))
        #expect(handled.current == 1 && completed.current == 0)
        #expect(transaction.isCancelled)
        #expect(transaction.errors.compactMap { $0 as? StubError } == [error], "\(transaction.errors)")
        #expect(executed.current == 1)
    }

    // MARK: - Observers and timeouts

    // ObserversAndTimeouts.md: "`TimeoutObserver(timeout:)` cancels the operation with
    // timedOut(after:) if it has not finished that many seconds after it started"; Composition.md:
    // "Its `errors` hold every child's errors, then its own."
    @Test
    func givenAGroupWhoseChildNeverAnswers_whenTheChildsTimeoutFires_thenTheGroupFinishesUncancelled_withTheTimeoutAsItsOnlyError() {
        let child = AsyncBlockOperation { _ in }
        child.addObserver(TimeoutObserver(timeout: 0.05))
        let group = GroupOperation(operations: [child])

        AsyncOperationQueue().addOperation(group)

        #expect(waitUntilFinished([group]))
        #expect(child.isCancelled && !group.isCancelled)
        #expect(group.errors.asOperationErrors == [.timedOut(after: 0.05)], "\(group.errors)")
    }

    // ObserversAndTimeouts.md: "An AsyncBlockOperation whose continuation is never called therefore
    // cannot block its queue when it has a timeout: cancelling it finishes it at once" ... "a
    // timeout frees its categories once it finishes"; Composition.md: "Cancelling it cancels the
    // children and still waits for them".
    @Test
    func givenAGroupWithATimeoutWhoseChildHoldsACategory_whenTheGroupTimesOut_thenItFinishesWithTheTimeout_andTheCategoryGoesToTheOutsider() {
        let x = uniqueName("X")
        let held = HeldOperations()
        let childName = uniqueName("child")
        let child = held.make(childName)
        child.addCondition(ExclusiveCategory(x))
        let group = GroupOperation(operations: [child])
        group.addObserver(TimeoutObserver(timeout: 0.3))
        AsyncOperationQueue().addOperation(group)
        #expect(held.waitUntilStarted(childName))
        let executed = Counter()
        let outsider = counting(executed, category: x)

        AsyncOperationQueue().addOperation(outsider)

        #expect(waitUntilFinished([group, outsider]))
        #expect(executed.current == 1)
        #expect(child.isCancelled && group.isCancelled)
        #expect(group.errors.asOperationErrors == [.timedOut(after: 0.3)], "\(group.errors)")
    }

    // Composition.md: "so does finishing it by hand (`finish(with:)`, in a subclass's `execute()`
    // say) while children are left: it is heard finished once they have, with their errors before
    // its own"; AsyncOperation.cancel(with:): "after `finish(with:)` was called on it, nothing
    // changes"; a TimeoutObserver cancels "if it has not finished".
    @Test
    func givenAGroupFinishedByHandWhileAStubbornChildRuns_whenItsTimeoutFiresMeanwhile_thenNothingChanges_andItFinishesWithItsOwnErrorAlone() {
        let blocking = HeldCallback<Void>()
        let ownError = StubError("finished by hand")
        let groups = Recorder<GroupOperation>()
        let finishedBeforeTheTimeout = Recorder<Bool>()
        let stubborn = ClosureOperation(name: uniqueName("stubborn")) { operation in
            blocking.hold { _ in operation.finish() }
            guard let group = groups.all.first else { return }
            finishedBeforeTheTimeout.append(!group.isCancelled)
            group.finish(with: ownError) // by hand, while this child is left running
        }
        let group = GroupOperation(operations: [stubborn])
        groups.append(group)
        let cancels = Counter()
        group.addObserver(CancelledObserver { _ in _ = cancels.increment() })
        group.addObserver(TimeoutObserver(timeout: 0.5))
        AsyncOperationQueue().addOperation(group)
        #expect(blocking.waitUntilHeld())
        #expect(waitUntil { finishedBeforeTheTimeout.count == 1 })
        guard finishedBeforeTheTimeout.all.first == true else {
            // A loaded machine started the child after the timeout fired: not the case probed.
            blocking.call(())
            return
        }

        // Watching, well past the timeout, for a finish that must not come while the child runs.
        #expect(!waitUntil(timeout: 1) { group.isFinished })
        #expect(stubborn.isCancelled)
        blocking.call(())

        #expect(waitUntilFinished([group]))
        #expect(!group.isCancelled && cancels.current == 0)
        #expect(group.errors.asStubErrors == [ownError], "\(group.errors)")
    }

    // Composition.md: "`shouldRetry` picks which errors are worth another attempt. If every attempt
    // fails, the retry operation's errors are the last attempt's." ObserversAndTimeouts.md: a
    // TimeoutObserver "cancels the operation with timedOut(after:)".
    @Test
    func givenARetryWhoseAttemptTimesOut_whenShouldRetryRefusesTimeouts_thenItMakesOneAttempt_andFailsWithThatTimeout() {
        let retry = RetryOperation(maxAttempts: 3, shouldRetry: { !($0 is AsyncOperationError) }) { _ in
            let attempt = AsyncBlockOperation { _ in }
            attempt.addObserver(TimeoutObserver(timeout: 0.05))
            return attempt
        }

        AsyncOperationQueue().addOperation(retry)

        #expect(waitUntilFinished([retry]))
        #expect(retry.attemptCount == 1)
        #expect(retry.errors.asOperationErrors == [.timedOut(after: 0.05)], "\(retry.errors)")
    }

    // ObserversAndTimeouts.md: "A timeout covers an operation's execution, not its wait"; a
    // TimeoutObserver on a retry; Composition.md: "Cancelling it stops the running attempt, or the
    // wait, and makes no further attempt."
    @Test
    func givenARetryWithATimeoutWhoseAttemptWaitsForAHeldCategory_whenTheRetryTimesOut_thenTheAttemptNeverExecutes_andNoOtherIsMade() {
        let (x, held, holderName, holder, queue) = startHoldingACategory()
        let executed = Counter()
        let retry = RetryOperation(maxAttempts: 3) { _ in counting(executed, category: x) }
        retry.addObserver(TimeoutObserver(timeout: 0.2))

        queue.addOperation(retry)

        #expect(waitUntilFinished([retry]))
        #expect(!holder.isFinished && executed.current == 0)
        #expect(retry.attemptCount == 1)
        #expect(retry.errors.asOperationErrors == [.timedOut(after: 0.2)], "\(retry.errors)")
        held.finish(holderName)
    }

    // MARK: - Composites

    // Composition.md: "Composites nest in each other in both directions. An inner composite that
    // recovers stays invisible to the outer one".
    @Test
    func givenACascadeWhoseStepIsATransactionThatRecoversByRerun_whenItRuns_thenTheOuterHandlerIsNeverCalled_andTheCascadeCompletesCleanly() {
        let tries = Counter()
        let outerHandled = Counter()
        let completed = Counter()
        let executed = Counter()
        let cascade = CascadeOperation { steps in
            steps.add {
                TransactionOperation { parts in
                    parts.add {
                        AsyncBlockOperation {
                            if tries.increment() == 1 { throw StubError("first try") }
                        }
                    }
                } cancellation: { _ in .rerun }
            }
            steps.add { counting(executed) }
        } completion: {
            _ = completed.increment()
        } cancellation: { _ in
            _ = outerHandled.increment()
            return .cancel
        }

        AsyncOperationQueue().addOperation(cascade)

        #expect(waitUntilFinished([cascade]))
        #expect(tries.current == 2)
        #expect(outerHandled.current == 0)
        #expect(executed.current == 1 && completed.current == 1)
        #expect(cascade.errors.isEmpty && !cascade.isCancelled, "\(cascade.errors)")
    }

    // Composition.md: "one that gives up is a failed child of the outer one, whose handler can run a
    // new inner composite from its factory" (the `publish` example: `.rerun` on index 0, attempt 1).
    @Test
    func givenThePublishExample_whenTheInnerTransactionGivesUpOnce_thenTheOuterHandlerRerunsIt_withAFreshTransaction_andTheCascadeSucceeds() {
        let textTries = Counter()
        let transactionsBuilt = Counter()
        let rendered = Counter()
        let seen = Recorder<(index: Int, attempt: Int)>()
        let publish = CascadeOperation { steps in
            steps.add {
                _ = transactionsBuilt.increment()
                return TransactionOperation { sources in
                    sources.add { AsyncBlockOperation { if textTries.increment() == 1 { throw StubError("fetchText") } } }
                    sources.add { AsyncBlockOperation {} }
                }
            }
            steps.add { AsyncBlockOperation { _ = rendered.increment() } }
        } cancellation: { failure in
            seen.append((failure.index, failure.attempt))
            return failure.index == 0 && failure.attempt == 1 ? .rerun : .cancel
        }

        AsyncOperationQueue().addOperation(publish)

        #expect(waitUntilFinished([publish]))
        #expect(seen.all.map(\.index) == [0] && seen.all.map(\.attempt) == [1])
        #expect(transactionsBuilt.current == 2)
        #expect(rendered.current == 1)
        #expect(publish.errors.isEmpty && !publish.isCancelled, "\(publish.errors)")
    }

    // Composition.md: the `signUp` example: "`failure.attempt < 3 ? .rerun(after: 0.5) : .cancel`";
    // CompositeFailure.attempt: "1 the first time, 2 after one rerun, and so on"; "`.cancel` ...
    // later ones never start, no completion; it finishes cancelled, with the child's errors".
    @Test
    func givenTheSignUpExample_whenTheAvatarUploadAlwaysFails_thenTheHandlerSeesAttemptsOneToThree_theMailIsNeverBuilt_andTheCascadeEndsCancelledWithTheLastError() {
        let uploads = Counter()
        let mailsBuilt = Counter()
        let completed = Counter()
        let seen = Recorder<(index: Int, attempt: Int)>()
        let signUp = CascadeOperation { steps in
            steps.add { AsyncBlockOperation {} }
            steps.add { AsyncBlockOperation { throw StubError("upload \(uploads.increment())") } }
            steps.add {
                _ = mailsBuilt.increment()
                return AsyncBlockOperation {}
            }
        } completion: {
            _ = completed.increment()
        } cancellation: { failure in
            seen.append((failure.index, failure.attempt))
            return failure.attempt < 3 ? .rerun(after: 0.01) : .cancel
        }

        AsyncOperationQueue().addOperation(signUp)

        #expect(waitUntilFinished([signUp]))
        #expect(seen.all.map(\.index) == [1, 1, 1])
        #expect(seen.all.map(\.attempt) == [1, 2, 3])
        #expect(mailsBuilt.current == 0 && completed.current == 0)
        #expect(signUp.isCancelled)
        #expect(signUp.errors.compactMap { ($0 as? StubError)?.label } == ["upload 3"], "\(signUp.errors)")
    }

    // Composition.md: "The handler is called once per failed finish, never concurrently with itself
    // (children of a transaction that fail together are presented one at a time)".
    @Test
    func givenATransactionWhoseFourPartsFailTogether_whenTheHandlerCarriesOn_thenItIsCalledFourTimes_neverTwoAtOnce_andTheTransactionCompletes() {
        let held = HeldOperations()
        let names = (0..<4).map { _ in uniqueName("part") }
        let probe = ConcurrencyProbe()
        let handled = Counter()
        let completed = Counter()
        let transaction = TransactionOperation { parts in
            for name in names {
                parts.add { held.make(name) }
            }
        } completion: {
            _ = completed.increment()
        } cancellation: { _ in
            probe.enter("handler")
            usleep(20_000) // widens the window in which a second call would overlap this one
            probe.leave("handler")
            _ = handled.increment()
            return .carryOn
        }
        AsyncOperationQueue().addOperation(transaction)
        #expect(names.allSatisfy { held.waitUntilStarted($0) })

        DispatchQueue.concurrentPerform(iterations: names.count) { index in
            held.finish(names[index], with: StubError("part \(index)"))
        }

        #expect(waitUntilFinished([transaction]))
        #expect(handled.current == 4)
        #expect(probe.maximum("handler") == 1)
        #expect(completed.current == 1)
        #expect(transaction.errors.isEmpty, "\(transaction.errors)")
    }

    // Composition.md: "The handler is called once per failed finish ... and never again after a
    // `.cancel` answer."
    @Test
    func givenATransactionWhoseFourPartsFailTogether_whenTheHandlerAnswersCancel_thenItIsCalledOnce_andTheTransactionFinishesCancelled() {
        let held = HeldOperations()
        let names = (0..<4).map { _ in uniqueName("part") }
        let handled = Counter()
        let transaction = TransactionOperation { parts in
            for name in names {
                parts.add { held.make(name) }
            }
        } cancellation: { _ in
            _ = handled.increment()
            return .cancel
        }
        AsyncOperationQueue().addOperation(transaction)
        #expect(names.allSatisfy { held.waitUntilStarted($0) })

        DispatchQueue.concurrentPerform(iterations: names.count) { index in
            held.finish(names[index], with: StubError("part \(index)"))
        }

        #expect(waitUntilFinished([transaction]))
        #expect(handled.current == 1)
        #expect(transaction.isCancelled)
        #expect(!transaction.errors.isEmpty)
    }

    // Composition.md: the `refresh` transaction: "`failure.index == 2 ? .carryOn : .cancel` // the
    // weather is optional", "`refresh.maxConcurrentOperationCount = 2` // at most two downloads at
    // once", and "The completion handler is called once, when every child has succeeded (or
    // failed and was carried on)".
    @Test
    func givenTheRefreshExample_whenTheWeatherFails_thenTheTransactionCarriesOn_runsAtMostTwoAtOnce_andCompletesWithoutErrors() {
        let probe = ConcurrencyProbe()
        let ran = Counter()
        let completed = Counter()
        let handledIndexes = Recorder<Int>()
        @Sendable func download(failing: Bool) -> AsyncBlockOperation {
            AsyncBlockOperation {
                probe.enter("download")
                _ = ran.increment()
                usleep(20_000) // keeps the downloads overlapping, so a third one at once would show
                probe.leave("download")
                if failing { throw StubError("weather") }
            }
        }
        let refresh = TransactionOperation { parts in
            parts.add { download(failing: false) }
            parts.add { download(failing: false) }
            parts.add { download(failing: true) }
        } completion: {
            _ = completed.increment()
        } cancellation: { failure in
            handledIndexes.append(failure.index)
            return failure.index == 2 ? .carryOn : .cancel
        }
        refresh.maxConcurrentOperationCount = 2

        AsyncOperationQueue().addOperation(refresh)

        #expect(waitUntilFinished([refresh]))
        #expect(ran.current == 3)
        #expect(probe.maximum("download") <= 2)
        #expect(handledIndexes.all == [2])
        #expect(completed.current == 1)
        #expect(refresh.errors.isEmpty && !refresh.isCancelled, "\(refresh.errors)")
    }

    // CompositeFailure: "`errors` ... empty when it was cancelled without an error (and always for
    // plain Foundation operations, which carry no errors)"; Composition.md: "The cancellation
    // handler is called when a child finishes failed or cancelled".
    @Test
    func givenATransactionWithAPlainPart_whenThatPartIsCancelledWhileItWaitsForASlot_thenTheHandlerSeesItCancelledWithNoErrors_andCarryOnCompletes() {
        let held = HeldOperations()
        let firstName = uniqueName("first")
        let plainParts = Recorder<BlockOperation>()
        let plainRan = Counter()
        let seen = Recorder<(index: Int, isCancelled: Bool, errorCount: Int, childHasFinished: Bool)>()
        let completed = Counter()
        let transaction = TransactionOperation { parts in
            parts.add { held.make(firstName) }
            parts.add {
                let plain = BlockOperation { _ = plainRan.increment() }
                plainParts.append(plain)
                return plain
            }
        } completion: {
            _ = completed.increment()
        } cancellation: { failure in
            seen.append((failure.index, failure.isCancelled, failure.errors.count, failure.child.isFinished))
            return .carryOn
        }
        transaction.maxConcurrentOperationCount = 1
        AsyncOperationQueue().addOperation(transaction)
        #expect(held.waitUntilStarted(firstName))
        #expect(waitUntil { plainParts.count == 1 })

        plainParts.all.first?.cancel()
        held.finish(firstName)

        #expect(waitUntilFinished([transaction]))
        #expect(plainRan.current == 0)
        #expect(seen.all.map(\.index) == [1])
        #expect(seen.all.first?.isCancelled == true && seen.all.first?.errorCount == 0)
        #expect(seen.all.first?.childHasFinished == true, "CompositeFailure.child: \"it has finished\"")
        #expect(completed.current == 1)
        #expect(transaction.errors.isEmpty && !transaction.isCancelled, "\(transaction.errors)")
    }

    // CompositeFailure: "`child`: The operation that failed or was cancelled; it has finished";
    // "`errors`: The child's errors"; "`isCancelled`: Whether the child was cancelled (possibly with
    // errors too)".
    @Test
    func givenATransactionPartCancelledWithAnErrorWhileItWaitsForAHeldCategory_whenTheHandlerHearsOfIt_thenThePartHasFinished_isCancelled_andCarriesTheError() {
        let (x, held, holderName, _, queue) = startHoldingACategory()
        let error = StubError("stop waiting")
        let executed = Counter()
        let parts = Recorder<AsyncBlockOperation>()
        let seen = Recorder<(hasFinished: Bool, isCancelled: Bool, errors: [StubError?])>()
        let completed = Counter()
        let transaction = TransactionOperation { declared in
            declared.add {
                let part = counting(executed, category: x)
                parts.append(part)
                return part
            }
        } completion: {
            _ = completed.increment()
        } cancellation: { failure in
            seen.append((failure.child.isFinished, failure.isCancelled, failure.errors.asStubErrors))
            return .carryOn
        }
        queue.addOperation(transaction)
        #expect(waitUntil { parts.count == 1 && waitsForCategories(parts.all[0]) })

        parts.all.first?.cancel(with: error)

        #expect(waitUntilFinished([transaction]))
        #expect(executed.current == 0)
        #expect(seen.count == 1)
        #expect(seen.all.first?.hasFinished == true, "CompositeFailure.child: \"it has finished\"")
        #expect(seen.all.first?.isCancelled == true)
        #expect(seen.all.first?.errors == [error])
        #expect(completed.current == 1)
        held.finish(holderName)
    }

    // Composition.md: "`.rerun` | runs a new attempt of the child at once"; "children of a
    // transaction that fail together are presented one at a time"; "A composite's `errors` hold its
    // children's errors, except those of attempts that were run again".
    @Test
    func givenATransactionWhoseTwoPartsFailTogether_whenTheHandlerRerunsBoth_thenEachRunsASecondAttempt_andTheTransactionCompletesWithoutErrors() {
        let held = HeldOperations()
        let names = [uniqueName("part"), uniqueName("part")]
        let builds = Counter()
        let attempts = Recorder<Int>()
        let completed = Counter()
        let transaction = TransactionOperation { parts in
            for name in names {
                let calls = Counter()
                parts.add {
                    _ = builds.increment()
                    return calls.increment() == 1 ? held.make(name) : AsyncBlockOperation {}
                }
            }
        } completion: {
            _ = completed.increment()
        } cancellation: { failure in
            attempts.append(failure.attempt)
            return .rerun
        }
        AsyncOperationQueue().addOperation(transaction)
        #expect(names.allSatisfy { held.waitUntilStarted($0) })

        DispatchQueue.concurrentPerform(iterations: names.count) { index in
            held.finish(names[index], with: StubError("part \(index)"))
        }

        #expect(waitUntilFinished([transaction]))
        #expect(attempts.all == [1, 1])
        #expect(builds.current == 4)
        #expect(completed.current == 1)
        #expect(transaction.errors.isEmpty && !transaction.isCancelled, "\(transaction.errors)")
    }

    // TransactionOperation: "When a child fails or is cancelled, the others keep running while the
    // cancellation handler decides".
    @Test
    func givenATransactionHandlerStillDeciding_whenAnotherPartFinishesMeanwhile_thenThatPartFinishes_andTheTransactionCompletesOnceTheHandlerAnswers() {
        let held = HeldOperations()
        let failingName = uniqueName("failing")
        let otherName = uniqueName("other")
        let others = Recorder<AsyncBlockOperation>()
        let deciding = Signal()
        let decide = Signal()
        let completed = Counter()
        let transaction = TransactionOperation { parts in
            parts.add { held.make(failingName) }
            parts.add {
                let other = held.make(otherName)
                others.append(other)
                return other
            }
        } completion: {
            _ = completed.increment()
        } cancellation: { _ in
            deciding.signal()
            _ = decide.wait()
            return .carryOn
        }
        AsyncOperationQueue().addOperation(transaction)
        #expect(held.waitUntilStarted(failingName) && held.waitUntilStarted(otherName))
        DispatchQueue.global().async { held.finish(failingName, with: StubError("failed")) }
        #expect(deciding.wait(timeout: generousTimeout))

        held.finish(otherName)

        #expect(waitUntil { others.all.first?.isFinished == true })
        #expect(!transaction.isFinished && completed.current == 0)
        decide.signal()
        #expect(waitUntilFinished([transaction]))
        #expect(completed.current == 1)
        #expect(transaction.errors.isEmpty, "\(transaction.errors)")
    }

    // Composition.md: "Both are GroupOperations: add them to a queue, observe them, give them
    // conditions and dependencies, nest them." ... "In a cascade, the factory is called when the
    // child is due to run".
    @Test
    func givenACascadeWithADependencyAndACategoryHeldElsewhere_whenAdded_thenNoFactoryIsCalledUntilBothAreFree_andThenItCompletes() {
        let (x, held, holderName, holder, queue) = startHoldingACategory()
        let dependencyName = uniqueName("dependency")
        let dependency = held.make(dependencyName)
        let factoryCalls = Counter()
        let completed = Counter()
        let cascade = CascadeOperation { steps in
            steps.add {
                _ = factoryCalls.increment()
                return AsyncBlockOperation {}
            }
        } completion: {
            _ = completed.increment()
        }
        cascade.addDependency(dependency)
        cascade.addCondition(ExclusiveCategory(x))

        queue.addOperations([dependency, cascade], waitUntilFinished: false)
        #expect(held.waitUntilStarted(dependencyName))

        // Watching briefly for factory calls that must not come, first while both hold it back,
        // then while only the category does.
        #expect(!waitUntil(timeout: briefly) { factoryCalls.current > 0 })
        held.finish(dependencyName)
        #expect(waitUntilFinished([dependency]))
        #expect(!waitUntil(timeout: briefly) { factoryCalls.current > 0 })
        held.finish(holderName)
        #expect(waitUntilFinished([holder, cascade]))
        #expect(factoryCalls.current == 1 && completed.current == 1)
        #expect(cascade.errors.isEmpty, "\(cascade.errors)")
    }

    // Composition.md: "A finished composite lets go of its factories and handlers."
    @Test
    func givenACascadeThatCompleted_whenItIsStillHeld_thenWhatItsFactoriesAndHandlersCapturedIsReleased() {
        func makeCascade() -> (CascadeOperation, [WeakProbe<Token>]) {
            let factoryToken = Token()
            let completionToken = Token()
            let cancellationToken = Token()
            let cascade = CascadeOperation { steps in
                steps.add { withExtendedLifetime(factoryToken) { AsyncBlockOperation {} } }
            } completion: {
                withExtendedLifetime(completionToken) {}
            } cancellation: { _ in
                withExtendedLifetime(cancellationToken) { .cancel }
            }
            return (cascade, [WeakProbe(factoryToken), WeakProbe(completionToken), WeakProbe(cancellationToken)])
        }
        let (cascade, tokens) = makeCascade()

        AsyncOperationQueue().addOperation(cascade)

        #expect(waitUntilFinished([cascade]))
        #expect(tokens.allSatisfy { $0.isReleased() })
        withExtendedLifetime(cascade) {}
    }

    // GroupOperation.addChild: "A child added to a cancelled group is cancelled."; Composition.md:
    // "Cancelling it cancels the children and still waits for them".
    @Test
    func givenACancelledGroupWaitingForAChildThatIgnoresCancellation_whenAChildIsAddedMeanwhile_thenItIsCancelledWithoutExecuting_andTheGroupWaitsForTheFirst() {
        let blocking = HeldCallback<Void>()
        let stubborn = ClosureOperation(name: uniqueName("stubborn")) { operation in
            blocking.hold { _ in operation.finish() }
        }
        let group = GroupOperation(operations: [stubborn])
        AsyncOperationQueue().addOperation(group)
        #expect(blocking.waitUntilHeld())
        group.cancel()
        #expect(waitUntil { stubborn.isCancelled })
        let executed = Counter()
        let late = counting(executed)

        group.addChild(late)

        #expect(waitUntilFinished([late]))
        #expect(late.isCancelled && executed.current == 0)
        // Watching briefly for a finish that must not come while the first child still runs.
        #expect(!waitUntil(timeout: briefly) { group.isFinished })
        blocking.call(())
        #expect(waitUntilFinished([group]))
    }

    // GroupOperation: "Children ... start when the group executes; until then they wait (their
    // conditions are not evaluated either)."
    @Test
    func givenAGroupWaitingForADependency_whenItsChildHasACondition_thenTheConditionIsEvaluatedOnlyOnceTheGroupExecutes() {
        let held = HeldOperations()
        let dependencyName = uniqueName("dependency")
        let dependency = held.make(dependencyName)
        let evaluated = Counter()
        let executed = Counter()
        let child = counting(executed)
        child.addCondition(StubCondition(name: "Recorded") { _, completion in
            _ = evaluated.increment()
            completion(.satisfied)
        })
        let group = GroupOperation(operations: [child])
        group.addDependency(dependency)
        AsyncOperationQueue().addOperations([dependency, group], waitUntilFinished: false)
        #expect(held.waitUntilStarted(dependencyName))

        // Watching briefly for an evaluation that must not come before the group executes.
        #expect(!waitUntil(timeout: briefly) { evaluated.current > 0 })
        held.finish(dependencyName)

        #expect(waitUntilFinished([group]))
        #expect(evaluated.current == 1 && executed.current == 1)
    }

    // ConditionsAndMutualExclusion.md: "A GroupOperation's children stand in line where their
    // group stands, ahead of operations added after the group"; GroupOperation: groups nest.
    @Test
    func givenANestedGroupsGrandchildWaitingForYHeldElsewhere_whenAnOperationAddedAfterTheOuterGroupWaitsToo_thenTheGrandchildGetsYFirst() {
        let (y, held, holderName, _, _) = startHoldingACategory()
        let order = Recorder<String>()
        let gateName = uniqueName("gate")
        let gate = held.make(gateName)
        let grandchild = recording("grandchild", in: order, categories: [y])
        grandchild.addDependency(gate)
        let outer = GroupOperation(operations: [GroupOperation(operations: [gate, grandchild])])
        AsyncOperationQueue().addOperation(outer)
        #expect(held.waitUntilStarted(gateName))
        let outsider = recording("outsider", in: order, categories: [y])
        AsyncOperationQueue().addOperation(outsider)
        #expect(waitUntil { waitsForCategories(outsider) }, "\(outsider.debugDescription)")
        held.finish(gateName)
        #expect(waitUntil { waitsForCategories(grandchild) }, "\(grandchild.debugDescription)")

        held.finish(holderName)

        #expect(waitUntilFinished([outer, outsider]))
        #expect(order.all == ["grandchild", "outsider"])
    }

    // RetryOperation: "If `makeAttempt` returns an operation that was already queued or run, the
    // retry operation is cancelled with `AsyncOperationError.childReused`, beside the errors of the
    // attempt before."
    @Test
    func givenARetryWhoseSecondAttemptIsTheFirstAgain_whenItRuns_thenItIsCancelledWithChildReused_besideTheFirstAttemptsError() {
        let error = StubError("first attempt")
        let retryName = uniqueName("retry")
        let attemptName = uniqueName("attempt")
        let made = Recorder<AsyncBlockOperation>()
        let retry = RetryOperation(maxAttempts: 3) { number -> AsyncBlockOperation in
            if number == 1 {
                let attempt = AsyncBlockOperation { throw error }
                attempt.name = attemptName
                made.append(attempt)
                return attempt
            }
            return made.all[0]
        }
        retry.name = retryName

        AsyncOperationQueue().addOperation(retry)

        #expect(waitUntilFinished([retry]))
        #expect(retry.isCancelled)
        #expect(retry.errors.count == 2, "\(retry.errors)")
        #expect(retry.errors.asStubErrors.contains(error))
        #expect(retry.errors.asOperationErrors.contains(.childReused(composite: retryName, child: attemptName)), "\(retry.errors)")
    }

    // MARK: - Chains

    // Composition.md: "An adapter between two operations transforms the value, or vetoes it by
    // throwing: the next operation then finishes without executing, with the thrown error, and the
    // ones after it with `.upstreamFailed`."
    @Test
    func givenAChainWhoseAdapterVetoes_whenItRuns_thenTheNextLinkFailsWithTheThrownError_andTheOneAfterWithUpstreamFailedNamingIt() {
        let veto = StubError("veto")
        let executed = Counter()
        let fetch = ResultBlockOperation { "name" }
        fetch.name = uniqueName("fetch")
        let saveName = uniqueName("save")
        let save = InputBlockOperation { (name: String) -> String in
            _ = executed.increment()
            return name
        }
        save.name = saveName
        save.takeInput(from: fetch) { (_: String) throws -> String in throw veto }
        let afterName = uniqueName("after")
        let after = counting(executed, name: afterName)

        AsyncOperationQueue().addChain([fetch, save, after])

        #expect(waitUntilFinished([fetch, save, after]))
        #expect(executed.current == 0)
        #expect(save.errors.asStubErrors == [veto], "\(save.errors)")
        #expect(after.errors.count == 1, "\(after.errors)")
        guard case let .upstreamFailed(operation, upstream, reason)? = after.errors.first as? AsyncOperationError else {
            Issue.record("expected upstreamFailed, got \(after.errors)")
            return
        }
        #expect(operation == afterName && upstream == saveName)
        #expect(reason.contains("veto"), "\(reason)")
    }

    // Composition.md: "naming the first operation that failed and why (for instance `'importRecords'
    // was not run: 'download', before it in the chain, failed: offline`)".
    @Test
    func givenTheDownloadUnzipImportChain_whenTheDownloadFailsOffline_thenImportRecordsSaysSoInTheDocumentedWords() {
        let download = AsyncBlockOperation { throw Offline() }
        download.name = "download"
        let unzip = AsyncBlockOperation {}
        unzip.name = "unzip"
        let importRecords = AsyncBlockOperation {}
        importRecords.name = "importRecords"

        AsyncOperationQueue().addChain([download, unzip, importRecords])

        #expect(waitUntilFinished([download, unzip, importRecords]))
        #expect(importRecords.errors.map { String(describing: $0) } == ["'importRecords' was not run: 'download', before it in the chain, failed: offline"])
    }

    // MARK: - Retry

    // RetryOperation: "`makeAttempt` and `shouldRetry` are released once it has finished;
    // `lastAttempt` is kept so that its result can be read."
    @Test
    func givenARetryThatSucceededOnItsSecondAttempt_whenItIsStillHeld_thenItsClosuresCapturesAreReleased_andLastAttemptKeepsTheOutput() {
        func makeRetry() -> (RetryOperation<ResultBlockOperation<Int>>, [WeakProbe<Token>]) {
            let attemptToken = Token()
            let retryToken = Token()
            let retry = RetryOperation(maxAttempts: 3, shouldRetry: { _ in withExtendedLifetime(retryToken) { true } }) { number in
                withExtendedLifetime(attemptToken) {
                    ResultBlockOperation { () throws -> Int in
                        if number == 1 { throw StubError("first") }
                        return number * 10
                    }
                }
            }
            return (retry, [WeakProbe(attemptToken), WeakProbe(retryToken)])
        }
        let (retry, tokens) = makeRetry()

        AsyncOperationQueue().addOperation(retry)

        #expect(waitUntilFinished([retry]))
        #expect(retry.errors.isEmpty, "\(retry.errors)")
        #expect(retry.lastAttempt?.output == 20)
        #expect(tokens.allSatisfy { $0.isReleased() })
    }

    // MARK: - Getting started

    // GettingStarted.md: "Finished operations let go of their dependencies, observers, conditions
    // and blocks".
    @Test
    func givenAFinishedOperationStillHeld_whenItsObserverConditionAndBlockCapturedObjects_thenThoseAreReleased() {
        func makeOperation() -> (AsyncBlockOperation, [WeakProbe<Token>]) {
            let blockToken = Token()
            let conditionToken = Token()
            let observerToken = Token()
            let operation = AsyncBlockOperation { withExtendedLifetime(blockToken) {} }
            operation.addCondition(BlockCondition { withExtendedLifetime(conditionToken) { true } })
            operation.addObserver(FinishedObserver { _, _ in withExtendedLifetime(observerToken) {} })
            return (operation, [WeakProbe(blockToken), WeakProbe(conditionToken), WeakProbe(observerToken)])
        }
        let (operation, tokens) = makeOperation()

        AsyncOperationQueue().addOperation(operation)

        #expect(waitUntilFinished([operation]))
        #expect(tokens.allSatisfy { $0.isReleased() })
        withExtendedLifetime(operation) {}
    }

}
