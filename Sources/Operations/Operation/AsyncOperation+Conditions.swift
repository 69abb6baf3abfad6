import Foundation

extension AsyncOperation {
    /// Adds a condition the operation must meet before it executes.
    ///
    /// Add conditions before the operation is added to a queue (or while it still waits for its
    /// dependencies). Later additions are reported as `.configuredTooLate` and ignored. A
    /// condition added while the operation waits brings its dependency at once
    /// (`OperationCondition.dependency(for:)`), which counts as added with the operation; if the
    /// operation's other dependencies have finished, it may go on to evaluate its conditions on
    /// the calling thread before this returns.
    ///
    /// ```swift
    /// operation.addCondition(MutuallyExclusive<Database>())
    /// ```
    public final func addCondition(_ condition: any OperationCondition) {
        let satisfiedByConstruction = ConditionKinds.isSatisfiedByConstruction(condition) // decided once, here
        switch lifecycle.addCondition(condition, satisfiedByConstruction: satisfiedByConstruction) {
        case .tooLate:
            OperationDiagnostics.report(.configuredTooLate, self, "addCondition(_:) was called after the operation's conditions were evaluated; '\(condition.name)' was ignored")
        case let .addedWhileWaiting(attachment):
            // It waits until the dependency is attached, even if its others finish meanwhile.
            if let dependency = condition.dependency(for: self) {
                attachDependency(dependency, as: attachment)
            }
            endAttachment(lifecycle.conditionDependencyAttached())
        case .added:
            break
        }
    }

    /// Goes on as the end of a condition's attachment says.
    private func endAttachment(_ end: OperationLifecycle.AttachmentEnd) {
        switch end {
        case let .advance(action):
            advance(action)
        case var .release(released):
            DeferredRelease.release(&released)
        }
    }

    // MARK: - The way to execution

    /// Attaches the conditions' dependencies, then waits for every dependency, evaluates the
    /// conditions and acquires the categories; `queue` receives the condition dependencies.
    /// (Started by hand: no queue of ours holds it.)
    func runPipeline(_ conditions: [any OperationCondition], addingDependenciesTo queue: OperationQueue?) {
        _ = attachConditionDependencies(conditions, to: queue)
        endEnqueuing(attached: conditions.count, heldBy: nil, addingTo: queue, joining: nil, categories: nil)
    }

    /// Attaches the dependencies the conditions bring, each added to `queue` (to a fallback queue
    /// if `nil`); whether it attached any. `joining`: the add of the operation to `queue`, an
    /// `AsyncOperationQueue`, still in flight: the dependencies are added as part of it.
    func attachConditionDependencies(_ conditions: [any OperationCondition], to queue: OperationQueue?, joining add: AsyncOperationQueue.AddInFlight? = nil) -> Bool {
        var attachedAny = false
        for index in conditions.indices { // by index: each condition is read in place, not copied out
            if let dependency = conditions[index].dependency(for: self) {
                addConditionDependency(dependency, to: queue, joining: add)
                attachedAny = true
            }
        }
        return attachedAny
    }

    /// Ends its add to `queue`, which holds it now, its condition dependencies attached. Given
    /// its turn as it was held (`turn`), it begins evaluating the conditions in the same step,
    /// unless something stands in the way; otherwise it waits for its dependencies and goes on
    /// as usual. `categories`: those of `conditions`, if the queue read them already.
    /// `add`: the add in flight, which the dependencies of conditions added meanwhile join.
    func endAdd(of conditions: [any OperationCondition], to queue: AsyncOperationQueue, joining add: AsyncOperationQueue.AddInFlight, turn: QueueScheduler.HeldAdmission, categories: consuming [String]?) {
        if case .heldWithTurn = turn {
            switch lifecycle.finishEnqueuing(holdingTurnWith: conditions.count) {
            case let .evaluate(start):
                proceed(after: start, with: conditions, gate: nil, lineRoot: nil)
                return
            case let .giveBackTurn(ticket):
                queue.endTurn(ticket: ticket) // still being added: nothing lets it on meanwhile
            }
        }
        let read = categories.map { CategoriesReadAtAdd(names: $0, conditionCount: conditions.count) }
        endEnqueuing(attached: conditions.count, heldBy: queue, addingTo: queue, joining: add, categories: read)
    }

