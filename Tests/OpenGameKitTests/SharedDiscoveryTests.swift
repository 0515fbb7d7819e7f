import GameKitDiscovery
import NIOConcurrencyHelpers
import NetworkImpairment
import Testing

@testable import OpenGameKit

/// Holds callers until opened.
final class Gate: Sendable {
    private let state = NIOLockedValueBox<(open: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { continuation in
            let now = self.state.withLockedValue { state -> Bool in
                if state.open { return true }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    func open() {
        for waiter in self.state.withLockedValue({ state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }) { waiter.resume() }
    }
}

/// The one discovery endpoint a process's sessions share.
@Suite("Shared discovery endpoint")
struct SharedDiscoveryTests {
    @Test func anEndpointReleasedByItsFirstUserStaysUpForTheOthersStillWaiting() async throws {
        // A session closed as soon as it was made available, while another session waited for
        // the same endpoint: the endpoint stays up for the other (it used to be shut down under
        // it, and every session of the process made afterwards saw nobody).
        try NetworkSandbox.requireIsolation()
        let gate = Gate()
        let shared = SharedDiscovery { configuration in
            await gate.wait()
            return try await DiscoveryEndpoint.start(configuration: configuration)
        }
        let lo: [String]? = ["lo"]
        async let first = shared.acquire(interfaces: lo)
        async let second = shared.acquire(interfaces: lo)
        for _ in 0..<400 where await shared.users(of: lo) < 2 { try await Task.sleep(for: .milliseconds(5)) }
        #expect(await shared.users(of: lo) == 2)
        gate.open()
        let a = try await first
        await shared.release(interfaces: lo)
        let b = try await second
        #expect(a === b)
        #expect(await shared.users(of: lo) == 1)
        let type = ServiceType(sessionIdentifier: "shared-endpoint")
        let registration = try b.register(ServiceDescription(instanceName: "Still here", serviceType: type, port: 7))
        _ = try await registration.registered()
        // The last user's release shuts it down; the next acquire starts another.
        await shared.release(interfaces: lo)
        #expect(await shared.users(of: lo) == 0)
        #expect(throws: DiscoveryError.shutDown) { try b.browse(type) }
        let c = try await shared.acquire(interfaces: lo)
        #expect(c !== b)
        _ = try c.browse(type)
        await shared.release(interfaces: lo)
    }

    @Test func aFailedStartFailsEveryWaiterAndTheNextAcquireTriesAgain() async throws {
        try NetworkSandbox.requireIsolation()
        let attempts = NIOLockedValueBox(0)
        let shared = SharedDiscovery { configuration in
            if attempts.withLockedValue({ $0 += 1; return $0 }) == 1 { throw DiscoveryError.noUsableInterface }
            return try await DiscoveryEndpoint.start(configuration: configuration)
        }
        await #expect(throws: DiscoveryError.noUsableInterface) { try await shared.acquire(interfaces: ["lo"]) }
        #expect(await shared.users(of: ["lo"]) == 0)
        let endpoint = try await shared.acquire(interfaces: ["lo"])
        #expect(await shared.users(of: ["lo"]) == 1)
        _ = try endpoint.browse(ServiceType(sessionIdentifier: "shared-retry"))
        await shared.release(interfaces: ["lo"])
    }
}
