// libFuzzer harness for NAT traversal's network input (GameKitTraversal): STUN, TURN and ICE
// messages and the real-time connection's socket.
//
// The first input byte selects what the rest is (`runSelected`); it is not part of any datagram:
//   xxxxxxx0 → one datagram, passed to the STUN decoder. One that decodes must survive a round
//              trip (MESSAGE-INTEGRITY and FINGERPRINT aside, which the encoder regenerates),
//              every typed attribute reader must cope with it, and signing it again must give a
//              message whose integrity and fingerprint check; otherwise the harness traps.
//   xxxxxx01 → records of a control byte, a 2-byte big-endian length and a datagram, delivered in
//   xxxxxx11   order to a fresh real-time machine (bit 1: this side initiated the call) with a
//              STUN server, a TURN server and ICE checks running, as its socket would: STUN
//              binding responses, TURN answers and Data indications, ICE checks and responses,
//              media. The control byte picks the source, can give a response the transaction ID
//              of the machine's last request to it, can sign a message with the key its receiver
//              checks (or seal media) so mutations get past authentication, and moves the clock
//              (see `TraversalFuzzingEntryPoints.receive`). Every datagram is also decoded as above.
@_spi(Fuzzing) import FuzzingSupport
@_spi(Fuzzing) import GameKitTraversal

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    runSelected(data, size, one: TraversalFuzzingEntryPoints.decode) { selector, datagrams in
        TraversalFuzzingEntryPoints.receive(initiator: selector & 2 != 0, datagrams)
    }
    return 0
}

@main
enum TraversalFuzzer {
    static func main() { runLibFuzzer { data, size in fuzz(data, size) } }
}
