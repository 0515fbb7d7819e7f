import Foundation
import NetworkImpairment
import Testing

/// Two gk-session processes on two private networks behind NAT routers (scripts/nat-topology)
/// meet in a room of gk-rendezvous on the public network between them (scripts/nat-chat).
@Suite("Online sessions across NATs", .serialized)
struct OnlineProcessTests {
    struct Outcome {
        var alice: [[String: Any]]
        var bob: [[String: Any]]
        var rendezvous: [[String: Any]]
        /// The sessions' info logs (standard error).
        var aliceLog: [String] = []
        var bobLog: [String] = []

        func events(_ side: [[String: Any]], _ name: String) -> [[String: Any]] {
            side.filter { $0["event"] as? String == name }
        }

        /// The texts alice received, in order.
        var received: [String] { self.events(self.alice, "data").compactMap { $0["text"] as? String } }

        func paths(_ side: [[String: Any]]) -> [String] {
            self.events(side, "path").compactMap { $0["path"] as? String }
        }

        func connected(_ side: [[String: Any]]) -> [String: Any]? {
            self.events(side, "state").first { $0["state"] as? String == "connected" }
        }
    }

    static let messages = 200

    static func chat(topology: String) async throws -> Outcome {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-natchat-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try await SandboxScript.run(
            """
            scripts/nat-chat \(topology) --messages \(Self.messages) \(directory)
            sed 's/^/A /' \(directory)/alice.jsonl; sed 's/^/B /' \(directory)/bob.jsonl; sed 's/^/R /' \(directory)/rendezvous.jsonl
            sed 's/^/AL /' \(directory)/alice.log; sed 's/^/BL /' \(directory)/bob.log
            """,
            timeout: 120)
        return Outcome(
            alice: result.objects(tagged: "A"), bob: result.objects(tagged: "B"), rendezvous: result.objects(tagged: "R"),
            aliceLog: result.lines(tagged: "AL"), bobLog: result.lines(tagged: "BL"))
    }

    static var expected: [String] { (0..<Self.messages).map { "m\($0)" } + (0..<Self.messages).map { "n\($0)" } }

    @Test func behindEndpointIndependentNATsTheSessionsMoveToADirectPath() async throws {
        let outcome = try await Self.chat(topology: "")
        let bob = try #require(outcome.connected(outcome.bob), "bob never connected: \(outcome.bob)")
        let alice = try #require(outcome.connected(outcome.alice))
        // Connected at once through the relay, then direct.
        #expect(bob["path"] as? String == "relayed")
        #expect(outcome.paths(outcome.bob) == ["direct"], "\(outcome.bobLog)")
        #expect(outcome.paths(outcome.alice) == ["direct"], "\(outcome.aliceLog)")
        // One link all along: each message once, in order, across the move.
        #expect(outcome.received == Self.expected)
        // Nobody in between: both read the same verification code.
        #expect(bob["verification"] as? String == alice["verification"] as? String)
        #expect((bob["verification"] as? String)?.count == 9)
    }

    @Test func withUDPBlockedTheSessionsMeetAndTalkOverTCP() async throws {
        let outcome = try await Self.chat(topology: "--block-udp")
        let bob = try #require(outcome.connected(outcome.bob), "bob never connected: \(outcome.bob)")
        #expect(bob["path"] as? String == "relayed")
        #expect(outcome.paths(outcome.bob).isEmpty)
        #expect(outcome.received == Self.expected)
        // Nothing of theirs reached the rendezvous over UDP (the topology drops it all), so
        // every request and relayed datagram came over TCP; none was refused for its rate.
        let statistics = try #require(outcome.rendezvous.last { $0["event"] as? String == "statistics" })
        #expect((statistics["relayedDatagrams"] as? Int ?? 0) > 0)
        #expect(statistics["allocations"] as? Int == 2)
        #expect(statistics["droppedRateLimited"] as? Int == 0)
    }

    @Test func garbageToTheRendezvousPortsIsDroppedAndServiceGoesOn() async throws {
        // Random datagrams of every first byte and size to the UDP port; to the TCP port, random
        // bytes, a frame longer than allowed, and garbage inside well-formed frames. Then a real
        // session still makes a room there.
        let garbage = """
            import os, random, socket, struct
            rng = random.Random(16)
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            for i in range(600):
                u.sendto(bytes([i % 256]) + os.urandom(rng.randrange(0, 1500)), ("127.0.0.1", 7878))
            for payload in (os.urandom(4000), struct.pack(">H", 0xFFFF) + os.urandom(100),
                            b"".join(struct.pack(">H", 40) + bytes([13 + k % 3]) + os.urandom(39) for k in range(50))):
                t = socket.create_connection(("127.0.0.1", 7878))
                t.sendall(payload)
                t.close()
            """
        let result = try await SandboxScript.run(
            """
            d=$(mktemp -d)
            gk-rendezvous --listen 127.0.0.1:7878 --stats-interval 1 --duration 30 > $d/r &
            R=$!
            for i in $(seq 200); do grep -q listening $d/r && break; sleep 0.05; done
            python3 -c '\(garbage)'
            sleep 0.5
            gk-session --name alice --online new --rendezvous 127.0.0.1:7878 --online-only --seconds 2 --ignore-stdin | sed 's/^/A /'
            kill -INT $R; wait $R; echo "X {\\"exit\\":$?}"
            sed 's/^/R /' $d/r; rm -rf $d
            """,
            timeout: 60)
        #expect(result.objects(tagged: "A").contains { $0["event"] as? String == "room" }, "\(result.lines)")
        #expect(result.objects(tagged: "X").first?["exit"] as? Int == 0)
        let statistics = try #require(result.objects(tagged: "R").last { $0["event"] as? String == "statistics" })
        #expect((statistics["droppedMalformed"] as? Int ?? 0) >= 500, "\(statistics)")
        #expect(statistics["roomsCreated"] as? Int == 1)
    }

