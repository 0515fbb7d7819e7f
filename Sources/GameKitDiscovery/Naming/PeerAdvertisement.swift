/// What a peer of a session publishes about itself in its service instance: the instance name
/// and the TXT record layout (documented in docs/PROTOCOL.md, "Discovery names and TXT").
///
/// | key | value |
/// |---|---|
/// | `v` | protocol version, decimal (first, as RFC 6763 §6.7 advises) |
/// | `id` | peer ID, the decimal text of a 32-bit number |
/// | `dn` | display name, UTF-8, cut at a character boundary to fit 255 bytes |
/// | `st` | `free` or `busy` |
/// | `tp` | transport port, decimal (also in the SRV record) |
/// | `fp` | key fingerprint, lower-case hex, when the peer has a static key |
/// | `lk` | liveness key: the transport endpoint's 32-byte X25519 liveness public key, lower-case hex |
public struct PeerAdvertisement: Sendable, Hashable {
    /// The version this code writes. Readers accept any version and ignore keys they do not know.
    public static let currentProtocolVersion = 1

    public var peerID: String
    public var displayName: String
    public var isBusy: Bool
    public var protocolVersion: Int
    public var transportPort: UInt16
    public var keyFingerprint: [UInt8]?
    /// The key others probe to learn that the peer is alive (exactly 32 bytes, or nil).
    public var livenessKey: [UInt8]?

    public init(
        peerID: String, displayName: String, isBusy: Bool = false, transportPort: UInt16, keyFingerprint: [UInt8]? = nil,
        livenessKey: [UInt8]? = nil, protocolVersion: Int = Self.currentProtocolVersion
    ) {
        self.peerID = peerID
        self.displayName = displayName
        self.isBusy = isBusy
        self.transportPort = transportPort
        self.keyFingerprint = keyFingerprint
        self.livenessKey = livenessKey
        self.protocolVersion = protocolVersion
    }

    /// The instance label: `<display name> [<peer ID>]`, the display name cut at a character
    /// boundary so that the label fits 63 bytes. The peer ID keeps it unique per peer.
    public var instanceName: String {
        let suffix = " [\(self.peerID)]"
        return self.displayName.utf8Prefix(maximumBytes: DNSName.maximumLabelLength - suffix.utf8.count) + suffix
    }

    /// The TXT record.
    public var txtRecord: TXTRecord {
        var txt = TXTRecord()
        // Keys are fixed and short; values are bounded below, so these never throw.
        try! txt.set("v", String(self.protocolVersion))
        try! txt.set("id", String(self.peerID.utf8.prefix(32)) ?? "")
        try! txt.set("dn", self.displayName.utf8Prefix(maximumBytes: 255 - 3))
        try! txt.set("st", self.isBusy ? "busy" : "free")
        try! txt.set("tp", String(self.transportPort))
        if let fingerprint = self.keyFingerprint {
            try! txt.set("fp", Self.hex(fingerprint.prefix(64)))
        }
        if let key = self.livenessKey, key.count == 32 {
            try! txt.set("lk", Self.hex(key))
        }
        return txt
    }

    /// Reads an advertisement from a TXT record, or nil without a peer ID and a transport port.
    public init?(txt: TXTRecord) {
        guard let peerID = txt["id"], !peerID.isEmpty, let port = txt["tp"].flatMap(UInt16.init) else { return nil }
        self.peerID = peerID
        self.displayName = txt["dn"] ?? peerID
        self.isBusy = txt["st"] == "busy"
        self.transportPort = port
        self.protocolVersion = txt["v"].flatMap(Int.init) ?? 0
        self.keyFingerprint = txt["fp"].flatMap(Self.hexBytes)
        self.livenessKey = txt["lk"].flatMap(Self.hexBytes).flatMap { $0.count == 32 ? $0 : nil }
    }

    private static func hex(_ bytes: some Sequence<UInt8>) -> String {
        bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }

    private static func hexBytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - self.count)) + self
    }
}