    /// Ends its add, the dependencies of its first `attached` conditions attached, and goes on as
    /// the end says. The dependencies of conditions added meanwhile are attached first, added to
    /// `queue` (as part of `add`, if given). `holder`: the queue that holds it, if one does.
    private func endEnqueuing(attached: Int, heldBy holder: AsyncOperationQueue?, addingTo queue: OperationQueue?, joining add: AsyncOperationQueue.AddInFlight?, categories: consuming CategoriesReadAtAdd?) {
        switch lifecycle.finishEnqueuing(attached: attached) {
        case let .attachConditions(added, attached):
            _ = attachConditionDependencies(added, to: queue, joining: add)
            endEnqueuing(attached: attached, heldBy: holder, addingTo: queue, joining: add, categories: categories)
        case .finishedWhileAdded(let turnToForget, var released):
            if let ticket = turnToForget {
                holder?.forgetOperationFinishedWhileAdded(self, ticket: ticket)
            }
            DeferredRelease.release(&released)
        case let .advance(action):
            if case .none = action {
                logWaiting() // for its dependencies
            }
            advance(action, categories: categories)
        }
    }

    /// Makes the operation wait for `dependency`, which a condition produced, and adds it to
    /// `queue`, as part of `add` if it is given (`waitForConditionDependency(_:)`), unless it is
    /// on a queue already, or finished (`looksUnused`), or another condition brought it.
    private func addConditionDependency(_ dependency: Operation, to queue: OperationQueue?, joining add: AsyncOperationQueue.AddInFlight?) {
        guard waitForConditionDependency(dependency) != .broughtBefore, dependency.looksUnused else {
            return // another condition brought it, or it is on a queue already, or finished
        }
        if let add, let queue = queue as? AsyncOperationQueue { // an add in flight is always one of its own
            queue.addConditionDependency(dependency, within: add)
        } else {
            (queue ?? engine.fallbackQueue).addOperation(dependency)
        }
    }

    /// Makes the operation, which waits for its dependencies, wait for `dependency` too, which a
    /// condition added meanwhile produced, and adds it where `attachment` says, unless another
    /// condition brought it, or it is on a queue already. On a queue of ours it counts as added
    /// with the operation: it waits for the barriers the operation waits for, not for one placed
    /// since, which waits for the operation and so, while the operation waits for it, for
    /// `dependency` too. If it closes a cycle, or the operation finished meanwhile, it is added as
    /// any operation is. (A barrier placed since does not wait for `dependency` itself: if the
    /// operation is cancelled before `dependency` finishes, the barrier may run beside it.)
    private func attachDependency(_ dependency: Operation, as attachment: OperationLifecycle.ConditionDependencyAttachment) {
        let waits = waitForConditionDependency(dependency)
        guard waits != .broughtBefore, dependency.looksUnused else {
            return // another condition brought it, or it is on a queue already, or finished
        }
        guard let queue = attachment.queue else {
            // Started by hand: as the dependencies of its first conditions, this one goes to
            // the queue that started it, if any.
            (attachment.startedBy ?? engine.fallbackQueue).addOperation(dependency)
            return
        }
        if waits == .doesNotWait {
            queue.addOperation(dependency)
        } else {
            queue.addConditionDependency(dependency, waitingFor: attachment.barriers)
        }
    }

    /// Whether an operation waits for a dependency a condition produced.
    enum ConditionDependencyWait {
        /// It waits for it now.
        case waits
        /// It waited for it already (the user added it too).
        case waitsAlready
        /// It does not: the dependency closes a cycle, or the operation is past waiting.
        case doesNotWait
        /// Another condition of the operation brought it: nothing more to do.
        case broughtBefore
    }

    /// Makes the operation wait for `dependency`, which a condition produced, unless another
    /// condition brought it. A dependency that would close a cycle is diagnosed as
    /// `addDependency(_:)` does: the operation finishes with `AsyncOperationError.dependencyCycle`
    /// instead of waiting forever.
    private func waitForConditionDependency(_ dependency: Operation) -> ConditionDependencyWait {
        if dependency === self {
            recordCycle(through: dependency)
            return .doesNotWait
        }
        switch lifecycle.addConditionDependency(dependency) {
        case .broughtBefore:
            return .broughtBefore
        case let .added(dependents):
            return waitForNewDependency(dependency, dependents: dependents) ? .waits : .doesNotWait
        case .alreadyThere:
            return .waitsAlready
        case .tooLate:
            return .doesNotWait
        }
    }

