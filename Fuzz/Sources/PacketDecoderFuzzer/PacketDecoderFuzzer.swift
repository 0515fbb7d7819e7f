// libFuzzer harness for GameKitTransport's packet decoding.
//
// The first input byte selects what the rest is; it is not part of any packet:
//   xxxxxxx1 → FuzzingEntryPoints.readFrames(rest): the plaintext of a data packet (a frame
//              sequence), which mutated datagrams never reach through `receive` because the
//              fuzzer cannot forge their AEAD tag.
//   xxxxxx00 → FuzzingEntryPoints.receive(rest): one received datagram, run through every
//              handshake decoder, the data header, the frame reader and a long-lived endpoint
//              state machine (initiator with a handshake in progress, and responder that accepts
//              every authenticated request).
//   xxxxxx10 → several datagrams, each behind a 2-byte big-endian length (the last one may be
//              cut short), each passed to `receive` in order. One input can then build the state
//              a later datagram depends on (an initiation, then its cancel or a repeat), so such
//              paths are found and reproduce from that input alone.
// Routing on the low bits keeps each input meaningful to one decoder (coverage found in one path
// is not paid for by running the other) and lets the seed corpus aim at each.
import FuzzingSupport
@_spi(Fuzzing) import GameKitTransport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let rest = UnsafeRawBufferPointer(start: data + 1, count: size - 1)
    switch data[0] & 3 {
    case 1, 3:
        FuzzingEntryPoints.readFrames(rest)
    case 0:
        FuzzingEntryPoints.receive(rest)
    default:
        var start = 0
        while rest.count - start >= 2 {
            let length = Int(rest[start]) << 8 | Int(rest[start + 1])
            let end = min(start + 2 + length, rest.count)
            FuzzingEntryPoints.receive(UnsafeRawBufferPointer(rebasing: rest[(start + 2)..<end]))
            start = end
        }
    }
    return 0
}

/// The process entry point: hands the command line to libFuzzer's driver (see FuzzingSupport for
/// why a Swift executable cannot use libFuzzer's own main()).
@main
enum PacketDecoderFuzzer {
    static func main() { runLibFuzzer { data, size in fuzz(data, size) } }
}
