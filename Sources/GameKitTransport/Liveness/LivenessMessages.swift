import Crypto
import NIOCore

/// The three liveness messages (PROTOCOL §3.9): a probe to an endpoint's static liveness key, the
/// authenticated reply, and the cookie a busy responder answers an unknown key with.
///
/// A probe names the prober's static public key and a random nonce, and is MACed with the key the
/// two endpoints share (``KeySchedule/livenessKey(sharedSecret:psk:publicKeys:)``); only the
/// holder of the probed key (and of the password, if any) can compute the reply's MAC, which
/// covers the nonce. No reply is larger than what it answers.
enum LivenessMessage {
    static let version: UInt8 = 1
    /// type, version, reserved (2), prober key (32), nonce (8), MAC (16).
    static let probeSize = 60
    /// A probe that repeats a cookie: the cookie (16) before the MAC.
    static let probeWithCookieSize = 76
    /// type, version, reserved (2), nonce (8), MAC or cookie (16).
    static let replySize = 28

    struct Probe: Equatable {
        var proberKey: [UInt8]
        var nonce: UInt64
        var cookie: [UInt8]?
    }

    /// A probe, MACed with `key`.
    static func probe(_ probe: Probe, key: SymmetricKey) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(probe.cookie == nil ? Self.probeSize : Self.probeWithCookieSize)
        buffer.writeInteger(PacketType.probe.rawValue)
        buffer.writeInteger(Self.version)
        buffer.writeInteger(UInt16(0))
        buffer.writeBytes(probe.proberKey)
        buffer.writeInteger(probe.nonce)
        if let cookie = probe.cookie { buffer.writeBytes(cookie) }
        buffer.writeBytes(KeySchedule.truncatedMAC(key: key, over: buffer))
        return buffer
    }

    /// A probe's fields, and the bytes its MAC covers and the MAC, for the responder to check;
    /// nil when the size or version is wrong.
    static func decodeProbe(_ datagram: ByteBuffer) -> (probe: Probe, covered: ByteBuffer, mac: ByteBuffer)? {
        let size = datagram.readableBytes
        guard size == Self.probeSize || size == Self.probeWithCookieSize,
            datagram.getInteger(at: datagram.readerIndex + 1, as: UInt8.self) == Self.version,
            let key = datagram.getBytes(at: datagram.readerIndex + 4, length: WireSize.publicKey),
            let nonce = datagram.getInteger(at: datagram.readerIndex + 36, as: UInt64.self),
            let covered = datagram.getSlice(at: datagram.readerIndex, length: size - WireSize.mac),
            let mac = datagram.getSlice(at: datagram.readerIndex + size - WireSize.mac, length: WireSize.mac)
        else { return nil }
        let cookie = size == Self.probeWithCookieSize ? datagram.getBytes(at: datagram.readerIndex + 44, length: WireSize.cookie) : nil
        return (Probe(proberKey: key, nonce: nonce, cookie: cookie), covered, mac)
    }

    /// The reply to the probe with `nonce`, MACed with the pair's key.
    static func reply(nonce: UInt64, key: SymmetricKey) -> ByteBuffer {
        var buffer = Self.header(.probeReply, nonce: nonce)
        buffer.writeBytes(KeySchedule.truncatedMAC(key: key, over: buffer))
        return buffer
    }

    /// The cookie a busy responder sends instead of a reply.
    static func cookie(nonce: UInt64, cookie: [UInt8]) -> ByteBuffer {
        var buffer = Self.header(.probeCookie, nonce: nonce)
        buffer.writeBytes(cookie)
        return buffer
    }

    /// A reply's or cookie's nonce, the bytes its MAC covers, and the MAC or cookie; nil when
    /// the size or version is wrong.
    static func decodeAnswer(_ datagram: ByteBuffer) -> (nonce: UInt64, covered: ByteBuffer, trailer: ByteBuffer)? {
        guard datagram.readableBytes == Self.replySize,
            datagram.getInteger(at: datagram.readerIndex + 1, as: UInt8.self) == Self.version,
            let nonce = datagram.getInteger(at: datagram.readerIndex + 4, as: UInt64.self),
            let covered = datagram.getSlice(at: datagram.readerIndex, length: 12),
            let trailer = datagram.getSlice(at: datagram.readerIndex + 12, length: WireSize.mac)
        else { return nil }
        return (nonce, covered, trailer)
    }

    private static func header(_ type: PacketType, nonce: UInt64) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(Self.replySize)
        buffer.writeInteger(type.rawValue)
        buffer.writeInteger(Self.version)
        buffer.writeInteger(UInt16(0))
        buffer.writeInteger(nonce)
        return buffer
    }
}
