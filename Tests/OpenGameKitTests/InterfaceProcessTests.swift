import Foundation
import NetworkImpairment
import Testing

/// Sessions on two hosts (namespaces) joined by veth pairs.
///
/// IPv6 link-local only: with nothing but fe80:: addresses on the link, and more links with
/// fe80::/64 routes beside it, discovery hands the session each address with its interface as
/// scope, and the sessions connect and talk.
///
/// Two hosts joined by two links (two veth pairs between two namespaces), a GKSession on each,
/// connected over the first before the second appears. The first link's interface goes down on
/// one side: the sessions stay
/// connected (the transport link moves to the peer's address on the second link, PROTOCOL
/// §6.7, §14.9) and messages flow both ways again. On this side the route goes away with the
/// interface (the move is at once); on the far side this side's interface only loses its
/// carrier, the packets vanish, and the move follows the silence.
@Suite("Addresses and interfaces across processes", .serialized)
struct InterfaceProcessTests {
    enum Side: String, CaseIterable, CustomTestStringConvertible {
        case here, far
        var testDescription: String { self == .here ? "the connecting side's interface" : "the accepting side's interface" }
    }

    @Test func sessionsWithOnlyIPv6LinkLocalAddressesConnectAndTalk() async throws {
        let result = try await SandboxScript.run(
            """
            export d=$(mktemp -d)
            cat > $d/inner.sh <<'INNER'
            far() { nsenter --net=$OGK_PEER_NETNS -- "$@"; }
            ip addr flush dev ogk0 scope global
            far ip addr flush dev ogk1 scope global
            ip -o addr show dev ogk0 | sed 's/^/I /'
            OGK_DISCOVERY_INTERFACES=ogk1 nsenter --net=$OGK_PEER_NETNS -- gk-session --session-id ll --name Far --answer accept --echo --seconds 30 --ignore-stdin > $d/b 2>&1 &
            B=$!
            OGK_DISCOVERY_INTERFACES=ogk0 gk-session --session-id ll --name Here --connect Far --greet hello --seconds 30 --ignore-stdin > $d/a 2>&1 &
            A=$!
            gk-mdns browse --type _ll._udp --interface ogk0 --seconds 30 --ignore-stdin > $d/m &
            M=$!
            \(SandboxScript.awaitText("\"text\":\"hello\"", in: "$d/a"))
            \(SandboxScript.awaitText("\"instance\":\"Far", in: "$d/m"))
            kill $A $B $M; wait $A $B $M
            sed 's/^/A /' $d/a; sed 's/^/B /' $d/b; sed 's/^/M /' $d/m
            INNER
            # Two more links with fe80::/64 routes, made first (a veth pair with both ends here):
            # an address without its scope would go out on one of them.
            ip link add ogk2 type veth peer name ogk3
            ip link set ogk2 up; ip link set ogk3 up
            scripts/veth-pair bash $d/inner.sh
            rm -rf $d
            """, timeout: 60)
        let output = result.lines.joined(separator: "\n")
        // Only link-local addresses on the link.
        #expect(result.lines(tagged: "I").allSatisfy { !$0.contains("inet ") && !$0.contains("fd00") }, "\(output)")
        #expect(result.lines(tagged: "I").contains { $0.contains("fe80:") }, "\(output)")
        // The browser saw Far at a link-local address scoped to ogk0's index.
        let far = try #require(result.objects(tagged: "M").first { ($0["instance"] as? String)?.hasPrefix("Far") == true && $0["event"] as? String == "found" }, "\(output)")
        let scoped = far["scoped_addresses"] as? [String] ?? []
        #expect(!scoped.isEmpty && scoped.allSatisfy { $0.hasPrefix("fe80:") && $0.contains("%") }, "\(scoped)")
        // Connected, and Far's echo of the greeting came back over the link-local path.
        #expect(result.objects(tagged: "A").contains { $0["event"] as? String == "state" && $0["state"] as? String == "connected" }, "\(output)")
        #expect(result.objects(tagged: "B").contains { $0["event"] as? String == "data" && $0["text"] as? String == "hello" }, "\(output)")
        #expect(result.objects(tagged: "A").contains { $0["event"] as? String == "data" && $0["text"] as? String == "hello" }, "\(output)")
    }

