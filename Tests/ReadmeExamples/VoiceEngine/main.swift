// The README's voice engine example as a program of its own (ReadmeVoiceEngineProgramTests
// runs it against a private PulseAudio server).
// BEGIN README EXAMPLE
import GameKitVoiceEngine

// Two engines back to back; in a real call the packets cross the network.
final class Box: @unchecked Sendable { var engine: VoiceEngine? }
let clock = MonotonicVoiceClock()
let bob = Box()
let alice = try VoiceEngine { packet in bob.engine?.receive(packet, atMilliseconds: clock.milliseconds()) }
bob.engine = try VoiceEngine { _ in }

// Drive Alice from PulseAudio (or PipeWire's pulse server) on a thread of its own:
let loop = AudioLoop(
    engine: alice,
    capture: try PulseAudioDevice(.capture, device: nil),       // nil = the default source
    playback: try PulseAudioDevice(.playback, device: nil))     // ~20 ms buffers
loop.start()
alice.isMicrophoneMuted = false
alice.remoteVolume = 0.5                  // −6 dB
print(alice.inputLevel, alice.outputLevel) // dBFS, smoothed
// END README EXAMPLE
