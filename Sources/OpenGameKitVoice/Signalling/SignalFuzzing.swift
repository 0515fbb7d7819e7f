@_spi(Fuzzing) import GameKitMachine
@_spi(Fuzzing) import GameKitTransport
@_spi(Fuzzing) import GameKitTraversal
import NIOCore

/// Entry point for fuzzing voice chat's call signalling: the `SignalMessage` codec and the call
/// state machine that acts on what it decodes, and group voice's channel messages. The harness is Fuzz/Sources/VoiceSignalFuzzer.
@_spi(Fuzzing)
public enum SignalFuzzingEntryPoints {
    /// Decodes `bytes` as one signalling message; one that decodes must survive a round trip
    /// (the encoder sends candidates best first, so they compare in that order).
    /// The same bytes are also decoded as a group voice channel message (``GroupVoiceMessage``),
    /// which must survive a round trip too.
    public static func decode(_ bytes: [UInt8]) {
        FuzzingRoundTrip.check("GroupVoiceMessage", bytes, decode: { try? GroupVoiceMessage.decode($0) }, encode: { $0.encoded() })
        FuzzingRoundTrip.check(
            "SignalMessage", bytes, decode: { try? SignalMessage.decode($0) }, encode: { $0.encoded() },
            normalized: { message in
                var message = message
                message.candidates = message.candidates.sorted { $0.priority > $1.priority }
                return message
            })
    }

    /// Delivers `blobs`, in order, to a fresh call machine, with the local calls their control
    /// bytes ask for. Each blob is also passed to ``decode(_:)``, and every message the machine
    /// sends must decode to itself. A blob's control byte says, bit by bit:
    /// - bit 0: which participant sends it ("alice" or "bob");
    /// - bits 1–3: what this side does first: nothing, start a chat with the sender, accept the
    ///   call, deny it, stop it, report its candidates and key share gathered, report the media
    ///   path connected, or report the path failed and no client channel;
    /// - bits 4–6: how far the clock moves first (1 ms to 60 s, then the machine's timers run);
    /// - bit 7: replace bytes 4..<8 (the call ID) with the current call's.
    public static func receive(_ blobs: [FuzzingRecord]) {
        var machine = VoiceCallMachine()
        var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        let candidates = [
            ICECandidate(kind: .host, address: TraversalAddress(bytes: [10, 0, 0, 1], port: 5000)!),
            ICECandidate(kind: .relayed, address: TraversalAddress(bytes: Array(repeating: 0x20, count: 16), port: 5001)!),
        ]
        let advances: [Int64] = [1, 10, 100, 1000, 2500, 5000, 30_000, 60_000]
        for blob in blobs {
            let participant = blob.control & 1 == 0 ? "alice" : "bob"
            let callID = machine.call?.callID ?? 0x0102_0304
            now = now + .milliseconds(advances[Int(blob.control >> 4 & 7)])
            var actions = machine.handleTimeout(now: now)
            switch blob.control >> 1 & 7 {
            case 1: actions += (try? machine.start(participant, callID: 0x0102_0304, now: now)) ?? []
            case 2: actions += (try? machine.accept(callID, now: now)) ?? []
            case 3: actions += machine.deny(callID)
            case 4: actions += machine.stop(participant)
            case 5: actions += machine.gathered(candidates: candidates, keyShare: Array(repeating: 9, count: 32), now: now)
            case 6: actions += machine.connected(.direct, now: now) + machine.audioReady()
            case 7: actions += machine.pathFailed(now: now) + machine.clientPath(available: false, now: now)
            default: break
            }
            var bytes = blob.bytes
            if blob.control & 0x80 != 0, bytes.count >= SignalMessage.headerSize {
                bytes.replaceSubrange(4..<8, with: callID.bigEndianBytes)
            }
            Self.decode(bytes)
            actions += machine.receive(bytes, from: participant, localParticipant: "carol", callID: 0x0A0B_0C0D, now: now)
            for case .send(let message, _) in actions {
                let encoded = message.encoded()
                FuzzingRoundTrip.require((try? SignalMessage.decode(encoded))?.encoded() == encoded, "the call machine sends a message that does not decode: \(message)")
            }
        }
    }
}
