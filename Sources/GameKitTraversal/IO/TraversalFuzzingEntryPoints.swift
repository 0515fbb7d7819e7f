import Crypto
import NIOCore
@_spi(Fuzzing) import GameKitMachine

/// Entry points for fuzzing NAT traversal's network input: the STUN/TURN/ICE message codec and
/// the real-time connection's demultiplexer (STUN servers, the TURN server and its Data
/// indications, ICE checks, media). The harness is Fuzz/Sources/TraversalFuzzer.
@_spi(Fuzzing)
public enum TraversalFuzzingEntryPoints {
    /// Decodes `bytes` as one STUN message. One that decodes must survive a round trip (the
    /// encoder drops MESSAGE-INTEGRITY and FINGERPRINT, which it regenerates), every typed reader
    /// must cope with its attributes, and signing it again must give a message whose integrity
    /// and fingerprint check.
    public static func decode(_ bytes: [UInt8]) {
        let regenerated: Set<UInt16> = [STUNAttribute.Kind.messageIntegrity.rawValue, STUNAttribute.Kind.fingerprint.rawValue]
        func unsigned(_ message: STUNMessage) -> STUNMessage {
            var message = message
            message.attributes.removeAll { regenerated.contains($0.type) }
            return message
        }
        guard
            let message = FuzzingRoundTrip.check(
                "STUN", bytes, decode: { try? STUNMessage.decode($0).message }, encode: { $0.encoded() }, normalized: unsigned)
        else { return }
        for attribute in message.attributes {
            _ = attribute.stringValue
            _ = attribute.uint32Value
            _ = attribute.uint64Value
            _ = attribute.xorAddressValue(transactionID: message.transactionID)
            _ = attribute.errorCodeValue
        }
        let key = Array("fuzzing key".utf8)
        let signed = message.encoded(integrityKey: key, fingerprint: true)
        guard signed.count <= STUNMessage.maximumSize else { return }
        do {
            let decoded = try STUNMessage.decode(signed)
            FuzzingRoundTrip.require(decoded.hasValidIntegrity(key: key), "STUN: a re-signed message fails its integrity check: \(message)")
            FuzzingRoundTrip.require(unsigned(decoded.message) == unsigned(message), "STUN: re-signing changes a message: \(message)")
        } catch {
            fatalError("STUN: a re-signed message does not decode (\(error)): \(message)")
        }
    }

    /// Delivers `datagrams`, in order, to a fresh real-time machine (one STUN server, one TURN
    /// server, ICE checks running against two remote candidates), polling it after each, as its
    /// socket would. Each datagram is also passed to ``decode(_:)``. A datagram's control byte
    /// says, bit by bit:
    /// - bits 0–1: the source: the STUN server, the TURN server, the remote host candidate, or an
    ///   address nobody announced (a peer-reflexive candidate);
    /// - bit 2: replace bytes 8..<20 (a STUN transaction ID) with those of the last datagram the
    ///   machine sent to the source, so responses can match a request;
    /// - bits 3–4: re-sign a STUN message with MESSAGE-INTEGRITY and FINGERPRINT under: nothing,
    ///   this side's ICE password (a check from the peer), the peer's ICE password (a response from
    ///   the peer), or the TURN long-term key; for a media datagram (first byte 0x90), any of the
    ///   three seals the rest under the peer's media key with the datagram's own 12-byte header;
    /// - bits 5–7: how far the clock moves before the datagram arrives (1 ms to 10 min).
    public static func receive(initiator: Bool, _ datagrams: [FuzzingRecord]) {
        var fuzzed = FuzzedRealTime(initiator: initiator)
        for datagram in datagrams {
            fuzzed.deliver(datagram)
        }
    }
}

