#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The AEAD that protects a link's data packets (PROTOCOL §2.2, §3.7): chosen in the handshake,
/// AES-256-GCM when both sides have hardware AES, ChaCha20-Poly1305 otherwise.
public enum DataCipher: UInt16, Sendable, Hashable, CustomStringConvertible {
    /// ChaCha20-Poly1305 (RFC 8439): fast in software everywhere; what every 0.1 peer speaks.
    case chaCha20Poly1305 = 1
    /// AES-256-GCM (NIST SP 800-38D): faster where the processor has AES and carry-less
    /// multiplication instructions.
    case aes256GCM = 2

    public var description: String {
        switch self {
        case .chaCha20Poly1305: "ChaCha20-Poly1305"
        case .aes256GCM: "AES-256-GCM"
        }
    }

    /// The initiator's offer (the `data ciphers` field of its parameters): one bit per cipher it
    /// will accept. ChaCha20-Poly1305 is always among them.
    static func offer(preference: DataCipherPreference) -> UInt16 {
        preference.allowsAES ? Self.chaCha20Poly1305.rawValue | Self.aes256GCM.rawValue : Self.chaCha20Poly1305.rawValue
    }

    /// The responder's choice for an offer: AES-256-GCM when offered and this side allows it.
    /// Bits this version does not know are ignored; an offer of 0 (a 0.1 initiator) means
    /// ChaCha20-Poly1305.
    static func choice(forOffer offer: UInt16, preference: DataCipherPreference) -> DataCipher {
        offer & Self.aes256GCM.rawValue != 0 && preference.allowsAES ? .aes256GCM : .chaCha20Poly1305
    }

    /// The cipher a response names, or nil when it names one the initiator did not offer (the
    /// response is then ignored). 0 is a 0.1 responder: ChaCha20-Poly1305.
    static func chosen(inResponse field: UInt16, offer: UInt16) -> DataCipher? {
        if field == 0 { return .chaCha20Poly1305 }
        guard let cipher = DataCipher(rawValue: field), offer & field != 0 else { return nil }
        return cipher
    }
}

/// Which data cipher an endpoint offers and accepts (``TransportConfiguration/dataCipher``).
public enum DataCipherPreference: Sendable, Hashable {
    /// AES-256-GCM when this machine has hardware AES (and the peer offers or accepts it), else
    /// ChaCha20-Poly1305. The default.
    case automatic
    /// ChaCha20-Poly1305 only.
    case chaCha20Poly1305
    /// AES-256-GCM whenever the peer offers or accepts it, whatever this machine's hardware.
    case aes256GCM

    var allowsAES: Bool {
        switch self {
        case .automatic: HardwareAES.isAvailable
        case .chaCha20Poly1305: false
        case .aes256GCM: true
        }
    }
}

/// Whether the processor has AES instructions and carry-less multiplication (what makes GCM
/// fast): x86's `aes` and `pclmulqdq` flags, or ARM's `aes` and `pmull` features, as Linux
/// lists them in /proc/cpuinfo. False where that file cannot be read.
public enum HardwareAES {
    public static let isAvailable: Bool = {
        guard let data = FileManager.default.contents(atPath: "/proc/cpuinfo"), let text = String(data: data, encoding: .utf8) else {
            return false
        }
        return Self.listsAES(cpuinfo: text)
    }()

    /// Whether a /proc/cpuinfo text lists both instructions on its first processor.
    static func listsAES(cpuinfo: String) -> Bool {
        for line in cpuinfo.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let key = parts[0].trimmingCharacters(in: .whitespaces)
            guard key == "flags" || key == "Features" else { continue }
            let flags = Set(parts[1].split(separator: " ").map(String.init))
            return flags.contains("aes") && (flags.contains("pclmulqdq") || flags.contains("pmull"))
        }
        return false
    }
}
