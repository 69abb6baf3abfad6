import Foundation
@testable import Operations
import Testing
import TestSupport

@Suite("The gate's listeners")
struct GateOperationTests {
    private typealias Listening = GateOperation.Listening

    private static func listener() -> GateOperation.Listener {
        .finishListener(FinishListener())
    }

    private static func identity(_ listener: GateOperation.Listener?) -> ObjectIdentifier? {
        guard case let .finishListener(listener) = listener else { return nil }
        return ObjectIdentifier(listener)
    }

    private static func released(_ keeping: Listening.Keeping) -> ObjectIdentifier?? {
        guard case let .release(listener) = keeping else { return nil }
        return .some(identity(listener))
    }

    @Test
    func keepsTheLatestStepsListener_andGivesItToStopOnceOver() {
        var listening = Listening.listening(step: 0, current: nil)
        let first = listening.beginStep()
        let kept = Self.listener()
        #expect(Self.released(listening.keep(kept, madeIn: first)) == .some(nil), "nothing to release")
        #expect(Self.identity(listening.end()) == Self.identity(kept))
    }

    @Test
    func aListenerReplacedByTheNextStepsOne_isReleased() {
        var listening = Listening.listening(step: 0, current: nil)
        let first = Self.listener()
        _ = listening.keep(first, madeIn: listening.beginStep())
        let second = Self.listener()
        #expect(Self.released(listening.keep(second, madeIn: listening.beginStep())) == .some(Self.identity(first)))
        #expect(Self.identity(listening.end()) == Self.identity(second))
    }

    @Test
    func aListenerOvertakenByALaterStep_isReleased_notKept() {
        // Given a listener that reported before the gate kept it, and the next step's listener
        var listening = Listening.listening(step: 0, current: nil)
        let first = listening.beginStep()
        let second = listening.beginStep()
        let later = Self.listener()
        _ = listening.keep(later, madeIn: second)

        // When the overtaken one comes to be kept, it is released
        let overtaken = Self.listener()
        #expect(Self.released(listening.keep(overtaken, madeIn: first)) == .some(Self.identity(overtaken)))

        // Then the later one is the one to stop once over
        #expect(Self.identity(listening.end()) == Self.identity(later))
    }

    @Test
    func aListenerMadeOnceOver_isToBeStoppedAtOnce() {
        var listening = Listening.listening(step: 0, current: nil)
        let step = listening.beginStep()
        #expect(listening.end() == nil)
        let late = Self.listener()
        guard case let .stop(stopped) = listening.keep(late, madeIn: step) else {
            Issue.record("a listener made once over was not to be stopped")
            return
        }
        #expect(Self.identity(stopped) == Self.identity(late))
        #expect(listening.end() == nil)
    }

    @Test
    func theGateStopsItsListener_whenItsOperationHasFinished() {
        // Given a gate listening for an `AsyncOperation` that has not finished
        let dependency = AsyncBlockOperation {}
        let gate = GateOperation(holdingBack: BlockOperation {}, ticket: 1)
        let heard = Locked<Bool>.make(false)
        gate.keepListener {
            let listener = FinishListener()
            listener.listen(to: dependency) { heard.withLock { $0 = true } }
            return .finishListener(listener)
        }

        // When the gate stops listening, and the dependency then finishes
        gate.stopListening()
        dependency.start()
        #expect(waitUntilFinished([dependency]))

        // Then the listener heard nothing
        #expect(!heard.withLock { $0 })
    }
}
