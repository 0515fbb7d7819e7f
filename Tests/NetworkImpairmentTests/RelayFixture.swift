import NIOCore
import NIOPosix

@testable import NetworkImpairment

/// A relay between an echoing target and the test, on real loopback sockets, torn down
/// whatever the test body does.
struct RelayFixture {
    let group: any EventLoopGroup
    let target: UDPPeer
    let relay: UDPImpairmentRelay

    /// Runs `body` with a started relay; requires `scripts/sandbox`.
    static func with(
        forward: ImpairmentProfile,
        backward: ImpairmentProfile,
        seed: UInt64 = 1,
        listenHost: String = "127.0.0.1",
        _ body: (RelayFixture) async throws -> Void
    ) async throws {
        try NetworkSandbox.requireIsolation()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let outcome: Result<Void, any Error>
        do {
            let target = try await UDPPeer.bind(on: group, echo: true)
            let relay = try await UDPImpairmentRelay.start(
                listen: try SocketAddress(ipAddress: listenHost, port: 0),
                target: target.address,
                forward: forward,
                backward: backward,
                seed: seed,
                group: group
            )
            do {
                try await body(RelayFixture(group: group, target: target, relay: relay))
                outcome = .success(())
            } catch {
                outcome = .failure(error)
            }
            try? await relay.stop()
            await target.close()
        } catch {
            outcome = .failure(error)
        }
        try await group.shutdownGracefully()
        try outcome.get()
    }

    /// A client socket on the same group, for `body` to close.
    func makeClient(host: String = "127.0.0.1") async throws -> UDPPeer {
        try await UDPPeer.bind(on: self.group, host: host, echo: false)
    }
}

// MARK: - Expected outcomes

/// What the relay's models will do to `count` datagrams sent in order with `seed`: the
/// numbers the target receives, and the numbers the client gets back (the target echoes in
/// arrival order). Valid for profiles without jitter or reordering, whose outputs keep the
/// order of their inputs.
func expectedRelayOutcome(
    forward: ImpairmentProfile,
    backward: ImpairmentProfile,
    seed: UInt64,
    count: Int
) -> (atTarget: [Int], atClient: [Int]) {
    let seeds = UDPImpairmentRelay.directionSeeds(seed)
    var forwardModel = ImpairmentModel<[UInt8]>(profile: forward, seed: seeds.forward)
    for index in 0..<count {
        forwardModel.submit(numbered(index), at: origin)
    }
    let atTarget = forwardModel.drain().map { number(of: $0.datagram) }
    var backwardModel = ImpairmentModel<[UInt8]>(profile: backward, seed: seeds.backward)
    for value in atTarget {
        backwardModel.submit(numbered(value), at: origin)
    }
    return (atTarget, backwardModel.drain().map { number(of: $0.datagram) })
}
