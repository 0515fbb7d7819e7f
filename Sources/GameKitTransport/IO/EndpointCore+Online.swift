@_spi(Machine) import GameKitMachine
@_spi(Machine) import GameKitOnline
import GameKitTraversal
import NIOCore

/// An online session's layer on the endpoint's socket: starting it once the socket is bound,
/// its TCP streams, and the session's operations on it.
extension EndpointCore {
    /// Registers in the room with this socket's host candidates, and lets the streams reach the
    /// driver (event loop only, before the socket is attached).
    func startOnline(localAddress: SocketAddress?, streams: OnlineStreams) {
        let candidates = localAddress.map(Self.hostCandidates(for:)) ?? []
        _ = self.driver.perform { endpoint, now in endpoint.socket.online?.start(hostCandidates: candidates, now: now) }
        let driver = self.driver
        streams.start(
            OnlineStreams.Hooks(
                eventLoop: self.eventLoop,
                receive: { driver.receive($0, from: $1) },
                complete: { driver.runCycle() },
                servers: {
                    driver.read { endpoint in
                        guard let room = endpoint.socket.online?.room else { return [] }
                        return room.configuration.rendezvous + (room.relay.map { [$0] } ?? [])
                    }
                },
                inRoom: { driver.read { $0.socket.online?.room.code != nil } }))
    }

    /// The addresses this socket can be reached at on its own interfaces: the bound address, or
    /// for a wildcard, each interface's (never loopback or link-local ones), with its port.
    static func hostCandidates(for local: SocketAddress) -> [SocketAddress] {
        guard let bound = TraversalAddress(local) else { return [] }
        return TraversalAddress.hostAddresses(bound: bound, loopbackIfAlone: false).map(\.socketAddress)
    }

    /// Acts on the online layer under the lock and schedules a cycle; nil once closing or for an
    /// endpoint without one.
    func withOnline<Result>(_ body: (inout OnlineMachine, NIODeadline) -> Result) -> Result? {
        self.driver.perform { endpoint, now -> Result? in
            guard endpoint.socket.online != nil else { return nil }
            return body(&endpoint.socket.online!, now)
        } ?? nil
    }

    /// Reads the online layer under the lock (nil for an endpoint without one).
    func readOnline<Result>(_ body: (OnlineMachine) -> Result) -> Result? {
        self.driver.read { $0.socket.online.map(body) }
    }
}
