import Dispatch
import Foundation

extension QualityOfService {
    /// The Dispatch class that matches this quality of service, for work the engine moves to a
    /// Dispatch thread on an operation's behalf.
    var dispatchClass: DispatchQoS.QoSClass {
        switch self {
        case .userInteractive: .userInteractive
        case .userInitiated: .userInitiated
        case .utility: .utility
        case .background: .background
        default: .default
        }
    }
}
