import Foundation
import Operations
import Testing
import TestSupport

/// `AsyncBlockOperation`: its two kinds of block, its continuation, cancellation and release.
@Suite struct AsyncBlockOperationTests {
    init() {
        _ = DiagnosticsLog.shared // capture diagnostics before any test reports one
    }

    // MARK: - Throwing block

    @Test func throwingBlock_runsOnceAndFinishesWithoutErrors() {
        // Given a block that returns normally
        let ran = Counter()
        let operation = AsyncBlockOperation { ran.increment() }

        // When it runs
        AsyncOperationQueue().addOperation(operation)

        // Then it ran once and finished without errors
        #expect(waitUntilFinished([operation]))
        #expect(ran.current == 1)
        #expect(operation.errors.isEmpty)
        #expect(!operation.isFailed)
    }

    @Test func throwingBlock_thrownErrorBecomesTheOperationsError() {
        // Given a block that throws
        let error = StubError()
        let operation = AsyncBlockOperation { throw error }

        // When it runs
        AsyncOperationQueue().addOperation(operation)

        // Then the thrown error is the operation's error
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.asStubErrors == [error])
        #expect(operation.isFailed)
    }

    // MARK: - Continuation block

    @Test func continuationBlock_finishesOnlyWhenContinuationIsCalled() {
        // Given a block that keeps its continuation
        let gate = HeldCallback<(any Error)?>()
        let operation = AsyncBlockOperation { finish in gate.hold(finish) }

        // When it runs
        AsyncOperationQueue().addOperation(operation)
        #expect(gate.waitUntilHeld())

        // Then it executes until the continuation is called, here from another thread
        #expect(operation.isExecuting)
        #expect(!operation.isFinished)
        DispatchQueue.global().async { gate.call(nil) }
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.isEmpty)
    }

    @Test func continuationBlock_errorGivenToContinuationBecomesTheOperationsError() {
        // Given a block that finishes through its continuation with an error
        let error = StubError()
        let operation = AsyncBlockOperation { finish in
            DispatchQueue.global().async { finish(error) }
        }

        // When it runs
        AsyncOperationQueue().addOperation(operation)

        // Then that error is the operation's error
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.asStubErrors == [error])
    }

    @Test func continuationCalledTwice_isIgnoredAndReported() {
        // Given a block that calls its continuation twice, with different errors
        let name = uniqueName("continuation-twice")
        let first = StubError("first")
        let observer = EventLogObserver()
        let operation = AsyncBlockOperation { finish in
            finish(first)
            finish(StubError("second"))
        }
        operation.name = name
        operation.addObserver(observer)

        // When it runs
        AsyncOperationQueue().addOperation(operation)

        // Then the first call won, the second was reported, and observers heard one finish
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.asStubErrors == [first])
        #expect(observer.log.all == ["didStart", "didFinish"])
        #expect(DiagnosticsLog.shared.kinds(about: name, onceThereAre: 1) == [.continuationCalledTwice])
    }

    @Test func cancelWhileContinuationPending_finishesAtOnceAndIgnoresALateCall() {
        // Given a running operation whose continuation has not been called
        let gate = HeldCallback<(any Error)?>()
        let observer = EventLogObserver()
        let operation = AsyncBlockOperation { finish in gate.hold(finish) }
        operation.addObserver(observer)
        AsyncOperationQueue().addOperation(operation)
        #expect(gate.waitUntilHeld())

        // When it is cancelled with an error
        let cancellation = StubError("cancelled")
        operation.cancel(with: cancellation)

        // Then it finishes without waiting for the continuation
        #expect(waitUntilFinished([operation]))
        #expect(operation.isCancelled)
        #expect(operation.errors.asStubErrors == [cancellation])

        // And a late call of the continuation changes nothing
        gate.call(StubError("late"))
        #expect(operation.errors.asStubErrors == [cancellation])
        #expect(observer.log.all == ["didStart", "didCancel", "didFinish"])
    }

    @Test func continuationCalledFromADidCancelObserver_isIgnored() {
        // Given a running operation whose continuation has not been called, and an observer that
        // calls it as soon as it hears the cancel (before the block has heard of it)
        let gate = HeldCallback<(any Error)?>()
        let operation = AsyncBlockOperation { finish in gate.hold(finish) }
        operation.addObserver(ContinuationCallingObserver(gate: gate))
        AsyncOperationQueue().addOperation(operation)
        #expect(gate.waitUntilHeld())

        // When it is cancelled with an error
        let cancellation = StubError("cancelled")
        operation.cancel(with: cancellation)

        // Then the cancel came first: the continuation's error is not kept
        #expect(waitUntilFinished([operation]))
        #expect(operation.errors.asStubErrors == [cancellation])
    }

    @Test func cancelBeforeStart_neverRunsTheBlock() {
        // Given a cancelled operation
        let ran = Counter()
        let operation = AsyncBlockOperation { finish in
            ran.increment()
            finish(nil)
        }
        operation.cancel()

        // When it is added to a queue
        AsyncOperationQueue().addOperation(operation)

        // Then it finishes without running its block
        #expect(waitUntilFinished([operation]))
        #expect(ran.current == 0)
    }

    // MARK: - Releasing the block

    @Test func throwingBlock_isReleasedAfterFinishing() {
        // Given a finished operation, still referenced, whose block captured an object
        let (operation, probe) = makeOperationCapturingPayload { payload in
            AsyncBlockOperation { payload.touch() }
        }
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntilFinished([operation]))

        // Then the block, and so the object, was released
        #expect(probe.isReleased())
        withExtendedLifetime(operation) {}
    }

    @Test func continuationBlock_isReleasedAfterFinishing() {
        // Given a finished operation, still referenced, whose block captured an object
        let (operation, probe) = makeOperationCapturingPayload { payload in
            AsyncBlockOperation { finish in
                payload.touch()
                finish(nil)
            }
        }
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntilFinished([operation]))

        // Then the block, and so the object, was released
        #expect(probe.isReleased())
        withExtendedLifetime(operation) {}
    }

    @Test func continuationBlock_isReleasedAfterCancellingWhileContinuationPending() {
        // Given an operation cancelled while its continuation is still held elsewhere
        let gate = HeldCallback<(any Error)?>()
        let (operation, probe) = makeOperationCapturingPayload { payload in
            AsyncBlockOperation { finish in
                payload.touch()
                gate.hold(finish)
            }
        }
        AsyncOperationQueue().addOperation(operation)
        #expect(gate.waitUntilHeld())
        operation.cancel()
        #expect(waitUntilFinished([operation]))

        // Then the block was released although the continuation is still held
        #expect(probe.isReleased())
        withExtendedLifetime(operation) {}
        gate.drop()
    }

    @Test func neverRunBlock_isReleasedWhenCancelledBeforeStart() {
        // Given an operation cancelled before it ran
        let (operation, probe) = makeOperationCapturingPayload { payload in
            AsyncBlockOperation { payload.touch() }
        }
        operation.cancel()
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntilFinished([operation]))

        // Then its block was released all the same
        #expect(probe.isReleased())
        withExtendedLifetime(operation) {}
    }

    /// Makes an operation with `make`, handing it an object only the block will hold.
    private func makeOperationCapturingPayload(
        _ make: (Payload) -> AsyncBlockOperation
    ) -> (AsyncBlockOperation, WeakProbe<Payload>) {
        let payload = Payload()
        return (make(payload), WeakProbe(payload))
    }
}

