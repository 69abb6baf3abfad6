import Foundation
import Operations
import Testing
import TestSupport

/// Each diagnostic names the operation and the queues involved, and an ignored call names what it
/// dropped and where it was made: the three mistakes a newcomer makes first.
private struct LostWork: Error, CustomStringConvertible {
    var description: String { "the upload failed" }
}

@Suite struct DiagnosticMessagesTests {
    @Test func addedTwice_namesTheQueueItIsOn_andTheOneThatRefusedIt() {
        let ledger = AsyncOperationQueue()
        ledger.name = "ledger"
        ledger.isSuspended = true
        let billing = AsyncOperationQueue()
        billing.name = "billing"
        let operation = AsyncBlockOperation {}
        operation.name = uniqueName("sync")

        ledger.addOperation(operation)
        billing.addOperation(operation)
        ledger.addOperation(operation)

        let reports = DiagnosticsLog.shared.diagnostics(about: operation.name!)
        #expect(reports.map(\.kind) == [.addedTwice, .addedTwice])
        #expect(reports.first?.queueNames == ["ledger", "billing"])
        #expect(reports.first?.message == "the operation is already on queue 'ledger', so queue 'billing' refused it; the second add was ignored, and it runs once, on 'ledger'")
        #expect(reports.first?.description.hasPrefix("[Operations] addedTwice (\(operation.name!), queues 'ledger', 'billing'): ") == true)
        #expect(reports.last?.queueNames == ["ledger"])
        #expect(reports.last?.message.contains("already on queue 'ledger'; adding it to the same queue again was ignored") == true)
        ledger.isSuspended = false
        #expect(waitUntilFinished([operation]))
    }

    @Test func addedTwice_ofAPlainOperation_namesBothQueuesToo() {
        let ledger = AsyncOperationQueue()
        ledger.name = "ledger"
        ledger.isSuspended = true
        let billing = AsyncOperationQueue()
        billing.name = "billing"
        let operation = BlockOperation {}
        operation.name = uniqueName("plain")

        ledger.addOperation(operation)
        billing.addOperation(operation)

        let report = DiagnosticsLog.shared.diagnostics(about: operation.name!).first
        #expect(report?.kind == .addedTwice)
        #expect(report?.queueNames == ["ledger", "billing"])
        ledger.isSuspended = false
        #expect(waitUntilFinished([operation]))
    }

    @Test func addedAfterFinishing_namesTheQueueThatRefusedIt_andWhereItRan() throws {
        let ledger = AsyncOperationQueue()
        ledger.name = "ledger"
        let billing = AsyncOperationQueue()
        billing.name = "billing"
        let operation = AsyncBlockOperation {}
        operation.name = uniqueName("done")
        try operation.runAndWait(on: ledger, timeout: generousTimeout)

        billing.addOperation(operation)

        let report = DiagnosticsLog.shared.diagnostics(about: operation.name!).first
        #expect(report?.kind == .addedAfterFinishing)
        #expect(report?.queueNames == ["ledger", "billing"])
        #expect(report?.message.hasPrefix("queue 'billing' refused the operation, which ran on queue 'ledger': ") == true)
    }

    @Test func finishedTwice_namesTheDroppedError_andWhereTheCallWasMade() {
        let queue = AsyncOperationQueue()
        queue.name = "uploads"
        let operation = FinishesTwice(second: LostWork())
        operation.name = uniqueName("upload")
        queue.addOperation(operation)

        let reports = DiagnosticsLog.shared.kinds(about: operation.name!, onceThereAre: 1)
        #expect(reports == [.finishedTwice])
        let report = DiagnosticsLog.shared.diagnostics(about: operation.name!).first
        #expect(report?.queueNames == ["uploads"])
        #expect(report?.message == "finish(with:) was called at OperationsTests/DiagnosticMessagesTests.swift:\(FinishesTwice.secondCallLine) on an operation that had already finished; the call was ignored and the error it passed was dropped: the upload failed")
        #expect(operation.errors.isEmpty) // the first call won
    }

    @Test func finishedTwice_withoutAnError_saysNothingWasLost() {
        let operation = AsyncBlockOperation {}
        operation.name = uniqueName("twice")
        AsyncOperationQueue().addOperation(operation)
        #expect(waitUntilFinished([operation]))
        operation.finish()
        let report = DiagnosticsLog.shared.diagnostics(about: operation.name!).first
        #expect(report?.message.hasSuffix("the call was ignored (it passed no error: nothing was lost)") == true)
        #expect(report?.message.contains("DiagnosticMessagesTests.swift:") == true)
    }