    /// Goes on as `action` says. `categories`: the conditions' categories, if they were read
    /// already (on the way to execution they are read once).
    func advance(_ action: OperationLifecycle.AdvanceAction, categories read: consuming CategoriesReadAtAdd? = nil) {
        switch action {
        case .none:
            break
        case let .finish(errors):
            finish(errors: errors)
        case .finishClosingCycle:
            let operationName = displayName
            withExtendedLifetime(self) {
                perform(lifecycle.finishClosingCycle(operationName: operationName))
            }
        case let .proceedWithoutConditions(queue, ticket):
            guard let queue else {
                perform(lifecycle.proceedWithoutCategories())
                return
            }
            if queue.requestTurn(for: self, ticket: ticket).passage == .parked {
                logWaiting()
                return // its turn comes later (a serial or suspended queue): continueTowardsExecution()
            }
            switch lifecycle.turnTakenToProceed() {
            case let .proceed(then):
                perform(then)
            case let .giveBack(ticket):
                queue.endTurn(ticket: ticket)
            }
        case let .evaluateConditions(conditions, queue, ticket):
            let categories = read?.names(of: conditions) ?? Self.categories(of: conditions)
            guard let queue else {
                evaluate(conditions, categories: categories, in: nil, lineRoot: nil)
                return
            }
            // A suspended queue evaluates nothing, a serial one one operation at a time, and an
            // operation that needs categories waits for a free slot before it asks for them:
            // continueTowardsExecution() picks up when it may go on.
            let turn = queue.requestTurn(for: self, ticket: ticket, needsSlot: !categories.isEmpty)
            if turn.passage == .parked {
                logWaiting()
                return
            }
            evaluate(conditions, categories: categories, in: turn.group, lineRoot: turn.lineRoot, takingTurnOn: queue)
        }
    }

    /// Takes the turn it asked `queue` for; `false` if it finished before it asked (cancelled on
    /// its way): its queue heard of that finish first, so it gives the turn back and goes no
    /// further. (The usual way takes the turn as the evaluation begins: `turnTakenToEvaluate`.)
    private func takeTurn(on queue: AsyncOperationQueue) -> Bool {
        switch lifecycle.turnTaken() {
        case .goOn:
            return true
        case let .giveBack(ticket):
            queue.endTurn(ticket: ticket)
            return false
        }
    }

    /// Evaluates the conditions. `lineRoot`: the queue let it through a moment ago (it runs, and
    /// has a slot for an operation that needs categories), and said where it stands in lines.
    /// `queue`: the queue whose turn it takes as the evaluation begins (in the same step).
    private func evaluate(_ conditions: [any OperationCondition], categories: [String], in group: GroupOperation?, lineRoot: UInt64?, takingTurnOn queue: AsyncOperationQueue? = nil) {
        if let category = group?.heldCategory(among: categories) {
            failBeforeEvaluating(.categoryHeldByEnclosingGroup, "the operation needs the mutually exclusive category '\(category)', which its enclosing group holds; it fails instead of waiting forever",
                                 with: .categoryHeldByEnclosingGroup(category: category, operation: displayName), takingTurnOn: queue)
            return
        }
        var gate: CategoryLockGate?
        if !categories.isEmpty {
            switch CategoryLockGate.make(for: conditions, engine: engine) {
            case nil:
                break
            case let .gate(made)?:
                gate = made
            case let .conflict(category)?:
                failBeforeEvaluating(.categoryLockConflict, "the operation names the mutually exclusive category '\(category)' with a different lock than other conditions or operations in this process; it fails instead of running without exclusion",
                                     with: .categoryLockConflict(category: category, operation: displayName), takingTurnOn: queue)
                return
            }
        }
        let start: OperationLifecycle.EvaluationStart
        if let queue {
            switch lifecycle.turnTakenToEvaluate(categories: categories, categoryLockGate: gate) {
            case let .evaluate(evaluationStart):
                start = evaluationStart
            case let .giveBack(ticket):
                gate?.operationFinished() // it finished before it asked: nobody uses the gate
                queue.endTurn(ticket: ticket)
                return
            }
        } else {
            start = lifecycle.beginEvaluating(categories: categories, categoryLockGate: gate)
        }
        proceed(after: start, with: conditions, gate: gate, lineRoot: lineRoot)
    }

