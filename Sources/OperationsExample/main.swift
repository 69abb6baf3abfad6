import Conditions
import Foundation
import Observers
import Operations

// A small tour of the engine: a subclass, a block operation with a continuation, a mutually
// exclusive category, a timeout and observers reporting progress. Run it with
// `swift run operations-example`.

/// Prints what happens to the operations it observes, with the time since the tour began.
struct ProgressReporter: OperationObserver {
    let start = DispatchTime.now()

    func operationDidStart(_ operation: AsyncOperation) {
        log("started", operation)
    }

    func operationDidCancel(_ operation: AsyncOperation) {
        log("cancelled", operation)
    }

    func operationDidFinish(_ operation: AsyncOperation, errors: [any Error]) {
        let outcome = errors.isEmpty ? "finished" : "finished with \(errors.map { "\($0)" }.joined(separator: "; "))"
        log(outcome, operation)
    }

    private func log(_ event: String, _ operation: AsyncOperation) {
        let milliseconds = Int((DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1_000_000)
        print(String(format: "%6d ms  %-22@ %@", milliseconds, operation.name ?? "?" as NSString, event))
    }
}

/// A subclass: "downloads" a report on a background queue and finishes when the work is done.
final class DownloadReport: AsyncOperation, @unchecked Sendable {
    private let pages: Int

    init(pages: Int) {
        self.pages = pages
        super.init()
        name = "download \(pages) pages"
    }

    override func execute() {
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20 * pages)) {
            self.finish()
        }
    }
}

/// The category every database write belongs to: at most one runs at a time.
enum Database {}

let reporter = ProgressReporter()
let queue = AsyncOperationQueue()

let download = DownloadReport(pages: 3)

let parse = AsyncBlockOperation { finish in
    // A continuation: finish when the asynchronous work calls back.
    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(30)) {
        finish(nil)
    }
}
parse.name = "parse report"
parse.addDependency(download)

var writes: [AsyncOperation] = []
for table in ["customers", "orders", "invoices"] {
    let write = AsyncBlockOperation { Thread.sleep(forTimeInterval: 0.02) }
    write.name = "write \(table)"
    write.addCondition(MutuallyExclusive<Database>())
    write.addDependency(parse)
    writes.append(write)
}

struct Unreachable: Error, CustomStringConvertible {
    var description: String { "the mirror never answered" }
}

let stuck = AsyncBlockOperation { _ in
    // Never calls its continuation: the timeout below finishes it anyway.
}
stuck.name = "sync to mirror"
stuck.addObserver(TimeoutObserver(timeout: 0.2))

for operation in [download, parse, stuck] + writes {
    operation.addObserver(reporter)
}

print("Queueing \(3 + writes.count) operations; writes to the database never overlap.\n")
queue.addOperations([download, parse, stuck] + writes, waitUntilFinished: true)

let failed = [download, parse, stuck] + writes
print("\nAll done: \(failed.filter { !$0.isFailed }.count) succeeded, \(failed.filter(\.isFailed).count) failed.")

runCompositionTour()
runInspectorTour()
