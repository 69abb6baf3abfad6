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

@Suite struct TransactionOperationTests {
    // MARK: - Running together

    @Test func children_allStartBeforeAnyFinishes() {
        let held = HeldOperations()
        let keys = (0..<4).map { "child \($0)" }
        let transaction = TransactionOperation { children in
            for key in keys {
                children.add { held.make(key) }
            }
        }
        AsyncOperationQueue().addOperation(transaction)

        // Every child runs although none has finished yet.
        for key in keys {
            #expect(held.waitUntilStarted(key))
        }
        #expect(!transaction.isFinished)
        for key in keys.reversed() {
            held.finish(key)
        }

        #expect(waitUntilFinished([transaction]))
        #expect(!transaction.isFailed)
    }

    @Test func completion_isCalledOnce_whicheverOrderChildrenFinishIn_beforeTheTransactionFinishes() {
        let held = HeldOperations()
        let events = Recorder<String>()
        let transaction = TransactionOperation { children in
            children.add { held.make("a") }
            children.add { held.make("b") }
            children.add { held.make("c") }
        } completion: {
            events.append("completion")
        }
        transaction.addObserver(OnFinish { events.append("finished") })
        AsyncOperationQueue().addOperation(transaction)
        for key in ["a", "b", "c"] {
            #expect(held.waitUntilStarted(key))
        }

        for key in ["b", "c", "a"] {
            #expect(events.all.isEmpty)
            held.finish(key)
        }

        #expect(waitUntilFinished([transaction]))
        #expect(waitUntil { events.count == 2 })
        #expect(events.all == ["completion", "finished"])
    }

    @Test func emptyTransaction_callsCompletion_andFinishes() {
        let completions = Counter()
        let transaction = TransactionOperation { _ in } completion: { completions.increment() }
        run(transaction)
        #expect(completions.current == 1)
        #expect(transaction.isFinished && !transaction.isFailed)
    }

    @Test func maxConcurrentOperationCount_limitsChildrenRunningAtOnce() {
        let probe = ConcurrencyProbe()
        let transaction = TransactionOperation { children in
            for _ in 0..<6 {
                children.add { AsyncBlockOperation { probe.enter("t"); usleep(300); probe.leave("t") } }
            }
        }
        transaction.maxConcurrentOperationCount = 1
        run(transaction)
        #expect(probe.maximum("t") == 1)
    }

    // MARK: - Failures and the cancellation handler

    @Test func childrenFailingTogether_callTheHandlerOnce_whenItCancels() {
        for _ in 0..<50 {
            let handlerCalls = Counter()
            let completions = Counter()
            let transaction = TransactionOperation { children in
                for code in 0..<8 {
                    children.add { AsyncBlockOperation { throw StubError("\(code)") } }
                }
            } completion: {
                completions.increment()
            } cancellation: { _ in
                handlerCalls.increment()
                return .cancel
            }

            run(transaction)

            #expect(handlerCalls.current == 1)
            #expect(completions.current == 0)
            #expect(transaction.isCancelled)
            #expect(!transaction.errors.isEmpty)
        }
    }

    @Test func handler_hearsEveryFailure_oneAtATime_whenCarryingOn() {
        let probe = ConcurrencyProbe()
        let indices = Recorder<Int>()
        let completions = Counter()
        let transaction = TransactionOperation { children in
            for code in 0..<8 {
                children.add { AsyncBlockOperation { throw StubError("\(code)") } }
            }
        } completion: {
            completions.increment()
        } cancellation: { failure in
            probe.enter("handler")
            indices.append(failure.index)
            usleep(1_000)
            probe.leave("handler")
            return .carryOn
        }

        run(transaction)

        #expect(probe.maximum("handler") == 1)
        #expect(indices.all.sorted() == Array(0..<8))
        #expect(completions.current == 1)
        #expect(!transaction.isFailed && !transaction.isCancelled)
    }

    @Test func cancelAnswer_cancelsTheChildrenStillRunning() {
        let held = HeldOperations()
        let launched = Recorder<AsyncBlockOperation>()
        let transaction = TransactionOperation { children in
            children.add {
                let slow = held.make("slow")
                launched.append(slow)
                return slow
            }
            children.add { held.make("failing") }
        }
        AsyncOperationQueue().addOperation(transaction)
        #expect(held.waitUntilStarted("slow"))
        #expect(held.waitUntilStarted("failing"))

        held.finish("failing", with: StubError("3"))

        #expect(waitUntilFinished([transaction]))
        #expect(transaction.isCancelled)
        #expect(launched.all.first?.isCancelled == true)
        #expect(transaction.errors.compactMap { $0 as? StubError } == [StubError("3")])
    }

