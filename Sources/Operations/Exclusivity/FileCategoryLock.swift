import Foundation
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Extends categories to every process on one host, through advisory file locks (`flock`): one
/// lock file per category in `directory`.
///
/// The kernel ends a lock when its holder's process ends, however it ends (even by `SIGKILL`), so
/// a crashed holder never keeps a category. Each grant writes the next fencing token, and the
/// holder's process ID, into the lock file.
///
/// ```swift
/// let hostWide = try FileCategoryLock(directory: URL(fileURLWithPath: "/tmp/billing-locks"))
/// nightlyRun.addCondition(ExclusiveCategory("billing", lock: hostWide))
/// ```
///
/// Two `FileCategoryLock`s on one directory are the same lock. Keep the directory on a local
/// file system: `flock` on network file systems is not reliable. Leave its lock files in place
/// while processes use them: the lock lives on the file, so a process that finds one deleted makes
/// another and holds its category beside the holder of the deleted one, and the new file's
/// fencing tokens start again from 1 (a cleaner of old files in `/tmp` can delete one). The
/// fencing token survives the death of any process, but not a reboot that loses the file
/// system's unwritten pages (it is not synced to disk on every grant).
public final class FileCategoryLock: CategoryLock {
    /// The directory that holds the lock files.
    public let directory: URL
    /// How long an acquisition keeps trying while the lock files cannot be opened (the directory
    /// is missing and cannot be created, is not writable, the disk is full) before the operation
    /// fails with `CategoryLockError.unavailable`, in seconds.
    public let unavailableTimeout: TimeInterval
    /// How long an operation waits while another process holds its category before it fails with
    /// `CategoryLockError.unavailable` (underlying `CategoryLockWaitTimedOut`), in seconds; `nil`,
    /// the default, waits as long as it takes.
    public let waitTimeout: TimeInterval?
    private let path: String

    /// Makes the lock for lock files in `directory`, which is created if missing.
    ///
    /// - Parameters:
    ///   - directory: A directory on a local file system, the same for every process sharing
    ///     the categories.
    ///   - unavailableTimeout: How long an acquisition retries while the lock files cannot be
    ///     opened, in seconds.
    ///   - waitTimeout: How long an operation may wait while another process holds its
    ///     category, in seconds; `nil` waits as long as it takes.
    /// - Throws: `CocoaError(.fileWriteUnsupportedScheme)` if `directory` is not a file URL;
    ///   `POSIXError(.ENOTDIR)` if it names a file that is not a directory. A directory that cannot
    ///   be created now is tried again by each acquisition, which fails with
    ///   `CategoryLockError.unavailable` once `unavailableTimeout` has passed.
    public init(directory: URL, unavailableTimeout: TimeInterval = 10, waitTimeout: TimeInterval? = nil) throws {
        guard directory.isFileURL else { throw CocoaError(.fileWriteUnsupportedScheme, userInfo: [NSURLErrorKey: directory]) }
        var isDirectory: ObjCBool = false
        let standardized = directory.standardizedFileURL
        if FileManager.default.fileExists(atPath: standardized.path, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw POSIXError(.ENOTDIR)
        }
        try? FileManager.default.createDirectory(at: standardized, withIntermediateDirectories: true)
        self.directory = standardized
        self.path = standardized.resolvingSymlinksInPath().path
        self.unavailableTimeout = unavailableTimeout
        self.waitTimeout = waitTimeout
    }

    /// "file:" and the directory's path, symbolic links resolved.
    public var identity: String { "file:" + path }

    /// "file lock" and the directory's path.
    public var description: String { "file lock \(path)" }

    /// The lock file of `category`: its name in canonical composition (NFC, so that spellings
    /// Swift holds equal share one file), with every byte other than ASCII letters, digits, `.`,
    /// `-` and `_` escaped as `%` and two hex digits, and a leading `.` escaped too (`%2E`, so that
    /// no lock file is hidden), then `.lock`. A name that escapes to more than 200 characters keeps
    /// its first 160, then `%-` and a hash of the whole name.
    public func lockFile(for category: String) -> URL {
        URL(fileURLWithPath: lockFilePath(for: category))
    }

