import Foundation
import Operations
import Testing
import TestSupport

private func run(_ operation: Foundation.Operation) {
    AsyncOperationQueue().addOperations([operation], waitUntilFinished: true)
}

@Suite struct CompositeNestingTests {
    @Test func transactionInsideCascade_andCascadeInsideTransaction_keepTheirOrder() {
        let order = Recorder<String>()
        let completions = Recorder<String>()
        let outer = CascadeOperation { steps in
            steps.add { AsyncBlockOperation { order.append("prepare") } }
            steps.add {
                TransactionOperation { parallel in
                    parallel.add {
                        CascadeOperation { inner in
                            inner.add { AsyncBlockOperation { usleep(500); order.append("inner 1") } }
                            inner.add { AsyncBlockOperation { order.append("inner 2") } }
                        } completion: {
                            completions.append("inner cascade")
                        }
                    }
                    parallel.add { AsyncBlockOperation { order.append("side") } }
                } completion: {
                    completions.append("transaction")
                }
            }
            steps.add { AsyncBlockOperation { order.append("wrap up") } }
        } completion: {
            completions.append("outer cascade")
        }

        run(outer)

        let ran = order.all
        #expect(ran.first == "prepare")
        #expect(ran.last == "wrap up")
        #expect(Set(ran.dropFirst().dropLast()) == ["inner 1", "inner 2", "side"])
        #expect(ran.firstIndex(of: "inner 1")! < ran.firstIndex(of: "inner 2")!)
        #expect(completions.all == ["inner cascade", "transaction", "outer cascade"])
        #expect(!outer.isFailed)
    }

    @Test func failureResolvedInside_isInvisibleOutside() {
        let attempts = Counter()
        let outerHandlerCalls = Counter()
        let outerCompletions = Counter()
        let outer = TransactionOperation { children in
            children.add {
                CascadeOperation { inner in
                    inner.add { AsyncBlockOperation { if attempts.increment() == 1 { throw StubError("1") } } }
                } cancellation: { _ in
                    .rerun
                }
            }
            children.add { AsyncBlockOperation {} }
        } completion: {
            outerCompletions.increment()
        } cancellation: { _ in
            outerHandlerCalls.increment()
            return .cancel
        }

        run(outer)

        #expect(attempts.current == 2)
        #expect(outerHandlerCalls.current == 0)
        #expect(outerCompletions.current == 1)
        #expect(!outer.isFailed)
    }

    @Test func innerCompositeThatGaveUp_reachesTheOuterHandler_whichRunsANewOne() {
        let innerBuilds = Counter()
        let attempts = Counter()
        let outerFailures = Recorder<CompositeFailure>()
        let outerCompletions = Counter()
        let outer = CascadeOperation { steps in
            steps.add {
                innerBuilds.increment()
                return TransactionOperation { parallel in
                    parallel.add { AsyncBlockOperation { if attempts.increment() == 1 { throw StubError("9") } } }
                    parallel.add { AsyncBlockOperation {} }
                }
            }
        } completion: {
            outerCompletions.increment()
        } cancellation: { failure in
            outerFailures.append(failure)
            return .rerun
        }

        run(outer)

        #expect(innerBuilds.current == 2)
        #expect(outerFailures.count == 1)
        let failure = outerFailures.all.first
        #expect(failure?.child is TransactionOperation)
        #expect(failure?.isCancelled == true)
        #expect(failure?.errors.compactMap { $0 as? StubError } == [StubError("9")])
        #expect(outerCompletions.current == 1)
        #expect(!outer.isFailed)
    }

    @Test func cancellingTheOuterComposite_cancelsTheInnerOnesChildren_andCallsNoHandler() {
        let held = HeldOperations()
        let launched = Recorder<AsyncBlockOperation>()
        let handlerCalls = Counter()
        let outer = TransactionOperation { children in
            children.add {
                CascadeOperation { inner in
                    inner.add {
                        let child = held.make("deep")
                        launched.append(child)
                        return child
                    }
                    inner.add { handlerCalls.increment(); return AsyncBlockOperation {} }
                } completion: {
                    handlerCalls.increment()
                } cancellation: { _ in
                    handlerCalls.increment()
                    return .rerun
                }
            }
        } completion: {
            handlerCalls.increment()
        } cancellation: { _ in
            handlerCalls.increment()
            return .rerun
        }
        AsyncOperationQueue().addOperation(outer)
        #expect(held.waitUntilStarted("deep"))

        outer.cancel()

        #expect(waitUntilFinished([outer]))
        #expect(launched.all.first?.isCancelled == true)
        #expect(handlerCalls.current == 0)
    }

    // Found by a soak: a composite cancelled just as its factory made a child dropped that child,
    // which then never finished.
    @Test(arguments: [true, false])
    func compositeCancelledWhileItsFactoryMakesAChild_stillFinishesThatChild(cascade: Bool) {
        // Given a composite whose factory cancels the composite before returning its child
        let box = WeakBox<CompositeOperation>()
        let made = Recorder<AsyncBlockOperation>()
        let declare: (inout CompositeChildren) -> Void = { children in
            children.add {
                box.object?.cancel()
                let child = AsyncBlockOperation {}
                made.append(child)
                return child
            }
        }
        let composite: CompositeOperation = cascade ? CascadeOperation(declare) : TransactionOperation(declare)
        box.object = composite

        // When it runs
        run(composite)

        // Then the child it made finished (cancelled), before the composite did
        #expect(composite.isFinished && composite.isCancelled)
        #expect(made.all.count == 1)
        #expect(made.all.allSatisfy { $0.isFinished && $0.isCancelled })
    }
}
