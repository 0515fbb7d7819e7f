import Crypto
import NIOCore
@_spi(Fuzzing) import GameKitMachine

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
        _ = HandshakeKind.of(datagram)
        _ = ChallengeMessage.decode(datagram)
        _ = RequestMessage.decode(datagram)
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
        self.machine.handle(datagram: datagram, from: self.source, now: self.now)
        while let event = self.machine.pollEvent() {
            if case .connectionRequest(let request) = event {
                _ = try? self.machine.accept(request.id, payload: ByteBuffer(), now: self.now)
            }
        }
        var output = ByteBuffer()
        var budget = 64
        while budget > 0, self.machine.pollTransmit(now: self.now, into: &output) != nil {
            budget -= 1
            output.clear()
        }
        self.machine.handleTimeout(now: self.now)
    }
}
