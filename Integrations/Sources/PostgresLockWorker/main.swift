import Conditions
import Foundation
import Logging
import Operations
import PostgresCategoryLock
import PostgresNIO
#if canImport(Glibc)
import Glibc
#endif

// A process (a "host") that shares cluster-wide categories with others through a
// PostgresCategoryLock, for the multi-process tests and benchmark W8. It reaches the server named
// by OPERATIONS_POSTGRES_HOST, _PORT, _USER and _DATABASE (set by .ci/postgres), and logs to one
// shared file in the format of the core package's category-lock-worker:
// "begin <pid> <category>:<token>,... <operation>", "end ...", "finish <pid> <operation> ...",
// "done <pid> <count>", and "lost <pid> <category>:<token>,... <operation>" when a holder's lease
// is counted lost. Usage:
//
//   postgres-lock-worker --log FILE [--categories a,b] [--operations N] [--queues Q]
//       [--cancel-percent P] [--hold-microseconds H] [--seed S] [--several]
//   postgres-lock-worker --log FILE --hold CATEGORY              (holds it until killed)
//   postgres-lock-worker --handoffs N --category C [--start-at T]     (benchmark W8)
//   postgres-lock-worker --raw-handoffs N --category C [--start-at T] (W8's reference: bare SQL)
//   postgres-lock-worker --benchmark-w8 [--handoffs N]           (runs W8 both ways, prints the ratio)

let arguments = CommandLine.arguments

func value(_ name: String) -> String? {
    arguments.firstIndex(of: name).flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("postgres-lock-worker: \(message)\n".utf8))
    exit(2)
}

let environment = ProcessInfo.processInfo.environment
var configuration = PostgresClient.Configuration(
    host: environment["OPERATIONS_POSTGRES_HOST"] ?? "127.0.0.1",
    port: Int(environment["OPERATIONS_POSTGRES_PORT"] ?? "5432") ?? 5432,
    username: environment["OPERATIONS_POSTGRES_USER"] ?? "postgres",
    password: nil,
    database: environment["OPERATIONS_POSTGRES_DATABASE"] ?? "postgres",
    tls: .disable
)
configuration.options.maximumConnections = 50
let client = PostgresClient(configuration: configuration, backgroundLogger: Logger(label: "postgres-lock-worker", factory: { _ in SwiftLogNoOpLogHandler() }))
let clientRun = Task.detached { await client.run() }
let lock = PostgresCategoryLock(client: client, heartbeatInterval: 0.2)
let pid = getpid()

/// Sleeps until the moment `--start-at` names (uptime nanoseconds), if it is given.
func sleepUntilStart() async {
    guard let start = value("--start-at").flatMap(UInt64.init) else { return }
    let now = DispatchTime.now().uptimeNanoseconds
    if start > now { try? await Task.sleep(nanoseconds: start - now) }
}

/// Blocks a thread of its own, not one of the cooperative pool, until `body` returns.
func offThePool(_ body: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        Thread.detachNewThread {
            body()
            continuation.resume()
        }
    }
}

/// Appends whole lines to a file shared by several processes.
final class SharedLog: Sendable {
    private let descriptor: Int32

    init(path: String) {
        descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        if descriptor < 0 { fail("cannot open log \(path)") }
    }

    func append(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = write(descriptor, bytes, bytes.count)
    }
}

/// An operation that logs its begin and end, with the fencing tokens of its categories.
final class LoggedOperation: AsyncOperation, @unchecked Sendable { // @unchecked: its lets never change
    let categories: [String]
    let log: SharedLog
    let holdMicroseconds: UInt32
    let holdsForever: Bool

    init(name: String, categories: [String], log: SharedLog, holdMicroseconds: UInt32, holdsForever: Bool = false) {
        self.categories = categories
        self.log = log
        self.holdMicroseconds = holdMicroseconds
        self.holdsForever = holdsForever
        super.init()
        self.name = name
        for category in categories {
            addCondition(ExclusiveCategory(category, lock: lock))
        }
    }

    /// Its categories with their fencing tokens, as the log lines carry them.
    var tokens: String {
        categories.map { "\($0):\(fencingToken(for: $0).map(String.init) ?? "none")" }.joined(separator: ",")
    }

