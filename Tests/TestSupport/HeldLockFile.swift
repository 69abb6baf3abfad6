import Foundation
import Operations
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A category's lock file held with a bare `flock` on a descriptor of its own: to the
/// `FileCategoryLock`s of this process it looks like another process holding the category.
public final class HeldLockFile: @unchecked Sendable { // @unchecked: `descriptor` is only changed by `release()`, called once by the test
    private var descriptor: Int32

    /// Takes `category`'s lock file of `lock`, waiting for it if needed.
    public init(_ lock: FileCategoryLock, category: String) {
        descriptor = open(lock.lockFile(for: category).path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        flock(descriptor, LOCK_EX)
    }

    /// Lets the category go.
    public func release() {
        guard descriptor >= 0 else { return }
        flock(descriptor, LOCK_UN)
        close(descriptor)
        descriptor = -1
    }

    deinit { release() }
}
