import Foundation
import NetworkImpairment
import Testing

/// Real processes on real sockets in namespaces of their own: our responder and browser
/// (`gk-mdns`) against python-zeroconf (Tests/Peers/zeroconf_peer.py, from the venv that
/// scripts/test makes), over IPv4 on the namespace's loopback and over IPv6 on a veth pair
/// between two namespaces; several of our processes sharing port 5353; name conflicts between
/// processes.
@Suite("Interoperability with python-zeroconf, and processes sharing port 5353", .serialized)
struct InteropTests {
    static let zeroconf = "\"$PEER_PYTHON\" \"$PEERS/zeroconf_peer.py\""

    static func events(_ result: SandboxScript.Result, _ tag: String, _ event: String) -> [[String: Any]] {
        result.objects(tagged: tag).filter { $0["event"] as? String == event }
    }

    static func index(_ result: SandboxScript.Result, _ tag: String, _ event: String) -> Int? {
        result.lines.firstIndex { $0.hasPrefix("\(tag) ") && $0.contains("\"event\":\"\(event)\"") }
    }

    @Test func zeroconfSeesOurServiceWithItsPortAddressAndTXTAndSeesItLeave() async throws {
        let result = try await SandboxScript.run(
            """
            gk-mdns register --type _interop._udp --name "Ours One" --port 7001 --txt a=1 --txt flag --txt empty= --seconds 3 --ignore-stdin | sed -u 's/^/R /' &
            \(Self.zeroconf) browse --type _interop._udp --seconds 5 --ignore-stdin | sed -u 's/^/B /'
            wait
            """)
        let found = try #require(Self.events(result, "B", "found").first)
        #expect(found["name"] as? String == "Ours One._interop._udp.local.")
        #expect(found["port"] as? Int == 7001)
        #expect((found["addresses"] as? [String])?.contains("127.0.0.1") == true)
        let txt = try #require(found["txt"] as? [String: Any])
        #expect(txt["a"] as? String == "1")
        #expect(txt["flag"] is NSNull)
        #expect(txt["empty"] as? String == "")
        let lost = try #require(Self.index(result, "B", "lost"))
        #expect(lost > (Self.index(result, "B", "found") ?? .max))
        #expect(Self.events(result, "R", "unregistered").count == 1)
    }

    @Test func weSeeAZeroconfServiceAndItsRemoval() async throws {
        let result = try await SandboxScript.run(
            """
            \(Self.zeroconf) register --type _interop._udp --name "Theirs" --port 7002 --txt k=v --seconds 3 --ignore-stdin | sed -u 's/^/R /' &
            gk-mdns browse --type _interop._udp --seconds 5 --ignore-stdin | sed -u 's/^/B /'
            wait
            """)
        let found = try #require(Self.events(result, "B", "found").first)
        #expect(found["name"] as? String == "Theirs._interop._udp.local.")
        #expect(found["port"] as? Int == 7002)
        #expect((found["addresses"] as? [String])?.contains("127.0.0.1") == true)
        #expect((found["txt"] as? [String: Any])?["k"] as? String == "v")
        #expect(Self.index(result, "B", "lost") != nil)
        #expect(Self.events(result, "R", "unregistered").count == 1)
    }