    override func execute() {
        let tokens = tokens
        if holdsForever {
            log.append("holding \(pid) \(tokens) \(name ?? "")")
            return // never finishes: the process is killed while it holds its categories
        }
        log.append("begin \(pid) \(tokens) \(name ?? "")")
        if holdMicroseconds > 0 { usleep(holdMicroseconds) }
        log.append("end \(pid) \(tokens) \(name ?? "")")
        finish()
    }
}

/// Logs each finish, once.
struct FinishLogger: OperationObserver {
    let log: SharedLog
    let name: String

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        log.append("finish \(pid) \(name) \(operation.isCancelled ? "cancelled" : "completed") \(errors.count)")
    }
}

/// Logs "lost <pid> <category>:<token>,... <operation>" when the lock cancels a holder with
/// `CategoryLockError.lost` (a heartbeat unanswered within `heartbeatTimeout`): from that line on
/// its categories are free, so that a test can tell a lost lease apart from a broken exclusion.
/// The lock cancels the holder before it closes the session that holds the advisory lock.
struct LossLogger: OperationObserver {
    let log: SharedLog

    func operationDidCancel(_ operation: AsyncOperation) {
        guard let holder = operation as? LoggedOperation, operation.errors.contains(where: Self.isLost) else { return }
        log.append("lost \(pid) \(holder.tokens) \(operation.name ?? "")")
    }

    private static func isLost(_ error: any Error) -> Bool {
        if case .lost? = error as? CategoryLockError { return true }
        return false
    }
}

/// A deterministic random sequence (SplitMix64).
struct Random {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}

if arguments.contains("--benchmark-w8") {
    // W8: 1,000 handoffs of one cluster-wide category between 2 processes, each side in 2 copies
    // of this executable: PostgresCategoryLock against a bare pg_advisory_lock/unlock loop.
    let handoffs = Int(value("--handoffs") ?? "1000") ?? 1000
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    // Both workers connect first and then start at one moment of the monotonic clock that every
    // process shares; each prints when its last handoff ended. A run is the latest end minus that
    // start: neither process start-up nor connecting is counted, and the two loops overlap fully.
    func timeRun(_ mode: String) -> Double? {
        let category = "w8-\(UUID().uuidString.prefix(8))"
        let start = DispatchTime.now().uptimeNanoseconds + 1_000_000_000
        let workers = (0..<2).compactMap { _ -> (Process, Pipe)? in
            let process = Process()
            let output = Pipe()
            process.executableURL = executable
            process.arguments = [mode, String(handoffs / 2), "--category", category, "--start-at", String(start)]
            process.standardOutput = output
            return (try? process.run()) == nil ? nil : (process, output)
        }
        let ends = workers.compactMap { process, output -> UInt64? in
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { return nil }
            return text.split(separator: "\n").last { $0.hasPrefix("end ") }.flatMap { UInt64($0.dropFirst(4)) }
        }
        guard ends.count == 2, let last = ends.max(), last > start else { return nil }
        return Double(last - start) / 1e9
    }
    var raw: [Double] = []
    var ours: [Double] = []
    for _ in 0..<5 {
        guard let rawRun = timeRun("--raw-handoffs"), let ourRun = timeRun("--handoffs") else { fail("a W8 run failed") }
        raw.append(rawRun)
        ours.append(ourRun)
    }
    let (rawMedian, ourMedian) = (raw.sorted()[2], ours.sorted()[2])
    print("W8: \(handoffs) handoffs of one cluster-wide category between 2 processes, medians of 5, seconds")
    func runs(_ times: [Double]) -> String { times.map { String(format: "%.3f", $0) }.joined(separator: " ") }
    print(String(format: "  bare pg_advisory_lock loop (reference) %7.3f", rawMedian) + "  (runs: \(runs(raw)))")
    print(String(format: "  PostgresCategoryLock                   %7.3f", ourMedian) + "  (runs: \(runs(ours)))")
    print(String(format: "  W8 vs a bare advisory-lock loop        %.2f x   target <= 1.50 x", ourMedian / rawMedian))
    exit(0)
}