    private func lockFilePath(for category: String) -> String {
        (path.hasSuffix("/") ? path : path + "/") + LockFileName.make(for: category)
    }

    /// Tries the category's lock file without blocking, again and again (every 50 µs at first,
    /// every 2 ms at most) on a Dispatch queue until it is granted, the request is cancelled, or a
    /// timeout passes. No thread waits meanwhile, and none of Swift's cooperative pool is used.
    public func acquire(
        _ request: CategoryLockRequest,
        onLost: @escaping @Sendable (CategoryLockError) -> Void,
        completion: @escaping @Sendable (Result<any CategoryLease, any Error>) -> Void
    ) {
        let attempt = LockFileAttempt(category: request.category, file: lockFilePath(for: request.category), unavailableTimeout: unavailableTimeout, waitTimeout: waitTimeout)
        attempt.poll(request, completion: completion)
    }

    /// "another process (pid N, file lock PATH)", with the process ID of the latest grant.
    public func holder(of category: String) -> String? {
        let file = lockFilePath(for: category)
        let pid = LockFileRecord.read(from: file)?.pid
        return "another process (\(pid.map { "pid \($0), " } ?? "")file lock \(file))"
    }
}

/// One acquisition of a lock file: the descriptor it keeps open while it waits, and its clocks.
private final class LockFileAttempt: @unchecked Sendable { // @unchecked: one poll at a time touches it, each scheduling the next
    private static let polls = DispatchQueue(label: "Operations.FileCategoryLock", attributes: .concurrent)

    let category: String
    let file: String
    let unavailableTimeout: TimeInterval
    let waitTimeout: TimeInterval?
    private var descriptor: Int32 = -1
    private var granted = false
    private let began = DispatchTime.now().uptimeNanoseconds
    private var unreachableSince: UInt64?
    /// How long to sleep before the next try, in nanoseconds: short while a holder may let go at
    /// any moment, longer while the file cannot be opened.
    private(set) var pause: UInt64 = 50_000

    init(category: String, file: String, unavailableTimeout: TimeInterval, waitTimeout: TimeInterval?) {
        self.category = category
        self.file = file
        self.unavailableTimeout = unavailableTimeout
        self.waitTimeout = waitTimeout
    }

    /// Tries now, then again after each pause, until it ends: granted, cancelled, or failed.
    func poll(_ request: CategoryLockRequest, completion: @escaping @Sendable (Result<any CategoryLease, any Error>) -> Void) {
        if request.isCancelled {
            closeUnlessGranted()
            completion(.failure(CancellationError()))
            return
        }
        let lease: (any CategoryLease)?
        do {
            lease = try tryOnce()
        } catch {
            closeUnlessGranted()
            completion(.failure(error))
            return
        }
        if let lease {
            completion(.success(lease))
            return
        }
        Self.polls.asyncAfter(deadline: .now() + .nanoseconds(Int(pause))) {
            self.poll(request, completion: completion)
        }
    }

    /// Tries to take the lock once: its lease, or `nil` to try again after `pause`.
    private func tryOnce() throws -> (any CategoryLease)? {
        if descriptor < 0 {
            guard open() else {
                try giveUpIfUnreachableTooLong()
                pause = 20_000_000
                return nil
            }
        }
        if flock(descriptor, LOCK_EX | LOCK_NB) == 0 {
            return try stampGrant()
        }
        let error = errno
        guard error == EWOULDBLOCK || error == EINTR else {
            closeUnlessGranted()
            try giveUpIfUnreachable(POSIXError(POSIXErrorCode(rawValue: error) ?? .EIO))
            return nil
        }
        unreachableSince = nil
        if let waitTimeout, elapsed(since: began) > waitTimeout {
            throw CategoryLockError.unavailable(category: category, underlying: CategoryLockWaitTimedOut(category: category, after: waitTimeout))
        }
        pause = min(pause * 2, 2_000_000)
        return nil
    }

