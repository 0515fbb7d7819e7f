import Foundation
import NetworkImpairment
import Testing

/// Interfaces that appear and disappear while `gk-mdns register` runs (real processes): the
/// endpoint re-reads the interfaces every 2 s, opens sockets on a new one and announces there;
/// when the interface goes, the others keep working.
@Suite("Interfaces coming and going, with real processes", .serialized)
struct InterfaceChangeTests {
    /// At start only `lo` has an IPv4 address. scripts/veth-pair makes ogk0 here and ogk1 in a
    /// peer namespace, where the capture listens on ogk1 and python-zeroconf browses there; once
    /// the capture listens, ogk0 gets 10.107.0.1: finding the service there, at that address,
    /// shows that the responder noticed the new interface and announced on it (the capture, up
    /// before the address, sees every announcement). After veth-pair has ended (ogk0 gone) and
    /// the responder has re-read its interfaces, a browser of ours on lo still finds the service.
    @Test func aNewInterfaceGetsTheAnnouncementsAndLoopbackKeepsWorkingWhenItGoes() async throws {
        let result = try await SandboxScript.run(
            """
            source scripts/lib.sh
            d=$(mktemp -d)
            mkfifo $d/in; exec 3<>$d/in
            gk-mdns register --type _late._udp --name Late --port 7010 < $d/in > $d/register &
            R=$!
            ogk_wait_for $d/register registered 1 10
            scripts/veth-pair --no-here-ipv4 bash -c '
              source scripts/lib.sh
              nsenter --net=$OGK_PEER_NETNS -- "$PEER_PYTHON" "$PEERS/mdns_capture.py" --interface 10.107.0.2 --seconds 8 > '$d'/capture &
              ogk_wait_for '$d'/capture listening 1 20
              ip addr add 10.107.0.1/24 dev ogk0
              nsenter --net=$OGK_PEER_NETNS -- "$PEER_PYTHON" "$PEERS/zeroconf_peer.py" browse --type _late._udp --interface ogk1 --seconds 6 --ignore-stdin | sed -u "s/^/Z /"
              wait'
            echo "V {\\"event\\":\\"veth-pair-ended\\",\\"status\\":$?}"
            sed 's/^/C /' $d/capture
            # The responder re-reads its interfaces every 2 s: ogk0's removal has been seen by now.
            sleep 2.5
            gk-mdns browse --type _late._udp --interface lo --seconds 2 --ignore-stdin | sed -u 's/^/O /'
            kill $R; wait $R
            sed 's/^/R /' $d/register; rm -rf $d
            """, timeout: 60)
        #expect(result.status == 0)
        #expect(result.objects(tagged: "V").first?["status"] as? Int == 0, "veth-pair failed")

        // python-zeroconf, across the veth, resolved the service at our side's address.
        let found = try #require(result.objects(tagged: "Z").first { $0["event"] as? String == "found" }, "\(result.lines.joined(separator: "\n"))")
        #expect(found["name"] as? String == "Late._late._udp.local.")
        #expect(found["port"] as? Int == 7010)
        #expect((found["addresses"] as? [String])?.contains("10.107.0.1") == true, "\(found)")
        #expect(!((found["addresses"] as? [String])?.contains("127.0.0.1") ?? true), "loopback's address announced on the veth: \(found)")

        // On the wire in the peer namespace: announcements from 10.107.0.1, gaps 1 s and 2 s.
        let capture = Capture(result, tag: "C")
        #expect(capture.errors.isEmpty, "\(capture.errors)")
        let announcements = capture.received.filter {
            $0.isResponse && $0.answers.contains { $0.name == "Late._late._udp.local." && $0.type == "SRV" && $0.ttl > 0 }
        }
        #expect(announcements.count >= 2, "\(announcements)")
        for packet in announcements {
            #expect(packet.source == "10.107.0.1:5353", "\(packet)")
            #expect(packet.answers.contains { $0.type == "A" && $0.address == "10.107.0.1" && $0.cacheFlush }, "\(packet)")
            #expect(!packet.answers.contains { $0.address == "127.0.0.1" }, "\(packet)")
            #expect(packet.parsersAgree, "\(packet.disagreements)")
        }
        // The capture starts in a namespace made after the interface appears, so it may miss the
        // first announcement (a cold Python start): the gaps it sees are 1 s, 2 s, … or 2 s, 4 s, …
        let gaps = zip(announcements, announcements.dropFirst()).map { $1.milliseconds(since: $0.time) }
        let first = gaps.first.map { WireTiming.fits($0, 2000) ? 2000.0 : 1000.0 } ?? 1000
        for (index, gap) in gaps.enumerated() {
            let expected = first * Double(1 << index)
            #expect(WireTiming.fits(gap, expected), "announcement gap \(index + 1) on the new interface: \(gap) ms, not \(expected)")
        }

        // ogk0 is gone; our process still answers on lo.
        let ours = try #require(result.objects(tagged: "O").first { $0["event"] as? String == "found" }, "\(result.lines.joined(separator: "\n"))")
        #expect(ours["port"] as? Int == 7010)
        #expect((ours["addresses"] as? [String])?.contains("127.0.0.1") == true, "\(ours)")
        #expect(result.objects(tagged: "R").contains { $0["event"] as? String == "unregistered" })
    }
}
