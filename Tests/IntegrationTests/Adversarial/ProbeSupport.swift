import Foundation
import Conditions
import Operations
import Testing
import TestSupport

/// A new category X, held by `holder` (`held`'s operation named `holderName`), which has started
/// on `queue` and runs until `held.finish(holderName)`. Shared by the probe suites.
func startHoldingACategory() -> (x: String, held: HeldOperations, holderName: String, holder: AsyncBlockOperation, queue: AsyncOperationQueue) {
    let x = uniqueName("X")
    let held = HeldOperations()
    let holderName = uniqueName("holder")
    let holder = held.make(holderName)
    holder.addCondition(ExclusiveCategory(x))
    let queue = AsyncOperationQueue()
    queue.addOperation(holder)
    #expect(held.waitUntilStarted(holderName))
    return (x, held, holderName, holder, queue)
}

/// A plain operation that records `label` in `started` as it starts, and blocks until `release`
/// fires. Shared by the parity probes.
func gatedOperation(_ label: String, started: Recorder<String>, release: Signal) -> BlockOperation {
    let operation = BlockOperation {
        started.append(label)
        _ = release.wait(timeout: blockingTimeout)
    }
    operation.name = label
    return operation
}

/// Makes `queue` of width 2 and takes both its slots with gated operations recording `labels`:
/// their release signals, once both started.
func takeBothSlots(of queue: OperationQueue, started: Recorder<String>, labels: (String, String) = ("blocker", "blocker")) -> (first: Signal, second: Signal) {
    queue.maxConcurrentOperationCount = 2
    let first = Signal()
    let second = Signal()
    queue.addOperation(gatedOperation(labels.0, started: started, release: first))
    queue.addOperation(gatedOperation(labels.1, started: started, release: second))
    #expect(waitUntil { started.count >= 2 })
    return (first, second)
}

/// Makes `queue` of width 2 and takes both its slots with operations of `held`: their names,
/// once both started.
func takeBothSlots(of queue: AsyncOperationQueue, with held: HeldOperations) -> (first: String, second: String) {
    queue.maxConcurrentOperationCount = 2
    let first = uniqueName("blocker")
    let second = uniqueName("blocker")
    queue.addOperations([held.make(first), held.make(second)], waitUntilFinished: false)
    #expect(held.waitUntilStarted(first) && held.waitUntilStarted(second))
    return (first, second)
}

/// `operation`, with a condition that answers `.satisfied` from another thread. Shared by the
/// parity probes.
func conditioned(_ operation: AsyncOperation) -> AsyncOperation {
    operation.addCondition(StubCondition(name: "AnswersFromAnotherThread") { _, completion in
        DispatchQueue.global().async { completion(.satisfied) }
    })
    return operation
}

/// `operation`, in a mutually exclusive category of its own. Shared by the parity probes.
func exclusive(_ operation: AsyncOperation) -> AsyncOperation {
    operation.addCondition(ExclusiveCategory(uniqueName("own")))
    return operation
}

/// What `task` ended with, or `nil` if it had not ended within `timeout`: a wait that never ends
/// fails the test instead of hanging it.
func boundedOutcome<Success: Sendable>(
    of task: Task<Success, any Error>,
    timeout: TimeInterval = generousTimeout
) async -> Result<Success, any Error>? {
    let ended = Recorder<Result<Success, any Error>>()
    Task { ended.append(await task.result) }
    guard await eventually(timeout: timeout, { ended.count > 0 }) else { return nil }
    return ended.all.first
}

/// Whether an outcome is a `CancellationError`.
func isCancellationError<Success>(_ outcome: Result<Success, any Error>) -> Bool {
    if case let .failure(error) = outcome { return error is CancellationError }
    return false
}

/// The environment variable that tells a child process of the test binary which probe scenario
/// it runs (`runProbeScenarioInChildProcess`).
let probeScenarioVariable = "OPERATIONS_PROBE_SCENARIO"

