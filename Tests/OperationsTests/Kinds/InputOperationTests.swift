import Foundation
import Operations
import Testing
import TestSupport

private struct User: Sendable, Equatable {
    let id: Int
    let name: String
}

/// A subclass that finishes later, on another thread.
private final class Shout: InputOperation<String, String>, @unchecked Sendable {
    override func execute(with input: String) {
        DispatchQueue.global().async {
            self.finish(producing: input.uppercased() + "!")
        }
    }
}

private func named<T: Foundation.Operation>(_ name: String, _ operation: T) -> T {
    operation.name = name
    return operation
}

@Suite struct InputOperationTests {
    // MARK: - Passing results

    @Test func outputs_flowDownTheChain_asInputs() {
        let fetch = ResultBlockOperation { User(id: 42, name: "Ada") }
        let greet = InputBlockOperation { (user: User) in "Hello, \(user.name)" }
        let shout = Shout()
        greet.takeInput(from: fetch)
        shout.takeInput(from: greet)

        AsyncOperationQueue().addChain([fetch, greet, shout], waitUntilFinished: true)

        #expect(greet.input == User(id: 42, name: "Ada"))
        #expect(shout.output == "HELLO, ADA!")
        #expect([fetch, greet, shout].allSatisfy { !$0.isFailed })
    }

    @Test func takeInput_aloneWiresTheDependency() {
        let fetch = ResultBlockOperation { 20 }
        let double = InputBlockOperation { (value: Int) in value * 2 }
        double.takeInput(from: fetch)

        // Added in the "wrong" order, without addChain: the dependency still orders them.
        AsyncOperationQueue().addOperations([double, fetch], waitUntilFinished: true)

        #expect(double.output == 40)
    }

    @Test func inputGivenUpFront_needsNoUpstream() {
        let count = InputBlockOperation(input: "chain") { $0.count }
        AsyncOperationQueue().addOperations([count], waitUntilFinished: true)
        #expect(count.output == 5)
    }

    @Test func voidOutput_works() {
        let saved = Recorder<Int>()
        let fetch = ResultBlockOperation { 7 }
        let save = InputBlockOperation { (value: Int) in saved.append(value) }
        save.takeInput(from: fetch)
        AsyncOperationQueue().addChain([fetch, save], waitUntilFinished: true)
        #expect(saved.all == [7])
        #expect(save.result != nil && !save.isFailed)
    }

    // MARK: - Adapters

    @Test func adapter_transformsTheValue() {
        let fetch = ResultBlockOperation { User(id: 1, name: "Grace") }
        let length = InputBlockOperation { (name: String) in name.count }
        length.takeInput(from: fetch) { user in user.name }

        AsyncOperationQueue().addChain([fetch, length], waitUntilFinished: true)

        #expect(length.input == "Grace")
        #expect(length.output == 5)
    }

    @Test func adapterThatThrows_vetoesTheNextOperation_andStopsTheRest() {
        let ran = Counter()
        let fetch = named("fetch", ResultBlockOperation { User(id: 1, name: "") })
        let save = named("save", InputBlockOperation { (name: String) in ran.increment() })
        let notify = named("notify", InputBlockOperation { (_: Int) in ran.increment() })
        save.takeInput(from: fetch) { user in
            guard !user.name.isEmpty else { throw StubError("8") }
            return user.name
        }
        notify.takeInput(from: save) { _ in 1 }

        AsyncOperationQueue().addChain([fetch, save, notify], waitUntilFinished: true)

        #expect(ran.current == 0)
        #expect(save.errors.compactMap { $0 as? StubError } == [StubError("8")])
        #expect(notify.errors.compactMap { $0 as? AsyncOperationError } == [.upstreamFailed(operation: "notify", upstream: "save", reason: "StubError(8)")])
    }

    // MARK: - Failures travel forward

    @Test func upstreamFailure_finishesEveryDownstreamOperation_withoutExecuting_namingTheFirstFailure() {
        let ran = Counter()
        let fetch = named("fetch", ResultBlockOperation<User> { throw StubError("5") })
        let greet = named("greet", InputBlockOperation { (user: User) in ran.increment(); return user.name })
        let shout = named("shout", Shout())
        greet.takeInput(from: fetch)
        shout.takeInput(from: greet)

        AsyncOperationQueue().addChain([fetch, greet, shout], waitUntilFinished: true)

        #expect(ran.current == 0)
        // One error each, although addChain and takeInput both link the same pairs.
        #expect(greet.errors.compactMap { $0 as? AsyncOperationError } == [.upstreamFailed(operation: "greet", upstream: "fetch", reason: "StubError(5)")])
        #expect(shout.errors.compactMap { $0 as? AsyncOperationError } == [.upstreamFailed(operation: "shout", upstream: "fetch", reason: "StubError(5)")])
        #expect(shout.output == nil)
        if case .failure(let error)? = shout.result {
            #expect("\(error)" == "'shout' was not run: 'fetch', before it in the chain, failed: StubError(5)")
        } else {
            Issue.record("shout should have failed")
        }
    }

