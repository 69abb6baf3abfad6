import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// How big randomized stress tests run: `.full` by default, `.small` under a sanitizer, which
/// slows the engine down ten to fifty times.
///
/// The environment variable `OPERATIONS_STRESS_SCALE` decides when set (`small` or `full`;
/// `.ci/run` sets `small` for its sanitizer passes). Otherwise the scale is `.small` when the
/// thread or address sanitizer is linked into the test process (its runtime's entry point is
/// there), and `.full` when not.
///
/// ```swift
/// let operations = StressScale.current == .small ? 4_000 : 40_000
/// ```
public enum StressScale: String, Sendable {
    case full
    case small

    /// The environment variable that chooses the scale.
    public static let variable = "OPERATIONS_STRESS_SCALE"

    /// The scale of this test run.
    public static let current: StressScale = {
        if let text = ProcessInfo.processInfo.environment[variable]?.lowercased(),
           let scale = StressScale(rawValue: text) {
            return scale
        }
        return linkedSanitizer == nil ? .full : .small
    }()

    /// "thread" or "address" when that sanitizer's runtime is in the process, else `nil`.
    public static let linkedSanitizer: String? = {
        guard let process = dlopen(nil, RTLD_NOW) else { return nil }
        defer { dlclose(process) }
        if dlsym(process, "__tsan_init") != nil { return "thread" }
        if dlsym(process, "__asan_init") != nil { return "address" }
        return nil
    }()
}
