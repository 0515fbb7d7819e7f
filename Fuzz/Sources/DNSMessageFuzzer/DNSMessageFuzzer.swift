// libFuzzer harness for GameKitDiscovery's DNS message codec.
//
// Every input is one received mDNS datagram, passed whole to `DNSMessage(decoding:)`. An input
// that decodes must survive a round trip: encoding it and decoding that again gives an equal
// message, and encoding the result gives the same bytes again (compression is deterministic).
// Either failing traps, so libFuzzer records the input as a crash. Rejections are the decoder's
// job and are not findings; traps, AddressSanitizer reports, timeouts and excessive memory are.
import FuzzingSupport
import GameKitDiscovery
import NIOCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let buffer = ByteBuffer(bytes: UnsafeBufferPointer(start: data, count: size))
    guard let message = try? DNSMessage(decoding: buffer) else { return 0 }
    let encoded = message.encoded()
    let again: DNSMessage
    do {
        again = try DNSMessage(decoding: encoded)
    } catch {
        fatalError("a decoded message re-encodes to bytes that do not decode (\(error)): \(message)")
    }
    guard again == message else {
        fatalError("a decoded message changes through a round trip:\n  \(message)\n  \(again)")
    }
    guard again.encoded() == encoded else {
        fatalError("encoding a round-tripped message gives different bytes: \(message)")
    }
    return 0
}

/// The process entry point: hands the command line to libFuzzer's driver (FuzzingSupport).
@main
enum DNSMessageFuzzer {
    static func main() { runLibFuzzer { data, size in fuzz(data, size) } }
}