    @Test func rerun_runsOnlyTheFailedChildAgain() {
        let builds = Recorder<String>()
        let attempts = Counter()
        let completions = Counter()
        let transaction = TransactionOperation { children in
            children.add { builds.append("steady"); return AsyncBlockOperation {} }
            children.add {
                builds.append("flaky")
                return AsyncBlockOperation { if attempts.increment() == 1 { throw StubError("1") } }
            }
        } completion: {
            completions.increment()
        } cancellation: { _ in
            .rerun
        }

        run(transaction)

        #expect(builds.all.sorted() == ["flaky", "flaky", "steady"])
        #expect(completions.current == 1)
        #expect(!transaction.isFailed)
    }

    @Test func carryOn_completesWithoutTheFailedChild() {
        let completions = Counter()
        let transaction = TransactionOperation { children in
            children.add { AsyncBlockOperation {} }
            children.add { AsyncBlockOperation { throw StubError("1") } }
        } completion: {
            completions.increment()
        } cancellation: { _ in
            .carryOn
        }
        run(transaction)
        #expect(completions.current == 1)
        #expect(!transaction.isFailed)
    }

    @Test func cancelledPlainChild_reachesTheHandler() {
        let failures = Recorder<CompositeFailure>()
        let transaction = TransactionOperation { children in
            children.add { BlockOperation {} }
            children.add {
                let cancelled = BlockOperation {}
                cancelled.cancel()
                return cancelled
            }
        } cancellation: { failure in
            failures.append(failure)
            return .carryOn
        }
        run(transaction)
        #expect(failures.count == 1)
        #expect(failures.all.first?.index == 1)
        #expect(failures.all.first?.isCancelled == true)
        #expect(!transaction.isCancelled)
    }

    // MARK: - Cancelling the transaction

    @Test func cancelledBeforeStart_buildsNoChild_andCallsNoHandler() {
        let calls = Counter()
        let transaction = TransactionOperation { children in
            children.add { calls.increment(); return AsyncBlockOperation {} }
        } completion: {
            calls.increment()
        } cancellation: { _ in
            calls.increment()
            return .cancel
        }
        transaction.cancel()
        run(transaction)
        #expect(transaction.isCancelled && transaction.isFinished)
        #expect(calls.current == 0)
    }

    @Test func cancelledWhileChildrenRun_cancelsThemAll_andCallsNoHandler() {
        let held = HeldOperations()
        let launched = Recorder<AsyncBlockOperation>()
        let handlerCalls = Counter()
        let transaction = TransactionOperation { children in
            for index in 0..<3 {
                children.add {
                    let child = held.make("child \(index)")
                    launched.append(child)
                    return child
                }
            }
        } completion: {
            handlerCalls.increment()
        } cancellation: { _ in
            handlerCalls.increment()
            return .rerun
        }
        AsyncOperationQueue().addOperation(transaction)
        for index in 0..<3 {
            #expect(held.waitUntilStarted("child \(index)"))
        }

        transaction.cancel()

        #expect(waitUntilFinished([transaction]))
        #expect(launched.all.allSatisfy { $0.isCancelled && $0.isFinished })
        #expect(handlerCalls.current == 0)
    }

    @Test func cancelledDuringARerunDelay_finishesWithoutRerunning() {
        let held = HeldOperations()
        let flakyBuilds = Counter()
        let handled = Signal()
        let transaction = TransactionOperation { children in
            children.add { held.make("steady") }
            children.add {
                flakyBuilds.increment()
                return AsyncBlockOperation { throw StubError("1") }
            }
        } cancellation: { _ in
            handled.signal()
            return .rerun(after: 600)
        }
        AsyncOperationQueue().addOperation(transaction)
        #expect(handled.wait())

        transaction.cancel()

        #expect(waitUntilFinished([transaction]))
        #expect(flakyBuilds.current == 1)
        #expect(transaction.isCancelled)
    }

    // MARK: - Memory

    @Test func finishedTransaction_isReleasedWithItsChildren() {
        let childProbes = Recorder<WeakProbe<AsyncBlockOperation>>()
        var transaction: TransactionOperation? = TransactionOperation { children in
            for _ in 0..<4 {
                children.add {
                    let child = AsyncBlockOperation {}
                    childProbes.append(WeakProbe(child))
                    return child
                }
            }
        }
        let probe = WeakProbe(transaction!)
        run(transaction!)
        transaction = nil
        #expect(probe.isReleased())
        #expect(childProbes.all.allSatisfy { $0.isReleased() })
    }
}
