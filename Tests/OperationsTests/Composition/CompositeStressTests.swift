import Foundation
import Operations
import Testing
import TestSupport

/// A small deterministic random generator, so a failing round can be replayed from its seed.
private struct Dice: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// What one child does on each attempt, decided up front.
private enum Behaviour: CaseIterable {
    case succeed, fail, cancelItself
}

@Suite struct CompositeStressTests {
    @Test(arguments: [false, true])
    func randomFailuresAndAnswers_keepTheHandlersContract(concurrent: Bool) {
        for round in 0..<150 {
            var dice = Dice(seed: UInt64(round) &* 7919 &+ (concurrent ? 1 : 0))
            let childCount = Int.random(in: 0...6, using: &dice)
            let plans = (0..<childCount).map { _ in
                (0..<4).map { _ in Behaviour.allCases.randomElement(using: &dice)! }
            }
            let answers = (0..<32).map { _ -> CompositeResolution in
                [.cancel, .rerun, .rerun(after: 0.001), .carryOn].randomElement(using: &dice)!
            }

            let completions = Counter()
            let handlerCalls = Counter()
            let callsAfterCancel = Counter()
            let gaveUp = Counter()
            let probe = ConcurrencyProbe()

            let declare: (inout CompositeChildren) -> Void = { children in
                for plan in plans {
                    let attempts = Counter()
                    children.add {
                        let behaviour = plan[min(attempts.increment(), plan.count) - 1]
                        let child = AsyncBlockOperation {
                            usleep(UInt32.random(in: 0...200))
                            if behaviour == .fail { throw StubError("child failed") }
                        }
                        if behaviour == .cancelItself { child.cancel() }
                        return child
                    }
                }
            }
            let completion: @Sendable () -> Void = { completions.increment() }
            let cancellation: @Sendable (CompositeFailure) -> CompositeResolution = { failure in
                probe.enter("handler")
                defer { probe.leave("handler") }
                if gaveUp.current > 0 { callsAfterCancel.increment() }
                let call = handlerCalls.increment()
                var answer = answers[call % answers.count]
                if case .rerun = answer, failure.attempt >= 4 { answer = .carryOn }
                if answer == .cancel { gaveUp.increment() }
                return answer
            }
            let composite: CompositeOperation = concurrent
                ? TransactionOperation(declare, completion: completion, cancellation: cancellation)
                : CascadeOperation(declare, completion: completion, cancellation: cancellation)

            AsyncOperationQueue().addOperations([composite], waitUntilFinished: true)

            #expect(composite.isFinished, "round \(round)")
            #expect(completions.current <= 1, "round \(round)")
            #expect(callsAfterCancel.current == 0, "round \(round)")
            #expect(probe.maximum("handler") <= 1, "round \(round)")
            if gaveUp.current > 0 {
                #expect(composite.isCancelled && completions.current == 0, "round \(round)")
            } else {
                #expect(!composite.isCancelled && !composite.isFailed && completions.current == 1, "round \(round)")
            }
        }
    }
}
