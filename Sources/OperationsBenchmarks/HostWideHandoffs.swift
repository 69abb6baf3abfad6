import Conditions
import Foundation
import Operations
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// W7: one host-wide category handed between processes, through `FileCategoryLock`, against a
/// bare `flock` loop doing the same handoffs. Each side starts the same number of copies of this
/// executable in worker mode (`--handoff-worker ours|flock DIRECTORY COUNT`), so the cost of
/// starting processes is the same on both sides.
enum HostWideHandoffs {
    /// Runs `handoffs` acquisitions of one category, split between `processes` workers.
    static func run(_ mode: String, handoffs: Int, processes: Int) -> String? {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("w7-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var workers: [Process] = []
        for _ in 0..<processes {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            process.arguments = ["--handoff-worker", mode, directory.path, String(handoffs / processes)]
            do { try process.run() } catch { return "could not start a worker: \(error)" }
            workers.append(process)
        }
        for worker in workers { worker.waitUntilExit() }
        let failed = workers.filter { $0.terminationStatus != 0 }.count
        return failed == 0 ? nil : "\(failed) workers failed"
    }

    /// Worker mode: `count` acquisitions of the category "w7", one at a time.
    static func work(_ mode: String, directory: String, count: Int) -> Int32 {
        if mode == "flock" {
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let descriptor = open(directory + "/w7.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else { return 1 }
            for _ in 0..<count {
                flock(descriptor, LOCK_EX)
                flock(descriptor, LOCK_UN)
            }
            return 0
        }
        guard let lock = try? FileCategoryLock(directory: URL(fileURLWithPath: directory)) else { return 1 }
        let queue = AsyncOperationQueue()
        let operations = (0..<count).map { _ in
            let operation = AsyncBlockOperation {}
            operation.addCondition(ExclusiveCategory("w7", lock: lock))
            return operation
        }
        queue.addOperations(operations, waitUntilFinished: true)
        return operations.allSatisfy { $0.errors.isEmpty } ? 0 : 1
    }
}
