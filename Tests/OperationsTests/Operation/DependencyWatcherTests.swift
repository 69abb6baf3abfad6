import Foundation
@testable import Operations
import Testing
import TestSupport

// The watcher that tells the engine when a plain Foundation operation finishes: one watcher per
// watched operation, its reports in the order they were asked for, those that come last after
// every other (a serial queue's turn held by a plain operation ends after its dependents heard).

@Suite struct DependencyWatcherTests {
    /// A plain operation that runs once `release` is signalled.
    private func gated(_ release: Signal) -> BlockOperation {
        BlockOperation { _ = release.wait() }
    }

    @Test func reportsComeInTheOrderAskedFor_andTheLastAfterEveryOther_evenOnesAskedForAfterIt() {
        // Given a plain operation watched twice, then by a last report, then once more
        let watcher = DependencyWatcher()
        let release = Signal()
        let watched = gated(release)
        let log = Recorder<String>()
        _ = watcher.watch(watched) { log.append("first") }
        _ = watcher.watch(watched) { log.append("second") }
        watcher.watchAfterOtherWatchers(watched) { log.append("last") }
        _ = watcher.watch(watched) { log.append("third") }

        // When it finishes
        OperationQueue().addOperation(watched)
        release.signal()

        // Then every report is made, the last one last
        #expect(waitUntil { log.count == 4 })
        #expect(log.all == ["first", "second", "third", "last"])
    }

    @Test func aStoppedSubscription_isNotReported_whileTheOthersAre() {
        // Given a plain operation watched three times, the second of which is stopped
        let watcher = DependencyWatcher()
        let release = Signal()
        let watched = gated(release)
        let log = Recorder<String>()
        _ = watcher.watch(watched) { log.append("first") }
        let stopped = watcher.watch(watched) { log.append("stopped") }
        _ = watcher.watch(watched) { log.append("third") }
        DependencyWatcher.stop(stopped)

        // When it finishes
        OperationQueue().addOperation(watched)
        release.signal()

        // Then the others are reported, and the stopped one is not
        #expect(waitUntil { log.count == 2 })
        Thread.sleep(forTimeInterval: 0.05) // a chance for the stopped one to be reported
        #expect(log.all == ["first", "third"])
    }

    @Test func everySubscriptionStopped_stopsTheWatch_andANewOneIsReported() {
        // Given a plain operation whose only listener stopped listening
        let watcher = DependencyWatcher()
        let release = Signal()
        let watched = gated(release)
        let log = Recorder<String>()
        DependencyWatcher.stop(watcher.watch(watched) { log.append("stopped") })

        // When it is watched again, and finishes
        _ = watcher.watch(watched) { log.append("again") }
        OperationQueue().addOperation(watched)
        release.signal()

        // Then only the new listener hears of it
        #expect(waitUntil { log.count == 1 })
        Thread.sleep(forTimeInterval: 0.05)
        #expect(log.all == ["again"])
    }

    @Test func anOperationWatchedAfterItFinished_isReportedAtOnce() {
        // Given a plain operation that finished
        let watcher = DependencyWatcher()
        let watched = BlockOperation {}
        OperationQueue().addOperations([watched], waitUntilFinished: true)

        // When it is watched, and watched last
        let log = Recorder<String>()
        _ = watcher.watch(watched) { log.append("watch") }
        watcher.watchAfterOtherWatchers(watched) { log.append("last") }

        // Then both hear of its finish
        #expect(waitUntil { log.count == 2 })
    }
}
