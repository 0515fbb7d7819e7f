import Foundation
import NetworkImpairment
import Testing

/// Two (or more) real processes over real sockets in a namespace of their own: the transport as
/// deployed, with the kernel dropping packets, a relay corrupting and replaying them, strangers
/// sending garbage and floods of handshakes from spoofed sources.
@Suite("Processes over real sockets", .serialized)
struct ProcessTests {
    static func summary(_ objects: [[String: Any]]) -> [String: Any]? {
        objects.last { $0["event"] as? String == "summary" }
    }

    @Test func tenThousandReliableMessagesArriveInOrderThroughFivePercentKernelDrop() async throws {
        let result = try await SandboxScript.run(
            """
            gk-link listen --port 7100 --expect 10000 --duration 90 | sed -u 's/^/L /' > /tmp/ogk-listen.$$ &
            \(SandboxScript.awaitListening("/tmp/ogk-listen.$$"))
            gk-link connect 127.0.0.1:7100 --count 10000 --size 200 | sed -u 's/^/C /'
            wait
            cat /tmp/ogk-listen.$$; rm -f /tmp/ogk-listen.$$
            iptables -L INPUT -v -n -x | awk '/DROP/ {print "D", $1}'
            """,
            loss: 0.05
        )
        let listener = try #require(Self.summary(result.objects(tagged: "L")))
        #expect(listener["reliable_received"] as? Int == 10_000)
        #expect(listener["reliable_in_order"] as? Bool == true)
        let sender = try #require(Self.summary(result.objects(tagged: "C")))
        #expect(sender["closed"] as? Bool == true)
        // The kernel did drop datagrams, and the sender saw losses and recovered from them.
        let dropped = result.lines.first { $0.hasPrefix("D ") }.flatMap { Int($0.dropFirst(2)) } ?? 0
        #expect(dropped > 0)
        let link = try #require(sender["link"] as? [String: Any])
        #expect((link["packets_lost"] as? Int ?? 0) > 0)
    }

    @Test func corruptedReplayedAndStrangerDatagramsAreRejectedAndCounted() async throws {
        let stranger = "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.9', 0)); s.sendto(bytes([9,0,0,0, 1,2,3,4]) + bytes(40), ('127.0.0.1', 7200))\""
        let result = try await SandboxScript.run(
            """
            gk-link listen --port 7200 --expect 3000 --duration 90 | sed -u 's/^/L /' > /tmp/ogk-listen.$$ &
            \(SandboxScript.awaitListening("/tmp/ogk-listen.$$"))
            gk-impair --listen 127.0.0.1:7201 --target 127.0.0.1:7200 --corrupt 0.02 --duplicate 0.02 --seed 7 --duration 80 > /tmp/ogk-relay.$$ &
            for i in $(seq 200); do grep -q 'listening' /tmp/ogk-relay.$$ && break; sleep 0.05; done
            \(stranger)
            gk-link connect 127.0.0.1:7201 --count 3000 --size 300 | sed -u 's/^/C /'
            wait %1
            kill -INT %2; wait
            cat /tmp/ogk-listen.$$; sed 's/^{/R {/' /tmp/ogk-relay.$$; rm -f /tmp/ogk-*.$$
            """
        )
        let listener = try #require(Self.summary(result.objects(tagged: "L")))
        #expect(listener["reliable_received"] as? Int == 3000)
        #expect(listener["reliable_in_order"] as? Bool == true)
        let endpoint = try #require(listener["endpoint"] as? [String: Any])
        let relay = try #require(result.objects(tagged: "R").last)
        let forward = try #require(relay["forward"] as? [String: Any])
        #expect((forward["corrupted"] as? Int ?? 0) > 0)
        #expect((forward["duplicated"] as? Int ?? 0) > 0)
        // Corrupted datagrams fail authentication (or, if the flip hit the packet number, look
        // like replays or strays); duplicates are replays; the stranger's index is unknown.
        let unauthenticated = endpoint["dropped_unauthenticated"] as? Int ?? 0
        let replayed = endpoint["dropped_replayed"] as? Int ?? 0
        #expect(unauthenticated > 0)
        #expect(replayed >= (forward["duplicated"] as? Int ?? 0) / 2)
        #expect((endpoint["dropped_unknown_link"] as? Int ?? 0) >= 1)
    }

    @Test func wrongPasswordFailsOnBothSidesWithItsOwnError() async throws {
        let result = try await SandboxScript.run(
            """
            gk-link listen --port 7300 --password alpha --json --duration 5 | sed -u 's/^/L /' > /tmp/ogk-listen.$$ &
            \(SandboxScript.awaitListening("/tmp/ogk-listen.$$"))
            gk-link connect 127.0.0.1:7300 --password beta --timeout 30 | sed -u 's/^/C /'
            echo "S ${PIPESTATUS[0]}"
            wait
            cat /tmp/ogk-listen.$$; rm -f /tmp/ogk-listen.$$
            """
        )
        let client = try #require(Self.summary(result.objects(tagged: "C")))
        #expect(client["opened"] as? Bool == false)
        #expect(client["error"] as? String == "authenticationFailed")
        #expect(result.lines.contains("S 1"))
        let listenerEvents = result.objects(tagged: "L")
        #expect(listenerEvents.contains { $0["event"] as? String == "handshakeFailed" && $0["error"] as? String == "authenticationFailed" })
        #expect(!listenerEvents.contains { $0["event"] as? String == "linkOpened" })
    }

