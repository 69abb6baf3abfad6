/// An `AsyncBlockOperation`'s block through its one call, without threads or side effects.
///
/// It lives in the operation's lifecycle, under the lifecycle's one lock, so that a cancel and
/// the call never cross: a block never starts once its operation was cancelled or has finished.
/// (Kept there rather than behind a lock of its own, it costs a block operation no second
/// allocation, no second mutex and no second lock per execution.)
struct BlockInvocation {
    /// The block, as it was given.
    enum Body {
        case throwing(@Sendable () throws -> Void)
        case continuation(@Sendable (_ finish: @escaping AsyncBlockOperation.Continuation) -> Void)
    }

    /// Where the block is in its one call.
    private enum Stage: Equatable {
        case notStarted
        /// A cancel came first: the block is never called.
        case skipped
        /// The block is being called; `finishRequested`: a cancel came meanwhile, and the
        /// operation finishes as soon as the call returns.
        case invoking(finishRequested: Bool)
        /// The block was called (a continuation block may still be working).
        case invoked
        /// A cancel cut the call or its pending continuation short: the operation finishes
        /// without the continuation (a second cancel finishes nothing more).
        case cutShort
    }

    private var body: Body?
    private var stage = Stage.notStarted
    /// The continuation handed to a continuation block, while it may still be called.
    private var pendingContinuation: ContinuationGate?

    init(_ body: Body) {
        self.body = body
    }

    /// What beginning the execution comes to.
    enum Start {
        /// Call the block now.
        case call(Body)
        /// A cancel came first (or the block is gone): finish without calling it.
        case finishWithoutCalling
    }

    /// Execution begins.
    mutating func begin(isCancelled: Bool) -> Start {
        guard !isCancelled, stage == .notStarted, let body else { return .finishWithoutCalling }
        stage = .invoking(finishRequested: false)
        return .call(body)
    }

    /// The continuation handed to the block: a cancel from now on cuts it short.
    mutating func awaitContinuation(through gate: ContinuationGate) {
        pendingContinuation = gate
    }

    /// What follows the block's return.
    enum AfterCall: Equatable {
        /// A cancel came while it ran: the operation finishes now.
        case finishNow
        /// Nothing more: a throwing block's operation finishes by itself, a continuation
        /// block's when its continuation is called.
        case nothing
    }

    /// The block's call returned.
    mutating func returned() -> AfterCall {
        guard stage == .invoking(finishRequested: true) else {
            stage = .invoked
            return .nothing
        }
        stage = .cutShort // the continuation stays ignored until the finish lands
        return .finishNow
    }

    /// What a cancel while executing does to the block.
    enum CancelReaction: Equatable {
        case nothing
        /// A continuation is still pending: the operation finishes at once.
        case finishNow
        /// The block is being called: the operation finishes once the call returns; tell `gate`
        /// (after unlocking) that a continuation called from now on finds no operation to finish.
        case ignoreContinuation(ContinuationGate)

        static func == (lhs: CancelReaction, rhs: CancelReaction) -> Bool {
            switch (lhs, rhs) {
            case (.nothing, .nothing), (.finishNow, .finishNow): true
            case let (.ignoreContinuation(left), .ignoreContinuation(right)): left === right
            default: false
            }
        }
    }

    /// A cancel while executing: before the block is called, it never is (`begin` returns
    /// `.finishWithoutCalling`, and the operation finishes); while it is being called, the operation finishes once the
    /// call returns, and its continuation is ignored from now on; after, a continuation still
    /// pending is cut short at once.
    mutating func cancelled() -> CancelReaction {
        switch stage {
        case .notStarted:
            stage = .skipped
            return .nothing
        case .invoking:
            stage = .invoking(finishRequested: true)
            return pendingContinuation.map { .ignoreContinuation($0) } ?? .nothing
        case .invoked:
            guard pendingContinuation != nil else { return .nothing }
            stage = .cutShort
            return .finishNow
        case .skipped, .cutShort:
            return .nothing
        }
    }

    /// What the operation lets go of once its finish is final, to be released (and told) after
    /// unlocking: the block's captures may run user code in their `deinit`.
    struct Leftovers {
        let body: Body?
        let pendingContinuation: ContinuationGate?
    }

    /// The operation's finish is final: the block and its continuation go.
    mutating func release() -> Leftovers {
        defer {
            body = nil
            pendingContinuation = nil
        }
        return Leftovers(body: body, pendingContinuation: pendingContinuation)
    }
}
