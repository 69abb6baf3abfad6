import Foundation
import Operations
import Testing
import TestSupport

/// Calls `body` when the observed operation finishes.
private struct OnFinish: OperationObserver {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) { body() }
}

private func run(_ operation: Foundation.Operation) {
    AsyncOperationQueue().addOperations([operation], waitUntilFinished: true)
}

@Suite struct CascadeOperationTests {
    // MARK: - Ordering

    @Test func children_runOneAfterAnother_inDeclaredOrder() {
        let order = Recorder<Int>()
        let probe = ConcurrencyProbe()
        let cascade = CascadeOperation { children in
            for index in 0..<10 {
                children.add {
                    AsyncBlockOperation {
                        probe.enter("cascade")
                        order.append(index)
                        usleep(300)
                        probe.leave("cascade")
                    }
                }
            }
        }

        run(cascade)

        #expect(order.all == Array(0..<10))
        #expect(probe.maximum("cascade") == 1)
        #expect(cascade.isFinished && !cascade.isFailed && !cascade.isCancelled)
    }

    @Test func nextChild_isBuiltOnlyOnceThePreviousOneSucceeded() {
        let held = HeldOperations()
        let built = Recorder<String>()
        let cascade = CascadeOperation { children in
            children.add { built.append("first"); return held.make("first") }
            children.add { built.append("second"); return held.make("second") }
        }
        AsyncOperationQueue().addOperation(cascade)

        #expect(held.waitUntilStarted("first"))
        #expect(built.all == ["first"])
        held.finish("first")
        #expect(held.waitUntilStarted("second"))
        #expect(built.all == ["first", "second"])
        held.finish("second")

        #expect(waitUntilFinished([cascade]))
        #expect(!cascade.isFailed)
    }

    @Test func plainFoundationChildren_runInOrder() {
        let order = Recorder<Int>()
        let cascade = CascadeOperation { children in
            for index in 0..<5 {
                children.add { BlockOperation { usleep(200); order.append(index) } }
            }
        }
        run(cascade)
        #expect(order.all == Array(0..<5))
    }

    // MARK: - Completion

    @Test func completion_isCalledOnce_afterEveryChild_beforeTheCascadeFinishes() {
        let events = Recorder<String>()
        let cascade = CascadeOperation { children in
            children.add { AsyncBlockOperation { events.append("child 0") } }
            children.add { AsyncBlockOperation { events.append("child 1") } }
        } completion: {
            events.append("completion")
        } cancellation: { _ in
            events.append("cancellation")
            return .cancel
        }
        cascade.addObserver(OnFinish { events.append("finished") })

        run(cascade)

        #expect(events.all == ["child 0", "child 1", "completion", "finished"])
    }

    @Test func emptyCascade_callsCompletion_andFinishes() {
        let completions = Counter()
        let cascade = CascadeOperation { _ in } completion: { completions.increment() }
        run(cascade)
        #expect(completions.current == 1)
        #expect(cascade.isFinished && !cascade.isFailed)
    }

    // MARK: - Failures and the cancellation handler

    @Test func failedChild_withoutHandler_cancelsTheCascade_andSkipsTheRest() {
        let built = Counter()
        let completions = Counter()
        let cascade = CascadeOperation { children in
            children.add { AsyncBlockOperation {} }
            children.add { AsyncBlockOperation { throw StubError("1") } }
            children.add { built.increment(); return AsyncBlockOperation {} }
        } completion: {
            completions.increment()
        }

        run(cascade)

        #expect(built.current == 0)
        #expect(completions.current == 0)
        #expect(cascade.isCancelled)
        #expect(cascade.errors.compactMap { $0 as? StubError } == [StubError("1")])
    }

    @Test func cancellationHandler_isCalledOnce_withTheFailedChild() {
        let failures = Recorder<CompositeFailure>()
        let completions = Counter()
        let cascade = CascadeOperation { children in
            children.add { AsyncBlockOperation {} }
            children.add {
                let failing = AsyncBlockOperation { throw StubError("7") }
                failing.name = "failing"
                return failing
            }
            children.add { AsyncBlockOperation {} }
        } completion: {
            completions.increment()
        } cancellation: { failure in
            failures.append(failure)
            return .cancel
        }

        run(cascade)

        #expect(failures.count == 1)
        let failure = failures.all.first
        #expect(failure?.index == 1)
        #expect(failure?.attempt == 1)
        #expect(failure?.child.name == "failing")
        #expect(failure?.isCancelled == false)
        #expect(failure?.errors.compactMap { $0 as? StubError } == [StubError("7")])
        #expect(completions.current == 0)
    }

    @Test func cancelledChild_reachesTheHandler_asCancelled() {
        let held = HeldOperations()
        let launched = Recorder<AsyncBlockOperation>()
        let failures = Recorder<CompositeFailure>()
        let cascade = CascadeOperation { children in
            children.add {
                let child = held.make("child")
                launched.append(child)
                return child
            }
        } cancellation: { failure in
            failures.append(failure)
            return .cancel
        }
        AsyncOperationQueue().addOperation(cascade)
        #expect(held.waitUntilStarted("child"))

        launched.all.first?.cancel()

        #expect(waitUntilFinished([cascade]))
        #expect(failures.count == 1)
        #expect(failures.all.first?.isCancelled == true)
        #expect(failures.all.first?.errors.isEmpty == true)
        #expect(cascade.isCancelled)
    }

