@_spi(Machine) import GameKitMachine
import NIOCore
import Testing

@testable import GameKitTraversal

/// The TURN client against a scripted server, and the media sealing of real-time connections.
@Suite("TURN client and media sealing")
struct TURNAndMediaTests {
    static let server = TraversalAddress("203.0.113.1", port: 3478)!
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    /// A scripted TURN server: answers the first request of each kind with 401, checks integrity
    /// with the long-term key after that.
    struct ScriptedServer {
        let key = TURNClient.longTermKey(username: "alice", realm: "example.org", password: "secret")
        var sawUnsigned = false
        var permitted: [TraversalAddress] = []
        var refreshLifetimes: [UInt32] = []
        var wrongPassword = false

        mutating func answer(_ bytes: [UInt8]) -> [UInt8]? {
            guard let decoded = try? STUNMessage.decode(bytes) else { return nil }
            let request = decoded.message
            guard request.messageClass == .request else { return nil }
            let id = request.transactionID
            guard request.attribute(.username) != nil, !self.wrongPassword, decoded.hasValidIntegrity(key: self.key) else {
                self.sawUnsigned = true
                return STUNMessage(request.method, .error, transactionID: id, attributes: [
                    .errorCode(401, reason: "Unauthorized"), .text(.realm, "example.org"), .text(.nonce, "n1"),
                ]).encoded()
            }
            var attributes: [STUNAttribute] = []
            switch request.method {
            case .allocate:
                attributes = [
                    .xorAddress(.xorRelayedAddress, TraversalAddress("203.0.113.1", port: 50000)!, transactionID: id),
                    .xorAddress(.xorMappedAddress, TraversalAddress("198.51.100.4", port: 40000)!, transactionID: id),
                    .uint32(.lifetime, 600),
                ]
            case .createPermission:
                self.permitted += request.attributes.compactMap {
                    $0.type == STUNAttribute.Kind.xorPeerAddress.rawValue ? $0.xorAddressValue(transactionID: id) : nil
                }
            case .refresh:
                self.refreshLifetimes.append(request.attribute(.lifetime)?.uint32Value ?? 999)
                attributes = [.uint32(.lifetime, 600)]
            default:
                return nil
            }
            return STUNMessage(request.method, .success, transactionID: id, attributes: attributes).encoded(integrityKey: self.key, fingerprint: true)
        }
    }

    static func exchange(_ client: inout TURNClient, _ server: inout ScriptedServer, at now: NIODeadline) {
        for _ in 0..<4 {
            client.handleTimeout(now: now)
            var out: [[UInt8]] = []
            while let bytes = client.pollTransmit() { out.append(bytes) }
            if out.isEmpty { return }
            for bytes in out {
                if let reply = server.answer(bytes) { _ = client.receive(try! STUNMessage.decode(reply), now: now) }
            }
        }
    }

    @Test("Allocation: 401, then a signed request; the relayed and mapped addresses come back")
    func allocation() {
        var client = TURNClient(server: Self.server, username: "alice", password: "secret", now: Self.start)
        var server = ScriptedServer()
        Self.exchange(&client, &server, at: Self.start)
        #expect(server.sawUnsigned)
        #expect(client.state == .allocated(relayed: TraversalAddress("203.0.113.1", port: 50000)!, mapped: TraversalAddress("198.51.100.4", port: 40000)!))
    }

