import Foundation

/// The condition that links an operation to the one before it in a chain: it fails when the
/// upstream operation failed or was cancelled, naming the first failure along the chain, and
/// otherwise may hand the upstream's output to the operation as its input.
///
/// It holds the upstream weakly: the operation's dependency on it keeps it alive until the
/// operation finishes, and a chain must not keep its links alive in any other way.
struct UpstreamCondition: OperationCondition {
    /// Reads `upstream`'s output into `operation`; throws to keep `operation` from executing.
    typealias Delivery = @Sendable (_ upstream: Foundation.Operation, _ operation: AsyncOperation) throws -> Void

    private let upstream: Weak<Foundation.Operation>
    private let upstreamName: String
    /// The upstream's identity, to recognize the link without touching the operation.
    let upstreamID: ObjectIdentifier
    private let delivery: Delivery?

    init(upstream: Foundation.Operation, delivery: Delivery? = nil) {
        self.upstream = Weak(upstream)
        self.upstreamName = upstream.displayName
        self.upstreamID = ObjectIdentifier(upstream)
        self.delivery = delivery
    }

    var name: String { "Upstream(\(upstreamName))" }

    func evaluate(for operation: AsyncOperation, completion: @escaping @Sendable (ConditionResult) -> Void) {
        guard let upstream = upstream.object else {
            completion(.failed(AsyncOperationError.missingInput(operation: operation.displayName, upstream: upstreamName)))
            return
        }
        if let failure = Self.failure(of: upstream, blocking: operation) {
            completion(.failed(failure))
            return
        }
        do {
            try delivery?(upstream, operation)
            completion(.satisfied)
        } catch {
            completion(.failed(error))
        }
    }

    /// The error that keeps `operation` from executing when `upstream` failed or was cancelled.
    static func failure(of upstream: Foundation.Operation, blocking operation: AsyncOperation) -> AsyncOperationError? {
        let name = operation.displayName
        let errors = (upstream as? AsyncOperation)?.errors ?? []
        // The upstream failed for the link before it (whatever else it failed for, such as a
        // condition of its own): that link's failure came first along the chain. Only its own
        // link's error counts: a group's errors hold its children's, from chains of their own.
        let upstreamName = upstream.displayName
        for error in errors {
            switch error {
            case let AsyncOperationError.upstreamFailed(link, root, reason) where link == upstreamName:
                return .upstreamFailed(operation: name, upstream: root, reason: reason)
            case let AsyncOperationError.upstreamCancelled(link, root) where link == upstreamName:
                return .upstreamCancelled(operation: name, upstream: root)
            default:
                continue
            }
        }
        switch errors.first {
        case .some where upstream.isCancelled:
            // Cancelled with a reason (`cancel(with:)`, a timeout, a shutdown): cancelled all the
            // same; the upstream's own errors keep the reason.
            return .upstreamCancelled(operation: name, upstream: upstream.displayName)
        case .some:
            let reason = errors.map { String(describing: $0) }.joined(separator: "; ")
            return .upstreamFailed(operation: name, upstream: upstream.displayName, reason: reason)
        case nil:
            return upstream.isCancelled ? .upstreamCancelled(operation: name, upstream: upstream.displayName) : nil
        }
    }
}

extension AsyncOperation {
    /// Whether an `UpstreamCondition` already links this operation to `upstream`.
    func isLinked(to upstream: Foundation.Operation) -> Bool {
        lifecycle.isLinked(toUpstream: ObjectIdentifier(upstream))
    }
}
