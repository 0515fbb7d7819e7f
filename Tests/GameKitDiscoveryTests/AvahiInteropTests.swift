import Foundation
import NetworkImpairment
import Testing

/// A real avahi-daemon as the other mDNS stack of the same host, both ways (scripts/avahi: its
/// own D-Bus, inside the sandbox, beside a veth pair so that it has a link other than loopback).
/// Avahi and our processes share port 5353 in one namespace, as on a Linux desktop.
///
/// What is checked: `avahi-browse` sees and resolves a GKSession's service and sees it leave when
/// the program is stopped with SIGTERM, after which Avahi no longer has it; our browser finds
/// what `avahi-publish` advertises, with port and TXT, whether it starts before or after, and
/// sees it withdrawn; two GKSessions find each other and connect with Avahi beside them; and a
/// responder asks for unicast replies in its first probe only when nobody shares the port
/// (RFC 6762 §15.1), as a capture on the far side of the veth shows.
@Suite("Beside Avahi on the same host", .serialized)
struct AvahiInteropTests {
    /// Runs `inner` (bash, with $d a private folder) inside scripts/veth-pair and scripts/avahi;
    /// `outer` runs before it, in the sandbox. Avahi's host name is avahi-peer.
    static func run(_ inner: String, outer: String = "", timeout: Double = 60) async throws -> SandboxScript.Result {
        try await SandboxScript.run(
            """
            export d=$(mktemp -d)
            cat > $d/inner.sh <<'INNER'
            \(inner)
            INNER
            \(outer)
            scripts/veth-pair scripts/avahi --host-name avahi-peer bash $d/inner.sh
            echo "Z {\\"status\\":$?}"
            rm -rf $d
            """, timeout: timeout)
    }

    /// avahi-browse's parseable lines (`+`, `=`, `-`) tagged `tag`, split at the semicolons.
    static func avahiLines(_ result: SandboxScript.Result, _ tag: String) -> [[String]] {
        result.lines(tagged: tag).map { $0.split(separator: ";", omittingEmptySubsequences: false).map(String.init) }
    }

    static func events(_ result: SandboxScript.Result, _ tag: String, _ event: String) -> [[String: Any]] {
        result.objects(tagged: tag).filter { $0["event"] as? String == event }
    }

