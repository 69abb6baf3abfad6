import Foundation
import Operations
import Testing
import TestSupport

private func named<T: Foundation.Operation>(_ name: String, _ operation: T) -> T {
    operation.name = name
    return operation
}

@Suite struct AddChainTests {
    @Test func operations_runOneAfterAnother_inArrayOrder() {
        let order = Recorder<Int>()
        let probe = ConcurrencyProbe()
        let operations = (0..<20).map { index in
            AsyncBlockOperation {
                probe.enter("chain")
                order.append(index)
                usleep(200)
                probe.leave("chain")
            }
        }

        AsyncOperationQueue().addChain(operations, waitUntilFinished: true)

        #expect(order.all == Array(0..<20))
        #expect(probe.maximum("chain") == 1)
    }

    @Test func worksOnAPlainOperationQueue_withPlainOperationsMixedIn() {
        let order = Recorder<String>()
        let chain: [Foundation.Operation] = [
            AsyncBlockOperation { usleep(500); order.append("async 1") },
            BlockOperation { usleep(500); order.append("plain") },
            AsyncBlockOperation { order.append("async 2") },
        ]

        OperationQueue().addChain(chain, waitUntilFinished: true)

        #expect(order.all == ["async 1", "plain", "async 2"])
    }

    @Test func failure_stopsTheRest_withErrorsNamingIt() {
        let ran = Recorder<String>()
        let fetch = named("fetch", AsyncBlockOperation { throw StubError("4") })
        let parse = named("parse", AsyncBlockOperation { ran.append("parse") })
        let save = named("save", AsyncBlockOperation { ran.append("save") })

        AsyncOperationQueue().addChain([fetch, parse, save], waitUntilFinished: true)

        #expect(ran.all.isEmpty)
        #expect(parse.errors.compactMap { $0 as? AsyncOperationError } == [.upstreamFailed(operation: "parse", upstream: "fetch", reason: "StubError(4)")])
        #expect(save.errors.compactMap { $0 as? AsyncOperationError } == [.upstreamFailed(operation: "save", upstream: "fetch", reason: "StubError(4)")])
        #expect("\(save.errors[0])" == "'save' was not run: 'fetch', before it in the chain, failed: StubError(4)")
    }

    @Test func aGroupLinkWhoseChildrenFailedAlongAChainOfTheirOwn_isTheLinkNamed() {
        // The group's errors hold its children's, among them an inner link's chain error: the
        // outer chain names the group, the link that failed, not the inner chain's first link.
        let download = named("download", ResultBlockOperation<Int> { throw StubError("offline") })
        let unzip = named("unzip", InputBlockOperation<Int, Int> { $0 })
        unzip.takeInput(from: download) { $0 }
        let fetch = named("fetch", GroupOperation(operations: [download, unzip]))
        let save = named("save", AsyncBlockOperation {})

        AsyncOperationQueue().addChain([fetch, save], waitUntilFinished: true)

        #expect(unzip.errors.compactMap { $0 as? AsyncOperationError } == [.upstreamFailed(operation: "unzip", upstream: "download", reason: "StubError(offline)")])
        guard case let .upstreamFailed(operation, upstream, _)? = save.errors.first as? AsyncOperationError else {
            Issue.record("\(save.errors)")
            return
        }
        #expect(operation == "save" && upstream == "fetch", "\(save.errors)")
    }

    @Test func cancellation_stopsTheRest_withErrorsNamingIt() {
        let ran = Counter()
        let fetch = named("fetch", AsyncBlockOperation { ran.increment() })
        let parse = named("parse", AsyncBlockOperation { ran.increment() })
        let save = named("save", AsyncBlockOperation { ran.increment() })
        fetch.cancel()

        AsyncOperationQueue().addChain([fetch, parse, save], waitUntilFinished: true)

        #expect(ran.current == 0)
        #expect(save.errors.compactMap { $0 as? AsyncOperationError } == [.upstreamCancelled(operation: "save", upstream: "fetch")])
    }

    @Test func cancellationWithAReason_stopsTheRest_asCancelled() {
        let ran = Counter()
        let fetch = named("fetch", AsyncBlockOperation { ran.increment() })
        let parse = named("parse", AsyncBlockOperation { ran.increment() })
        let save = named("save", AsyncBlockOperation { ran.increment() })
        fetch.cancel(with: StubError("superseded"))

        AsyncOperationQueue().addChain([fetch, parse, save], waitUntilFinished: true)

        #expect(ran.current == 0)
        #expect(fetch.errors.asStubErrors == [StubError("superseded")]) // the reason stays with it
        #expect(parse.errors.compactMap { $0 as? AsyncOperationError } == [.upstreamCancelled(operation: "parse", upstream: "fetch")])
        #expect(save.errors.compactMap { $0 as? AsyncOperationError } == [.upstreamCancelled(operation: "save", upstream: "fetch")])
    }

    @Test func cancellingTheMiddle_whileTheFirstRuns_stopsTheRest() {
        let held = HeldOperations()
        let ran = Counter()
        let first = held.make("first")
        let middle = named("middle", AsyncBlockOperation { ran.increment() })
        let last = named("last", AsyncBlockOperation { ran.increment() })
        AsyncOperationQueue().addChain([first, middle, last])
        #expect(held.waitUntilStarted("first"))

        middle.cancel()
        held.finish("first")

        #expect(waitUntilFinished([first, middle, last]))
        #expect(ran.current == 0)
        #expect(!first.isFailed)
        #expect(last.errors.compactMap { $0 as? AsyncOperationError } == [.upstreamCancelled(operation: "last", upstream: "middle")])
    }

    @Test func plainLastLink_runsWhateverHappened_andSeesTheOutcome() {
        let outcome = Recorder<Bool>()
        let failing = AsyncBlockOperation { throw StubError("1") }
        let next = AsyncBlockOperation {}
        let report = BlockOperation { outcome.append(next.isFailed) }

        AsyncOperationQueue().addChain([failing, next, report], waitUntilFinished: true)

        #expect(outcome.all == [true])
    }

    @Test func finishedChain_isReleased() {
        var operations: [AsyncBlockOperation]? = (0..<5).map { _ in AsyncBlockOperation {} }
        let probes = operations!.map { WeakProbe($0) }
        AsyncOperationQueue().addChain(operations!, waitUntilFinished: true)
        operations = nil
        #expect(probes.allSatisfy { $0.isReleased() })
    }

    @Test func failedChain_isReleased() {
        var operations: [AsyncBlockOperation]? = [AsyncBlockOperation { throw StubError("1") }]
            + (0..<4).map { _ in AsyncBlockOperation {} }
        let probes = operations!.map { WeakProbe($0) }
        AsyncOperationQueue().addChain(operations!, waitUntilFinished: true)
        operations = nil
        #expect(probes.allSatisfy { $0.isReleased() })
    }
}
