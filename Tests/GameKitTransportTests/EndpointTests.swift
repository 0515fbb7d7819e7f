import NIOCore
import NIOPosix
import NetworkImpairment
import Testing

@testable import GameKitTransport

/// The NIO endpoint over real loopback sockets (inside the test run's network namespace).
@Suite("Endpoint over real sockets")
struct EndpointTests {
    @Test func openLinkSendReceiveAndCloseOverLoopback() async throws {
        let serverEvents = EventRecorder()
        let server = try await TransportEndpoint.loopback(serverEvents)
        let client = try await TransportEndpoint.loopback(EventRecorder())
        let link = try await client.openLink(to: server.localAddress, payload: ByteBuffer(string: "hello"))
        for sequence in 0..<500 {
            try await client.write(.numbered(sequence, size: 300), on: link.id)
        }
        try await client.write(ByteBuffer(string: "fast"), on: link.id, mode: .unreliable)
        #expect(await serverEvents.wait { _ in serverEvents.messages().count == 501 })
        let reliable = serverEvents.all.compactMap { event -> ByteBuffer? in
            if case .received(let message, _, .reliable) = event { return message } else { return nil }
        }
        #expect(reliable.map(\.sequenceNumber) == Array(0..<500))
        let stats = try #require(client.statistics(for: link.id))
        #expect(stats.reliableMessagesSent == 500 && stats.unreliableMessagesSent == 1)
        #expect(stats.smoothedRTT != nil)
        try client.close(link.id, code: 3)
        #expect(await serverEvents.wait { _ in serverEvents.closeReasons == [.closedByPeer(code: 3)] })
        #expect(throws: TransportError.linkNotOpen) { try client.send(ByteBuffer(), on: link.id) }
        await client.shutdown()
        await server.shutdown()
    }

    @Test func ipv6LoopbackWorksToo() async throws {
        let serverEvents = EventRecorder()
        let server = try await TransportEndpoint.loopback(serverEvents, host: "::1")
        let client = try await TransportEndpoint.loopback(EventRecorder(), host: "::1")
        let link = try await client.openLink(to: server.localAddress)
        try await client.write(ByteBuffer(string: "over six"), on: link.id)
        #expect(await serverEvents.wait { _ in serverEvents.messages() == [ByteBuffer(string: "over six")] })
        await client.shutdown()
        await server.shutdown()
    }

    @Test func immediateSendFailsWithBufferFullAndTheAsyncWriteWaitsForRoom() async throws {
        var configuration = TransportConfiguration()
        configuration.sendBufferCapacity = 16 * 1024
        let serverEvents = EventRecorder()
        let server = try await TransportEndpoint.loopback(serverEvents, configuration: configuration)
        let clientEvents = EventRecorder()
        let client = try await TransportEndpoint.loopback(clientEvents, configuration: configuration)
        let link = try await client.openLink(to: server.localAddress)
        var accepted = 0
        var refusal: TransportError?
        while refusal == nil, accepted < 10_000 {
            do {
                try client.send(.numbered(accepted, size: 4000), on: link.id)
                accepted += 1
            } catch {
                refusal = error
            }
        }
        #expect(refusal == .bufferFull)
        #expect(accepted < 10_000)
        #expect(await clientEvents.wait { events in events.contains { if case .sendBufferAvailable = $0 { true } else { false } } })
        // The async write never fails for lack of room: it waits.
        for sequence in accepted..<(accepted + 200) {
            try await client.write(.numbered(sequence, size: 4000), on: link.id)
        }
        #expect(await serverEvents.wait { _ in serverEvents.messages().count == accepted + 200 })
        #expect(serverEvents.messages().map(\.sequenceNumber) == Array(0..<(accepted + 200)))
        await client.shutdown()
        await server.shutdown()
    }

