import ServiceLifecycle

/// Runs `drain` (the queue's shutdown) and then, once it returned, waits `linger` more before
/// returning, so that the server (shut down after this service) still answers clients reading
/// the jobs' final states for a moment. Cancellation ends the linger at once.
struct DrainThenLinger: Service {
    let drain: any Service
    let linger: Duration

    func run() async throws {
        try await drain.run()
        try? await Task.sleep(for: linger)
    }
}
