// libFuzzer harness for voice chat's call signalling (OpenGameKitVoice): the blobs a
// GKVoiceChatService receives through its client's `receivedData`.
//
// The first input byte selects what the rest is (`runSelected`); it is not part of any message:
//   xxxxxxx0 → one signalling message, passed to `SignalMessage.decode`; one that decodes must
//              survive a round trip (equal message, same bytes again), or the harness traps.
//   xxxxxxx1 → records of a control byte, a 2-byte big-endian length and a blob, delivered in
//              order to a fresh call state machine, each after the local call its control byte
//              asks for (start, accept, deny, stop, candidates gathered, path connected or failed)
//              and a clock step (see `SignalFuzzingEntryPoints.receive`). Every blob is also round
//              tripped, and every message the machine sends must decode to itself.
@_spi(Fuzzing) import FuzzingSupport
@_spi(Fuzzing) import OpenGameKitVoice

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    runSelected(data, size, one: SignalFuzzingEntryPoints.decode) { _, blobs in SignalFuzzingEntryPoints.receive(blobs) }
    return 0
}

@main
enum VoiceSignalFuzzer {
    static func main() { runLibFuzzer { data, size in fuzz(data, size) } }
}
