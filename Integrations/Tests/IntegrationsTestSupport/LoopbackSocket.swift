import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A TCP socket bound to a free port of 127.0.0.1. Listening, it never accepts: connections
/// complete (the kernel's backlog) but no byte ever comes back, as from a server that hangs. Not
/// listening, its port is one nothing listens on once it is closed. `close()` it.
public final class LoopbackSocket: Sendable {
    /// The port it is bound to.
    public let port: Int
    private let descriptor: Int32

    public init(listening: Bool) throws {
        let made = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard made >= 0 else { throw TestFailure("socket failed: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(made, generic, length) == 0 && (!listening || listen(made, 64) == 0) && getsockname(made, generic, &length) == 0
            }
        }
        guard bound else {
            Glibc.close(made)
            throw TestFailure("bind\(listening ? "/listen" : "") failed: errno \(errno)")
        }
        descriptor = made
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    public func close() {
        Glibc.close(descriptor)
    }
}
