import Foundation

/// A smoothed level meter in dBFS.
///
/// dBFS here is AES17's: the RMS level relative to that of a full-scale sine, so a sine whose peaks
/// reach full scale reads 0 dBFS and one at a tenth of full scale reads −20 dBFS. The mean
/// square is smoothed exponentially with a time constant of 300 ms (a VU meter's), so a steady
/// tone reads steady. Silence reads the floor, −120 dBFS.
public struct LevelMeter: Sendable {
    /// The lowest reading.
    public static let floor: Float = -120
    private var meanSquare: Double = 0
    private var primed = false
    /// The smoothing time constant in milliseconds.
    public let timeConstantMilliseconds: Double

    /// A meter with a time constant of `timeConstantMilliseconds`.
    public init(timeConstantMilliseconds: Double = 300) {
        self.timeConstantMilliseconds = timeConstantMilliseconds
    }

    /// The current level in dBFS.
    public var level: Float {
        guard meanSquare > 0 else { return Self.floor }
        // Full-scale sine: mean square 1/2, hence the factor 2.
        return max(Self.floor, Float(10 * log10(2 * meanSquare)))
    }

    /// One frame's level in dBFS, unsmoothed (the floor for silence or no samples).
    public static func level(of frame: [Int16]) -> Float {
        let meanSquare = self.meanSquare(of: frame)
        guard meanSquare > 0 else { return floor }
        return max(floor, Float(10 * log10(2 * meanSquare)))
    }

    private static func meanSquare(of frame: [Int16]) -> Double {
        guard !frame.isEmpty else { return 0 }
        var sum = 0.0
        for sample in frame {
            let x = Double(sample) / 32768
            sum += x * x
        }
        return sum / Double(frame.count)
    }

    /// Takes in one frame.
    public mutating func measure(_ frame: [Int16]) {
        guard !frame.isEmpty else { return }
        let frameMeanSquare = Self.meanSquare(of: frame)
        if !primed {
            meanSquare = frameMeanSquare
            primed = true
            return
        }
        let frameMilliseconds = Double(frame.count) * 1000 / Double(VoiceFormat.sampleRate)
        let alpha = 1 - exp(-frameMilliseconds / timeConstantMilliseconds)
        meanSquare += alpha * (frameMeanSquare - meanSquare)
    }

    /// Forgets what it measured.
    public mutating func reset() {
        meanSquare = 0
        primed = false
    }
}

/// Scales samples by a linear gain, clipping at full scale.
func applyGain(_ gain: Float, to frame: inout [Int16]) {
    guard gain != 1 else { return }
    for index in frame.indices {
        let value = (Float(frame[index]) * gain).rounded()
        frame[index] = Int16(max(-32768, min(32767, value)))
    }
}