    @Test(arguments: [0, 16])
    func handshakeFloodFromSpoofedSourcesLeavesNoPerSourceState(cookieThreshold: Int) async throws {
        let result = try await SandboxScript.run(
            """
            gk-link listen --port 7400 --cookie-threshold \(cookieThreshold) --expect 5 --duration 60 | sed -u 's/^/L /' > /tmp/ogk-listen.$$ &
            \(SandboxScript.awaitListening("/tmp/ogk-listen.$$"))
            gk-link flood 127.0.0.1:7400 --count 2000 | sed -u 's/^/F /'
            # A genuine client still gets through after the flood.
            gk-link connect 127.0.0.1:7400 --count 5 --size 100 | sed -u 's/^/C /'
            wait
            cat /tmp/ogk-listen.$$; rm -f /tmp/ogk-listen.$$
            """
        )
        #expect(Self.summary(result.objects(tagged: "F"))?["sent"] as? Int == 2000)
        let listener = try #require(Self.summary(result.objects(tagged: "L")))
        let endpoint = try #require(listener["endpoint"] as? [String: Any])
        let requests = endpoint["connection_requests"] as? Int ?? -1
        let challenges = endpoint["challenges_sent"] as? Int ?? -1
        let cookies = endpoint["cookie_replies_sent"] as? Int ?? -1
        // Every initiation beyond the threshold got a cookie and left nothing behind; those within
        // it got a challenge and no more (a flood holds no scalar, so it never sends a request
        // that opens): the genuine client's is the only request.
        #expect(challenges >= 1 && challenges <= cookieThreshold + 1)
        #expect(requests == 1)
        #expect(cookies >= 2000 - cookieThreshold)
        #expect(listener["reliable_received"] as? Int == 5)
        let client = try #require(Self.summary(result.objects(tagged: "C")))
        #expect(client["opened"] as? Bool == true)
    }

    @Test func killedPeerIsDeclaredGoneAfterTheDisconnectTimeoutAndWellBeforeThreeTimesIt() async throws {
        // The client sends a message every 20 ms until it is killed, so its last packet reaches
        // the listener within a few milliseconds of the kill; the listener reports how long the
        // link had been silent (since its last message) when it declared the peer gone.
        let timeout = 2.0
        let result = try await SandboxScript.run(
            """
            gk-link listen --port 7500 --disconnect-timeout \(timeout) --json --duration 30 > /tmp/ogk-listen.$$ &
            LISTENER=$!
            \(SandboxScript.awaitListening("/tmp/ogk-listen.$$"))
            gk-link connect 127.0.0.1:7500 --count 100000 --interval 0.02 --disconnect-timeout \(timeout) > /dev/null &
            CLIENT=$!
            for i in $(seq 200); do grep -q linkOpened /tmp/ogk-listen.$$ && break; sleep 0.05; done
            sleep 0.5
            kill -9 $CLIENT
            for i in $(seq 300); do grep -q linkClosed /tmp/ogk-listen.$$ && break; sleep 0.05; done
            kill -INT $LISTENER; wait $LISTENER
            sed 's/^/L /' /tmp/ogk-listen.$$; rm -f /tmp/ogk-listen.$$
            """
        )
        let events = result.objects(tagged: "L")
        #expect(events.contains { $0["event"] as? String == "linkOpened" })
        let closed = try #require(events.first { $0["event"] as? String == "linkClosed" })
        #expect(closed["reason"] as? String == "timedOut")
        // Not before the timeout (less 0.2 s for the gap between the last message and the last
        // packet, and for event delivery), and well within three times it.
        let silent = try #require(closed["silent_s"] as? Double)
        #expect(silent >= timeout - 0.2, "declared gone after \(silent) s of silence")
        #expect(silent < 3 * timeout, "declared gone after \(silent) s of silence")
    }

    @Test func bufferFullAndDataTooBigBetweenTwoProcessesLeaveTheLinkWorking() async throws {
        // A 16 KiB send buffer and 1000-byte messages sent without waiting: sends are refused
        // with "buffer full" and written once there is room. Half way, a message over both
        // limits fails with "data too big" in either mode. Every numbered message still
        // arrives once and in order, and the link never holds more than the cap and one message.
        let capacity = 16_384
        let result = try await SandboxScript.run(
            """
            gk-link listen --port 7600 --expect 2000 --duration 60 | sed -u 's/^/L /' > /tmp/ogk-listen.$$ &
            \(SandboxScript.awaitListening("/tmp/ogk-listen.$$"))
            gk-link connect 127.0.0.1:7600 --count 2000 --size 1000 --send-buffer \(capacity) --no-wait --oversize \((1 << 20) + 1) | sed -u 's/^/C /'
            wait
            cat /tmp/ogk-listen.$$; rm -f /tmp/ogk-listen.$$
            """
        )
        let sender = try #require(Self.summary(result.objects(tagged: "C")))
        #expect(sender["error"] == nil)
        #expect((sender["buffer_full"] as? Int ?? 0) > 0)
        let queued = try #require(sender["max_bytes_queued"] as? Int)
        #expect(queued > 0 && queued <= capacity + 1000)
        let oversize = try #require(sender["oversize"] as? [String: Any])
        #expect(oversize["reliable_write"] as? String == "dataTooBig")
        #expect(oversize["unreliable_send"] as? String == "dataTooBig")
        #expect(sender["closed"] as? Bool == true)
        let listener = try #require(Self.summary(result.objects(tagged: "L")))
        #expect(listener["reliable_received"] as? Int == 2000)
        #expect(listener["unreliable_received"] as? Int == 0)
        #expect(listener["reliable_in_order"] as? Bool == true)
    }
}
