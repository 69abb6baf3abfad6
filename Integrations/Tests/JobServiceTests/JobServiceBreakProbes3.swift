import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IntegrationsTestSupport
import Testing

/// Probes of round 3 that found breaks of Integrations/README.md (quoted above each test), fixed
/// since. They use `JobServiceProcess` and `HTTPClient`.
@Suite(.serialized) struct JobServiceBreakProbes3 {
    // README: "A body that is not such JSON answers `400 {"error": "..."}` saying what is wrong, a
    // body over 64 KiB `413 {"error": "..."}`" (the limit was found undocumented, with an empty
    // 413, by this probe)
    @Test func aBodyOver64KiB_answers413WithAnError() async throws {
        // Given a service
        let service = try JobServiceProcess(arguments: ["--port", "0"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())

        // When a job padded with whitespace past 64 KiB, and 70 000 bytes of garbage, are posted
        let (padded, paddedAnswer) = try await client.send("POST", "/jobs", #"{"account": "acme""# + String(repeating: " ", count: 70_000) + "}")
        let (garbage, garbageAnswer) = try await client.send("POST", "/jobs", String(repeating: "x", count: 70_000))

        // Then both answer 413 with an error
        #expect(padded == 413 && paddedAnswer["error"] is String, "a job of 70 kB answered \(padded) \(paddedAnswer)")
        #expect(garbage == 413 && garbageAnswer["error"] is String, "70 kB of garbage answered \(garbage) \(garbageAnswer)")
    }

    // README: "A body that is not such JSON answers `400 {"error": "..."}` saying what is wrong"
    @Test func validJSONThatIsNotAJob_isNotToldItIsInvalidJSON_norThatAnUnnamedKeyMustBeANumber() async throws {
        // Given a service
        let service = try JobServiceProcess(arguments: ["--port", "0"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())

        // When bodies that are valid JSON but not a job are posted
        for body in [#"{"account": "acme", "durationMs": 1.5}"#, #"{"account": "acme", "failTimes": 99999999999999999999}"#, #""acme""#, "[1]"] {
            #expect((try? JSONSerialization.jsonObject(with: Data(body.utf8), options: .fragmentsAllowed)) != nil)
            let (status, answer) = try await client.send("POST", "/jobs", body)

            // Then each answers 400, and its explanation neither calls it invalid JSON nor names an empty key
            let said = explanation(of: answer["error"] as? String ?? "")
            #expect(status == 400)
            #expect(!said.contains("not valid JSON") && !said.contains("''"), "\(body) was told: \(said)")
        }
    }

    // Left alone in session 44: a number too close to a whole one for a Double passed as whole.
    // (A number too large for a Double, 1e400, is refused by the JSON parser itself, as not
    // valid JSON, before any key is read: that is what it is told.)
    @Test func numbersAreReadExactly_soOneAHairAboveAWholeNumberIsRefused_namingTheRange() async throws {
        // Given a service
        let service = try JobServiceProcess(arguments: ["--port", "0"])
        defer { service.kill() }
        let client = HTTPClient(port: try service.waitForPort())

        // When a duration a hair above a whole number, and a count too large for any number, are posted
        let (nearlyWhole, nearlyWholeAnswer) = try await client.send("POST", "/jobs", #"{"account": "acme", "durationMs": 600000.00000000001}"#)
        let (huge, hugeAnswer) = try await client.send("POST", "/jobs", #"{"account": "acme", "failTimes": 1e400}"#)

        // Then each answers 400: the first saying which whole numbers the key takes
        #expect(nearlyWhole == 400)
        #expect(explanation(of: nearlyWholeAnswer["error"] as? String ?? "").contains("'durationMs' must be a whole number from 0 to 600000"), "\(nearlyWholeAnswer)")
        #expect(huge == 400 && hugeAnswer["error"] is String, "\(hugeAnswer)")
    }
}
