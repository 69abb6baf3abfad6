import Foundation
import Operations
import Testing
import TestSupport

// `ResultOperation.result`, `value` and `runAndWait()` agree in every case: `result` is
// `.success(x)` exactly when `runAndWait()` and `value` return x, and `.failure(e)` exactly when
// they throw the same error. These tests check that the ways agree, not which answer they give.

@Suite("Result agreement")
struct ResultAgreementTests {
    init() {
        _ = DiagnosticsLog.shared // capture diagnostics before any test reports one
    }

    /// How the operation ends.
    enum Ending: String, CaseIterable, Sendable {
        case success
        case failure
        /// Cancelled while it executes, and produces its output anyway.
        case cancelledAfterProducingAnOutput
        /// Cancelled before it starts: it never produces an output.
        case cancelledWithoutOutput
        /// Cancelled with an error while it executes, then finished with another error.
        case severalErrors
        /// Cancelled with an error before it starts.
        case cancelledWithAnError
        /// Finishes without errors and without producing an output.
        case finishedWithoutOutput

        /// A new operation that ends this way once it runs.
        func makeOperation() -> ResultOperation<Int> {
            let operation: ResultOperation<Int>
            switch self {
            case .success:
                operation = ResultBlockOperation { 7 }
            case .failure:
                operation = ResultBlockOperation { throw StubError("failure") }
            case .cancelledAfterProducingAnOutput:
                operation = Ending.producing { operation in
                    operation.cancel()
                    operation.finish(producing: 7)
                }
            case .cancelledWithoutOutput:
                operation = ResultBlockOperation { 7 }
                operation.cancel()
            case .severalErrors:
                operation = Ending.producing { operation in
                    operation.cancel(with: StubError("cancelled"))
                    operation.finish(with: StubError("finished"))
                }
            case .cancelledWithAnError:
                operation = ResultBlockOperation { 7 }
                operation.cancel(with: StubError("cancelled"))
            case .finishedWithoutOutput:
                operation = Ending.producing { operation in operation.finish() }
            }
            operation.name = "agreement-\(rawValue)"
            return operation
        }

        private static func producing(_ body: @escaping @Sendable (ClosureResultOperation<Int>) -> Void) -> ResultOperation<Int> {
            ClosureResultOperation(body)
        }
    }

    @Test(arguments: Ending.allCases)
    func result_agreesWithRunAndWait(ending: Ending) {
        // Given an operation that ends this way
        let operation = ending.makeOperation()

        // When it is run and waited for
        let waited: Result<Int, any Error>
        do {
            waited = .success(try operation.runAndWait(timeout: generousTimeout))
        } catch {
            waited = .failure(error)
        }

        // Then its result is the same answer
        #expect(operation.isFinished)
        let result = operation.result
        #expect(result.map { isSameOutcome($0, waited) } == true, "result \(String(describing: result)), runAndWait \(waited)")
    }

    @Test(arguments: Ending.allCases)
    func result_agreesWithValue(ending: Ending) async {
        // Given an operation that ends this way, on a queue
        let operation = ending.makeOperation()
        AsyncOperationQueue().addOperation(operation)

        // When its value is awaited (a hang fails instead: the operation is cancelled after a while)
        let timeout = Task {
            try await Task.sleep(nanoseconds: UInt64(generousTimeout * 1_000_000_000))
            operation.cancel(with: StubError("the test gave up waiting"))
        }
        let awaited: Result<Int, any Error>
        do {
            awaited = .success(try await operation.value)
        } catch {
            awaited = .failure(error)
        }
        timeout.cancel()

        // Then its result is the same answer
        #expect(operation.isFinished)
        let result = operation.result
        #expect(result.map { isSameOutcome($0, awaited) } == true, "result \(String(describing: result)), value \(awaited)")
    }
}
