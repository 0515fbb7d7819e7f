import Crypto
import NIOCore

/// Entry points for coverage-guided fuzzing of everything that parses bytes from the network
/// (the harness lives in Fuzz/, outside the package's normal build).
@_spi(Fuzzing)
public enum FuzzingEntryPoints {
    /// Feeds `bytes` as a received datagram to every decoder: the endpoint (as responder with a
    /// link open, and as initiator with a handshake in progress), each handshake message decoder,
    /// the data header and the frame reader. Must never crash, hang or allocate without bound.
    public static func receive(_ bytes: UnsafeRawBufferPointer) {
        let datagram = ByteBuffer(bytes: bytes)
        _ = InitiationMessage.decode(datagram)
        _ = InitiationMessage.peekVersionAndEcho(datagram)
        _ = ResponseMessage.decode(datagram)
        _ = RejectMessage.decode(datagram)
        _ = CookieMessage.decode(datagram)
        _ = CancelMessage.decode(datagram)
        _ = DataPacketHeader.decode(datagram)
        var copy = datagram
        _ = TransportParameters.decode(from: &copy)
        Self.roundTripLiveness(datagram)
        Self.readFrames(datagram)
        Self.endpoint.receive(datagram)
    }

    /// Reads `bytes` as the plaintext of a data packet, as a link does after decryption.
    public static func readFrames(_ bytes: UnsafeRawBufferPointer) {
        Self.readFrames(ByteBuffer(bytes: bytes))
    }

    private static func readFrames(_ plaintext: ByteBuffer) {
        var reader = FrameReader(plaintext)
        var stream = ReceiveStream(window: 1 << 16, maxMessageSize: 1 << 15)
        var reassembler = FragmentReassembler(maxMessageSize: 1 << 15, timeout: .seconds(1), maximumBufferedBytes: 1 << 16)
        var count = 0
        while count < 10_000, let frame = try? reader.next() {
            count += 1
            switch frame {
            case .reliable(let offset, let data):
                if (try? stream.receive(offset: offset, data: data)) != nil {
                    while stream.nextMessage() != nil {}
                }
            case .unreliableFragment(let fragment):
                _ = reassembler.receive(fragment, now: .uptimeNanoseconds(0))
            default:
                break
            }
        }
    }

    /// The liveness probe and answer decoders (the endpoint reaches them only by packet type): a
    /// message that decodes must encode to one that decodes to the same fields.
    private static func roundTripLiveness(_ datagram: ByteBuffer) {
        let key = SymmetricKey(size: .bits256)
        if let (probe, _, _) = LivenessMessage.decodeProbe(datagram) {
            let again = LivenessMessage.decodeProbe(LivenessMessage.probe(probe, key: key))
            FuzzingRoundTrip.require(again?.probe == probe, "a liveness probe changes through a round trip: \(probe)")
        }
        if let (nonce, _, trailer) = LivenessMessage.decodeAnswer(datagram) {
            let again = LivenessMessage.decodeAnswer(LivenessMessage.cookie(nonce: nonce, cookie: Array(trailer.readableBytesView)))
            FuzzingRoundTrip.require(again?.nonce == nonce && again?.trailer == trailer, "a liveness answer changes through a round trip")
        }
    }

    /// A long-lived endpoint machine the fuzzer's datagrams are delivered to.
    private static let endpoint = FuzzedEndpoint()
}

/// One endpoint machine, shared by fuzzing iterations (libFuzzer runs them on one thread).
private final class FuzzedEndpoint: @unchecked Sendable {
    private var machine: EndpointMachine
    private let source = try! SocketAddress(ipAddress: "10.0.0.2", port: 4000)
    private var now = NIODeadline.uptimeNanoseconds(1_000_000_000)

    init() {
        var configuration = TransportConfiguration()
        configuration.cookieThreshold = 4
        self.machine = try! EndpointMachine(configuration: configuration, now: self.now)
        _ = try? self.machine.connect(to: self.source, payload: ByteBuffer(), timeout: .seconds(3600), now: self.now)
    }

    func receive(_ datagram: ByteBuffer) {
        self.now = self.now + .milliseconds(1)
        self.machine.handleDatagram(datagram, from: self.source, now: self.now)
        while let event = self.machine.popEvent() {
            if case .connectionRequest(let request) = event {
                _ = try? self.machine.accept(request.id, payload: ByteBuffer(), now: self.now)
            }
        }
        var output = ByteBuffer()
        var budget = 64
        while budget > 0, self.machine.pollDatagram(now: self.now, into: &output) != nil {
            budget -= 1
            output.clear()
        }
        self.machine.handleTimeouts(now: self.now)
    }
}

/// The round-trip check of every fuzzing harness whose decoder has an encoder: bytes that decode
/// must encode to bytes that decode to an equal value, and encoding that value again must give the
/// same bytes (encoders are deterministic). `normalized` maps a decoded value to what its encoding
/// carries when the encoder legitimately rewrites it (sorts, drops what it regenerates). A failure
/// traps, so libFuzzer records the input as a crash.
@_spi(Fuzzing)
public enum FuzzingRoundTrip {
    /// Returns the decoded value, or nil when `bytes` do not decode (not a finding).
    @discardableResult
    public static func check<Bytes, Value: Equatable>(
        _ name: String, _ bytes: Bytes, decode: (Bytes) -> Value?, encode: (Value) -> Bytes,
        normalized: (Value) -> Value = { $0 }
    ) -> Value? where Bytes: Equatable {
        guard let value = decode(bytes) else { return nil }
        let encoded = encode(value)
        guard let again = decode(encoded) else {
            fatalError("\(name): a decoded value encodes to bytes that do not decode: \(value)")
        }
        Self.require(again == normalized(value), "\(name): a decoded value changes through a round trip:\n  \(value)\n  \(again)")
        Self.require(encode(again) == encoded, "\(name): encoding a round-tripped value gives other bytes: \(value)")
        return value
    }

    /// Traps with `message` unless `condition` holds: a finding. (Unlike `precondition`, the
    /// message survives an optimised build, so libFuzzer's report says what failed.)
    public static func require(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { fatalError(message()) }
    }
}

/// One step of a fuzzing input that holds a sequence: a control byte (what the entry point does
/// around it, see each entry point) and the bytes that arrive.
@_spi(Fuzzing)
public struct FuzzingRecord: Sendable {
    public var control: UInt8
    public var bytes: [UInt8]

    public init(control: UInt8, bytes: [UInt8]) {
        self.control = control
        self.bytes = bytes
    }
}
