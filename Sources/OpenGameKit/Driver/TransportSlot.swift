import GameKitTransport
import NIOConcurrencyHelpers
import NIOCore

/// The session's transport endpoint, bound when the session first starts. Until then (and after
/// shutdown) every operation fails as if the endpoint were closed; nothing can reach those calls
/// before it is bound anyway, since peers are only known through it or through discovery, which
/// starts after it.
final class TransportSlot: SessionLinks {
    private let endpoint = NIOLockedValueBox<TransportEndpoint?>(nil)

    var current: TransportEndpoint? { self.endpoint.withLockedValue { $0 } }

    func install(_ endpoint: TransportEndpoint?) {
        self.endpoint.withLockedValue { $0 = endpoint }
    }

    private func get() throws(TransportError) -> TransportEndpoint {
        guard let endpoint = self.current else { throw .endpointClosed }
        return endpoint
    }

    func connect(to address: SocketAddress, payload: ByteBuffer, timeout: TimeAmount?) throws(TransportError) -> LinkID {
        try self.get().connect(to: address, payload: payload, timeout: timeout)
    }

    func cancelConnect(_ link: LinkID) -> Bool {
        self.current?.cancelConnect(link) ?? false
    }

    func accept(_ request: ConnectionRequest.ID, payload: ByteBuffer) throws(TransportError) -> LinkID {
        try self.get().accept(request, payload: payload)
    }

    func deny(_ request: ConnectionRequest.ID, code: UInt16) throws(TransportError) {
        try self.get().deny(request, code: code)
    }

    func send(_ message: ByteBuffer, on link: LinkID, mode: SendMode) throws(TransportError) {
        try self.get().send(message, on: link, mode: mode)
    }

    func send(_ batch: [(message: ByteBuffer, link: LinkID)], mode: SendMode) throws(TransportError) {
        try self.get().send(batch, mode: mode)
    }

    func close(_ link: LinkID, code: UInt16) throws(TransportError) {
        try self.get().close(link, code: code)
    }

    func watch(_ addresses: [SocketAddress], peerKey: [UInt8]) throws(TransportError) -> LivenessWatchID {
        try self.get().watch(addresses, peerKey: peerKey)
    }

    func updateWatch(_ id: LivenessWatchID, addresses: [SocketAddress]) {
        self.current?.updateWatch(id, addresses: addresses)
    }

    func unwatch(_ id: LivenessWatchID) {
        self.current?.unwatch(id)
    }

    func setAlternateAddresses(_ addresses: [SocketAddress], for link: LinkID) {
        self.current?.setAlternateAddresses(addresses, for: link)
    }
}
