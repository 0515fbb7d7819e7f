import Crypto
import NIOCore

/// Stateless proof that an initiator can receive at the address it claims.
///
/// Under load the responder answers an initiation with a cookie instead of keeping any state: a
/// MAC of the source address under a secret that rotates every two minutes. The initiator repeats
/// its initiation with `mac2`, a MAC of the initiation under that cookie; the responder recomputes
/// the cookie from the source address and checks it. Spoofed sources never see their cookie, so
/// they never get past this point and cost the responder nothing but the reply.
struct CookieGenerator {
    static let rotationInterval = TimeAmount.seconds(120)

    private var current: SymmetricKey
    private var previous: SymmetricKey
    private var rotatedAt: NIODeadline

    init(now: NIODeadline) {
        self.current = SymmetricKey(size: .bits256)
        self.previous = SymmetricKey(size: .bits256)
        self.rotatedAt = now
    }

    mutating func rotateIfNeeded(now: NIODeadline) {
        guard now - self.rotatedAt >= Self.rotationInterval else { return }
        self.previous = self.current
        self.current = SymmetricKey(size: .bits256)
        self.rotatedAt = now
    }

    var nextRotation: NIODeadline { self.rotatedAt + Self.rotationInterval }

    /// The current cookie for `address`.
    func cookie(for address: SocketAddress) -> [UInt8] {
        Self.cookie(secret: self.current, address: address)
    }

    /// Whether `cookie` is the current or the previous cookie of `address`.
    func matches(_ cookie: [UInt8], address: SocketAddress) -> Bool {
        [self.current, self.previous].contains { secret in
            KeySchedule.constantTimeEqual(ByteBuffer(bytes: Self.cookie(secret: secret, address: address)), cookie)
        }
    }

    /// Whether `mac2` is a MAC of `message` under the current or previous cookie of `address`.
    func isValid(mac2: ByteBuffer, message: ByteBuffer, from address: SocketAddress) -> Bool {
        for secret in [self.current, self.previous] {
            let cookie = SymmetricKey(data: Self.cookie(secret: secret, address: address))
            if KeySchedule.constantTimeEqual(mac2, KeySchedule.truncatedMAC(key: cookie, over: message)) {
                return true
            }
        }
        return false
    }

    private static func cookie(secret: SymmetricKey, address: SocketAddress) -> [UInt8] {
        var bytes = ByteBuffer()
        address.writeIdentity(into: &bytes)
        return KeySchedule.truncatedMAC(key: secret, over: bytes)
    }
}

extension SocketAddress {
    /// The address and port bytes that identify a UDP source, for MACs over it.
    func writeIdentity(into buffer: inout ByteBuffer) {
        switch self {
        case .v4(let address):
            var sin = address.address
            _ = withUnsafeBytes(of: &sin.sin_addr) { buffer.writeBytes($0) }
            buffer.writeInteger(UInt16(bigEndian: sin.sin_port))
        case .v6(let address):
            var sin6 = address.address
            _ = withUnsafeBytes(of: &sin6.sin6_addr) { buffer.writeBytes($0) }
            buffer.writeInteger(UInt16(bigEndian: sin6.sin6_port))
        case .unixDomainSocket(let address):
            _ = withUnsafeBytes(of: address.address) { buffer.writeBytes($0) }
        }
    }
}
