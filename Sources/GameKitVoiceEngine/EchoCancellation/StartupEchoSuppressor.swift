import Foundation

/// Holds the echo down while an adaptive echo canceller has not converged yet (at the start of a
/// call, before its filter has learnt the room).
///
/// An adaptive filter needs seconds of far-end speech to converge; until then most of the echo
/// passes through it. This suppressor watches, frame by frame, the far end (the loudspeaker),
/// the microphone and the canceller's output, and attenuates the output by
/// ``attenuationDecibels`` in frames where the far end talks and the near end does not — until
/// the canceller itself has removed ``convergedDecibels`` of echo over ``convergedFrames``
/// frames of far-end-only talk. From then on it passes everything, for good.
///
/// "The near end talks" is Geigel's test: the microphone's peak exceeds ``geigelRatio`` times
/// the loudest far-end peak of the last ``windowFrames`` frames (the echo path's length), which
/// an echo alone never does when the path loses at least that much.
///
/// With no echo path (a headset, WAV files) the canceller never removes anything, and Geigel's
/// test takes a near talker quieter than the far end for echo: without more, the suppressor would
/// cut whoever talks over a louder far end, all call long. So an ``EchoPresenceDetector`` watches
/// the same frames. The suppressor holds nothing down until the microphone may hear the far end
/// (``mayHearEcho``: the detector's correlation reached its no-echo threshold while the far end
/// talked), so a near talker is never cut while the detector decides; once the detector finds
/// that the microphone does not hear the far end, the suppressor lets go for good (``release`` is
/// ``Release/noEcho``). Sans-I/O and deterministic.
public struct StartupEchoSuppressor: Sendable {
    /// Why the suppressor stopped suppressing.
    public enum Release: Sendable, Hashable {
        /// The canceller removes the echo itself.
        case converged
        /// The microphone does not hear the loudspeaker: there is no echo to suppress.
        case noEcho
    }

    /// Attenuation of echo-only frames until convergence.
    public var attenuationDecibels = 30.0
    /// Echo the canceller must remove on its own, measured over far-end-only frames.
    public var convergedDecibels = 20.0
    /// How many far-end-only frames in a row must show it.
    public var convergedFrames = 25
    /// The far-end peaks the near end's peak is compared with, in frames.
    public var windowFrames = 14
    /// Geigel's threshold: the echo path's largest gain assumed. 1: the echo is never louder
    /// than the loudspeaker's signal (0.8 took the benchmark room's reverberant echo, direct
    /// gain 0.5, for the near end in a third of the frames).
    public var geigelRatio = 1.0
    /// Far-end peaks below this (about −50 dBFS) are silence.
    public var farActivityThreshold: Int16 = 100

    /// The echo path's longest delay the presence detector covers, in ms (the canceller's tail).
    public var tailMilliseconds = 200
    /// Whether to let go when the microphone turns out to hear no echo (``Release/noEcho``).
    public var releasesWithoutEcho = true

    /// Why the suppressor passes everything now; nil while it still suppresses.
    public private(set) var release: Release?
    /// Whether the canceller has converged (the suppressor passes everything).
    public var converged: Bool { release == .converged }
    /// The presence detector's state (made with the first frame).
    public private(set) var detector: EchoPresenceDetector?
    /// Frames attenuated so far.
    public private(set) var attenuatedFrames = 0
    /// Whether the microphone may be hearing the loudspeaker: without a detector, always; with
    /// one, from the first frame in which the far end talked and the correlation reached the
    /// detector's no-echo threshold, until its verdict is "no echo".
    public private(set) var mayHearEcho = false

    private var farPeaks: [Int16] = []
    private var removal = EchoRemovalWatch()
    private var gain = 1.0

    public init() {}

    /// Takes one frame: what the loudspeaker played, what the microphone heard, what the canceller
    /// made of it; returns the output to send.
    public mutating func process(near: [Int16], far: [Int16], output: [Int16]) -> [Int16] {
        guard release == nil else { return output }
        if releasesWithoutEcho {
            var presence = detector.take() ?? EchoPresenceDetector(frameSamples: near.count, tailMilliseconds: tailMilliseconds)
            let noEcho = presence.process(near: near, far: far)
            detector = presence
            // Let go with a ramp from the last gain (the frame below, with a target of 1).
            if noEcho { release = .noEcho }
        }
        farPeaks.append(Self.peak(far))
        if farPeaks.count > windowFrames { farPeaks.removeFirst(farPeaks.count - windowFrames) }
        let farPeak = farPeaks.max() ?? 0
        let farActive = farPeak >= farActivityThreshold
        let nearTalks = Double(Self.peak(near)) > geigelRatio * Double(farPeak)
        if let detector {
            if farActive && detector.correlation >= detector.threshold { mayHearEcho = true }
            if detector.noEcho { mayHearEcho = false }
        } else {
            mayHearEcho = true
        }
        var target = 1.0
        if release == nil && farActive && !nearTalks && mayHearEcho {
            target = pow(10, -attenuationDecibels / 20)
            // The canceller's own progress, over echo-only frames.
            if removal.removes(convergedDecibels, for: convergedFrames, near: near, output: output) {
                release = .converged
                target = 1
            }
        }
        if target < 1 { attenuatedFrames += 1 }
        // A ramp across the frame from the last gain to the new one: no clicks.
        var result = output
        let start = gain
        let count = Double(max(1, output.count))
        for index in result.indices {
            let g = start + (target - start) * Double(index + 1) / count
            result[index] = Int16(max(-32768, min(32767, (Double(output[index]) * g).rounded())))
        }
        gain = target
        return result
    }

    private static func peak(_ frame: [Int16]) -> Int16 {
        frame.reduce(Int16(0)) { max($0, $1 == .min ? .max : abs($1)) }
    }
}