    @Test func rerun_runsANewAttempt_beforeTheNextChild_andDropsTheFailedAttemptsErrors() {
        let order = Recorder<String>()
        let attempts = Counter()
        let builds = Counter()
        let handled = Recorder<Int>()
        let completions = Counter()
        let cascade = CascadeOperation { children in
            children.add {
                builds.increment()
                return AsyncBlockOperation {
                    let attempt = attempts.increment()
                    order.append("attempt \(attempt)")
                    if attempt == 1 { throw StubError("1") }
                }
            }
            children.add { AsyncBlockOperation { order.append("next") } }
        } completion: {
            completions.increment()
        } cancellation: { failure in
            handled.append(failure.attempt)
            return .rerun
        }

        run(cascade)

        #expect(order.all == ["attempt 1", "attempt 2", "next"])
        #expect(builds.current == 2)
        #expect(handled.all == [1])
        #expect(completions.current == 1)
        #expect(!cascade.isFailed && !cascade.isCancelled)
    }

    @Test func rerun_asksAgainAfterEachFailedAttempt_andKeepsOnlyTheLastAttemptsErrors() {
        let attempts = Counter()
        let handled = Recorder<Int>()
        let cascade = CascadeOperation { children in
            children.add { AsyncBlockOperation { throw StubError("\(attempts.increment())") } }
        } cancellation: { failure in
            handled.append(failure.attempt)
            return failure.attempt < 3 ? .rerun : .cancel
        }

        run(cascade)

        #expect(handled.all == [1, 2, 3])
        #expect(cascade.isCancelled)
        #expect(cascade.errors.compactMap { $0 as? StubError } == [StubError("3")])
    }

    @Test func rerunAfterDelay_waitsAtLeastTheDelay_thenRunsANewAttempt() {
        let attempts = Counter()
        let failedAt = Recorder<DispatchTime>() // not ContinuousClock: the package supports macOS 10.15
        let rerunAt = Recorder<DispatchTime>()
        let completions = Counter()
        let cascade = CascadeOperation { children in
            children.add {
                AsyncBlockOperation {
                    if attempts.increment() == 1 { throw StubError("1") }
                    rerunAt.append(.now())
                }
            }
        } completion: {
            completions.increment()
        } cancellation: { _ in
            failedAt.append(.now())
            return .rerun(after: 0.05)
        }

        run(cascade)

        #expect(attempts.current == 2)
        #expect(completions.current == 1)
        #expect(!cascade.isFailed)
        if let failed = failedAt.all.first, let rerun = rerunAt.all.first {
            #expect(rerun.uptimeNanoseconds - failed.uptimeNanoseconds >= 45_000_000)
        }
    }

    @Test func carryOn_runsTheRest_andCompletes_withoutTheFailedChildsErrors() {
        let order = Recorder<String>()
        let completions = Counter()
        let cascade = CascadeOperation { children in
            children.add { AsyncBlockOperation { order.append("first") } }
            children.add { AsyncBlockOperation { order.append("optional"); throw StubError("2") } }
            children.add { AsyncBlockOperation { order.append("last") } }
        } completion: {
            completions.increment()
        } cancellation: { _ in
            .carryOn
        }

        run(cascade)

        #expect(order.all == ["first", "optional", "last"])
        #expect(completions.current == 1)
        #expect(!cascade.isFailed && !cascade.isCancelled)
    }

    @Test func factoryReturningAnOperationThatAlreadyRan_failsTheCascade() {
        let shared = AsyncBlockOperation { throw StubError("1") }
        shared.name = "shared"
        let cascade = CascadeOperation { children in
            children.add { shared }
        } cancellation: { _ in
            .rerun
        }
        cascade.name = "reusing"

        run(cascade)

        #expect(cascade.isCancelled)
        let errors = cascade.errors.compactMap { $0 as? AsyncOperationError }
        #expect(errors == [.childReused(composite: "reusing", child: "shared")])
    }

    // MARK: - Cancelling the cascade

    @Test func cancelledBeforeStart_buildsNoChild_andCallsNoHandler() {
        let calls = Counter()
        let cascade = CascadeOperation { children in
            children.add { calls.increment(); return AsyncBlockOperation {} }
        } completion: {
            calls.increment()
        } cancellation: { _ in
            calls.increment()
            return .cancel
        }
        cascade.cancel()

        run(cascade)

        #expect(cascade.isFinished && cascade.isCancelled)
        #expect(calls.current == 0)
    }