    private func open() -> Bool {
        descriptor = openLockFile(file)
        if descriptor < 0, errno == ENOENT {
            // The directory went missing (or was never made): make it, and try again.
            try? FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            descriptor = openLockFile(file)
        }
        if descriptor < 0 {
            lastOpenError = POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        return descriptor >= 0
    }

    private var lastOpenError: POSIXError?

    private func giveUpIfUnreachableTooLong() throws {
        try giveUpIfUnreachable(lastOpenError ?? POSIXError(.EIO))
    }

    private func giveUpIfUnreachable(_ error: POSIXError) throws {
        let now = DispatchTime.now().uptimeNanoseconds
        let since = unreachableSince ?? now
        unreachableSince = since
        if elapsed(since: since) >= unavailableTimeout {
            throw CategoryLockError.unavailable(category: category, underlying: error)
        }
    }

    /// Holding the lock: writes the next fencing token and this process's ID into the file. A
    /// record that cannot be read, or whose token cannot grow, is left as it is and the grant
    /// fails: a token that started again from 1 would let a stale holder through.
    private func stampGrant() throws -> any CategoryLease {
        let previous: UInt64
        switch LockFileRecord.read(descriptor: descriptor) {
        case .empty:
            previous = 0
        case let .record(record):
            previous = record.token
        case let .unreadable(error):
            throw giveBack(CategoryLockError.unavailable(category: category, underlying: error))
        case .corrupt:
            throw giveBack(CategoryLockError.unavailable(category: category, underlying: FileCategoryLockCorruptRecord(file: file)))
        }
        guard previous < UInt64.max else {
            throw giveBack(CategoryLockError.unavailable(category: category, underlying: FileCategoryLockCorruptRecord(file: file)))
        }
        let record = LockFileRecord(token: previous + 1, pid: getpid())
        guard record.write(to: descriptor) else {
            throw giveBack(CategoryLockError.unavailable(category: category, underlying: POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)))
        }
        granted = true
        return FileCategoryLease(descriptor: descriptor, fencingToken: record.token)
    }

    /// Lets go of the lock taken by a grant that failed, and returns `error`.
    private func giveBack(_ error: CategoryLockError) -> CategoryLockError {
        flock(descriptor, LOCK_UN)
        closeUnlessGranted()
        return error
    }

    /// Closes the descriptor of an attempt that did not end in a grant (a granted one belongs to
    /// its lease).
    func closeUnlessGranted() {
        guard !granted, descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    private func elapsed(since start: UInt64) -> TimeInterval {
        TimeInterval(DispatchTime.now().uptimeNanoseconds &- start) / 1_000_000_000
    }
}

/// A lock file whose record is not one this lock wrote (or whose token reached `UInt64.max`):
/// the grant fails with `CategoryLockError.unavailable` rather than start the fencing tokens
/// again. Mend it by writing a token no lower than the last one your resources accepted, as
/// 20 digits, a space, 10 digits and a newline (`printf '%020d %010d\n' TOKEN 0 > FILE`).
public struct FileCategoryLockCorruptRecord: Error, CustomStringConvertible {
    /// The lock file's path.
    public let file: String

    /// "the lock file PATH holds no fencing token this lock can read or increase".
    public var description: String { "the lock file \(file) holds no fencing token this lock can read or increase" }
}

/// Opens (creating if needed) a lock file for reading and writing, closed on `exec`.
private func openLockFile(_ file: String) -> Int32 {
    open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
}

/// What a lock file holds: the fencing token of the latest grant and its holder's process ID, as
/// one fixed-width line of text ("00000000000000000042 0000004242\n"), readable with `cat`.
private struct LockFileRecord {
    static let size = 32
    let token: UInt64
    let pid: Int32

    /// What reading a lock file found.
    enum Reading {
        /// Nothing: no grant yet.
        case empty
        case record(LockFileRecord)
        /// `pread` failed.
        case unreadable(POSIXError)
        /// Bytes that are not a record.
        case corrupt
    }