    @Test func aResultOperationFinishedTwice_namesTheCallAndWhatItDropped() throws {
        let operation = ResultBlockOperation { 1 }
        operation.name = uniqueName("count")
        try operation.runAndWait(on: AsyncOperationQueue(), timeout: generousTimeout)

        operation.finish(with: .failure(LostWork()))
        let valueLine = #line + 1
        operation.finish(producing: 2)
        operation.finish(with: Result<Int, any Error>.success(3))

        let messages = DiagnosticsLog.shared.diagnostics(about: operation.name!).map(\.message)
        #expect(messages == [
            "finish(with:) was called on an operation that had already finished; the call was ignored and the error it passed was dropped: the upload failed",
            "finish(producing:) was called at OperationsTests/DiagnosticMessagesTests.swift:\(valueLine) on an operation that had already finished; the call was ignored and the value it passed, of type Int, was dropped",
            "finish(with:) was called on an operation that had already finished; the call was ignored and the value it passed, of type Int, was dropped",
        ])
        #expect(operation.output == 1) // the first finish won
    }

    @Test func aResultOperationsFinishes_stayUsableAsFunctionValues() throws {
        let operation = ResultBlockOperation { 1 }
        let complete = operation.finish(with:) // the Result form, as a completion handler takes it
        let produce = operation.finish(producing:)
        let fail: ((any Error)?) -> Void = operation.finish(with:)
        _ = (complete, produce, fail)
        let answered = ResultOperationAnsweredBy { completion in completion(.success(7)) }
        #expect(try answered.runAndWait(timeout: generousTimeout) == 7)
    }

    @Test func continuationCalledTwice_namesTheDroppedError_andWhereTheBlockWasCreated() {
        let queue = AsyncOperationQueue()
        queue.name = "uploads"
        let calledTwice = Signal()
        let line = #line + 1
        let operation = AsyncBlockOperation { finish in
            finish(nil)
            finish(LostWork())
            calledTwice.signal()
        }
        operation.name = uniqueName("upload")
        queue.addOperation(operation)

        #expect(calledTwice.wait())
        let report = DiagnosticsLog.shared.diagnostics(about: operation.name!).first
        #expect(report?.kind == .continuationCalledTwice)
        #expect(report?.queueNames == ["uploads"])
        #expect(report?.message == "the continuation of the block created at OperationsTests/DiagnosticMessagesTests.swift:\(line) was called a second time; the call was ignored and the error it passed was dropped: the upload failed")
        #expect(operation.errors.isEmpty)
    }

    @Test func aChildsDiagnostic_namesItsGroup() {
        let child = AsyncBlockOperation {}
        child.name = uniqueName("child")
        let group = GroupOperation(operations: [child])
        group.name = uniqueName("group")
        try? group.runAndWait(timeout: generousTimeout)
        child.finish()
        let report = DiagnosticsLog.shared.diagnostics(about: child.name!).first
        #expect(report?.queueNames == ["children of \(group.name!)"])
    }

    @Test func finishWith_staysUsableAsAFunctionValue() throws {
        let operation = CompletesThroughAFunctionValue()
        #expect(throws: LostWork.self) { try operation.runAndWait(timeout: generousTimeout) }
    }

    @Test func aSubclassOverridingTheContinuationInitializer_stillCompiles() throws {
        let operation = Continued { finish in finish(nil) }
        try operation.runAndWait(timeout: generousTimeout)
    }
}

private final class FinishesTwice: AsyncOperation, @unchecked Sendable {
    static let secondCallLine = #line + 9
    let second: any Error
    init(second: any Error) {
        self.second = second
        super.init()
    }

    override func execute() {
        finish()
        finish(with: second)
    }
}

/// Hands `finish(with:)` on as a completion handler, as code written before the call site was
/// recorded does.
private final class CompletesThroughAFunctionValue: AsyncOperation, @unchecked Sendable {
    override func execute() {
        complete(finish(with:))
    }

    private func complete(_ handler: @escaping @Sendable ((any Error)?) -> Void) {
        DispatchQueue.global().async { handler(LostWork()) }
    }
}

/// A subclass that overrides the continuation initializer with its exact signature.
private final class Continued: AsyncBlockOperation, @unchecked Sendable {
    override init(_ block: @escaping @Sendable (_ finish: @escaping Continuation) -> Void) {
        super.init(block)
    }
}

/// Finishes with a `Result` handed to its `finish(with:)` as a completion handler.
private final class ResultOperationAnsweredBy: ResultOperation<Int>, @unchecked Sendable {
    let answer: @Sendable (@escaping @Sendable (Result<Int, any Error>) -> Void) -> Void

    init(_ answer: @escaping @Sendable (@escaping @Sendable (Result<Int, any Error>) -> Void) -> Void) {
        self.answer = answer
        super.init()
    }

    override func execute() {
        answer(finish(with:))
    }
}
