import NIOConcurrencyHelpers
import NIOCore
import NetworkImpairment
import Testing

import GameKitTransport

/// The README's example, as written there (printing replaced by recording), run for real.
@Suite("README example")
struct ReadmeExampleTests {
    @Test func theReadmeExampleWorksAsWritten() async throws {
        try NetworkSandbox.requireIsolation()
        let printed = NIOLockedValueBox<[String]>([])
        func print(_ line: String) { printed.withLockedValue { $0.append(line) } }

        let configuration = TransportConfiguration(password: "swordfish")

        // A server that accepts everyone and prints what arrives.
        let (events, sink) = AsyncStream.makeStream(of: TransportEvent.self)
        let server = try await TransportEndpoint.bind(host: "::1", port: 7000, configuration: configuration) { sink.yield($0) }
        Task {
            for await event in events {
                switch event {
                case .connectionRequest(let request):
                    _ = try? server.accept(request.id)
                case .received(let message, let link, let mode):
                    print("\(link) sent \(String(buffer: message)) (\(mode))")
                case .linkClosed(let link, let reason):
                    print("\(link) closed: \(reason)")
                default:
                    break
                }
            }
        }

        // A client.
        let client = try await TransportEndpoint.bind(host: "::1", port: 0, configuration: configuration) { _ in }
        let link = try await client.openLink(to: server.localAddress, payload: ByteBuffer(string: "Bob"))
        try await client.write(ByteBuffer(string: "hello"), on: link.id)  // reliable; waits for room
        try client.send(ByteBuffer(string: "position 3,4"), on: link.id, mode: .unreliable)  // never waits
        try client.close(link.id)  // after delivery

        for _ in 0..<2000 where printed.withLockedValue({ $0.count }) < 3 {
            try await Task.sleep(nanoseconds: 5_000_000)
        }
        let lines = printed.withLockedValue { $0 }
        #expect(lines.count == 3)
        #expect(lines.contains { $0.hasSuffix("sent hello (reliable)") })
        #expect(lines.contains { $0.hasSuffix("sent position 3,4 (unreliable)") })
        #expect(lines.last?.hasSuffix("closed: closed by peer (code 0)") == true)
        await client.shutdown()
        await server.shutdown()
        sink.finish()
    }
}