    @Test func upstreamCancelledWhileRunning_finishesDownstreamWithoutExecuting() {
        let held = HeldOperations()
        let gate = held.make("gate")
        let fetch = named("fetch", ResultBlockOperation { 1 })
        let double = named("double", InputBlockOperation { (value: Int) in value * 2 })
        double.takeInput(from: fetch)
        fetch.addDependency(gate)
        AsyncOperationQueue().addOperations([gate, fetch, double], waitUntilFinished: false)
        #expect(held.waitUntilStarted("gate"))

        fetch.cancel()
        held.finish("gate")

        #expect(waitUntilFinished([gate, fetch, double]))
        #expect(double.output == nil)
        #expect(double.errors.compactMap { $0 as? AsyncOperationError } == [.upstreamCancelled(operation: "double", upstream: "fetch")])
    }

    @Test func cancelledDownstream_doesNotRun_andKeepsNoInputBack() {
        let fetch = ResultBlockOperation { 1 }
        let ran = Counter()
        let double = InputBlockOperation { (value: Int) in ran.increment(); return value * 2 }
        double.takeInput(from: fetch)
        double.cancel()
        AsyncOperationQueue().addChain([fetch, double], waitUntilFinished: true)
        #expect(ran.current == 0)
        #expect(fetch.output == 1)
        #expect(double.isCancelled && double.output == nil)
    }

    @Test func upstreamThatProducedNothing_failsWithMissingInput() {
        final class Silent: ResultOperation<Int>, @unchecked Sendable {
            override func execute() { finish() }
        }
        let silent = named("silent", Silent())
        let double = named("double", InputBlockOperation { (value: Int) in value * 2 })
        double.takeInput(from: silent)
        AsyncOperationQueue().addChain([silent, double], waitUntilFinished: true)
        #expect(double.errors.compactMap { $0 as? AsyncOperationError } == [.missingInput(operation: "double", upstream: "silent")])
    }

    @Test func operationNeverGivenAnInput_failsWithMissingInput() {
        let double = named("double", InputBlockOperation { (value: Int) in value * 2 })
        AsyncOperationQueue().addOperations([double], waitUntilFinished: true)
        #expect(double.errors.compactMap { $0 as? AsyncOperationError } == [.missingInput(operation: "double", upstream: nil)])
    }

    // MARK: - Memory

    @Test func finishedChain_isReleased_withoutCycles() {
        var fetch: ResultBlockOperation<Int>? = ResultBlockOperation { 1 }
        var double: InputBlockOperation<Int, Int>? = InputBlockOperation { $0 * 2 }
        var shout: Shout? = Shout()
        double!.takeInput(from: fetch!)
        shout!.takeInput(from: double!) { "\($0)" }
        let probes: [WeakProbe<AsyncOperation>] = [WeakProbe(fetch!), WeakProbe(double!), WeakProbe(shout!)]

        AsyncOperationQueue().addChain([fetch!, double!, shout!], waitUntilFinished: true)
        #expect(shout?.output == "2!")
        (fetch, double, shout) = (nil, nil, nil)

        #expect(probes.allSatisfy { $0.isReleased() })
    }

    @Test func chainThatNeverRan_isReleased_withoutCycles() {
        var fetch: ResultBlockOperation<Int>? = ResultBlockOperation { 1 }
        var double: InputBlockOperation<Int, Int>? = InputBlockOperation { $0 * 2 }
        double!.takeInput(from: fetch!) { $0 + 1 }
        let probes: [WeakProbe<AsyncOperation>] = [WeakProbe(fetch!), WeakProbe(double!)]

        (fetch, double) = (nil, nil)

        #expect(probes.allSatisfy { $0.isReleased() })
    }

    @Test func failedChain_isReleased_withoutCycles() {
        var fetch: ResultBlockOperation<Int>? = ResultBlockOperation { throw StubError("1") }
        var double: InputBlockOperation<Int, Int>? = InputBlockOperation { $0 * 2 }
        double!.takeInput(from: fetch!)
        let probes: [WeakProbe<AsyncOperation>] = [WeakProbe(fetch!), WeakProbe(double!)]
        AsyncOperationQueue().addChain([fetch!, double!], waitUntilFinished: true)

        (fetch, double) = (nil, nil)

        #expect(probes.allSatisfy { $0.isReleased() })
    }
}
