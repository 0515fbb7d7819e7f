// The README's transport example as a program of its own (ReadmeProgramTests runs it).
// BEGIN README EXAMPLE
import GameKitTransport
import NIOCore

let configuration = TransportConfiguration(password: "swordfish")

// A server that accepts everyone and prints what arrives, until its first link closes.
let (events, sink) = AsyncStream.makeStream(of: TransportEvent.self)
let server = try await TransportEndpoint.bind(host: "::1", port: 7000, configuration: configuration) { sink.yield($0) }
let serving = Task {
    for await event in events {
        switch event {
        case .connectionRequest(let request):
            _ = try? server.accept(request.id)
        case .received(let message, let link, let mode):
            print("\(link) sent \(String(buffer: message)) (\(mode))")
        case .linkClosed(let link, let reason):
            print("\(link) closed: \(reason)")
            return
        default:
            break
        }
    }
}

// A client.
let client = try await TransportEndpoint.bind(host: "::1", port: 0, configuration: configuration) { _ in }
let link = try await client.openLink(to: server.localAddress, payload: ByteBuffer(string: "Bob"))
try await client.write(ByteBuffer(string: "hello"), on: link.id)                   // reliable; waits for room
try client.send(ByteBuffer(string: "position 3,4"), on: link.id, mode: .unreliable) // never waits
try client.close(link.id)                                                           // after delivery
await serving.value
// END README EXAMPLE