    /// Goes on as the beginning of an evaluation says: hands `conditions` out, or acts on what
    /// is settled already. `gate`: the lock gate it brought for its categories, if any.
    private func proceed(after start: OperationLifecycle.EvaluationStart, with conditions: [any OperationCondition], gate: CategoryLockGate?, lineRoot: UInt64?) {
        switch start {
        case .alreadyHandedOut:
            gate?.operationFinished() // another evaluation under way keeps its own
        case let .settled(.passed(categories, logger)):
            // Nothing left to evaluate.
            logger?.log(.conditionsAnswered(failures: 0), of: self)
            acquire(categories, lineRoot: lineRoot)
        case let .settled(action):
            handle(action, timedOut: false)
        case let .handOut(awaited):
            handOut(conditions, awaited: awaited)
        }
    }

    /// Fails the operation before its conditions are evaluated, reporting `kind` with `message`.
    /// On `queue`, it takes the turn first: an operation that finished meanwhile gives it back
    /// instead, and is neither reported nor finished again.
    private func failBeforeEvaluating(_ kind: OperationDiagnostic.Kind, _ message: String, with error: AsyncOperationError, takingTurnOn queue: AsyncOperationQueue?) {
        if let queue, !takeTurn(on: queue) { return }
        OperationDiagnostics.report(kind, self, message)
        finish(with: error)
    }

