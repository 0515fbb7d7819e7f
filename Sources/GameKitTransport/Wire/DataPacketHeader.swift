import NIOCore

/// The 16 cleartext bytes in front of every data packet: type, three reserved bytes, the
/// receiver's link index and the packet number.
///
/// The whole header is the additional authenticated data of the packet's AEAD, so none of it can
/// be altered; its last 12 bytes (receiver index and packet number) are the AEAD nonce, unique
/// because packet numbers are never reused within a direction.
struct DataPacketHeader: Equatable {
    static let size = WireSize.dataHeader

    var receiverIndex: UInt32
    var packetNumber: UInt64

    func encode(into buffer: inout ByteBuffer) {
        // One write of 16 bytes: this runs for every packet.
        let first = UInt64(PacketType.data.rawValue) << 56 | UInt64(self.receiverIndex)
        var bytes = (first.bigEndian, self.packetNumber.bigEndian)
        withUnsafeBytes(of: &bytes) { _ = buffer.writeBytes($0) }
    }

    /// Reads the header from the front of a datagram, or nil when it is not a data packet large
    /// enough to hold a header, a tag and at least one byte.
    static func decode(_ datagram: ByteBuffer) -> DataPacketHeader? {
        guard
            datagram.readableBytes > size + WireSize.tag,
            datagram.getInteger(at: datagram.readerIndex, as: UInt8.self) == PacketType.data.rawValue,
            let receiver = datagram.getInteger(at: datagram.readerIndex + 4, as: UInt32.self),
            let number = datagram.getInteger(at: datagram.readerIndex + 8, as: UInt64.self)
        else { return nil }
        return DataPacketHeader(receiverIndex: receiver, packetNumber: number)
    }
}
