import Foundation
import NIOConcurrencyHelpers
import NIOCore
import OpenGameKit

/// `gk-bench session`'s ping-pong: what users call. A client session sends a message to the
/// server session with `send(_:toPeers:with:)`; the server's data handler sends it back; the
/// client's handler ends the round. Both sessions are in this process (their own delegate
/// queues), on the sandbox's loopback. Side by side: the kernel's UDP ping-pong (the
/// `kernel_anchor` pair gk-bench transport runs), with the same count and size.
extension SessionBenchmark {
    static func pingPong(mode: GKSendDataMode, count: Int, size: Int) async throws -> [String: Any] {
        let name = "pingpong-\(mode == .reliable ? "reliable" : "unreliable")-\(size)"
        let id = "bench-\(name)-\(UInt32.random(in: 0...UInt32.max))"
        let server: GKSession = GKSession(sessionID: id, displayName: "Server", sessionMode: .server)
        let client: GKSession = GKSession(sessionID: id, displayName: "Client", sessionMode: .client)
        let serverWatch = Watcher(server, accept: true)
        let clientWatch = Watcher(client, accept: false)
        server.setDataReceiveHandler { data, peerID, session in
            try? session.send(data, toPeers: [peerID], with: mode)
        }
        let replies = DispatchSemaphore(value: 0)
        let expectedSequence = NIOLockedValueBox<UInt64>(0)
        client.setDataReceiveHandler { data, _, _ in
            let sequence = data.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            if sequence == expectedSequence.withLockedValue({ $0 }) { replies.signal() }
        }
        server.isAvailable = true
        client.isAvailable = true
        _ = await clientWatch.wait(seconds: 30) { client.peers(with: .stateAvailable)?.contains(server.peerID) == true }
        client.connect(toPeer: server.peerID, withTimeout: 20)
        _ = await serverWatch.wait(seconds: 30) { clientWatch.connectedAt != nil && serverWatch.connectedAt != nil }
        let serverID = server.peerID!

        // The rounds run on a thread of their own: a round trip is tens of microseconds, below
        // what a task's sleep can wait for.
        let samples: [Double] = await withCheckedContinuation { continuation in
            Thread {
                var samples: [Double] = []
                samples.reserveCapacity(count)
                var message = Data(count: max(size, 8))
                for sequence in 0..<UInt64(count) {
                    for byte in 0..<8 { message[byte] = UInt8(truncatingIfNeeded: sequence >> (56 - 8 * UInt64(byte))) }
                    expectedSequence.withLockedValue { $0 = sequence }
                    let start = DispatchTime.now().uptimeNanoseconds
                    guard (try? client.send(message, toPeers: [serverID], with: mode)) != nil else { continue }
                    // A lost unreliable ping ends its round after 100 ms.
                    if replies.wait(timeout: .now() + .milliseconds(100)) == .success {
                        samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
                    }
                }
                continuation.resume(returning: samples)
            }.start()
        }
        await client.close()
        await server.close()

        let ours = Percentiles(samples)
        var line: [String: Any] = [
            "work": name, "count": count, "size": size, "delivered": samples.count, "expected": count,
            "p50_us": ours.value(at: 0.5) ?? NSNull(), "p99_us": ours.value(at: 0.99) ?? NSNull(),
            "p50_ms": ours.value(at: 0.5).map { $0 / 1000 } ?? NSNull(), "p99_ms": ours.value(at: 0.99).map { $0 / 1000 } ?? NSNull(),
            "cpu_pct": NSNull(), "anchor": "udp",
        ]
        let udp = Self.udpPingPong(count: count, size: size)
        line["anchor_p50_ms"] = (udp?["p50_us"] as? Double).map { $0 / 1000 } ?? NSNull()
        line["udp_p50_us"] = udp?["p50_us"] ?? NSNull()
        line["udp_p99_us"] = udp?["p99_us"] ?? NSNull()
        func ratio(_ ours: Double?, _ theirs: Any?) -> Any {
            guard let ours, let theirs = theirs as? Double, theirs > 0 else { return NSNull() }
            return (ours / theirs * 1000).rounded() / 1000
        }
        line["p50_ratio_vs_udp"] = ratio(ours.value(at: 0.5), udp?["p50_us"])
        line["p99_ratio_vs_udp"] = ratio(ours.value(at: 0.99), udp?["p99_us"])
        line["ratio_vs_anchor"] = line["p50_ratio_vs_udp"]
        return line
    }

    /// The kernel's UDP ping-pong, two processes of `kernel_anchor` (blocking sockets), through
    /// gk-bench's own pair runner; nil when the anchor is not built.
    static func udpPingPong(count: Int, size: Int) -> [String: Any]? {
        let pair = ChildProcess(
            ProjectLayout.executable,
            ["transport-pair", "--impl", "udp", "--work", "pingpong-unreliable", "--count", "\(count)", "--size", "\(max(size, 8))", "--port", "7101"],
            name: "udp")
        guard (try? pair.start()) != nil else { return nil }
        if !pair.waitForExit(timeout: 120) { pair.terminate() }
        return pair.lastJSONObject
    }
}