    /// Calls `evaluate(for:completion:)` of the conditions `awaited` names, each with its own
    /// completion handler, and bounds the wait for those that do not answer at once. Conditions
    /// that answer at once (`AnswersAtOnce`) are asked instead, and their answers taken in one
    /// step with the end of the handing out (until then an inspection lists them as unanswered).
    private func handOut(_ conditions: [any OperationCondition], awaited: ConditionIndexSet) {
        var answeredAtOnce = AnsweredConditions()
        for index in conditions.indices where awaited.contains(index) {
            if case let .answersAtOnce(kind) = ConditionKinds.kind(of: conditions[index]),
               let result = kind.answer(of: conditions[index], for: self) {
                answeredAtOnce.add(result, of: index)
                continue
            }
            if !answeredAtOnce.isEmpty {
                // Taken before the next condition may answer: failures keep the conditions' order.
                handle(lifecycle.conditionsAnswered(answeredAtOnce), timedOut: false)
                answeredAtOnce = AnsweredConditions()
            }
            let answer = ConditionAnswer(operation: self, index: index)
            conditions[index].evaluate(for: self) { result in
                answer.deliver(result)
            }
        }
        // Handing the conditions out counted as a notification in flight: a finish that came
        // meanwhile (a cancel) waited for it, so no condition is evaluated after the finish.
        let handedOut = lifecycle.conditionsHandedOut(answeredAtOnce: answeredAtOnce)
        handle(handedOut.settled, timedOut: false)
        perform(handedOut.then)
        guard handedOut.unanswered > 0 else { return }
        logWaiting()
        let timeout = handedOut.queue?.conditionEvaluationTimeout ?? AsyncOperationQueue.defaultConditionEvaluationTimeout
        if timeout.isFinite {
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [weak self] in
                self?.conditionsTimedOut(after: timeout)
            }
        }
    }

    /// The distinct categories of `conditions`, sorted (the order is irrelevant to correctness).
    static func categories(of conditions: [any OperationCondition]) -> [String] {
        var categories: [String] = []
        var sources = 0
        for index in conditions.indices { // by index: each condition is read in place, not copied out
            let own = conditions[index].mutuallyExclusiveCategories
            guard !own.isEmpty else { continue }
            sources += 1
            if sources == 1 && own.count == 1, let only = own.first {
                categories = [only] // the common case: one exclusive condition, one category
            } else {
                categories.append(contentsOf: own)
            }
        }
        guard categories.count > 1 else { return categories }
        return sources == 1 ? categories.sorted() : Array(Set(categories)).sorted()
    }

    private func conditionsTimedOut(after timeout: TimeInterval) {
        let unanswered = lifecycle.unansweredConditions
        guard !unanswered.isEmpty else { return }
        let failures = unanswered.map { entry -> (index: Int, error: any Error) in
            (entry.index, AsyncOperationError.conditionTimedOut(condition: entry.condition.name, after: timeout))
        }
        handle(lifecycle.conditionsTimedOut(failures), timedOut: true)
    }

    /// A condition released its completion handler: if it never answered, the operation fails.
    func conditionWasDropped(index: Int) {
        // The common case, an answered condition, costs one look and never calls user code.
        guard let condition = lifecycle.awaitedCondition(at: index) else { return }
        let name = condition.name // user code: read outside the lock
        let error = AsyncOperationError.conditionNeverAnswered(condition: name)
        switch lifecycle.conditionNeverAnswered(index: index, error: error) {
        case .alreadyAnswered:
            break // a timeout answered for it meanwhile
        case let .fails(then):
            OperationDiagnostics.report(.conditionNeverAnswered, self, "condition '\(name)' released its completion handler without calling it; the operation fails")
            handle(then, timedOut: false)
        }
    }

    func conditionAnswered(index: Int, result: ConditionResult) {
        handle(lifecycle.conditionAnswered(index: index, result: result), timedOut: false)
    }

    private func handle(_ action: OperationLifecycle.ConditionAction, timedOut: Bool) {
        switch action {
        case .none:
            break
        case let .failed(errors):
            logIfLogging(.conditionsAnswered(failures: errors.count))
            if timedOut {
                OperationDiagnostics.report(.conditionTimedOut, self, "a condition did not answer in time; the operation finished without executing")
            }
            finish(errors: errors)
        case let .passed(categories, logger):
            logger?.log(.conditionsAnswered(failures: 0), of: self)
            acquire(categories)
        case let .cleared(logger, then):
            logger?.log(.conditionsAnswered(failures: 0), of: self)
            perform(then)
        }
    }

    // MARK: - Mutual exclusion

    /// Asks for the categories once the conditions passed: only while its queue runs and has a
    /// free slot (otherwise it parks, holding no category, until it may ask). `lineRoot`: the
    /// queue let it through a moment ago (its conditions were all satisfied by construction, so
    /// no user code ran since), and said where its operations stand in categories' lines. After
    /// conditions that were evaluated or asked it is `nil`: the queue may have been suspended
    /// meanwhile, so it asks again.
    private func acquire(_ categories: [String], lineRoot knownRoot: UInt64? = nil) {
        guard !categories.isEmpty else {
            perform(lifecycle.proceedWithoutCategories())
            return
        }
        let queue = lifecycle.queue
        var lineRoot = knownRoot ?? 0
        if knownRoot == nil, let queue {
            let turn = queue.categoryTurn
            lineRoot = turn.lineRoot
            if turn.passage == .parked {
                // Leave the line rather than hold it up, and come back (with the same ticket, so
                // the same place) when the queue resumes or a slot frees up.
                let ticket = leaveCategoryLines()
                if queue.parkUnlessFreeToTakeCategories(self, ticket: ticket) == .parked {
                    logWaiting()
                    return
                }
            }
        }
        // Marked as in line first, so that a finish from now on takes it out of line again. A
        // group's child stands where its group stands, known now that the group executes.
        guard case let .ask(place, logger) = lifecycle.enterLine(lineRoot: lineRoot) else { return }
        let exclusivity = (queue?.engine ?? .shared).exclusivity
        switch exclusivity.acquire(categories, for: self, place: place) {
        case .granted:
            categoriesWereGranted(by: exclusivity, whileAsking: true)
        case .waits:
            if let logger {
                logWaiting(through: logger)
            }
        }
    }

    /// Leaves the lines of the categories it waits for, if it stands in them; returns its ticket.
    private func leaveCategoryLines() -> UInt64 {
        let parking = lifecycle.leaveLineToPark()
        if case let .withdraw(place, categories) = parking.move {
            (parking.queue?.engine ?? .shared).exclusivity.withdraw(place: place, from: categories)
        }
        return parking.ticket
    }

    /// Its queue was suspended while it waits in a category's line: it steps out, and back in
    /// when the queue resumes. One whose request is still on its way is left to that request,
    /// which parks it. (If it was granted its categories meanwhile, the hand-off gives them back
    /// instead: `giveBackCategories()`.)
    func leaveCategoryLinesWhileSuspended() {
        guard let standing = lifecycle.standingInLine else { return }
        let exclusivity = standing.queue.engine.exclusivity
        if !exclusivity.withdraw(place: standing.place, from: standing.categories) {
            // Granted within the process, it may wait for a lock beyond it: it stops asking, and
            // gives the categories back.
            guard standing.lockGate?.queueSuspended() == true else { return }
            exclusivity.release(standing.categories)
        }
        // Out of every line now: marked so that a finish has nothing to withdraw (the withdrawal
        // came first, as a request still on its way must keep its mark).
        _ = lifecycle.leaveLine()
        parkUntilResumed(on: standing.queue, ticket: standing.ticket)
    }

    /// Parks on `queue` until it resumes or has a free slot, or goes on at once if it may.
    private func parkUntilResumed(on queue: AsyncOperationQueue, ticket: UInt64) {
        if queue.parkUnlessFreeToTakeCategories(self, ticket: ticket) == .proceed {
            continueTowardsExecution(on: queue)
        }
    }

    /// Its queue narrowed while it waited with Foundation for a slot: it gives its categories back
    /// (see `OperationLifecycle.yieldCategoriesUntilStarted()`).
    func yieldCategoriesUntilStarted() {
        if case let .release(categories, queue) = lifecycle.yieldCategoriesUntilStarted() {
            releaseCategories(categories, to: (queue?.engine ?? .shared).exclusivity)
        }
    }

    /// Started by Foundation after it gave its categories back: asks for them again, in the line
    /// it stood in, without parking (it holds a slot of Foundation's already).
    func acquireCategoriesOnceStarted(_ categories: [String], lineRoot: UInt64) {
        acquire(categories, lineRoot: lineRoot)
    }

    /// Granted its categories while its queue is suspended, or just as its queue's last slot was
    /// taken: it gives them back (to whoever can run) and asks again when it may.
    func giveBackCategories() {
        switch lifecycle.returnCategoriesWhileSuspended() {
        case let .handOffAnyway(queue, ticket):
            // It will not execute after all (cancelled meanwhile): Foundation starts and finishes it.
            queue?.handOff(self, ticket: ticket, holdsCategories: false)
        case let .release(categories, queue, ticket):
            releaseCategories(categories, to: (queue?.engine ?? .shared).exclusivity)
            if let queue {
                parkUntilResumed(on: queue, ticket: ticket)
            }
        }
    }

    /// Goes on towards execution when its queue lets it: its turn came (a serial queue), or the
    /// queue resumed.
    func continueTowardsExecution(on queue: AsyncOperationQueue) {
        switch lifecycle.resumeAfterSuspension() {
        case .none:
            break
        case let .giveBackTurn(ticket):
            queue.endTurn(ticket: ticket)
        case let .evaluateConditions(conditions):
            let group = lifecycle.queue?.group
            evaluate(conditions, categories: Self.categories(of: conditions), in: group, lineRoot: nil)
        case let .acquireCategories(categories):
            acquire(categories)
        }
    }

    /// Called once every category is held for this operation within the process, by the
    /// `controller` that holds them: `whileAsking` on the thread that asked for them, otherwise
    /// on a thread giving them back (another operation's finish, say). Categories that a lock
    /// extends beyond the process are acquired next, and the operation goes on once it holds
    /// them (`categoryLocksAcquired()`).
    func categoriesWereGranted(by controller: ExclusivityController, whileAsking: Bool) {
        perform(lifecycle.categoriesGranted(leasesAcquired: false), grantedBy: controller, whileAsking: whileAsking)
    }

    /// Holds its categories within the process and their leases beyond it (or finished meanwhile,
    /// and gives the categories back). Called on whichever thread acquired the last lease.
    func categoryLocksAcquired(grantedBy controller: ExclusivityController) {
        perform(lifecycle.categoriesGranted(leasesAcquired: true), grantedBy: controller, whileAsking: false)
    }

    private func perform(_ grant: OperationLifecycle.Grant, grantedBy controller: ExclusivityController, whileAsking: Bool) {
        switch grant {
        case let .acquireLeases(gate):
            gate.begin(for: self)
        case let .held(categories, logger, action):
            logger?.log(.categoriesGranted(categories), of: self)
            perform(action, grantedBy: controller, whileAsking: whileAsking)
        }
    }

    /// Gives `categories` back within the process, and their leases beyond it first.
    func releaseCategories(_ categories: OperationLifecycle.CategoriesToRelease, to controller: ExclusivityController) {
        categories.lockGate?.releaseHeld()
        controller.release(categories.names)
    }

    /// The fencing token of `category` while the operation holds it through a `CategoryLock`:
    /// strictly greater than the token of every earlier grant of the category, in any process on
    /// any host sharing the lock. `nil` while it does not hold the category, once its lock was
    /// lost (the operation is being cancelled with `CategoryLockError.lost`), or if no lock
    /// extends the category beyond this process.
    ///
    /// Hand it to the resource the category protects, so that the resource can turn away a
    /// holder whose lock was lost meanwhile:
    ///
    /// ```swift
    /// let token = operation.fencingToken(for: "billing")
    /// ```
    public final func fencingToken(for category: String) -> UInt64? {
        lifecycle.categoryLockGate?.fencingToken(for: category)
    }

    /// Performs what being cleared to run asks. `whileAsking` is false when the categories were
    /// granted on a thread busy with something else (another operation's finish gave them
    /// back): an operation started by hand (or by Foundation, after giving its categories back)
    /// then executes on a thread of its own rather than inside that finish, which would keep the
    /// other operation's dependents (and whatever waits for them) until it returns.
    func perform(_ action: OperationLifecycle.GrantAction, grantedBy controller: ExclusivityController? = nil, whileAsking: Bool = true) {
        switch action {
        case .none:
            break
        case let .handOff(queue, ticket, holdsCategories):
            queue?.handOff(self, ticket: ticket, holdsCategories: holdsCategories)
        case let .startExecuting(observers, queue, ticket) where whileAsking:
            beginExecution(observers: observers, queue: queue, ticket: ticket) // by hand, or by Foundation after giving categories back
        case let .startExecuting(observers, queue, ticket):
            // `queue`: Foundation started it, after it gave its categories back (see `execute()`)
            let target = queue?.underlyingQueue ?? DispatchQueue.global(qos: qualityOfService.dispatchClass)
            target.async { [self] in
                beginExecution(observers: observers, queue: queue, ticket: ticket)
            }
        case let .releaseAtOnce(categories):
            (controller ?? engine.exclusivity).release(categories)
        case let .finish(finishing):
            perform(finishing)
        }
    }
}

/// The completion handler given to one condition: passes the answer on, and notices being
/// dropped unanswered.
///
/// It needs no lock: the operation's lifecycle takes only the first answer for each condition,
/// and `deinit` runs once nothing can call `deliver` any more. It holds its operation strongly (a
/// weak reference would give every conditioned operation a side table and slow down all its
/// reference counting); the operation lets go of its conditions when it finishes.
final class ConditionAnswer: Sendable {
    private let operation: AsyncOperation
    private let index: Int

    init(operation: AsyncOperation, index: Int) {
        self.operation = operation
        self.index = index
    }

    func deliver(_ result: ConditionResult) {
        operation.conditionAnswered(index: index, result: result)
    }

    deinit {
        operation.conditionWasDropped(index: index)
    }
}

/// The categories of an operation's conditions, read once as it is added (user code, outside any
/// lock), and used for as long as no condition is added.
struct CategoriesReadAtAdd {
    let names: [String]
    /// How many conditions there were when they were read.
    let conditionCount: Int

    /// `names`, if `conditions` are still those they were read from (conditions are only ever
    /// added, so an unchanged count means the same conditions).
    func names(of conditions: [any OperationCondition]) -> [String]? {
        conditions.count == conditionCount ? names : nil
    }
}
