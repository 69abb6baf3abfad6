import Foundation
@testable import Operations
import Testing
import TestSupport

@Suite("The gate's listeners")
struct GateOperationTests {
    private static func listener() -> GateOperation.Wait {
        .listener(FinishListener())
    }

    private static func identity(_ wait: GateOperation.Wait?) -> ObjectIdentifier? {
        guard case let .listener(listener) = wait else { return nil }
        return ObjectIdentifier(listener)
    }

    @Test
    func keepsTheLatestStepsListener_andGivesItToStopOnceOver() {
        var waits = GateOperation.Waits()
        let first = waits.beginStep()
        let kept = Self.listener()
        #expect(waits.keep(kept, madeIn: first) == nil)
        #expect(Self.identity(waits.end()) == Self.identity(kept))
    }

    @Test
    func aListenerOvertakenByALaterStep_isNeitherKeptNorStopped() {
        // Given a listener that reported before the gate kept it, and the next step's listener
        var waits = GateOperation.Waits()
        let first = waits.beginStep()
        let second = waits.beginStep()
        let later = Self.listener()
        #expect(waits.keep(later, madeIn: second) == nil)

        // When the overtaken one comes to be kept
        #expect(waits.keep(Self.listener(), madeIn: first) == nil)

        // Then the later one is the one to stop once over
        #expect(Self.identity(waits.end()) == Self.identity(later))
    }

    @Test
    func aListenerMadeOnceOver_isGivenBackToStopAtOnce() {
        var waits = GateOperation.Waits()
        let step = waits.beginStep()
        #expect(waits.end() == nil)
        let late = Self.listener()
        #expect(Self.identity(waits.keep(late, madeIn: step)) == Self.identity(late))
        #expect(waits.end() == nil)
    }

    @Test
    func theGateStopsItsListener_whenItsOperationHasFinished() {
        // Given a gate listening for an `AsyncOperation` that never finishes
        let dependency = AsyncBlockOperation {}
        let gate = GateOperation(holdingBack: BlockOperation {}, ticket: 1)
        let heard = Locked<Bool>.make(false)
        let listener = FinishListener()
        gate.wait {
            listener.listen(to: dependency) { heard.withLock { $0 = true } }
            return .listener(listener)
        }
        let kept = WeakProbe(listener)

        // When the gate stops waiting, and the dependency then finishes
        gate.stopWaiting()
        dependency.start()
        #expect(waitUntilFinished([dependency]))

        // Then the listener heard nothing
        #expect(!heard.withLock { $0 })
        withExtendedLifetime(kept) {}
    }
}
