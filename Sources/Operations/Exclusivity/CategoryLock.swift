import Foundation

/// Grants mutually exclusive categories beyond this process: to one process at a time on a host
/// (`FileCategoryLock`), or in a cluster (`PostgresCategoryLock` in the Integrations package).
///
/// Give a lock to a category's condition, and the category reaches as far as the lock does:
///
/// ```swift
/// let hostWide = try FileCategoryLock(directory: URL(fileURLWithPath: "/tmp/billing-locks"))
/// billing.addCondition(ExclusiveCategory("billing", lock: hostWide))
/// ```
///
/// Within a process, a category is still one category whatever lock names it: the queue grants it
/// to the first operation in line, in add order, and only that operation asks the lock. So a
/// process has at most one request per category outstanding. An operation that needs several
/// categories asks for them one at a time, sorted by name, so that processes asking for
/// overlapping sets never deadlock. While it waits for the lock, the operation holds no slot of
/// its queue.
///
/// To write a lock of your own (Redis, etcd, a lease table), implement
/// `acquire(_:onLost:completion:)`: call `completion` once the category is yours, with a
/// `CategoryLease`, or with `CategoryLockError.unavailable` when the locking engine cannot be
/// reached within your lock's own timeout. When the request is cancelled (the operation was
/// cancelled, or its queue suspended), stop soon, leaving nothing behind, and complete with
/// `CancellationError`. A lock built on `async` code can conform to `AsyncCategoryLock` instead,
/// which bridges the two. The engine asks a lock for a category in canonical composition (NFC):
/// names that Swift holds equal (`"caf\u{E9}"` and `"cafe\u{301}"`) are one category in the
/// process, and a lock that derives its keys from the bytes of the name it is given keeps them
/// one beyond it. (A lock whose own API takes names, as `FileCategoryLock.lockFile(for:)` does,
/// should normalise them too: `precomposedStringWithCanonicalMapping`.)
public protocol CategoryLock: Sendable, CustomStringConvertible {
    /// What identifies the lock: two locks with the same identity are the same lock (two
    /// `FileCategoryLock`s on one directory, say). Naming one category with two locks of different
    /// identities is an error on the operation.
    var identity: String { get }

    /// Waits, without blocking the calling thread, until `request.category` is granted to this
    /// process, then calls `completion` with the lease that holds it.
    ///
    /// - Parameters:
    ///   - request: The category asked for, and whether the request was cancelled meanwhile.
    ///   - onLost: Call it, once, if the lease is lost while held (a dropped connection, an ended
    ///     session): the operation holding it is cancelled with `CategoryLockError.lost`.
    ///   - completion: Call it exactly once, on any thread: with the lease; with
    ///     `CancellationError` once the request is cancelled; or with
    ///     `CategoryLockError.unavailable` when the lock cannot be reached within its timeout.
    func acquire(
        _ request: CategoryLockRequest,
        onLost: @escaping @Sendable (CategoryLockError) -> Void,
        completion: @escaping @Sendable (Result<any CategoryLease, any Error>) -> Void
    )

    /// Who holds `category` elsewhere, as far as the lock knows, for messages such as
    /// `debugDescription`: "another process (pid 4242, file lock /var/run/billing/locks/billing.lock)".
    /// `nil` if it does not know.
    func holder(of category: String) -> String?
}

/// A `CategoryLock` written with `async` code: implement `acquire(_:onLost:)`, which runs in a
/// task that is cancelled with the request.
///
/// The task runs on Swift's cooperative thread pool: a process that blocks that pool's threads
/// (with `waitUntilFinished`, say, called from async code) delays the lock until they are free.
public protocol AsyncCategoryLock: CategoryLock {
    /// Waits until `category` is granted to this process, and returns the lease that holds it.
    /// Throws `CancellationError` once the task is cancelled, `CategoryLockError.unavailable` when
    /// the lock cannot be reached within its timeout.
    func acquire(_ category: String, onLost: @escaping @Sendable (CategoryLockError) -> Void) async throws -> any CategoryLease
}

extension AsyncCategoryLock {
    /// Runs `acquire(_:onLost:)` in a task, cancelled when `request` is.
    public func acquire(
        _ request: CategoryLockRequest,
        onLost: @escaping @Sendable (CategoryLockError) -> Void,
        completion: @escaping @Sendable (Result<any CategoryLease, any Error>) -> Void
    ) {
        let task = Task {
            do {
                let lease = try await acquire(request.category, onLost: onLost)
                completion(.success(lease))
            } catch {
                completion(.failure(error))
            }
        }
        request.onCancel { task.cancel() }
    }
}

/// One request of a category from a `CategoryLock`, which the engine may cancel.
public final class CategoryLockRequest: Sendable {
    /// The category asked for.
    public let category: String
    private let state = Locked<(cancelled: Bool, handlers: [@Sendable () -> Void])>.make((false, []))

    /// Makes a request for `category` (the engine makes them; tests of a lock may too).
    public init(category: String) {
        self.category = category
    }

    /// Whether the request was cancelled: the lock should stop and complete with
    /// `CancellationError`.
    public var isCancelled: Bool {
        state.withLock { $0.cancelled }
    }

    /// Runs `handler` once the request is cancelled: at once if it is already.
    public func onCancel(_ handler: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            if state.cancelled { return true }
            state.handlers.append(handler)
            return false
        }
        if runNow { handler() }
    }

    /// Cancels the request, running its cancellation handlers once.
    public func cancel() {
        let handlers = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.cancelled else { return [] }
            state.cancelled = true
            defer { state.handlers = [] }
            return state.handlers
        }
        handlers.forEach { $0() }
    }
}

/// One grant of a category by a `CategoryLock`, held until `release()`.
public protocol CategoryLease: Sendable {
    /// A number strictly greater than that of every earlier grant of the category, by any process
    /// on any host sharing the lock. Pass it to the resource you protect, which rejects any token
    /// lower than the highest it has seen: a stale holder (one that lost its lock but still runs)
    /// is turned away.
    var fencingToken: UInt64 { get }

    /// Gives the category back. Calling it again does nothing.
    func release()
}

/// Why an operation did not get, or lost, a category held beyond its process.
public enum CategoryLockError: Error, Sendable, CustomStringConvertible {
    /// The lock was lost while the operation held it (its PostgreSQL session ended, its
    /// connection dropped): another process may hold the category now. The operation was
    /// cancelled with this error.
    case lost(category: String)
    /// The lock could not be reached within its timeout (the server is down, the directory is not
    /// writable). The operation finished with this error, without executing.
    case unavailable(category: String, underlying: any Error)

    public var description: String {
        switch self {
        case let .lost(category):
            "the lock of category '\(category)' was lost while the operation held it"
        case let .unavailable(category, underlying):
            "the lock of category '\(category)' could not be reached: \(underlying)"
        }
    }
}

/// How long a `FileCategoryLock` (or another lock) waited for a category held elsewhere before
/// giving up, when it was given a wait timeout.
public struct CategoryLockWaitTimedOut: Error, Sendable, CustomStringConvertible {
    /// The category that stayed held elsewhere.
    public let category: String
    /// The wait timeout, in seconds.
    public let after: TimeInterval

    /// Makes the error for `category`, given up after `after` seconds.
    public init(category: String, after: TimeInterval) {
        self.category = category
        self.after = after
    }

    public var description: String {
        "category '\(category)' stayed held elsewhere for \(after) s, the lock's wait timeout"
    }
}

extension OperationCondition {
    /// No lock: the condition's categories reach as far as this process.
    public var categoryLock: (any CategoryLock)? { nil }
}
