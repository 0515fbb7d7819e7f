@_spi(Fuzzing) import GameKitMachine
@_spi(Fuzzing) import GameKitTransport
import NIOCore

/// Entry point for fuzzing the session layer's decoders: what peers send each other in the
/// transport's handshake (`SessionHello`, `SessionWelcome`) and on an established link
/// (`SessionMessage`). The harness is Fuzz/Sources/SessionWireFuzzer.
@_spi(Fuzzing)
public enum SessionWireFuzzingEntryPoints {
    /// Decodes `bytes` as each of the three messages. Whatever decodes must survive a round trip
    /// (``FuzzingRoundTrip``); rejections are the decoders' job.
    public static func decode(_ bytes: UnsafeRawBufferPointer) {
        let buffer = ByteBuffer(bytes: bytes)
        FuzzingRoundTrip.check("SessionMessage", buffer, decode: { try? SessionMessage.decode($0) }, encode: { $0.encode() })
        FuzzingRoundTrip.check("SessionHello", buffer, decode: { try? SessionHello.decode($0) }, encode: { $0.encode() })
        FuzzingRoundTrip.check("SessionWelcome", buffer, decode: { try? SessionWelcome.decode($0) }, encode: { $0.encode() })
    }
}
