import NIOCore
import Testing

@testable import GameKitTransport

@Suite("Wire formats")
struct WireTests {
    // MARK: - Variable-length integers

    @Test(arguments: [(UInt64(0), 1), (63, 1), (64, 2), (16383, 2), (16384, 4), (1_073_741_823, 4), (1_073_741_824, 8), (VarInt.maximum, 8)])
    func varIntsRoundTripWithTheirQUICLength(value: UInt64, length: Int) {
        var buffer = ByteBuffer()
        #expect(buffer.writeVarInt(value) == length)
        #expect(VarInt.encodedLength(value) == length)
        // The raw-memory encoder writes the same bytes.
        var raw = [UInt8](repeating: 0xEE, count: 9)
        let written = raw.withUnsafeMutableBytes { VarInt.encode(value, into: $0) }
        #expect(written == length)
        #expect(Array(raw.prefix(length)) == Array(buffer.readableBytesView))
        #expect(raw[length] == 0xEE)
        #expect(buffer.readVarInt() == value)
        #expect(buffer.readableBytes == 0)
    }

    @Test func varIntsMatchRFC9000Examples() {
        // RFC 9000 §A.1 sample encodings.
        var buffer = ByteBuffer(bytes: [0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c, 0x9d, 0x7f, 0x3e, 0x7d, 0x7b, 0xbd, 0x25])
        #expect(buffer.readVarInt() == 151_288_809_941_952_652)
        #expect(buffer.readVarInt() == 494_878_333)
        #expect(buffer.readVarInt() == 15_293)
        #expect(buffer.readVarInt() == 37)
    }

    @Test func truncatedVarIntConsumesNothing() {
        var buffer = ByteBuffer(bytes: [0x80, 0x01])
        #expect(buffer.readVarInt() == nil)
        #expect(buffer.readableBytes == 2)
    }

    // MARK: - Frames

    static func frames(_ buffer: ByteBuffer) throws(FrameDecodingError) -> [Frame] {
        var reader = FrameReader(buffer)
        var frames: [Frame] = []
        while let frame = try reader.next() { frames.append(frame) }
        return frames
    }