/// An object a block captures, to check when the block is released.
private final class Payload: Sendable {
    func touch() {}

    // Found by a soak (under TSan): a block cancelled just as it was being called started after
    // its operation had finished, outside the categories it needed.
    @Test func blockCancelledAsItIsCalled_neverStartsAfterItsOperationFinished() {
        var random = SplitMix64(seed: 0xB10C_CA9C)
        let lateStarts = Counter()
        var operations: [AsyncOperation] = []
        for _ in 0..<500 {
            // Given a continuation block that checks, as it starts, whether its operation finished
            let executing = Flag()
            let box = WeakBox<AsyncOperation>()
            let operation = ExecuteAnnouncingOperation(announce: executing.raise) { finish in
                if box.object?.isFinished == true { lateStarts.increment() }
                finish(nil)
            }
            box.object = operation
            let extraTurns = Int.random(in: 0...400, using: &random)
            let cancelled = runOnOwnThread {
                let deadline = Date().addingTimeInterval(generousTimeout)
                while !executing.isRaised {
                    if Date() > deadline { return }
                }
                spin(turns: extraTurns)
                operation.cancel()
            }

            // When it is cancelled a few hundred loop turns after its execute() began
            AsyncOperationQueue().addOperation(operation)
            #expect(cancelled.wait())
            operations.append(operation)
        }

        // Then every one finished, and no block started after its operation had finished
        #expect(waitUntilFinished(operations))
        #expect(lateStarts.current == 0)
    }
}

/// Calls a held continuation, with an error, from `operationDidCancel`.
private struct ContinuationCallingObserver: OperationObserver {
    let gate: HeldCallback<(any Error)?>

    func operationDidCancel(_ operation: AsyncOperation) {
        _ = gate.call(StubError("late, from didCancel"))
    }
}
