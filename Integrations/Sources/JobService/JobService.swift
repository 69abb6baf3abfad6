import Foundation
import Hummingbird
import Logging
import Operations
import Prometheus

/// The HTTP face of the service: its routes, over one operation queue.
struct JobService: Sendable {
    let queue: AsyncOperationQueue
    let store: JobStore
    let registry: PrometheusCollectorRegistry
    let jobTimeout: TimeInterval
    /// Whether a SIGTERM (or SIGINT) arrived.
    let terminating: @Sendable () -> Bool

    func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.post("/jobs") { request, _ in
            var request = request
            let body: ByteBuffer
            do {
                body = try await request.collectBody(upTo: Self.maximumBodySize)
            } catch let error as any HTTPResponseError where error.status == .contentTooLarge { // NIO's too-many-bytes
                return Self.json(["error": "the body must be at most \(Self.maximumBodySize / 1024) KiB"], status: .contentTooLarge)
            }
            return await post(body)
        }
        router.get("/jobs/:id") { _, context in
            guard let id = context.parameters.get("id"), let job = store.response(for: id) else {
                return Self.json(["error": "no job with this id"], status: .notFound)
            }
            return Self.json(job, status: .ok)
        }
        router.get("/metrics") { _, _ in
            var text: [UInt8] = []
            registry.emit(into: &text)
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: text))
            )
        }
        return router
    }

    /// The largest body `POST /jobs` reads: 64 KiB (a job's JSON takes a few dozen bytes).
    static let maximumBodySize = 64 * 1024

    /// `POST /jobs`: 202 with the new job's id, 400 for a body that is not a job, 503 once the
    /// service shuts down.
    func post(_ body: ByteBuffer) async -> Response {
        guard !terminating(), !queue.isShutDown else { return Self.shuttingDown }
        let request: JobRequest
        do {
            request = try JSONDecoder().decode(JobRequest.self, from: Data(body.readableBytesView))
        } catch {
            return Self.json(["error": "the body must be JSON like {\"account\": \"acme\", \"durationMs\": 50, \"failTimes\": 0}: \(Self.explain(error))"], status: .badRequest)
        }
        if let problem = request.problem {
            return Self.json(["error": problem], status: .badRequest)
        }
        var job = Job(id: UUID().uuidString.lowercased(), account: request.account)
        let operation = JobOperation.make(for: job, request, timeout: jobTimeout, store: store)
        job.operation = operation
        store.insert(job)
        queue.addOperation(operation)
        if operation.isFinished, queue.isShutDown, store.response(for: job.id)?.startedAt == nil {
            store.remove(job.id) // the shutdown began during this request: the queue refused the job
            return Self.shuttingDown
        }
        return Self.json(["id": job.id], status: .accepted)
    }

    private static var shuttingDown: Response {
        json(["error": "the service is shutting down and takes no new jobs"], status: .serviceUnavailable)
    }

    private static func json(_ value: some Encodable, status: HTTPResponse.Status) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: data))
        )
    }

    /// The key a decoding error is about, if it is about one.
    private static func key(of context: DecodingError.Context) -> String? {
        context.codingPath.isEmpty ? nil : context.codingPath.map(\.stringValue).joined(separator: ".")
    }

    /// A sentence for a decoding error.
    private static func explain(_ error: any Error) -> String {
        switch error {
        case let DecodingError.keyNotFound(key, _):
            return "'\(key.stringValue)' is missing"
        case let DecodingError.typeMismatch(type, context):
            guard let key = key(of: context) else { return "it must be a JSON object" }
            return "'\(key)' must be \(type == String.self ? "a string" : JobRequest.wholeNumber(for: key))"
        case let DecodingError.valueNotFound(_, context):
            guard let key = key(of: context) else { return "it must be a JSON object" }
            return "'\(key)' must not be null"
        case let DecodingError.dataCorrupted(context):
            // At a key: a number too large for any (1e400, say).
            guard let key = key(of: context) else { return "it is not valid JSON" }
            return "'\(key)' must be \(JobRequest.wholeNumber(for: key))"
        default:
            return "\(error)"
        }
    }
}