    static func read(descriptor: Int32) -> Reading {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: size) { buffer in
            let count = pread(descriptor, buffer.baseAddress, size, 0)
            if count < 0 { return .unreadable(POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)) }
            if count == 0 { return .empty }
            return parse(UnsafeBufferPointer(rebasing: buffer[..<count])).map(Reading.record) ?? .corrupt
        }
    }

    static func read(from file: String) -> LockFileRecord? {
        let descriptor = open(file, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        guard case let .record(record) = read(descriptor: descriptor) else { return nil }
        return record
    }

    /// The token (decimal digits, first) and the holder's process ID (the next field, if it is
    /// a number), separated by spaces, newlines or NULs; `nil` unless the token is whole.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> LockFileRecord? {
        let fields = bytes.split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\n") || $0 == 0 })
        guard let token = fields.first.flatMap(decimal) else { return nil }
        let pid = fields.dropFirst().first.flatMap(decimal).flatMap { Int32(exactly: $0) } ?? 0
        return LockFileRecord(token: token, pid: pid)
    }

    /// The value of decimal digits; `nil` for anything else, or a value beyond `UInt64`.
    private static func decimal(_ digits: Slice<UnsafeBufferPointer<UInt8>>) -> UInt64? {
        var value: UInt64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (times10, overflowed) = value.multipliedReportingOverflow(by: 10)
            let (sum, carried) = times10.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflowed, !carried else { return nil }
            value = sum
        }
        return value
    }

    func write(to descriptor: Int32) -> Bool {
        var line = [UInt8](repeating: UInt8(ascii: "0"), count: Self.size)
        Self.putDigits(token, into: &line, endingAt: 20)
        line[20] = UInt8(ascii: " ")
        Self.putDigits(UInt64(max(pid, 0)), into: &line, endingAt: 31)
        line[31] = UInt8(ascii: "\n")
        return pwrite(descriptor, line, line.count, 0) == line.count
    }

    /// Writes `value` in decimal, right-aligned in the zero-filled field that ends before `end`.
    private static func putDigits(_ value: UInt64, into line: inout [UInt8], endingAt end: Int) {
        var remaining = value
        var index = end - 1
        repeat {
            line[index] = UInt8(ascii: "0") + UInt8(remaining % 10)
            remaining /= 10
            index -= 1
        } while remaining > 0 && index >= 0
    }
}

/// A granted lock file: the descriptor that holds its `flock`, closed on release.
private final class FileCategoryLease: CategoryLease {
    let fencingToken: UInt64
    private let descriptor: Locked<Int32>

    init(descriptor: Int32, fencingToken: UInt64) {
        self.descriptor = .make(descriptor)
        self.fencingToken = fencingToken
    }

    func release() {
        let held = descriptor.exchange(with: -1)
        guard held >= 0 else { return }
        flock(held, LOCK_UN)
        close(held)
    }

    deinit {
        release() // a lease dropped without release still frees its category
    }
}

/// The name of a category's lock file.
private enum LockFileName {
    static func make(for spelling: String) -> String {
        let category = CategoryName.canonical(spelling)
        var name: [UInt8] = []
        name.reserveCapacity(category.utf8.count + 5)
        for byte in category.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                name.append(byte)
            case UInt8(ascii: ".") where !name.isEmpty:
                name.append(byte)
            default:
                name += [UInt8(ascii: "%"), hexDigit(byte >> 4), hexDigit(byte & 0xF)]
            }
        }
        if name.count > 200 {
            // "%-" never comes out of the escaping above (an escape is "%" and two hex digits),
            // so a shortened name never equals a name that needed no shortening.
            name = Array(name.prefix(160)) + Array("%-\(String(fnv1a(category), radix: 16))".utf8)
        }
        return String(decoding: name, as: UTF8.self) + ".lock"
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "A") + value - 10
    }

    private static func fnv1a(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return hash
    }
}