    @Test func avahiResolvesASessionAndForgetsItWhenTheProgramIsTerminated() async throws {
        let result = try await Self.run(
            """
            avahi-browse --parsable --resolve --no-db-lookup _avbye._udp > $d/a 2>/dev/null &
            B=$!
            gk-session --session-id avbye --name Ours --answer accept --seconds 60 --ignore-stdin > $d/s &
            S=$!
            \(SandboxScript.awaitText(";ogk0;IPv4;Ours", in: "$d/a", count: 2))
            # avahi-browse resolves each sighting to whichever address answers first, so the host's
            # A and AAAA records are asked for by name, one family at a time.
            H=$(grep '^=;ogk0;' $d/a | head -1 | cut -d';' -f7)
            avahi-resolve --name -4 "$H" 2>&1 | sed 's/^/R /'
            avahi-resolve --name -6 "$H" 2>&1 | sed 's/^/R /'
            kill -TERM $S
            wait $S
            echo "X {\\"status\\":$?}"
            \(SandboxScript.awaitText("-;ogk0;IPv4;Ours", in: "$d/a"))
            \(SandboxScript.awaitText("-;ogk0;IPv6;Ours", in: "$d/a"))
            # Avahi's cache once the goodbye is processed: the service is gone.
            avahi-browse --parsable --resolve --no-db-lookup --terminate _avbye._udp 2>/dev/null | sed 's/^/C /'
            kill $B; wait $B
            sed 's/^/A /' $d/a; sed 's/^/S /' $d/s
            """)
        let output = result.lines.joined(separator: "\n")
        #expect(result.objects(tagged: "Z").first?["status"] as? Int == 0, "\(output)")
        let started = try #require(Self.events(result, "S", "started").first, "\(output)")
        let peerID = try #require(started["peer"] as? String)
        let lines = Self.avahiLines(result, "A")
        // Resolved over IPv4 and IPv6 on the veth, with the session's port and TXT record.
        let resolved = lines.filter { $0.first == "=" && $0.count >= 10 && $0[1] == "ogk0" }
        #expect(Set(resolved.map { $0[2] }) == ["IPv4", "IPv6"], "\(output)")
        for line in resolved {
            #expect(line[3] == "Ours\\032\\091\(peerID)\\093", "\(line)")
            #expect(line[6] != "avahi-peer.local" && line[6].hasSuffix(".local"), "\(line)")
            let txt = line[9]
            #expect(txt.contains("\"dn=Ours\"") && txt.contains("\"id=\(peerID)\"") && txt.contains("\"lk="), "\(line)")
            #expect(txt.contains("\"tp=\(line[8])\""), "\(line)")
        }
        // Avahi resolves the session's host name to its addresses on the veth, both families.
        let host = try #require(resolved.first?[6], "\(output)")
        let addresses = result.lines(tagged: "R").map { $0.split(separator: "\t").map(String.init) }
        #expect(addresses.contains { $0 == [host, "10.107.0.1"] }, "\(output)")
        #expect(addresses.contains { $0.count == 2 && $0[0] == host && $0[1].hasPrefix("fe80::") }, "\(output)")
        // SIGTERM ended it as SIGTERM does, and every sighting was withdrawn.
        #expect(result.objects(tagged: "X").first?["status"] as? Int == 128 + 15, "\(output)")
        let added = Set(lines.filter { $0.first == "+" }.map { $0[1...2].joined(separator: ";") })
        let removed = Set(lines.filter { $0.first == "-" }.map { $0[1...2].joined(separator: ";") })
        #expect(!added.isEmpty && removed == added, "\(output)")
        #expect(result.lines(tagged: "C").filter { $0.contains("Ours") }.isEmpty, "\(output)")
    }

    @Test(arguments: [false, true]) func ourBrowserFindsWhatAvahiPublishesAndSeesItWithdrawn(publishedFirst: Bool) async throws {
        let publish = """
            avahi-publish --service "Their Game" _avtheirs._udp 4321 k=v flag empty= > $d/p 2>&1 &
            P=$!
            \(SandboxScript.awaitText("Established", in: "$d/p"))
            """
        let result = try await Self.run(
            """
            \(publishedFirst ? publish : "")
            gk-mdns browse --type _avtheirs._udp --seconds 30 --ignore-stdin > $d/b &
            M=$!
            \(SandboxScript.awaitText("browsing", in: "$d/b"))
            \(publishedFirst ? "" : publish)
            \(SandboxScript.awaitText("10.107.0.1", in: "$d/b"))
            echo "K {\\"mono_ns\\":$(python3 -c 'import time; print(time.monotonic_ns())')}"
            kill -TERM $P; wait $P
            \(SandboxScript.awaitText("\"lost\"", in: "$d/b"))
            kill $M; wait $M
            sed 's/^/B /' $d/b
            """)
        let output = result.lines.joined(separator: "\n")
        let found = try #require(Self.events(result, "B", "found").first, "\(output)")
        #expect(found["name"] as? String == "Their Game._avtheirs._udp.local.")
        #expect(found["host"] as? String == "avahi-peer.local.")
        #expect(found["port"] as? Int == 4321)
        let txt = try #require(found["txt"] as? [String: Any])
        #expect(txt["k"] as? String == "v" && txt["flag"] is NSNull && txt["empty"] as? String == "" && txt.count == 3, "\(txt)")
        let last = Self.events(result, "B", "updated").last ?? found
        #expect(Set(last["addresses"] as? [String] ?? []).isSuperset(of: ["10.107.0.1", "fd00:6b::1"]), "\(output)")
        // Withdrawn after avahi-publish was told to stop, and only then.
        let mark = try #require(result.objects(tagged: "K").first?["mono_ns"] as? Int)
        let lost = Self.events(result, "B", "lost")
        #expect(lost.count == 1 && (lost.first?["mono_ns"] as? Int ?? 0) > mark, "\(output)")
    }