    @Test func behindSymmetricNATsTheSessionsStayOnTheRelay() async throws {
        let outcome = try await Self.chat(topology: "--random-fully")
        let bob = try #require(outcome.connected(outcome.bob), "bob never connected: \(outcome.bob)")
        #expect(bob["path"] as? String == "relayed")
        #expect(outcome.paths(outcome.bob).isEmpty)
        #expect(outcome.paths(outcome.alice).isEmpty)
        #expect(outcome.received == Self.expected)
        let statistics = try #require(outcome.rendezvous.last { $0["event"] as? String == "statistics" })
        #expect((statistics["relayedDatagrams"] as? Int ?? 0) > 0)
        #expect(statistics["allocations"] as? Int == 2)
    }

    /// Symmetric NATs and a TURN server (coturn) given to both: the relayed candidates work where
    /// hole punching cannot. The controlling side (the lower peer ID, so either) reaches the other
    /// through its allocation; the other sends straight to that relayed address (coturn's, at
    /// 10.201.0.1). Both report the path as relayed.
    @Test func behindSymmetricNATsATURNServerCarriesTheSessions() async throws {
        let outcome = try await Self.chat(topology: "--random-fully --turn")
        let all = "\(outcome.bob)\n\(outcome.aliceLog)\n\(outcome.bobLog)"
        let bob = try #require(outcome.connected(outcome.bob), "bob never connected: \(all)")
        #expect(bob["path"] as? String == "relayed")
        func throughTURN(_ log: [String]) -> Bool { log.contains { $0.contains("through the TURN server") } }
        func toRelayed(_ log: [String]) -> Bool { log.contains { $0.contains("direct path") && $0.contains("address=[IPv4]10.201.0.1:") } }
        #expect((throughTURN(outcome.aliceLog) && toRelayed(outcome.bobLog)) || (throughTURN(outcome.bobLog) && toRelayed(outcome.aliceLog)), "\(all)")
        // Bob's path is still reported as relayed: it ends at Alice's TURN allocation.
        #expect(!outcome.paths(outcome.bob).contains("direct"), "\(all)")
        #expect(outcome.received == Self.expected)
    }

    /// IPv6 as usually deployed (global addresses, no NAT, the routers' stateful firewalls), with
    /// the rendezvous at its IPv6 address: the sessions meet over IPv6 and punch through both
    /// firewalls to a direct IPv6 path.
    @Test func overIPv6BehindFirewallsTheSessionsMoveToADirectPath() async throws {
        let outcome = try await Self.chat(topology: "--ipv6")
        let all = "\(outcome.bob)\n\(outcome.bobLog)"
        let bob = try #require(outcome.connected(outcome.bob), "bob never connected: \(all)")
        #expect(bob["path"] as? String == "relayed")
        #expect(outcome.paths(outcome.bob) == ["direct"], "\(all)")
        #expect(outcome.bobLog.contains { $0.contains("direct path") && $0.contains("address=[IPv6]2001:db8:1001::2:") }, "\(all)")
        #expect(outcome.received == Self.expected)
    }
}

/// Apart from "Online sessions across NATs" (serialized), so that it runs beside them.
@Suite("Online sessions on a busy machine")
struct OnlineStallTests {
    /// Alice's process is stopped for 6 s once the path is direct (longer than consent's 5 s
    /// timeout): it sent no consent check meanwhile, so on waking it keeps its direct path and
    /// checks again. (Bob, whose checks went unanswered for as long, may go back to the relay:
    /// to him the path was silent.) Every message still arrives once, in order.
    @Test func aSessionHeldUpForSecondsKeepsItsDirectPath() async throws {
        let outcome = try await OnlineProcessTests.chat(topology: "--stall 6")
        _ = try #require(outcome.connected(outcome.bob), "bob never connected: \(outcome.bob)")
        #expect(outcome.paths(outcome.alice) == ["direct"], "\(outcome.aliceLog)")
        #expect(outcome.paths(outcome.bob).first == "direct", "\(outcome.bobLog)")
        #expect(outcome.received == OnlineProcessTests.expected)
    }
}