if let handoffs = value("--raw-handoffs").flatMap(Int.init) {
    // W8's reference: the same handoffs with bare pg_advisory_lock/pg_advisory_unlock calls.
    let key = lock.key(for: value("--category") ?? "w8")
    do {
        try await client.withConnection { connection in
            _ = try await connection.query("SELECT 1", logger: Logger(label: "w8")).collect()
            await sleepUntilStart()
            for _ in 0..<handoffs {
                _ = try await connection.query("SELECT pg_advisory_lock(\(key))", logger: Logger(label: "w8")).collect()
                _ = try await connection.query("SELECT pg_advisory_unlock(\(key))", logger: Logger(label: "w8")).collect()
            }
        }
    } catch {
        fail("raw handoffs failed: \(error)")
    }
    print("end \(DispatchTime.now().uptimeNanoseconds)")
    exit(0)
}

if let handoffs = value("--handoffs").flatMap(Int.init) {
    // W8: one category handed between processes, one operation at a time.
    let category = value("--category") ?? "w8"
    let queue = AsyncOperationQueue()
    let operations = (0..<handoffs).map { _ in
        let operation = AsyncBlockOperation { }
        operation.addCondition(ExclusiveCategory(category, lock: lock))
        return operation
    }
    // A first grant of a category of its own opens a connection and finds the token sequence.
    let warmUp = AsyncBlockOperation { }
    warmUp.addCondition(ExclusiveCategory("\(category)-warm-up-\(pid)", lock: lock))
    await offThePool { queue.addOperations([warmUp], waitUntilFinished: true) }
    await sleepUntilStart()
    await offThePool { queue.addOperations(operations, waitUntilFinished: true) }
    print("end \(DispatchTime.now().uptimeNanoseconds)")
    exit(operations.allSatisfy { $0.errors.isEmpty } && warmUp.errors.isEmpty ? 0 : 1)
}

guard let logPath = value("--log") else { fail("--log is required") }
let log = SharedLog(path: logPath)

if let category = value("--hold") {
    let holder = LoggedOperation(name: "holder-\(pid)", categories: [category], log: log, holdMicroseconds: 0, holdsForever: true)
    holder.addObserver(LossLogger(log: log))
    AsyncOperationQueue().addOperation(holder)
    while true { try? await Task.sleep(nanoseconds: 60_000_000_000) }
}

let categories = (value("--categories") ?? "a,b").split(separator: ",").map(String.init)
let operationCount = Int(value("--operations") ?? "100") ?? 100
let queueCount = max(1, Int(value("--queues") ?? "1") ?? 1)
let cancelPercent = Int(value("--cancel-percent") ?? "0") ?? 0
let holdMicroseconds = UInt32(value("--hold-microseconds") ?? "0") ?? 0
let several = arguments.contains("--several")
var random = Random(state: UInt64(value("--seed") ?? "") ?? UInt64(pid))

let queues = (0..<queueCount).map { index in
    let queue = AsyncOperationQueue()
    queue.name = "worker-\(pid)-\(index)"
    return queue
}
var operations: [AsyncOperation] = []
for index in 0..<operationCount {
    let name = "\(pid)-\(index)"
    var needs = [categories[random.below(categories.count)]]
    if several, random.below(4) == 0 {
        needs.append(categories[random.below(categories.count)]) // in either order: the lock sorts them
    }
    let operation = LoggedOperation(name: name, categories: Array(Set(needs)), log: log, holdMicroseconds: holdMicroseconds)
    operation.addObserver(FinishLogger(log: log, name: name))
    operations.append(operation)
}
let toCancel = operations.filter { _ in random.below(100) < cancelPercent }
for (index, operation) in operations.enumerated() {
    queues[index % queueCount].addOperation(operation)
}
for operation in toCancel {
    try? await Task.sleep(nanoseconds: UInt64(random.below(2_000)) * 1_000)
    operation.cancel()
}
await offThePool {
    for queue in queues { queue.waitUntilAllOperationsAreFinished() }
}
log.append("done \(pid) \(operationCount)")
exit(0)
