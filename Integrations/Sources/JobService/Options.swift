import Foundation

/// The command line of `job-service`.
struct Options {
    var host = "127.0.0.1"
    var port = 8080
    /// How long SIGTERM's drain may take, in all, before the process exits.
    var graceSeconds: Double = 10
    /// How long one attempt of a job may run before it is cancelled as timed out.
    var jobTimeoutSeconds: Double = 5
    var logLevel = "info"
    /// How long the server keeps answering GET after the drain, before it stops; `nil` takes a
    /// tenth of the grace period, at most 1 second.
    var lingerSeconds: Double?

    static let usage = """
        usage: job-service [--port N] [--host ADDRESS] [--grace-seconds S] [--linger-seconds S] [--job-timeout-seconds S] [--log-level LEVEL]
          --port N                 the port to listen on (default 8080; 0 picks a free one, printed at start)
          --host ADDRESS           the address to listen on (default 127.0.0.1)
          --grace-seconds S        on SIGTERM, exit within S seconds (default 10)
          --linger-seconds S       after the drain, GET keeps answering for S seconds, within the grace period
                                   (default a tenth of it, at most 1)
          --job-timeout-seconds S  an attempt running longer than S seconds fails as timed out (default 5)
          --log-level LEVEL        trace, debug, info, notice, warning, error or critical (default info)
        """

    /// Reads `arguments` (without the program's name); throws a message for anything it does not understand.
    init(parsing arguments: [String]) throws {
        var remaining = arguments[...]
        while let flag = remaining.popFirst() {
            guard let value = remaining.popFirst() else { throw OptionsError("\(flag) needs a value") }
            switch flag {
            case "--port":
                guard let port = Int(value), (0...65535).contains(port) else { throw OptionsError("--port takes a number from 0 to 65535, not '\(value)'") }
                self.port = port
            case "--host":
                host = value
            case "--grace-seconds":
                guard let seconds = Double(value), seconds.isFinite, seconds >= 0 else { throw OptionsError("--grace-seconds takes a number of seconds, 0 or more, not '\(value)'") }
                graceSeconds = seconds
            case "--linger-seconds":
                guard let seconds = Double(value), seconds.isFinite, seconds >= 0 else { throw OptionsError("--linger-seconds takes a number of seconds, 0 or more, not '\(value)'") }
                lingerSeconds = seconds
            case "--job-timeout-seconds":
                guard let seconds = Double(value), seconds.isFinite, seconds > 0 else { throw OptionsError("--job-timeout-seconds takes a number of seconds above 0, not '\(value)'") }
                jobTimeoutSeconds = seconds
            case "--log-level":
                logLevel = value
            default:
                throw OptionsError("unknown option '\(flag)'")
            }
        }
    }

    init() {}
}

struct OptionsError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
