import Foundation
import Operations

/// A block operation that calls `announce` as its `execute()` is entered, before the block runs.
public final class ExecuteAnnouncingOperation: AsyncBlockOperation, @unchecked Sendable {
    // @unchecked Sendable: `announce` is immutable; the rest is AsyncBlockOperation's.
    private let announce: @Sendable () -> Void

    public init(announce: @escaping @Sendable () -> Void, _ block: @escaping @Sendable (_ finish: @escaping Continuation) -> Void) {
        self.announce = announce
        super.init(block)
    }

    public override func execute() {
        announce()
        super.execute()
    }
}