    @Test func everyFrameTypeRoundTrips() throws {
        var buffer = ByteBuffer()
        FrameWriter.writePing(into: &buffer)
        buffer.writeRepeatingByte(0, count: 3)  // padding is skipped
        FrameWriter.writeReliableHeader(offset: 70_000, length: 5, into: &buffer)
        buffer.writeString("hello")
        FrameWriter.writeUnreliable(ByteBuffer(string: "blip"), into: &buffer)
        FrameWriter.writeFragment(messageID: 9, totalLength: 100, offset: 40, data: ByteBuffer(string: "part"), into: &buffer)
        FrameWriter.writeWindow(maxOffset: 1 << 33, into: &buffer)
        FrameWriter.writeClose(code: 0xBEEF, into: &buffer)
        #expect(try Self.frames(buffer) == [
            .ping,
            .reliable(offset: 70_000, data: ByteBuffer(string: "hello")),
            .unreliable(ByteBuffer(string: "blip")),
            .unreliableFragment(UnreliableFragment(messageID: 9, totalLength: 100, offset: 40, data: ByteBuffer(string: "part"))),
            .window(maxOffset: 1 << 33),
            .close(code: 0xBEEF),
        ])
    }

    @Test func ackFramesCarryTheHighestRangesThatFit() throws {
        var received = IntervalSet()
        for start in stride(from: UInt64(0), to: 400, by: 10) { received.insert(start..<(start + 5)) }
        var buffer = ByteBuffer()
        #expect(FrameWriter.writeAck(received: received, ackDelayMicroseconds: 1234, maximumRanges: 32, space: 1000, into: &buffer))
        guard case .ack(let ack) = try Self.frames(buffer).first else {
            Issue.record("no ack frame")
            return
        }
        #expect(ack.largest == 394)
        #expect(ack.ackDelayMicroseconds == 1234)
        #expect(ack.ranges.count == 32)
        #expect(ack.ranges.first == 390...394)
        #expect(ack.ranges.last == 80...84)
        // In a small space, fewer ranges.
        var small = ByteBuffer()
        #expect(FrameWriter.writeAck(received: received, ackDelayMicroseconds: 0, maximumRanges: 32, space: 12, into: &small))
        #expect(small.readableBytes <= 12)
        guard case .ack(let smaller) = try Self.frames(small).first else {
            Issue.record("no ack frame")
            return
        }
        #expect(smaller.ranges.first == 390...394)
        #expect(smaller.ranges.count < 32)
        // Nothing to acknowledge: nothing written.
        var none = ByteBuffer()
        #expect(!FrameWriter.writeAck(received: IntervalSet(), ackDelayMicroseconds: 0, maximumRanges: 32, space: 100, into: &none))
        #expect(none.readableBytes == 0)
    }

    @Test(arguments: [
        ([UInt8]([0x08]), FrameDecodingError.unknownFrameType(8)),
        ([0x03, 0x05], .truncated),  // reliable frame without length
        ([0x03, 0x00, 0x05, 0x41], .truncated),  // reliable frame shorter than its length
        ([0x04, 0x3F], .truncated),  // unreliable frame shorter than its length
        ([0x02, 0x05, 0x00, 0x00, 0x06], .invalidAckRanges),  // first range larger than largest
        ([0x02, 0x05, 0x00, 0x01, 0x01, 0x03, 0x00], .invalidAckRanges),  // gap below zero
        ([0x02, 0x05, 0x00, 0x3F, 0x00], .invalidAckRanges),  // more ranges than bytes
        ([0x05, 0x01, 0x04, 0x03, 0x02, 0x41, 0x42], .valueOutOfRange),  // fragment past the total
        ([0x05, 0x01, 0x04, 0x00, 0x00], .valueOutOfRange),  // empty fragment
        ([0x07, 0x01], .truncated),  // close without full code
    ])
    func malformedFramesAreRejectedWithTheirReason(bytes: [UInt8], error: FrameDecodingError) {
        #expect(throws: error) { try Self.frames(ByteBuffer(bytes: bytes)) }
    }

    // MARK: - Packets

    @Test func dataPacketHeaderRoundTripsAndRejectsShortOrForeignDatagrams() {
        var buffer = ByteBuffer()
        DataPacketHeader(receiverIndex: 0xCAFE_BABE, packetNumber: 1 << 40).encode(into: &buffer)
        #expect(buffer.readableBytes == 16)
        buffer.writeRepeatingByte(0, count: 17)
        #expect(DataPacketHeader.decode(buffer) == DataPacketHeader(receiverIndex: 0xCAFE_BABE, packetNumber: 1 << 40))
        #expect(DataPacketHeader.decode(buffer.getSlice(at: 0, length: 32)!) == nil)
        buffer.setInteger(PacketType.initiation.rawValue, at: 0)
        #expect(DataPacketHeader.decode(buffer) == nil)
    }

    @Test func handshakeMessagesRoundTripAndRejectWrongSizes() {
        let key = ByteBuffer(repeating: 7, count: 32)
        let echo = ByteBuffer(repeating: 4, count: 16)
        let initiation = InitiationMessage(version: 2, senderIndex: 42, share: key, mac2: ByteBuffer(repeating: 2, count: 16))
        var bytes = ByteBuffer()
        initiation.encodeWithoutMAC(into: &bytes)
        #expect(bytes.readableBytes == InitiationMessage.headerSize)
        bytes.writeImmutableBuffer(initiation.mac2)
        #expect(InitiationMessage.decode(bytes) == initiation)
        #expect(HandshakeKind.of(bytes) == .share)
        #expect(InitiationMessage.decode(bytes.getSlice(at: 0, length: InitiationMessage.size - 1)!) == nil)
        var longer = bytes
        longer.writeInteger(UInt8(0))
        #expect(InitiationMessage.decode(longer) == nil)

        let challenge = ChallengeMessage(version: 2, receiverIndex: 42, echo: echo, share: key, tag: ByteBuffer(repeating: 3, count: 16))
        var challengeBytes = ByteBuffer()
        challenge.encodeHeader(into: &challengeBytes)
        #expect(challengeBytes.readableBytes == ChallengeMessage.headerSize)
        challengeBytes.writeImmutableBuffer(challenge.tag)
        #expect(ChallengeMessage.decode(challengeBytes) == challenge)
        #expect(ChallengeMessage.size <= InitiationMessage.size)
        #expect(ChallengeMessage.decode(challengeBytes.getSlice(at: 0, length: ChallengeMessage.size - 1)!) == nil)
        // The two kinds of one type are not confused.
        #expect(ResponseMessage.decode(challengeBytes) == nil)
        #expect(RequestMessage.decode(bytes) == nil)

        let request = RequestMessage(version: 2, senderIndex: 42, sealed: ByteBuffer(repeating: 5, count: 40))
        var requestBytes = ByteBuffer()
        request.encodeHeader(into: &requestBytes)
        requestBytes.writeImmutableBuffer(request.sealed)
        #expect(RequestMessage.decode(requestBytes) == request)
        #expect(HandshakeKind.of(requestBytes) == .sealed)
        #expect(request.tag == ByteBuffer(repeating: 5, count: 16))
        #expect(RequestMessage.decode(requestBytes.getSlice(at: 0, length: RequestMessage.minimumSize - 1)!) == nil)
        #expect(InitiationMessage.decode(requestBytes) == nil)

        let response = ResponseMessage(version: 2, senderIndex: 1, receiverIndex: 42, sealed: ByteBuffer(repeating: 3, count: 36))
        var responseBytes = ByteBuffer()
        response.encode(into: &responseBytes)
        #expect(ResponseMessage.decode(responseBytes) == response)
        #expect(ResponseMessage.decode(responseBytes.getSlice(at: 0, length: ResponseMessage.minimumSize - 1)!) == nil)
        #expect(ChallengeMessage.decode(responseBytes) == nil)
        // A kind byte that names neither.
        responseBytes.setInteger(UInt8(9), at: 2)
        #expect(HandshakeKind.of(responseBytes) == nil)

        let reject = RejectMessage(version: 1, reason: .denied, receiverIndex: 42, code: 99, echo: ByteBuffer(repeating: 4, count: 16))
        var rejectBytes = ByteBuffer()
        reject.encode(into: &rejectBytes)
        #expect(rejectBytes.readableBytes == RejectMessage.size)
        #expect(RejectMessage.decode(rejectBytes) == reject)
        rejectBytes.writeInteger(UInt8(0))  // one byte too many
        #expect(RejectMessage.decode(rejectBytes) == nil)

        let cookie = CookieMessage(version: 1, receiverIndex: 42, echo: ByteBuffer(repeating: 4, count: 16), cookie: ByteBuffer(repeating: 5, count: 16))
        var cookieBytes = ByteBuffer()
        cookie.encode(into: &cookieBytes)
        #expect(cookieBytes.readableBytes == CookieMessage.size)
        #expect(CookieMessage.decode(cookieBytes) == cookie)
        cookieBytes.writeInteger(UInt8(0))
        #expect(CookieMessage.decode(cookieBytes) == nil)
        let cancel = CancelMessage(version: 1, reason: 1, senderIndex: 42, echo: ByteBuffer(repeating: 4, count: 16), mac: ByteBuffer(repeating: 6, count: 16))
        var cancelBytes = ByteBuffer()
        cancel.encodeWithoutMAC(into: &cancelBytes)
        #expect(cancelBytes.readableBytes == CancelMessage.authenticatedSize)
        cancelBytes.writeImmutableBuffer(cancel.mac)
        #expect(CancelMessage.decode(cancelBytes) == cancel)
        // A cancel-sized datagram of another type, and a cancel of the wrong size.
        #expect(CancelMessage.decode(ByteBuffer(repeating: 9, count: CancelMessage.size)) == nil)
        #expect(CancelMessage.decode(ByteBuffer(repeating: 8, count: CancelMessage.size)) != nil)
        #expect(CancelMessage.decode(ByteBuffer(repeating: 8, count: CancelMessage.size + 1)) == nil)
    }

    @Test func transportParametersRoundTripAndRejectUnusableValues() {
        let parameters = TransportConfiguration().localParameters
        var buffer = ByteBuffer()
        parameters.encode(into: &buffer)
        #expect(buffer.readableBytes == TransportParameters.encodedSize)
        #expect(TransportParameters.decode(from: &buffer) == parameters)
        var tiny = parameters
        tiny.maxDatagramSize = 500
        var tinyBuffer = ByteBuffer()
        tiny.encode(into: &tinyBuffer)
        #expect(TransportParameters.decode(from: &tinyBuffer) == nil)
        var narrow = parameters
        narrow.receiveWindow = narrow.maxReliableMessageSize
        var narrowBuffer = ByteBuffer()
        narrow.encode(into: &narrowBuffer)
        #expect(TransportParameters.decode(from: &narrowBuffer) == nil)
    }

    @Test func invalidConfigurationsAreRefusedWithTheirReason() {
        var configuration = TransportConfiguration()
        configuration.maxDatagramSize = 1000
        #expect(throws: TransportError.invalidConfiguration("maxDatagramSize must be 1200...65507")) {
            try EndpointMachine(configuration: configuration, now: .now())
        }
        configuration = TransportConfiguration()
        configuration.disconnectTimeout = .zero
        #expect(throws: TransportError.invalidConfiguration("disconnectTimeout must be positive")) {
            try EndpointMachine(configuration: configuration, now: .now())
        }
    }
}