    @Test func cancelledWhileAChildRuns_cancelsIt_andBuildsNothingMore() {
        let held = HeldOperations()
        let built = Counter()
        let handlerCalls = Counter()
        let cascade = CascadeOperation { children in
            children.add { held.make("running") }
            children.add { built.increment(); return AsyncBlockOperation {} }
        } completion: {
            handlerCalls.increment()
        } cancellation: { _ in
            handlerCalls.increment()
            return .rerun
        }
        AsyncOperationQueue().addOperation(cascade)
        #expect(held.waitUntilStarted("running"))

        cascade.cancel()

        #expect(waitUntilFinished([cascade]))
        #expect(cascade.isCancelled)
        #expect(built.current == 0)
        #expect(handlerCalls.current == 0)
        #expect(held.startCount("running") == 1)
    }

    @Test func cancelledWhileTheHandlerDecides_ignoresItsAnswer() {
        let box = WeakBox<CascadeOperation>()
        let builds = Counter()
        let cascade = CascadeOperation { children in
            children.add {
                builds.increment()
                return AsyncBlockOperation { throw StubError("1") }
            }
        } cancellation: { _ in
            box.object?.cancel()
            return .rerun
        }
        box.object = cascade

        run(cascade)

        #expect(builds.current == 1)
        #expect(cascade.isCancelled)
        #expect(cascade.errors.compactMap { $0 as? StubError } == [StubError("1")])
    }

    @Test func cancelledDuringARerunDelay_finishesWithoutWaitingForIt() {
        let builds = Counter()
        let handled = Signal()
        let cascade = CascadeOperation { children in
            children.add {
                builds.increment()
                return AsyncBlockOperation { throw StubError("1") }
            }
        } cancellation: { _ in
            handled.signal()
            return .rerun(after: 600)
        }
        AsyncOperationQueue().addOperation(cascade)
        #expect(handled.wait())

        cascade.cancel()

        #expect(waitUntilFinished([cascade]))
        #expect(cascade.isCancelled)
        #expect(builds.current == 1)
    }

    @Test func subclass_declaresItsChildrenInItsInitializer() {
        final class SignUp: CascadeOperation, @unchecked Sendable {
            let steps = Recorder<String>()

            init() {
                let steps = self.steps
                super.init { children in
                    children.add { AsyncBlockOperation { steps.append("account") } }
                    children.add { AsyncBlockOperation { steps.append("avatar") } }
                }
            }
        }
        let signUp = SignUp()
        run(signUp)
        #expect(signUp.steps.all == ["account", "avatar"])
    }

    // MARK: - Memory

    @Test func finishedCascade_releasesItself_itsChildren_andWhatItsHandlersCapture() {
        final class Captured: Sendable {}
        let childProbes = Recorder<WeakProbe<AsyncBlockOperation>>()
        let attempts = Counter()
        var captured: Captured? = Captured()
        let capturedProbe = WeakProbe(captured!)
        var cascade: CascadeOperation? = { [captured] in
            CascadeOperation { children in
                for _ in 0..<3 {
                    children.add {
                        let child = AsyncBlockOperation { if attempts.increment() == 2 { throw StubError("1") } }
                        childProbes.append(WeakProbe(child))
                        return child
                    }
                }
            } completion: {
                _ = captured
            } cancellation: { _ in
                _ = captured
                return .rerun
            }
        }()
        captured = nil
        let cascadeProbe = WeakProbe(cascade!)

        run(cascade!)
        #expect(cascade?.isFailed == false)
        cascade = nil

        #expect(cascadeProbe.isReleased())
        #expect(capturedProbe.isReleased())
        #expect(childProbes.count == 4)
        #expect(childProbes.all.allSatisfy { $0.isReleased() })
    }

    @Test func cascadeThatNeverRan_isReleased() {
        var cascade: CascadeOperation? = CascadeOperation { children in
            children.add { AsyncBlockOperation {} }
        }
        let probe = WeakProbe(cascade!)
        cascade = nil
        #expect(probe.isReleased())
    }

    // Found in review: a composite finished by hand while a child ran drained its children, but
    // its machine went on: each cancelled child reached the cancellation handler, and a handler
    // that always reruns launched attempt after attempt, so the composite never finished.
    @Test func aCascadeFinishedByHandWhileAChildRuns_callsNoHandler_andFinishesAfterTheChild() {
        // Given a cascade whose running child runs until told, with handlers that would rerun
        let held = HeldOperations()
        let childName = uniqueName("child")
        let handlerCalls = Counter()
        let completionCalls = Counter()
        let cascade = CascadeOperation { children in
            children.add { held.make(childName) }
        } completion: {
            completionCalls.increment()
        } cancellation: { _ in
            handlerCalls.increment()
            return .rerun
        }
        let queue = AsyncOperationQueue()
        queue.addOperation(cascade)
        #expect(held.waitUntilStarted(childName))

        // When it is finished by hand
        cascade.finish(with: StubError("finished by hand"))

        // Then its child is cancelled, neither handler is called, and it finishes after the child
        #expect(waitUntilFinished([cascade], timeout: 20))
        #expect(handlerCalls.current == 0 && completionCalls.current == 0)
        #expect(cascade.errors.contains { ($0 as? StubError)?.label == "finished by hand" })
        held.finish(childName)
    }
}
