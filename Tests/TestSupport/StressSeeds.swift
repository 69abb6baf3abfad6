import Foundation

/// The seeds a randomized stress test runs with: `fixed`, plus one fresh seed per test run; or,
/// when the environment variable `replayVariable` holds a seed (decimal, or hexadecimal with
/// `0x`), only that one, to replay a failure.
///
/// ```swift
/// static let seeds = stressSeeds(fixed: [0x5EED_0001, 0xC0FF_EE42], replayVariable: "MY_STRESS_SEED")
///
/// @Test(arguments: seeds)
/// func randomWorkload_keepsEveryInvariant(seed: UInt64) { … "seed \(seed)" in every message … }
/// ```
public func stressSeeds(fixed: [UInt64], replayVariable: String) -> [UInt64] {
    if let text = ProcessInfo.processInfo.environment[replayVariable], let seed = parseSeed(text) {
        return [seed]
    }
    return fixed + [UInt64.random(in: .min ... .max)]
}

private func parseSeed(_ text: String) -> UInt64? {
    let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
    if trimmed.hasPrefix("0x") {
        return UInt64(trimmed.dropFirst(2).replacingOccurrences(of: "_", with: ""), radix: 16)
    }
    return UInt64(trimmed)
}