/// Whether this process is a child started to run `scenario`: the condition of the test that
/// holds the scenario, which is skipped in every ordinary run.
func isProbeScenario(_ scenario: String) -> Bool {
    ProcessInfo.processInfo.environment[probeScenarioVariable] == scenario
}

/// How a probe scenario run in a child process ended.
struct ProbeScenarioOutcome: Sendable, CustomStringConvertible {
    /// The exit status, or the signal that ended the process.
    let status: Int32
    /// Whether a signal ended it (a failed precondition traps).
    let wasKilledBySignal: Bool
    /// What it wrote, standard output and standard error together.
    let output: String

    /// Whether the scenario's test ran and passed.
    var passed: Bool {
        !wasKilledBySignal && status == 0 && output.contains("passed")
    }

    var description: String {
        let ending = wasKilledBySignal ? "killed by signal \(status)" : "exit status \(status)"
        // A crash report's headline and the crashed thread's innermost frames say where it trapped.
        let lines = output.split(separator: "\n")
        let headline = lines.first { $0.contains("Program crashed") }
        let frames = lines.drop { !$0.hasSuffix(" crashed:") }.filter { $0.hasPrefix("  0 ") || $0.hasPrefix("  1 ") }.prefix(2)
        guard let headline else { return "\(ending): \(output.suffix(600))" }
        return "\(ending): \(([headline] + frames).joined(separator: " | "))"
    }
}

