import Foundation
import Operations

/// What a client asks for with `POST /jobs`.
struct JobRequest: Decodable {
    /// Jobs of one account never run at the same time.
    let account: String
    /// How long each attempt works, in milliseconds.
    let durationMs: Int
    /// How many of the first attempts fail.
    let failTimes: Int

    enum CodingKeys: String, CodingKey {
        case account, durationMs, failTimes
    }

    /// A number given that is not a whole one, by key.
    private let fractionalKey: String?

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        account = try container.decode(String.self, forKey: .account)
        // Read as a Decimal: swift-corelibs-foundation's decoder calls a number that is not a
        // whole one, or too large for an Int, "not valid JSON", without saying where; a Double
        // would round 600000.00000000001 to a whole number.
        let duration = try container.decodeIfPresent(Decimal.self, forKey: .durationMs) ?? 0
        let fails = try container.decodeIfPresent(Decimal.self, forKey: .failTimes) ?? 0
        durationMs = Self.clamped(duration)
        failTimes = Self.clamped(fails)
        fractionalKey = !Self.isWhole(duration) ? "durationMs" : !Self.isWhole(fails) ? "failTimes" : nil
    }

    private static func isWhole(_ number: Decimal) -> Bool {
        var number = number
        var whole = Decimal()
        NSDecimalRound(&whole, &number, 0, .down)
        return whole == number
    }

    /// `number` as an Int, pinned to Int's range (a range check then says it is too large).
    private static func clamped(_ number: Decimal) -> Int {
        if number >= Decimal(Int.max) { return .max }
        if number <= Decimal(Int.min) { return .min }
        return Int(truncating: NSDecimalNumber(decimal: number))
    }

    /// The whole numbers each numeric key takes, as the messages say them.
    static let ranges = ["durationMs": 0...600_000, "failTimes": 0...1_000]

    /// What `key` must be, as a message says it: "a whole number from 0 to 1000".
    static func wholeNumber(for key: String) -> String {
        guard let range = ranges[key] else { return "a whole number" }
        return "a whole number from \(range.lowerBound) to \(range.upperBound)"
    }

    /// Why the request cannot be a job, if it cannot.
    var problem: String? {
        if let fractionalKey { return "'\(fractionalKey)' must be \(Self.wholeNumber(for: fractionalKey))" }
        if account.trimmingCharacters(in: .whitespaces).isEmpty { return "'account' must not be empty" }
        if account.count > 200 { return "'account' must be at most 200 characters" }
        for (key, value) in [("durationMs", durationMs), ("failTimes", failTimes)] where Self.ranges[key]?.contains(value) == false {
            return "'\(key)' must be \(Self.wholeNumber(for: key))"
        }
        return nil
    }
}

/// Where a job is in its life, as `GET /jobs/{id}` says it.
enum JobState: String, Encodable {
    case waiting, running, succeeded, failed, cancelled
}

/// One job as the service remembers it.
struct Job {
    let id: String
    let account: String
    var state = JobState.waiting
    /// Attempts that started.
    var attempts = 0
    var startedAt: Date?
    var finishedAt: Date?
    /// The job's operation while it has not finished: asked what it waits for.
    var operation: AsyncOperation?

    /// The body of `GET /jobs/{id}`; `waitsFor` is what the job waits for now (the queue
    /// snapshot's explanation), empty unless it waits.
    func response(waitsFor: [String]) -> JobResponse {
        JobResponse(
            id: id,
            account: account,
            state: state,
            attempts: attempts,
            startedAt: startedAt?.timeIntervalSince1970,
            finishedAt: finishedAt?.timeIntervalSince1970,
            waitsFor: waitsFor
        )
    }
}

/// The JSON of a job; the times are seconds since 1970, absent until known.
struct JobResponse: Encodable {
    let id: String
    let account: String
    let state: JobState
    let attempts: Int
    let startedAt: Double?
    let finishedAt: Double?
    let waitsFor: [String]
}

/// The error of an attempt told to fail.
struct AttemptFailed: Error, CustomStringConvertible {
    let attempt: Int
    var description: String { "attempt \(attempt) failed as asked" }
}
