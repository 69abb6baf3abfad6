import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A PostgreSQL server of one test's own, in a fresh temporary folder on a free port of
/// 127.0.0.1, that the test may stop and start again while its client runs. It is made from the
/// binaries that `.ci/postgres` found (`OPERATIONS_POSTGRES_PG_CTL`); as root it runs as the
/// `postgres` user, as PostgreSQL requires. `remove()` stops it and deletes its folder: `defer` it.
public final class ThrowawayPostgres: Sendable {
    /// The port it listens on, on 127.0.0.1.
    public let port: Int
    private let folder: String
    private let binaries: String

    /// What went wrong while making, starting or stopping the server, with its log.
    public struct Failure: Error, CustomStringConvertible {
        /// What failed, with the log of the command that failed.
        public let description: String
    }

    /// Makes the cluster (`initdb`) and starts the server (`pg_ctl start`), each bounded.
    public init() throws {
        guard let pgCtl = ProcessInfo.processInfo.environment["OPERATIONS_POSTGRES_PG_CTL"] else {
            throw Failure(description: "OPERATIONS_POSTGRES_PG_CTL is not set: run the tests through `bash ../.ci/postgres run swift test`")
        }
        binaries = (pgCtl as NSString).deletingLastPathComponent
        var template = Array("/tmp/operations-postgres-test.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw Failure(description: "mkdtemp failed: errno \(errno)") }
        folder = String(cString: made)
        do {
            port = try Self.freePort()
            chmod(folder, 0o755)
            if getuid() == 0 { try Self.run("/bin/chown", ["postgres", folder], asServerUser: false, log: nil) }
            try Self.run(binaries + "/initdb", ["-D", folder + "/cluster", "-A", "trust", "-U", "postgres"], log: folder + "/initdb.log")
        } catch {
            try? FileManager.default.removeItem(atPath: folder)
            throw error
        }
        do {
            try start()
        } catch {
            remove()
            throw error
        }
    }

    /// Starts the server and waits until it accepts connections (at most 60 seconds).
    public func start() throws {
        try Self.run(binaries + "/pg_ctl", [
            "-D", folder + "/cluster", "-l", folder + "/server.log", "-w", "-t", "60",
            "-o", "-c listen_addresses=127.0.0.1 -p \(port) -k \(folder) -c fsync=off", "start",
        ], log: folder + "/pg_ctl.log")
    }

    /// Stops the server at once, as a crash would (`pg_ctl -m immediate stop`): every session ends.
    public func stop() throws {
        try Self.run(binaries + "/pg_ctl", ["-D", folder + "/cluster", "-m", "immediate", "-w", "-t", "60", "stop"], log: folder + "/pg_ctl.log")
    }

    /// Stops the server if it runs (killing it if `pg_ctl` cannot) and deletes its folder.
    public func remove() {
        if (try? stop()) == nil, let postmaster = serverProcessID() {
            kill(postmaster, SIGKILL) // its children end when they see it gone
        }
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// The server's process ID, from the first line of `postmaster.pid`, while it runs.
    private func serverProcessID() -> pid_t? {
        guard let text = try? String(contentsOfFile: folder + "/cluster/postmaster.pid", encoding: .utf8) else { return nil }
        return text.split(separator: "\n").first.flatMap { pid_t($0) }
    }

    /// Runs `executable` to its end (at most `timeout` seconds) through `posix_spawn` and
    /// `waitpid`, not `Foundation.Process`: `pg_ctl start` leaves a server running that would keep
    /// the descriptor by which `Process` learns that its child ended, so `waitUntilExit()` would
    /// never return. The child first closes every descriptor above standard error, so the server
    /// holds none of this test process's (other tests' `Process`es among them), and writes its
    /// output to `log`.
    private static func run(_ executable: String, _ arguments: [String], asServerUser: Bool = true, log: String? = nil, timeout: TimeInterval = 120) throws {
        let command = asServerUser && getuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--", executable] + arguments : [executable] + arguments
        let script = #"exec >>"$1" 2>&1; shift; for fd in /proc/$$/fd/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done 2>/dev/null; exec "$@""#
        let argv = ["/bin/bash", "-c", script, "bash", log ?? "/dev/null"] + command
        var cArguments = argv.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/bash", nil, nil, &cArguments, environ)
        guard spawned == 0 else { throw Failure(description: "posix_spawn failed: \(spawned)") }
        let deadline = Date().addingTimeInterval(timeout)
        var status: Int32 = 0
        while true {
            let waited = waitpid(pid, &status, WNOHANG)
            if waited == pid { break }
            if waited < 0 && errno != EINTR { throw Failure(description: "waitpid failed: errno \(errno)") }
            guard Date() < deadline else {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                throw Failure(description: "\((executable as NSString).lastPathComponent) did not end within \(timeout) s")
            }
            usleep(10_000)
        }
        let exited = status & 0x7F == 0
        let code = (status >> 8) & 0xFF
        guard exited, code == 0 else {
            let detail = log.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } ?? ""
            throw Failure(description: "\((executable as NSString).lastPathComponent) \(arguments.last ?? "") ended with status \(status)\n\(detail)")
        }
    }

    /// A port of 127.0.0.1 that nothing listens on now.
    private static func freePort() throws -> Int {
        let socket = try LoopbackSocket(listening: false)
        defer { socket.close() }
        return socket.port
    }
}
