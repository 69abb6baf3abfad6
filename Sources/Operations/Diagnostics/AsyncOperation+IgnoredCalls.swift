import Foundation

/// Where a call was made in the user's code (`#fileID` and `#line`), for a message about it.
struct CallSite: Sendable, CustomStringConvertible {
    // The line first: a `StaticString` ends in a flag byte, and an optional call site's tag then
    // fits beside it. Every `AsyncBlockOperation` keeps one, last in the object, and those 7
    // bytes take its allocation from 224 bytes to 208.
    let line: UInt
    let file: StaticString

    init(file: StaticString, line: UInt) {
        self.line = line
        self.file = file
    }

    var description: String {
        "\(file):\(line)"
    }
}

/// Who asked an operation to finish, for the message when the request is ignored.
enum FinishCall: Sendable {
    /// The framework itself (or `finish(with:)` used as a function value): no call site.
    case framework
    /// `finish(with:)`, called there.
    case finish(CallSite)
    /// The continuation of an `AsyncBlockOperation` whose block was created there.
    case continuation(createdAt: CallSite?)
    /// `method` (`finish(producing:)`, or `finish(with:)` with a success), called there if
    /// known, with a value of that type (described only if the call is reported).
    case produce(CallSite?, valueType: Any.Type, method: String)
}

extension AsyncOperation {
    /// Reports a finish that came after the operation had finished: where it was called and what
    /// it tried to add, which is lost.
    func reportIgnoredFinish(_ call: FinishCall, dropping errors: [any Error]) {
        let who: String
        var lost = Self.whatWasLost(errors)
        switch call {
        case .framework:
            who = "finish(with:) was called"
        case let .finish(site):
            who = "finish(with:) was called at \(site)"
        case let .continuation(site):
            who = "the continuation" + (site.map { " of the block created at \($0)" } ?? "") + " was called"
        case let .produce(site, valueType, method):
            who = "\(method) was called" + (site.map { " at \($0)" } ?? "")
            lost = "and the value it passed, of type \(valueType), was dropped"
        }
        OperationDiagnostics.report(.finishedTwice, self, "\(who) on an operation that had already finished; the call was ignored \(lost)")
    }

    /// What an ignored call lost: `and its error, X, was dropped`, or that it carried none.
    static func whatWasLost(_ errors: [any Error]) -> String {
        switch errors.count {
        case 0: "(it passed no error: nothing was lost)"
        case 1: "and the error it passed was dropped: \(describe(errors[0]))"
        default: "and the errors it passed were dropped: " + errors.map(describe).joined(separator: "; ")
        }
    }

    private static func describe(_ error: any Error) -> String {
        String(describing: error)
    }
}
