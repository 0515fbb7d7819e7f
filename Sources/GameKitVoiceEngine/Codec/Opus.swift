import COpus

/// Opus encoder settings.
public struct OpusSettings: Sendable, Hashable {
    /// Target bit rate in bits per second (6,000–510,000) while no loss is expected. Default
    /// 32 kbit/s.
    public var bitrate: Int = 32_000
    /// Target bit rate while the encoder plans for loss (in-band FEC on and an expected loss above
    /// zero), so that the FEC copies' bits come on top of the primary frames rather than out of
    /// them (libopus otherwise takes them from the primary frame). Default 40 kbit/s: on the
    /// benchmark's speech at 5 % random loss, 3.77 PESQ-WB at 37 kbit/s against 3.50 at 31 with
    /// one rate, and 0.19–0.22 more at 10 and 20 % and in bursts; 48 kbit/s gave about 0.2 more
    /// again for 6 kbit/s more. Set it to `bitrate` to keep one rate.
    public var lossBitrate: Int = 40_000
    /// In-band forward error correction: each packet also carries a coarse copy of the previous
    /// frame, which the receiver decodes when that frame was lost. Default on.
    public var inBandFEC: Bool = true
    /// Discontinuous transmission: silence is sent as rare comfort-noise updates. Default off.
    public var dtx: Bool = false
    /// Encoder complexity, 0–10. Default 10: on the benchmark's speech at 32 kbit/s, 5 cost 0.2
    /// PESQ-WB points clean and 0.3–0.4 under 5–10 % loss (its FEC copies are coarser), for
    /// about half the encoder's CPU.
    public var complexity: Int = 10
    /// The loss the encoder expects before the first receiver report, in percent. FEC is only
    /// spent when this is above zero. Default 5.
    public var initialExpectedLossPercent: Int = 5
    /// The most loss the FEC is planned for, in percent, whatever the reports say. Default 5:
    /// libopus 1.3.1 gives its FEC copy more bits the more loss it is told, at the primary
    /// frame's expense; on the benchmark's speech, planning for 5 % scored best at 5, 10 and 20 %
    /// loss alike (planning for 15 % or more lost 0.3 PESQ-WB points at 5 %).
    public var maximumExpectedLossPercent: Int = 5
    /// How many receiver reports (one a second) the highest loss is held for. Default 10: a
    /// second without loss amid 5 % loss is common, and following it would switch the FEC off
    /// just before the next loss.
    public var lossHoldReports: Int = 10
    /// Copies of earlier frames against bursts of loss, sent while the receiver asks for them
    /// (``VoicePacket/redundantAudio(sequence:timestamp:muted:payload:earlier:)``). Default on.
    public var burstRedundancy: Bool = true
    /// The bit rate of those copies, coded by a second encoder, in bits per second. Default
    /// 16,000: two copies (the deepest cover) add about 28 kbit/s to the 31 of the frames
    /// themselves, only while the receiver reports bursts (12,000 scored 0.04–0.14 PESQ-WB
    /// lower under 10 % and 20 % loss and bursts).
    public var redundancyBitrate: Int = 16_000
    /// The most the stream may send on average, in bits per second, everything included: the
    /// frames with their FEC, the copies against bursts and the packets' headers. Under the cap
    /// the frames get what the headers and the copies leave, and the copies go before the frames
    /// would get less than ``minimumFrameBitrateUnderCap``. Default nil: no cap.
    public var maximumBitrate: Int?
    /// Under ``maximumBitrate``, the least the frames keep before copies against bursts are
    /// dropped.
    public static let minimumFrameBitrateUnderCap = 12_000

    /// The defaults.
    public init() {}

    /// The target bit rate when the encoder expects `loss` percent.
    func rate(expectingLoss loss: Int) -> Int {
        inBandFEC && loss > 0 ? lossBitrate : bitrate
    }

