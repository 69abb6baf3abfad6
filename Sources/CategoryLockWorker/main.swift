import Conditions
import Foundation
import Observers
import Operations
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// A process that shares host-wide categories with others through a `FileCategoryLock`: the
// multi-process tests and benchmark W7 start several of these. Each operation appends
// "begin <pid> <category> <token> <operation>" and "end ..." to one shared log, with O_APPEND so
// that the lines of all processes interleave whole; a test then checks that no two operations of
// a category overlapped and that the fencing tokens only grow. Usage:
//
//   category-lock-worker --directory DIR --log FILE [--categories a,b,c] [--operations N]
//       [--queues Q] [--cancel-percent P] [--hold-microseconds H] [--seed S] [--several]
//   category-lock-worker --directory DIR --log FILE --hold CATEGORY     (holds it until killed)
//   category-lock-worker --directory DIR --handoffs N --category C      (benchmark W7)
//   category-lock-worker --raw-flock FILE --handoffs N                  (W7's reference)

let arguments = CommandLine.arguments

func value(_ name: String) -> String? {
    arguments.firstIndex(of: name).flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("category-lock-worker: \(message)\n".utf8))
    exit(2)
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

/// A deterministic random sequence (SplitMix64), so a run can be repeated from its seed.
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

if let file = value("--raw-flock") {
    // W7's reference: the same handoffs with a bare flock loop.
    let handoffs = Int(value("--handoffs") ?? "1000") ?? 1000
    let descriptor = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
    for _ in 0..<handoffs {
        flock(descriptor, LOCK_EX)
        flock(descriptor, LOCK_UN)
    }
    exit(0)
}

guard let directory = value("--directory") else { fail("--directory is required") }
let lock: FileCategoryLock
do {
    lock = try FileCategoryLock(directory: URL(fileURLWithPath: directory))
} catch {
    fail("cannot make the lock: \(error)")
}

if let handoffs = value("--handoffs").flatMap(Int.init) {
    // W7: one category handed between processes, one operation at a time.
    let category = value("--category") ?? "w7"
    let queue = AsyncOperationQueue()
    let operations = (0..<handoffs).map { _ in
        let operation = AsyncBlockOperation { }
        operation.addCondition(ExclusiveCategory(category, lock: lock))
        return operation
    }
    queue.addOperations(operations, waitUntilFinished: true)
    exit(operations.allSatisfy { $0.errors.isEmpty } ? 0 : 1)
}

guard let logPath = value("--log") else { fail("--log is required") }
let log = SharedLog(path: logPath)
let pid = getpid()

/// An operation that logs its begin and end, with the fencing tokens of its categories.
final class LoggedOperation: AsyncOperation, @unchecked Sendable { // @unchecked: its lets never change
    let categories: [String]
    let holdMicroseconds: UInt32
    let holdsForever: Bool

    init(name: String, categories: [String], holdMicroseconds: UInt32, holdsForever: Bool = false) {
        self.categories = categories
        self.holdMicroseconds = holdMicroseconds
        self.holdsForever = holdsForever
        super.init()
        self.name = name
        for category in categories {
            addCondition(ExclusiveCategory(category, lock: lock))
        }
    }

    override func execute() {
        let tokens = categories.map { "\($0):\(fencingToken(for: $0).map(String.init) ?? "none")" }.joined(separator: ",")
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

if let category = value("--hold") {
    // Holds `category` until killed, after saying so in the log.
    AsyncOperationQueue().addOperation(LoggedOperation(name: "holder-\(pid)", categories: [category], holdMicroseconds: 0, holdsForever: true))
    while true { sleep(60) }
}

let categories = (value("--categories") ?? "a,b,c,d").split(separator: ",").map(String.init)
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
    var needs = [categories[random.below(categories.count)]]
    if several, random.below(4) == 0 {
        needs.append(categories[random.below(categories.count)])
    }
    needs = Array(Set(needs)).sorted()
    let name = "\(pid)-\(index)"
    let operation = LoggedOperation(name: name, categories: needs, holdMicroseconds: holdMicroseconds)
    operation.addObserver(BlockObserver(didFinish: { operation, errors in
        log.append("finish \(pid) \(name) \(operation.isCancelled ? "cancelled" : "completed") \(errors.count)")
    }))
    operations.append(operation)
}
let toCancel = operations.filter { _ in random.below(100) < cancelPercent }
for (index, operation) in operations.enumerated() {
    queues[index % queueCount].addOperation(operation)
}
for operation in toCancel {
    usleep(UInt32(random.below(2_000)))
    operation.cancel()
}
for queue in queues {
    queue.waitUntilAllOperationsAreFinished()
}
log.append("done \(pid) \(operationCount)")
exit(0)