    @Test func twoSessionsFindEachOtherAndConnectBesideAvahi() async throws {
        let result = try await Self.run(
            """
            gk-session --session-id avpair --name Host --answer accept --seconds 30 --ignore-stdin > $d/h &
            H=$!
            gk-session --session-id avpair --name Guest --connect Host --seconds 30 --ignore-stdin > $d/g &
            G=$!
            nsenter --net=$OGK_PEER_NETNS -- gk-session --session-id avpair --name Far --connect Host --seconds 30 --ignore-stdin > $d/f &
            F=$!
            \(SandboxScript.awaitText("\"name\":\"Host\",", in: "$d/g"))
            for f in $d/g $d/f; do \(SandboxScript.awaitText("\"state\":\"connected\"", in: "$f")); done
            # Avahi, beside them, sees all three.
            avahi-browse --parsable --no-db-lookup --terminate _avpair._udp 2>/dev/null | sed 's/^/C /'
            kill $G $F $H; wait $G $F $H
            sed 's/^/G /' $d/g; sed 's/^/F /' $d/f; sed 's/^/H /' $d/h
            """)
        let output = result.lines.joined(separator: "\n")
        for tag in ["G", "F"] {
            let states = result.objects(tagged: tag).filter { $0["event"] as? String == "state" && $0["name"] as? String == "Host" }
            #expect(states.contains { $0["state"] as? String == "connected" }, "\(tag): \(output)")
        }
        let hostConnected = Set(
            result.objects(tagged: "H").filter { $0["event"] as? String == "state" && $0["state"] as? String == "connected" }.compactMap { $0["name"] as? String })
        #expect(hostConnected == ["Guest", "Far"], "\(output)")
        let seen = Set(result.lines(tagged: "C").compactMap { line in ["Host", "Guest", "Far"].first { line.contains(";\($0)\\032") } })
        #expect(seen == ["Host", "Guest", "Far"], "\(output)")
    }

    /// The first of a responder's three probes asks for unicast replies (QU) when it has the
    /// port to itself, and none does while Avahi shares it. The capture listens in the far
    /// namespace, so that it does not share the port itself.
    @Test(arguments: [false, true]) func theFirstProbeAsksForUnicastOnlyWhenThePortIsNotShared(avahiRunning: Bool) async throws {
        let probe = """
            nsenter --net=$OGK_PEER_NETNS -- "$PEER_PYTHON" "$PEERS/mdns_capture.py" --seconds 4 --interface 10.107.0.2 > $d/c &
            C=$!
            \(SandboxScript.awaitListening("$d/c"))
            gk-mdns register --type _avqu._udp --name Prober --port 7030 --interface ogk0 --seconds 1 --ignore-stdin > /dev/null
            wait $C
            sed 's/^/C /' $d/c
            """
        // Without Avahi: the same namespaces, the daemon never started.
        let result = avahiRunning
            ? try await Self.run(probe)
            : try await SandboxScript.run(
                """
                export d=$(mktemp -d)
                cat > $d/inner.sh <<'INNER'
                \(probe)
                INNER
                scripts/veth-pair bash $d/inner.sh
                rm -rf $d
                """, timeout: 60)
        let output = result.lines.joined(separator: "\n")
        let probes = result.objects(tagged: "C").filter { object in
            object["event"] as? String == "packet" && object["qr"] as? Bool == false
                && (object["questions"] as? [[String: Any]] ?? []).contains { ($0["name"] as? String)?.hasPrefix("Prober.") == true }
        }
        try #require(probes.count == 3, "\(output)")
        let qu = probes.map { ($0["questions"] as? [[String: Any]] ?? []).map { $0["qu"] as? Bool ?? false } }
        #expect(qu[0].allSatisfy { $0 == !avahiRunning } && !qu[0].isEmpty, "\(qu)")
        #expect(qu.dropFirst().allSatisfy { $0.allSatisfy { !$0 } }, "\(qu)")
    }
}