    func validate() throws(VoiceEngineError) {
        guard (6_000...510_000).contains(bitrate) else { throw .invalidConfiguration("bitrate \(bitrate)") }
        guard (6_000...510_000).contains(lossBitrate) else { throw .invalidConfiguration("loss bitrate \(lossBitrate)") }
        guard (0...10).contains(complexity) else { throw .invalidConfiguration("complexity \(complexity)") }
        guard (0...100).contains(initialExpectedLossPercent) else {
            throw .invalidConfiguration("expected loss \(initialExpectedLossPercent) %")
        }
        guard (0...100).contains(maximumExpectedLossPercent) else {
            throw .invalidConfiguration("maximum expected loss \(maximumExpectedLossPercent) %")
        }
        guard (1...600).contains(lossHoldReports) else { throw .invalidConfiguration("loss hold \(lossHoldReports) reports") }
        guard (6_000...510_000).contains(redundancyBitrate) else { throw .invalidConfiguration("redundancy bitrate \(redundancyBitrate)") }
        if let maximumBitrate, !(8_000...510_000).contains(maximumBitrate) {
            throw .invalidConfiguration("maximum bitrate \(maximumBitrate)")
        }
    }
}

/// The largest Opus packet.
let opusMaximumPacket = 1275

private func check(_ code: Int32) throws(VoiceEngineError) {
    if code < 0 { throw .opus(code: code, message: String(cString: opus_strerror(code))) }
}

/// A libopus encoder for mono 16 kHz voice (application VOIP, signal voice).
public final class OpusVoiceEncoder {
    private let state: OpaquePointer
    private var scratch = [UInt8](repeating: 0, count: opusMaximumPacket)
    private let settings: OpusSettings
    /// The samples per frame this encoder takes.
    public let samplesPerFrame: Int

    /// Creates an encoder with `settings` for frames of `format`.
    public init(format: VoiceFormat = .standard, settings: OpusSettings = OpusSettings()) throws(VoiceEngineError) {
        try settings.validate()
        var error: Int32 = 0
        guard let state = opus_encoder_create(Int32(VoiceFormat.sampleRate), 1, OPUS_APPLICATION_VOIP, &error),
            error == OPUS_OK
        else { throw .opus(code: error, message: String(cString: opus_strerror(error))) }
        self.state = state
        self.settings = settings
        samplesPerFrame = format.samplesPerFrame
        do {
            try check(ogk_opus_set_bitrate(state, Int32(settings.rate(expectingLoss: settings.initialExpectedLossPercent))))
            try check(ogk_opus_set_inband_fec(state, settings.inBandFEC ? 1 : 0))
            try check(ogk_opus_set_dtx(state, settings.dtx ? 1 : 0))
            try check(ogk_opus_set_complexity(state, Int32(settings.complexity)))
            try check(ogk_opus_set_signal_voice(state))
            try check(ogk_opus_set_packet_loss_perc(state, Int32(settings.initialExpectedLossPercent)))
        } catch {
            opus_encoder_destroy(state)
            throw error
        }
    }

    deinit { opus_encoder_destroy(state) }

    /// The loss the encoder plans its FEC for, in percent (0–100).
    public var expectedLossPercent: Int {
        get {
            var value: Int32 = 0
            _ = ogk_opus_get_packet_loss_perc(state, &value)
            return Int(value)
        }
        set {
            let loss = max(0, min(100, newValue))
            _ = ogk_opus_set_packet_loss_perc(state, Int32(loss))
            _ = ogk_opus_set_bitrate(state, Int32(self.rate(expectingLoss: loss)))
        }
    }

    /// A ceiling on the target bit rate, in bits per second (a sender under
    /// ``OpusSettings/maximumBitrate`` sets it); nil: none.
    public var bitrateLimit: Int? {
        didSet { _ = ogk_opus_set_bitrate(state, Int32(self.bitrate)) }
    }

