// libFuzzer harness for the online layer's network input (GameKitOnline): the rendezvous's and
// relay's messages and the machines that read them.
//
// The first input byte selects what the rest is (`runSelected`); it is not part of any datagram:
//   xxxxxxx0 → one datagram, decoded as a rendezvous message, a relay message and a room code;
//              whatever decodes must survive a round trip.
//   xxxxxx01 → records of a control byte, a 2-byte big-endian length and a datagram, delivered in
//              order to a fresh rendezvous with relay from one of four sources; it must never
//              answer a source with more bytes than it sent (STUN aside).
//   xxxxxx11 → the same records delivered to a fresh room client (with direct paths) from its
//              rendezvous or a stranger.
@_spi(Fuzzing) import FuzzingSupport
@_spi(Fuzzing) import GameKitOnline

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    runSelected(data, size, one: OnlineFuzzingEntryPoints.decode) { selector, records in
        if selector & 2 == 0 {
            OnlineFuzzingEntryPoints.serve(records)
        } else {
            OnlineFuzzingEntryPoints.client(records)
        }
    }
    return 0
}

@main
enum OnlineFuzzer {
    static func main() { runLibFuzzer { data, size in fuzz(data, size) } }
}