    @Test func oversizedMessagesFailWithDataTooBig() async throws {
        let server = try await TransportEndpoint.loopback(EventRecorder())
        let client = try await TransportEndpoint.loopback(EventRecorder())
        let link = try await client.openLink(to: server.localAddress)
        await #expect(throws: TransportError.dataTooBig(size: (1 << 20) + 1, limit: 1 << 20)) {
            try await client.write(ByteBuffer(repeating: 0, count: (1 << 20) + 1), on: link.id)
        }
        #expect(throws: TransportError.dataTooBig(size: (96 << 10) + 1, limit: 96 << 10)) {
            try client.send(ByteBuffer(repeating: 0, count: (96 << 10) + 1), on: link.id, mode: .unreliable)
        }
        await client.shutdown()
        await server.shutdown()
    }

    @Test func deniedWrongPasswordAndUnreachableHandshakesFailWithTheirErrors() async throws {
        let denying = try await TransportEndpoint.loopback(EventRecorder(answer: .deny(77)))
        let guardedEvents = EventRecorder()
        let guarded = try await TransportEndpoint.loopback(guardedEvents, configuration: TransportConfiguration(password: "sesame"))
        let plain = try await TransportEndpoint.loopback(EventRecorder())
        let client = try await TransportEndpoint.loopback(EventRecorder(), configuration: TransportConfiguration(password: "open"))
        await #expect(throws: TransportError.denied(code: 77)) {
            _ = try await plain.openLink(to: denying.localAddress)
        }
        await #expect(throws: TransportError.authenticationFailed) {
            _ = try await client.openLink(to: guarded.localAddress)
        }
        #expect(await guardedEvents.wait { events in
            events.contains { if case .handshakeFailed(_, .authenticationFailed) = $0 { true } else { false } }
        })
        // Nobody listens on this port in the namespace.
        let nowhere = try SocketAddress(ipAddress: "127.0.0.1", port: 9)
        await #expect(throws: TransportError.timedOut) {
            _ = try await client.openLink(to: nowhere, timeout: .milliseconds(600))
        }
        await client.shutdown()
        await plain.shutdown()
        await guarded.shutdown()
        await denying.shutdown()
    }

    /// An address with no route (an interface that went away) fails that handshake by its timeout;
    /// the send errors do not close the socket, and the endpoint goes on working.
    @Test func anUnroutableAddressFailsOnlyItsOwnHandshake() async throws {
        let server = try await TransportEndpoint.loopback(EventRecorder())
        let client = try await TransportEndpoint.loopback(EventRecorder(), host: "0.0.0.0")
        let unroutable = try SocketAddress(ipAddress: "10.255.255.1", port: 9)
        await #expect(throws: TransportError.timedOut) {
            _ = try await client.openLink(to: unroutable, timeout: .milliseconds(600))
        }
        // Nothing went to the socket: NIO would have closed it on ENETUNREACH.
        #expect(client.statistics.droppedUnroutable > 0)
        #expect(client.statistics.socketsReopened == 0)
        let serverAddress = try SocketAddress(ipAddress: "127.0.0.1", port: server.localAddress.port!)
        let link = try await client.openLink(to: serverAddress)
        try await client.write(ByteBuffer(string: "still here"), on: link.id)
        await client.shutdown()
        await server.shutdown()
    }

    /// A socket closed under a running endpoint (as NIO does on most send errors) is bound
    /// again at the same port; open links carry on, nothing is lost.
    /// Every endpoint owns its port. (With SO_REUSEADDR, Linux let a second socket bind a port
    /// in use, and handed out ephemeral ports already held: one of the two then received
    /// nothing.)
    @Test func aPortInUseCannotBeBoundAgain() async throws {
        let first = try await TransportEndpoint.loopback(EventRecorder(), host: "::")
        await #expect(throws: (any Error).self) {
            let second = try await TransportEndpoint.bind(host: "::", port: first.localAddress.port!) { _ in }
            await second.shutdown()
        }
        await first.shutdown()
    }

    @Test func aSocketClosedUnderTheEndpointIsReopenedAndLinksCarryOn() async throws {
        let serverEvents = EventRecorder()
        let server = try await TransportEndpoint.loopback(serverEvents)
        let client = try await TransportEndpoint.loopback(EventRecorder())
        let link = try await client.openLink(to: server.localAddress)
        try await client.write(.numbered(0, size: 100), on: link.id)
        await server.core.closeSocketUnderneath()
        for sequence in 1..<50 { try await client.write(.numbered(sequence, size: 2_000), on: link.id) }
        #expect(await serverEvents.wait { _ in serverEvents.messages().count == 50 })
        #expect(serverEvents.messages().map(\.sequenceNumber) == Array(0..<50))
        #expect(server.statistics.socketsReopened == 1)
        #expect(serverEvents.closeReasons.isEmpty)
        await client.shutdown()
        await server.shutdown()
    }

    @Test func cancellingTheOpeningTaskWithdrawsTheRequest() async throws {
        let serverEvents = EventRecorder(answer: nil)
        let server = try await TransportEndpoint.loopback(serverEvents)
        let client = try await TransportEndpoint.loopback(EventRecorder())
        let opening = Task { try await client.openLink(to: server.localAddress) }
        #expect(await serverEvents.wait { events in events.contains { if case .connectionRequest = $0 { true } else { false } } })
        opening.cancel()
        await #expect(throws: TransportError.cancelled) { _ = try await opening.value }
        #expect(await serverEvents.wait { events in
            events.contains { if case .connectionRequestWithdrawn(_, .cancelled) = $0 { true } else { false } }
        })
        await client.shutdown()
        await server.shutdown()
    }

    @Test func shutdownTellsPeersAndLaterCallsFail() async throws {
        let serverEvents = EventRecorder()
        let server = try await TransportEndpoint.loopback(serverEvents)
        let clientEvents = EventRecorder()
        let client = try await TransportEndpoint.loopback(clientEvents)
        let link = try await client.openLink(to: server.localAddress)
        // The client's link opens on the Response; the server's only when the client's first
        // packet confirms it (PROTOCOL §6.5), and until then the server sends nothing on it, not
        // even a CLOSE. A shutdown in between (seen once in a loaded full run) tells nobody.
        #expect(await serverEvents.wait { events in events.contains { if case .linkOpened = $0 { true } else { false } } })
        await server.shutdown()
        #expect(
            await clientEvents.wait { _ in clientEvents.closeReasons == [.closedByPeer(code: endpointClosingCode)] },
            "client: \(clientEvents.all), server: \(serverEvents.all), client statistics: \(String(describing: client.statistics(for: link.id)))")
        #expect(throws: TransportError.endpointClosed) { try server.send(ByteBuffer(), on: link.id) }
        await #expect(throws: TransportError.endpointClosed) { _ = try await server.openLink(to: client.localAddress) }
        await client.shutdown()
        await client.shutdown()  // twice is harmless
    }

    @Test func invalidConfigurationIsRefusedAtBind() async throws {
        var configuration = TransportConfiguration()
        configuration.sendBufferCapacity = 0
        await #expect(throws: TransportError.invalidConfiguration("sendBufferCapacity must be positive")) {
            _ = try await TransportEndpoint.loopback(EventRecorder(), configuration: configuration)
        }
    }

    @Test func datagramsLargerThanTwoKilobytesArriveWholeWithoutReceiveOffload() async throws {
        var configuration = TransportConfiguration()
        configuration.maxDatagramSize = 9000
        configuration.segmentationOffload = false
        let serverEvents = EventRecorder()
        let server = try await TransportEndpoint.loopback(serverEvents, configuration: configuration)
        let client = try await TransportEndpoint.loopback(EventRecorder(), configuration: configuration)
        let link = try await client.openLink(to: server.localAddress)
        for sequence in 0..<20 { try await client.write(.numbered(sequence, size: 50_000), on: link.id) }
        #expect(await serverEvents.wait { _ in serverEvents.messages().count == 20 })
        #expect(serverEvents.messages().map(\.sequenceNumber) == Array(0..<20))
        #expect(server.statistics.droppedUnauthenticated == 0)
        await client.shutdown()
        await server.shutdown()
    }
}