/// Runs the test `testName`, which holds a scenario that may crash the process (a failed
/// precondition inside Foundation), in a child process of the test binary with
/// `probeScenarioVariable` set to `scenario`, so that a crash ends only the child. `nil` if it had
/// not ended within `timeout` (it is killed then). Linux: the binary is `/proc/self/exe`.
func runProbeScenarioInChildProcess(testName: String, scenario: String, timeout: TimeInterval = 300) -> ProbeScenarioOutcome? {
    let outputFile = FileManager.default.temporaryDirectory.appendingPathComponent("probe-\(UUID().uuidString).log")
    guard FileManager.default.createFile(atPath: outputFile.path, contents: nil),
          let output = try? FileHandle(forWritingTo: outputFile) else { return nil }
    defer {
        try? output.close()
        try? FileManager.default.removeItem(at: outputFile)
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    process.arguments = ["--testing-library", "swift-testing", "--filter", testName]
    var environment = ProcessInfo.processInfo.environment
    environment[probeScenarioVariable] = scenario
    process.environment = environment
    process.standardOutput = output
    process.standardError = output
    guard (try? process.run()) != nil else { return nil }
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning {
        if Date() > deadline {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        usleep(10_000)
    }
    let text = (try? String(contentsOf: outputFile, encoding: .utf8)) ?? ""
    return ProbeScenarioOutcome(
        status: process.terminationStatus,
        wasKilledBySignal: process.terminationReason == .uncaughtSignal,
        output: text
    )
}

// Shared by the plain-operation probes (round 9, and the plain gate's).

/// A new `AsyncOperationQueue` with `maxConcurrentOperationCount = 1`.
func serialAsyncQueue(_ name: String = uniqueName("plain-serial")) -> AsyncOperationQueue {
    let queue = AsyncOperationQueue()
    queue.name = name
    queue.maxConcurrentOperationCount = 1
    return queue
}

/// Foundation's own serial queue: the reference.
func serialFoundationQueue() -> OperationQueue {
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = 1
    return queue
}

/// What a scenario makes its operations with: on Foundation's own queue every operation is a
/// plain `BlockOperation`; on an `AsyncOperationQueue` those the scenario asks for as
/// `asynchronous` are `AsyncBlockOperation`s. Each records its label in `log` as it starts.
struct ScenarioOperations: Sendable {
    let recording: RecordingOperations
    let onFoundation: Bool

    init(_ prefix: String, onFoundation: Bool) {
        recording = RecordingOperations(prefix)
        self.onFoundation = onFoundation
    }

    var log: Recorder<String> { recording.executed }

    func plain(_ label: String) -> BlockOperation {
        recording.makePlain(label)
    }

    func asynchronous(_ label: String) -> Operation {
        onFoundation ? recording.makePlain(label) : recording.make(label)
    }

    /// A plain operation that records `label` as it starts and returns once `release` fires.
    func gated(_ label: String, _ release: Signal) -> BlockOperation {
        gatedOperation(label, started: log, release: release)
    }

    /// The same as an `AsyncBlockOperation` on the package's queue.
    func gatedAsynchronous(_ label: String, _ release: Signal) -> Operation {
        guard !onFoundation else { return gated(label, release) }
        let log = log
        let operation = AsyncBlockOperation {
            log.append(label)
            _ = release.wait(timeout: blockingTimeout)
        }
        operation.name = label
        return operation
    }

    func queue() -> OperationQueue {
        onFoundation ? serialFoundationQueue() : serialAsyncQueue()
    }
}

/// Runs `scenario` on Foundation's own serial queue and on a serial `AsyncOperationQueue`: the
/// orders each recorded.
func onBothQueues(_ prefix: String, _ scenario: (OperationQueue, ScenarioOperations) -> [String]) -> (foundation: [String], package: [String]) {
    let reference = ScenarioOperations(prefix, onFoundation: true)
    let foundation = scenario(reference.queue(), reference)
    let ours = ScenarioOperations(prefix, onFoundation: false)
    let package = scenario(ours.queue(), ours)
    return (foundation, package)
}

/// Whether `errors` holds `AsyncOperationError.queueShutDown`.
func hasQueueShutDown(_ errors: [any Error]) -> Bool {
    errors.contains { error in
        if case .queueShutDown? = error as? AsyncOperationError { return true }
        return false
    }
}

/// A plain Foundation operation that runs asynchronously: `start()` marks it executing and calls
/// `onStart`; it finishes when `finish()` is called, from any thread, announcing both changes
/// with `willChangeValue`/`didChangeValue`, as Foundation asks of an asynchronous subclass.
final class ManuallyFinishedOperation: Operation, @unchecked Sendable {
    // @unchecked Sendable: `executing` and `finished` are only touched while holding `lock`;
    // `onStart` is immutable; the rest is Foundation's.
    private let lock = NSLock()
    private var executing = false
    private var finished = false
    private let onStart: @Sendable (ManuallyFinishedOperation) -> Void

    init(name: String, onStart: @escaping @Sendable (ManuallyFinishedOperation) -> Void) {
        self.onStart = onStart
        super.init()
        self.name = name
    }

    override var isAsynchronous: Bool { true }

    override var isExecuting: Bool {
        lock.lock()
        defer { lock.unlock() }
        return executing
    }

    override var isFinished: Bool {
        lock.lock()
        defer { lock.unlock() }
        return finished
    }

    override func start() {
        guard !isCancelled else {
            finish()
            return
        }
        willChangeValue(forKey: "isExecuting")
        lock.lock()
        executing = true
        lock.unlock()
        didChangeValue(forKey: "isExecuting")
        onStart(self)
    }

    func finish() {
        willChangeValue(forKey: "isExecuting")
        willChangeValue(forKey: "isFinished")
        lock.lock()
        executing = false
        finished = true
        lock.unlock()
        didChangeValue(forKey: "isExecuting")
        didChangeValue(forKey: "isFinished")
    }
}

/// How many seconds a stall report says `holder` has been executing ("has been executing for
/// [at least] N s"), if it says. Shared by the probe suites.
func secondsExecuting(of holder: String, in message: String) -> Double? {
    guard let range = message.range(of: "'\(holder)' has been executing for ") else { return nil }
    let rest = message[range.upperBound...].replacingOccurrences(of: "at least ", with: "")
    return Double(rest.prefix { $0.isNumber || $0 == "." })
}