    @Test func overIPv6OnAVethPairBothWaysRound() async throws {
        let result = try await SandboxScript.run(
            """
            scripts/veth-pair bash -c '
              nsenter --net=$OGK_PEER_NETNS -- gk-mdns register --type _six._udp --name "Ours Six" --port 7003 --txt six=6 --txt bare --txt nil= --ipv6-only --interface ogk1 --seconds 3 --ignore-stdin | sed -u "s/^/R /" &
              nsenter --net=$OGK_PEER_NETNS -- \(Self.zeroconf) register --type _six._udp --name "Theirs Six" --port 7004 --txt from=zeroconf --txt on= --ipv6 --interface ogk1 --seconds 3 --ignore-stdin | sed -u "s/^/S /" &
              \(Self.zeroconf) browse --type _six._udp --ipv6 --interface ogk0 --seconds 5 --ignore-stdin | sed -u "s/^/Z /" &
              gk-mdns browse --type _six._udp --ipv6-only --interface ogk0 --seconds 5 --ignore-stdin | sed -u "s/^/O /"
              wait'
            """)
        // python-zeroconf finds ours, with its ULA address and TXT, over ff02::fb; we find theirs.
        let zeroconfFound = Self.events(result, "Z", "found")
        let ours = try #require(zeroconfFound.first { $0["name"] as? String == "Ours Six._six._udp.local." })
        #expect(ours["port"] as? Int == 7003)
        #expect((ours["addresses"] as? [String])?.contains("fd00:6b::2") == true)
        let ourTXT = try #require(ours["txt"] as? [String: Any])
        #expect(ourTXT["six"] as? String == "6")
        #expect(ourTXT["bare"] is NSNull)
        #expect(ourTXT["nil"] as? String == "")
        #expect(ourTXT.count == 3)
        let ourFound = Self.events(result, "O", "found")
        let theirs = try #require(ourFound.first { $0["name"] as? String == "Theirs Six._six._udp.local." })
        #expect(theirs["port"] as? Int == 7004)
        #expect((theirs["addresses"] as? [String])?.contains("fd00:6b::2") == true)
        let theirTXT = try #require(theirs["txt"] as? [String: Any])
        #expect(theirTXT["from"] as? String == "zeroconf")
        #expect(theirTXT["on"] as? String == "")
        #expect(theirTXT.count == 2)
        // And each other's own kind, across the link.
        #expect(ourFound.contains { $0["name"] as? String == "Ours Six._six._udp.local." })
        #expect(Self.events(result, "O", "lost").count == 2)
        #expect(Self.events(result, "Z", "lost").count == 2)
    }

    @Test func twoOfOurProcessesShareThePortAndBothWork() async throws {
        let result = try await SandboxScript.run(
            """
            gk-mdns register --type _share._udp --name "First" --port 7005 --seconds 4 --ignore-stdin | sed -u 's/^/A /' &
            gk-mdns register --type _share._udp --name "Second" --port 7006 --seconds 4 --ignore-stdin | sed -u 's/^/B /' &
            gk-mdns browse --type _share._udp --seconds 3 --ignore-stdin | sed -u 's/^/O /' &
            \(Self.zeroconf) browse --type _share._udp --seconds 3 --ignore-stdin | sed -u 's/^/Z /'
            wait
            """)
        for tag in ["O", "Z"] {
            let names = Set(Self.events(result, tag, "found").compactMap { $0["name"] as? String })
            #expect(names == ["First._share._udp.local.", "Second._share._udp.local."], "browser \(tag)")
        }
        #expect(Self.events(result, "A", "registered").count == 1)
        #expect(Self.events(result, "B", "registered").count == 1)
    }

    @Test func twoRespondersClaimingOneNameEndWithTwoNames() async throws {
        let result = try await SandboxScript.run(
            """
            gk-mdns register --type _clash._udp --name "Same" --port 7007 --seconds 5 --ignore-stdin | sed -u 's/^/A /' &
            gk-mdns register --type _clash._udp --name "Same" --port 7008 --seconds 5 --ignore-stdin | sed -u 's/^/B /' &
            \(Self.zeroconf) register --type _clash._udp --name "Same" --port 7009 --seconds 5 --ignore-stdin | sed -u 's/^/Z /' &
            gk-mdns browse --type _clash._udp --seconds 4 --ignore-stdin | sed -u 's/^/O /'
            wait
            """)
        let ours = (Self.events(result, "A", "registered") + Self.events(result, "B", "registered")).compactMap { $0["name"] as? String }
        let theirs = Self.events(result, "Z", "registered").compactMap { $0["name"] as? String }
        #expect(ours.count == 2)
        #expect(theirs.count == 1)
        #expect(Set(ours + theirs).count == 3)
        let seen = Set(Self.events(result, "O", "found").compactMap { $0["port"] as? Int })
        #expect(seen == [7007, 7008, 7009])
    }
}
