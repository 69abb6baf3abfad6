import Foundation
import Operations

/// Four operations, one of each kind a scheduler might treat differently, that append their
/// label to `log` when they execute; in this order:
///
/// - "A": an `AsyncOperation` with a condition, which answers `.satisfied` at once, or, when
///   `heldAnswer` is given, holds its completion there for the test to call later;
/// - "B": an `AsyncOperation` without conditions;
/// - "C": an `AsyncOperation` in a mutually exclusive category of its own (so always free);
/// - "D": a plain Foundation `BlockOperation`.
///
/// For checking that a serial queue or group starts them in the order they were added.
///
/// ```swift
/// let log = Recorder<String>()
/// let answer = HeldCallback<ConditionResult>()
/// let operations = operationsOfEveryKind(log: log, heldAnswer: answer)
/// queue.addOperations(operations, waitUntilFinished: false)
/// #expect(answer.waitUntilHeld())
/// answer.call(.satisfied)
/// ```
public func operationsOfEveryKind(log: Recorder<String>, heldAnswer: HeldCallback<ConditionResult>? = nil) -> [Operation] {
    let conditional = AsyncBlockOperation { log.append("A") }
    conditional.name = uniqueName("A-conditional")
    conditional.addCondition(StubCondition(name: "Conditional") { _, completion in
        if let heldAnswer {
            heldAnswer.hold(completion)
        } else {
            completion(.satisfied)
        }
    })
    let simple = AsyncBlockOperation { log.append("B") }
    simple.name = uniqueName("B-simple")
    let exclusive = AsyncBlockOperation { log.append("C") }
    exclusive.name = uniqueName("C-exclusive")
    exclusive.addCondition(StubCondition(name: "FreeCategory", categories: [uniqueName("category")]) { _, completion in
        completion(.satisfied)
    })
    let plain = BlockOperation { log.append("D") }
    plain.name = uniqueName("D-plain")
    return [conditional, simple, exclusive, plain]
}

/// Answers the condition held in `answer` with `.satisfied`, once it is held and after a pause
/// that gives a wrong scheduler the chance to start later operations first (the pause decides
/// nothing: a right one waits for the answer however long it takes). Does nothing if `answer` is
/// `nil`; `false` if no condition was ever held.
@discardableResult
public func answerAfterAChanceToGoWrong(_ answer: HeldCallback<ConditionResult>?) -> Bool {
    guard let answer else { return true }
    guard answer.waitUntilHeld() else { return false }
    Thread.sleep(forTimeInterval: 0.1)
    return answer.call(.satisfied)
}
