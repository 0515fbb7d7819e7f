@_spi(Machine) import GameKitMachine
import NIOCore

/// The two ends of a plain STUN binding (RFC 8489 §3), for machines outside this module that
/// share a socket with STUN: the rendezvous answers binding requests, and a session learns its
/// server-reflexive address from it.
package enum STUNBinding {
    /// The success answer to a binding request (with XOR-MAPPED-ADDRESS of `source` and a
    /// FINGERPRINT), or nil when `datagram` is not a well-formed binding request.
    package static func answer(to datagram: ByteBuffer, from source: SocketAddress) -> ByteBuffer? {
        guard let decoded = try? STUNMessage.decode(Array(datagram.readableBytesView)),
            decoded.message.method == .binding, decoded.message.messageClass == .request,
            let mapped = TraversalAddress(source)
        else { return nil }
        let answer = STUNMessage(
            .binding, .success, transactionID: decoded.message.transactionID,
            attributes: [
                .xorAddress(.xorMappedAddress, mapped, transactionID: decoded.message.transactionID),
                .text(.software, TraversalSoftware.name),
            ])
        return ByteBuffer(bytes: answer.encoded(fingerprint: true))
    }

    /// A binding request with a fresh transaction ID: its bytes and the ID to match the answer.
    package static func request(random: inout MachineRandom) -> (datagram: ByteBuffer, transactionID: [UInt8]) {
        let id = STUNMessage.randomTransactionID(using: &random)
        let request = STUNMessage(.binding, .request, transactionID: id, attributes: [.text(.software, TraversalSoftware.name)])
        return (ByteBuffer(bytes: request.encoded(fingerprint: true)), id)
    }

    /// A binding indication (no answer expected): an online session sends one through its
    /// relay to a member to say "check a direct path to me now".
    package static func indication(random: inout MachineRandom) -> ByteBuffer {
        let message = STUNMessage(.binding, .indication, transactionID: STUNMessage.randomTransactionID(using: &random))
        return ByteBuffer(bytes: message.encoded(fingerprint: true))
    }

    /// The mapped address in a success answer to the request `transactionID`, or nil.
    package static func mappedAddress(in datagram: ByteBuffer, transactionID: [UInt8]) -> SocketAddress? {
        guard let decoded = try? STUNMessage.decode(Array(datagram.readableBytesView)),
            decoded.message.method == .binding, decoded.message.messageClass == .success,
            decoded.message.transactionID == transactionID
        else { return nil }
        return decoded.message.xorAddress(.xorMappedAddress)?.socketAddress
    }
}
