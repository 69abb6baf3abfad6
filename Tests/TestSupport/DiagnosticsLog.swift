import Foundation
import Operations

/// Captures the framework's diagnostics for tests, which run in parallel: give each operation a
/// unique name and ask for the diagnostics about that name.
public final class DiagnosticsLog: @unchecked Sendable {
    // @unchecked Sendable: `entries` is only touched while holding `lock`.
    public static let shared: DiagnosticsLog = {
        let log = DiagnosticsLog()
        OperationDiagnostics.handler = { diagnostic in log.record(diagnostic) }
        return log
    }()

    private let lock = NSLock()
    private var entries: [OperationDiagnostic] = []

    private func record(_ diagnostic: OperationDiagnostic) {
        lock.lock()
        defer { lock.unlock() }
        entries.append(diagnostic)
    }

    /// Every diagnostic reported so far about the operation named `operationName`.
    public func diagnostics(about operationName: String) -> [OperationDiagnostic] {
        lock.lock()
        defer { lock.unlock() }
        return entries.filter { $0.operationName == operationName }
    }

    /// Every diagnostic reported so far about operations whose names start with `prefix`.
    public func diagnostics(aboutNamesWithPrefix prefix: String) -> [OperationDiagnostic] {
        lock.lock()
        defer { lock.unlock() }
        return entries.filter { $0.operationName.hasPrefix(prefix) }
    }

    /// The kinds reported about `operationName`, in order.
    public func kinds(about operationName: String) -> [OperationDiagnostic.Kind] {
        diagnostics(about: operationName).map(\.kind)
    }

    /// The kinds reported about `operationName`, once at least `count` have been (or a generous
    /// timeout passed): for reports made after the operation finished, by code still running.
    public func kinds(about operationName: String, onceThereAre count: Int) -> [OperationDiagnostic.Kind] {
        waitUntil { kinds(about: operationName).count >= count }
        return kinds(about: operationName)
    }
}

/// A name no other test uses, for operations whose diagnostics a test checks. It also installs
/// the shared diagnostics log, so that a test reading the log only at its end still hears
/// what was reported before.
public func uniqueName(_ prefix: String = "op") -> String {
    _ = DiagnosticsLog.shared
    return "\(prefix)-\(UUID().uuidString.prefix(8))"
}