    @Test(arguments: Side.allCases) func connectedSessionsMoveToTheOtherLinkAndKeepTalking(side: Side) async throws {
        let down = side == .here ? "ip link set ogk0 down" : "nsenter --net=$OGK_PEER_NETNS ip link set ogk1 down"
        let result = try await SandboxScript.run(
            """
            export d=$(mktemp -d)
            cat > $d/inner.sh <<'INNER'
            # (Background processes in the far namespace are started with nsenter itself, not
            # through this function, so that $! is their PID.)
            far() { nsenter --net=$OGK_PEER_NETNS -- "$@"; }
            # A session that died must not take this script with it (a write to its input).
            trap '' PIPE
            mkfifo $d/a.in $d/b.in
            # The sessions connect while only the first link exists; each is told to use the
            # second too, which its discovery picks up when it appears.
            OGK_DISCOVERY_INTERFACES=ogk1,ogk3 nsenter --net=$OGK_PEER_NETNS -- gk-session --session-id ifdown --name Far --answer accept --disconnect-timeout 600 --seconds 60 < $d/b.in > $d/b 2>&1 &
            B=$!
            exec 4>$d/b.in
            OGK_DISCOVERY_INTERFACES=ogk0,ogk2 gk-session --session-id ifdown --name Here --connect Far --disconnect-timeout 600 --seconds 60 < $d/a.in > $d/a 2>&1 &
            A=$!
            exec 3>$d/a.in
            \(SandboxScript.awaitText("\"state\":\"connected\"", in: "$d/a"))
            \(SandboxScript.awaitText("\"state\":\"connected\"", in: "$d/b"))
            pid=${OGK_PEER_NETNS#/proc/}; pid=${pid%/ns/net}
            ip link add ogk2 type veth peer name ogk3
            ip link set ogk3 netns $pid
            ip link set ogk2 multicast on up
            ip addr add 10.108.0.1/24 dev ogk2
            far ip link set ogk3 multicast on up
            far ip addr add 10.108.0.2/24 dev ogk3
            # Browsers on the second link (not holding the sessions' inputs open): once each has resolved a session there, that session
            # announces there, and has asked there for its peer (queries go 20-120 ms after an
            # interface is added, announcements after 750 ms of probing).
            gk-mdns browse --type _ifdown._udp --interface ogk2 --seconds 60 --ignore-stdin > $d/m 3>&- 4>&- &
            M=$!
            nsenter --net=$OGK_PEER_NETNS -- gk-mdns browse --type _ifdown._udp --interface ogk3 --seconds 60 --ignore-stdin > $d/n 3>&- 4>&- &
            N=$!
            \(SandboxScript.awaitText("\"instance\":\"Far", in: "$d/m"))
            \(SandboxScript.awaitText("\"instance\":\"Here", in: "$d/n"))
            echo "send before" >&3
            \(SandboxScript.awaitText("\"text\":\"before\"", in: "$d/b"))
            echo "K {\\"mono_ns\\":$(python3 -c 'import time; print(time.monotonic_ns())')}"
            \(down)
            echo "send after-here" >&3
            echo "send after-far" >&4
            \(SandboxScript.awaitText("\"text\":\"after-here\"", in: "$d/b"))
            \(SandboxScript.awaitText("\"text\":\"after-far\"", in: "$d/a"))
            echo "E {\\"mono_ns\\":$(python3 -c 'import time; print(time.monotonic_ns())')}"
            exec 3>&- 4>&-
            wait $A $B
            kill $M $N; wait $M $N
            sed 's/^/A /' $d/a; sed 's/^/B /' $d/b
            INNER
            scripts/veth-pair bash $d/inner.sh
            rm -rf $d
            """, timeout: 90)
        let output = result.lines.joined(separator: "\n")
        let cut = try #require(result.objects(tagged: "K").first?["mono_ns"] as? Int, "\(output)")
        #expect(result.objects(tagged: "E").first != nil, "\(output)")
        for (tag, text, peer) in [("B", "after-here", "Here"), ("A", "after-far", "Far")] {
            let data = result.objects(tagged: tag).filter { $0["event"] as? String == "data" && $0["text"] as? String == text }
            #expect(data.count == 1 && (data.first?["mono_ns"] as? Int ?? 0) > cut, "\(tag): \(output)")
            // Connected throughout: no other state change for the peer after the cut but the
            // end-of-input stop (disconnected after "stopped" is the session's own close).
            let changes = result.objects(tagged: tag).filter {
                $0["event"] as? String == "state" && $0["name"] as? String == peer && ($0["mono_ns"] as? Int ?? 0) > cut
                    && ($0["mono_ns"] as? Int ?? 0) < (data.first?["mono_ns"] as? Int ?? 0)
            }
            #expect(changes.isEmpty, "\(tag): \(output)")
        }
        // The link moved on at least one side: the one that lost its route (once the kernel
        // says so) or the one whose packets went unanswered for a second, whichever came first;
        // the other followed the first packet from the new address.
        let moves = ["A", "B"].map { tag in
            (result.objects(tagged: tag).first { $0["event"] as? String == "stopped" }?["statistics"] as? [String: Any])?["link_moves"] as? Int ?? -1
        }
        #expect(moves.allSatisfy { $0 >= 0 } && moves.reduce(0, +) >= 1, "\(moves): \(output)")
    }
}