    @Test("Permissions, Send and Data indications, refreshes and release")
    func upkeep() throws {
        var client = TURNClient(server: Self.server, username: "alice", password: "secret", now: Self.start)
        var server = ScriptedServer()
        Self.exchange(&client, &server, at: Self.start)
        let peer = TraversalAddress("198.51.100.9", port: 7000)!
        client.permit([peer, TraversalAddress("198.51.100.9", port: 7001)!], now: Self.start)
        Self.exchange(&client, &server, at: Self.start)
        #expect(server.permitted.map(\.bytes) == [peer.bytes])

        let send = try STUNMessage.decode(client.sendIndication([1, 2, 3], to: peer)).message
        #expect(send.method == .send && send.messageClass == .indication)
        #expect(send.xorAddress(.xorPeerAddress) == peer && send.attribute(.data)?.value == [1, 2, 3])

        var random = MachineRandom(seed: 7)
        let id = STUNMessage.randomTransactionID(using: &random)
        let data = STUNMessage(.data, .indication, transactionID: id, attributes: [
            .xorAddress(.xorPeerAddress, peer, transactionID: id), STUNAttribute(.data, [9, 9]),
        ]).encoded()
        #expect(client.receive(try STUNMessage.decode(data), now: Self.start) == .data([9, 9], from: peer))

        // The allocation is refreshed a minute before its 600 s end, permissions every 240 s.
        let later = Self.start + .seconds(541)
        Self.exchange(&client, &server, at: later)
        #expect(server.refreshLifetimes == [600])
        #expect(server.permitted.count == 2)
        let closing = client.close()
        let releaseBytes = try #require(closing)
        let release = try STUNMessage.decode(releaseBytes).message
        #expect(release.method == .refresh && release.attribute(.lifetime)?.uint32Value == 0)
        #expect(client.state == .closed)
    }

    @Test("Refused credentials and a silent server end in failure, not a hang")
    func failures() {
        var client = TURNClient(server: Self.server, username: "alice", password: "secret", now: Self.start)
        var server = ScriptedServer()
        server.wrongPassword = true
        Self.exchange(&client, &server, at: Self.start)
        guard case .failed = client.state else { Issue.record("state \(client.state)"); return }

        var silent = TURNClient(server: Self.server, username: "alice", password: "secret", now: Self.start)
        var now = Self.start
        while let deadline = silent.nextDeadline, now < Self.start + .seconds(60) {
            now = deadline
            silent.handleTimeout(now: now)
            while silent.pollTransmit() != nil {}
        }
        guard case .failed = silent.state else { Issue.record("state \(silent.state)"); return }
        #expect(now - Self.start == .milliseconds(200 + 400 + 800 + 1600 + 3200))
    }

    @Test("Both sides derive matching keys; a bad key share is refused")
    func keyExchange() throws {
        let a = RealTimeKeyExchange(), b = RealTimeKeyExchange()
        let ka = try a.keys(remotePublicKey: b.publicKeyBytes, isInitiator: true, context: [7])
        let kb = try b.keys(remotePublicKey: a.publicKeyBytes, isInitiator: false, context: [7])
        #expect(ka.credentials.localUfrag == kb.credentials.remoteUfrag && ka.credentials.remotePassword == kb.credentials.localPassword)
        #expect(ka.credentials.localPassword.count == 24 && ka.credentials.localUfrag != ka.credentials.remoteUfrag)
        var sender = MediaCipher(keys: ka), receiver = MediaCipher(keys: kb)
        #expect(receiver.open(sender.seal([1, 2, 3])) == [1, 2, 3])
        #expect(throws: RealTimeError.invalidKeyShare) { try a.keys(remotePublicKey: [1, 2], isInitiator: true, context: []) }
        // Another call's context gives other keys.
        let other = try b.keys(remotePublicKey: a.publicKeyBytes, isInitiator: false, context: [8])
        var otherReceiver = MediaCipher(keys: other)
        #expect(otherReceiver.open(sender.seal([4])) == nil)
    }

    @Test("Tampered, replayed, truncated and reflected media are refused and counted")
    func mediaProtection() throws {
        let a = RealTimeKeyExchange(), b = RealTimeKeyExchange()
        var sender = MediaCipher(keys: try a.keys(remotePublicKey: b.publicKeyBytes, isInitiator: true, context: []))
        var receiver = MediaCipher(keys: try b.keys(remotePublicKey: a.publicKeyBytes, isInitiator: false, context: []))
        let first = sender.seal(Array(repeating: 5, count: 40))
        let second = sender.seal([6])
        #expect(receiver.open(second) == [6])
        #expect(receiver.open(first)?.count == 40)   // reordered is fine
        #expect(receiver.open(first) == nil)         // replayed is not
        var flipped = sender.seal([7])
        flipped[flipped.count - 20] ^= 1
        #expect(receiver.open(flipped) == nil)
        #expect(receiver.open(Array(first[..<20])) == nil)
        // A packet sent back to its own sender (reflection) does not open with the other key.
        var own = sender
        #expect(own.open(sender.seal([8])) == nil)
        #expect(receiver.rejected == 3)
    }
}