    /// The target bit rate now, in bits per second: ``OpusSettings/lossBitrate`` while the FEC
    /// is planned for loss, else ``OpusSettings/bitrate``; at most ``bitrateLimit``.
    public var bitrate: Int { self.rate(expectingLoss: expectedLossPercent) }

    private func rate(expectingLoss loss: Int) -> Int {
        max(6_000, min(settings.rate(expectingLoss: loss), bitrateLimit ?? .max))
    }

    /// Encodes one frame. With DTX on, a frame of silence may come back as one or two bytes,
    /// which need not be sent.
    public func encode(_ frame: [Int16]) throws(VoiceEngineError) -> [UInt8] {
        guard frame.count == samplesPerFrame else {
            throw .wrongFrameSize(expected: samplesPerFrame, got: frame.count)
        }
        let count = frame.withUnsafeBufferPointer { pcm in
            scratch.withUnsafeMutableBufferPointer { out in
                opus_encode(state, pcm.baseAddress!, Int32(samplesPerFrame), out.baseAddress!, Int32(out.count))
            }
        }
        try check(count)
        return Array(scratch[0..<Int(count)])
    }
}

/// A libopus decoder for mono 16 kHz voice, with packet-loss concealment and FEC recovery.
public final class OpusVoiceDecoder {
    private let state: OpaquePointer
    private var scratch: [Int16]
    /// The samples per frame this decoder produces.
    public let samplesPerFrame: Int

    /// Creates a decoder for frames of `format`.
    public init(format: VoiceFormat = .standard) throws(VoiceEngineError) {
        var error: Int32 = 0
        guard let state = opus_decoder_create(Int32(VoiceFormat.sampleRate), 1, &error), error == OPUS_OK else {
            throw .opus(code: error, message: String(cString: opus_strerror(error)))
        }
        self.state = state
        samplesPerFrame = format.samplesPerFrame
        // An Opus packet holds at most 120 ms.
        scratch = [Int16](repeating: 0, count: VoiceFormat.sampleRate / 1000 * 120)
    }

    deinit { opus_decoder_destroy(state) }

    /// Decodes a packet. A packet that is not Opus, or empty, is an error; the decoder's state
    /// is unharmed by it.
    public func decode(_ packet: [UInt8]) throws(VoiceEngineError) -> [Int16] {
        guard !packet.isEmpty, packet.count <= opusMaximumPacket else {
            throw .opus(code: OPUS_INVALID_PACKET, message: "packet of \(packet.count) bytes")
        }
        return try run(packet, fec: false, count: scratch.count)
    }

    /// Decodes the coarse copy of the previous frame that `next` carries (in-band FEC). Without
    /// FEC data in `next`, Opus conceals instead.
    public func decodeFEC(from next: [UInt8]) throws(VoiceEngineError) -> [Int16] {
        guard !next.isEmpty, next.count <= opusMaximumPacket else {
            throw .opus(code: OPUS_INVALID_PACKET, message: "packet of \(next.count) bytes")
        }
        return try run(next, fec: true, count: samplesPerFrame)
    }

    /// Makes up one frame for a packet that never came (Opus's concealment; it fades to comfort
    /// noise over consecutive losses).
    public func conceal() -> [Int16] {
        (try? run(nil, fec: false, count: samplesPerFrame)) ?? [Int16](repeating: 0, count: samplesPerFrame)
    }

    private func run(_ packet: [UInt8]?, fec: Bool, count: Int) throws(VoiceEngineError) -> [Int16] {
        let decoded: Int32 = scratch.withUnsafeMutableBufferPointer { out in
            if let packet {
                return packet.withUnsafeBufferPointer { data in
                    opus_decode(state, data.baseAddress, Int32(data.count), out.baseAddress!, Int32(count), fec ? 1 : 0)
                }
            }
            return opus_decode(state, nil, 0, out.baseAddress!, Int32(count), 0)
        }
        try check(decoded)
        return Array(scratch[0..<Int(decoded)])
    }
}
