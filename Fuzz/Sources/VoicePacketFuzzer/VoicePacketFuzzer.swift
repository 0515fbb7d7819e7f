// libFuzzer harness for the voice engine's media packets (GameKitVoiceEngine): what arrives from
// the other side of a call once the media path has decrypted it.
//
// The first input byte selects what the rest is (`runSelected`); it is not part of any packet:
//   xxxxxxx0 → one packet, passed to `VoicePacket(decoding:)`. One that decodes must survive a
//              round trip (equal packet, same bytes again), or the harness traps.
//   xxxxxxx1 → records of a control byte, a 2-byte big-endian length and a packet, each decoded
//              as above; the audio ones go to a fresh `VoiceReceiver` (jitter buffer, Opus
//              decoding, in-band FEC recovery, concealment, time stretching), as a voice engine
//              hands them over. Control bits 0–3 move the arrival clock (0 to 150 ms in steps of
//              10), bits 4–6 say how many frames are played after the packet. The receiver's own
//              report must survive the round trip too.
@_spi(Fuzzing) import FuzzingSupport
import GameKitVoiceEngine
@_spi(Fuzzing) import GameKitMachine
@_spi(Fuzzing) import GameKitTransport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    runSelected(data, size, one: { roundTrip($0) }) { _, packets in play(packets) }
    return 0
}

/// Decodes each packet and hands the audio ones to a fresh receiver, playing frames between them.
func play(_ packets: [FuzzingRecord]) {
    guard let receiver = try? VoiceReceiver() else { fatalError("no Opus decoder") }
    var now: Int64 = 0
    for packet in packets {
        now += Int64(packet.control & 0x0F) * 10
        if case .audio(let sequence, let timestamp, let muted, let payload)? = roundTrip(packet.bytes) {
            receiver.receive(sequence: sequence, timestamp: timestamp, muted: muted, payload: payload, atMilliseconds: now)
        }
        for _ in 0..<(packet.control >> 4 & 7) { _ = receiver.pull() }
    }
    roundTrip(receiver.makeReport().encoded())
}

@discardableResult
func roundTrip(_ bytes: [UInt8]) -> VoicePacket? {
    FuzzingRoundTrip.check("VoicePacket", bytes, decode: { try? VoicePacket(decoding: $0) }, encode: { $0.encoded() })
}

@main
enum VoicePacketFuzzer {
    static func main() { runLibFuzzer { data, size in fuzz(data, size) } }
}