/// A real-time machine with fixed addresses and keys, and what it last sent to each address.
private struct FuzzedRealTime {
    static let stunServer = TraversalAddress(bytes: [192, 0, 2, 1], port: 3478)!
    static let turnServer = TraversalAddress(bytes: [192, 0, 2, 2], port: 3478)!
    static let remoteHost = TraversalAddress(bytes: [10, 0, 0, 2], port: 6000)!
    static let stranger = TraversalAddress(bytes: [203, 0, 113, 5], port: 9000)!
    static let username = "fuzz", password = "fuzz password"
    /// Fixed key material: the keys, ICE credentials and seeds are the same in every run.
    static let material = (0..<96).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
    /// Clock steps, by control bits 5–7, in milliseconds.
    static let advances: [Int64] = [1, 10, 100, 1000, 5000, 30_000, 60_000, 600_000]

    private var machine: RealTimeMachine
    private let keys: RealTimeKeys
    private var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private var lastSent: [TraversalAddress: [UInt8]] = [:]

    init(initiator: Bool) {
        var settings = RealTimeMachine.Settings()
        settings.stunServers = [Self.stunServer]
        settings.turnServers = [(Self.turnServer, Self.username, Self.password)]
        settings.socketAcceptsIPv6 = true
        self.keys = RealTimeKeys(material: Self.material, isInitiator: initiator)
        self.machine = RealTimeMachine(settings: settings, hostAddresses: [TraversalAddress(bytes: [10, 0, 0, 1], port: 5000)!], now: self.now)
        self.machine.connect(keys: self.keys, remote: [
            ICECandidate(kind: .host, address: Self.remoteHost),
            ICECandidate(kind: .serverReflexive, address: TraversalAddress(bytes: [198, 51, 100, 7], port: 7000)!),
        ], now: self.now)
        self.poll()
    }

    mutating func deliver(_ datagram: FuzzingRecord) {
        let control = datagram.control
        let source = [Self.stunServer, Self.turnServer, Self.remoteHost, Self.stranger][Int(control & 3)]
        var bytes = datagram.bytes
        if control & 4 != 0, bytes.count >= STUNMessage.headerSize, let sent = self.lastSent[source], sent.count >= STUNMessage.headerSize {
            bytes.replaceSubrange(8..<20, with: sent[8..<20])
        }
        let signing = Int(control >> 3 & 3)
        if signing != 0 { bytes = self.sign(bytes, with: signing) }
        TraversalFuzzingEntryPoints.decode(bytes)
        self.now = self.now + .milliseconds(Self.advances[Int(control >> 5)])
        self.machine.receive(bytes, from: source, now: self.now)
        self.poll()
    }

    private func sign(_ bytes: [UInt8], with signing: Int) -> [UInt8] {
        if MediaCipher.isMedia(bytes) {
            guard bytes.count >= MediaCipher.headerSize else { return bytes }
            let header = Array(bytes[..<MediaCipher.headerSize])
            // The peer's sending key is this side's receiving key.
            guard let nonce = try? ChaChaPoly.Nonce(data: header),
                let box = try? ChaChaPoly.seal(bytes[MediaCipher.headerSize...], using: self.keys.receiveKey, nonce: nonce, authenticating: header)
            else { return bytes }
            return header + box.ciphertext + box.tag
        }
        guard let message = try? STUNMessage.decode(bytes).message else { return bytes }
        let key: [UInt8]
        switch signing {
        case 1: key = Array(self.keys.credentials.localPassword.utf8)
        case 2: key = Array(self.keys.credentials.remotePassword.utf8)
        default:
            // The realm the TURN client last signed with, if it has one yet.
            let realm = self.lastSent[Self.turnServer].flatMap { try? STUNMessage.decode($0).message }?.attribute(.realm)?.stringValue
            key = TURNClient.longTermKey(username: Self.username, realm: realm ?? "", password: Self.password)
        }
        let signed = message.encoded(integrityKey: key, fingerprint: true)
        return signed.count <= STUNMessage.maximumSize ? signed : bytes
    }

    private mutating func poll() {
        var budget = 64
        self.machine.handleTimeout(now: self.now)
        var output = ByteBuffer()
        while budget > 0, let destination = self.machine.pollTransmit(now: self.now, into: &output) {
            budget -= 1
            if let to = TraversalAddress(destination) { self.lastSent[to] = Array(output.readableBytesView) }
            output.clear()
        }
        while self.machine.pollEvent() != nil {}
        _ = self.machine.nextDeadline
    }
}
