import Foundation
import Operations
import Testing
import TestSupport

private extension StubError {
    static let broken = StubError("broken")
}

@Suite struct ResultOperationTests {
    @Test func finishProducing_givesTheOutputAsResult() throws {
        let operation = ResultBlockOperation { 42 }
        AsyncOperationQueue().addOperations([operation], waitUntilFinished: true)
        #expect(operation.output == 42)
        #expect(try operation.result?.get() == 42)
    }

    @Test func thrownError_isTheResult_andNoOutput() {
        let operation = ResultBlockOperation<Int> { throw StubError.broken }
        AsyncOperationQueue().addOperations([operation], waitUntilFinished: true)
        #expect(operation.output == nil)
        guard case let .failure(error)? = operation.result else {
            Issue.record("expected a failure")
            return
        }
        #expect(error as? StubError == .broken)
    }

    @Test func finishingWithoutOutput_saysSo_ratherThanCancellation() {
        final class Forgetful: ResultOperation<Int>, @unchecked Sendable {
            override func execute() { finish() }
        }
        let operation = Forgetful()
        AsyncOperationQueue().addOperations([operation], waitUntilFinished: true)
        guard case let .failure(error)? = operation.result else {
            Issue.record("expected a failure")
            return
        }
        #expect(error as? AsyncOperationError == .finishedWithoutOutput(operation: "Forgetful"))
    }

    @Test func cancelledOperation_isACancellation_evenIfItProducedAValue() {
        final class LateNoticer: ResultOperation<Int>, @unchecked Sendable {
            override func execute() {
                cancel()
                finish(producing: 7)
            }
        }
        let operation = LateNoticer()
        AsyncOperationQueue().addOperations([operation], waitUntilFinished: true)
        guard case let .failure(error)? = operation.result else {
            Issue.record("expected a failure")
            return
        }
        #expect(error is CancellationError)
    }

    @Test func concurrentFinishes_neverLeaveBothAnOutputAndAnError() {
        final class Racer: ResultOperation<Int>, @unchecked Sendable {
            override func execute() {
                DispatchQueue.global().async { self.finish(producing: 1) }
                DispatchQueue.global().async { self.finish(with: StubError.broken) }
            }
        }
        let queue = AsyncOperationQueue()
        let racers = (0..<200).map { _ in Racer() }
        queue.addOperations(racers, waitUntilFinished: true)
        for racer in racers {
            #expect((racer.output == nil) != racer.errors.isEmpty, "output \(String(describing: racer.output)), errors \(racer.errors)")
        }
    }

    @Test func errorDescriptions_handleInfiniteIntervals() {
        #expect(AsyncOperationError.timedOut(after: .infinity).description.contains("inf"))
        #expect(AsyncOperationError.timedOut(after: 2).description.contains("2 s"))
    }
}
