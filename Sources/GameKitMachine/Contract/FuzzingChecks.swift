/// The round-trip check of every fuzzing harness whose decoder has an encoder: bytes that decode
/// must encode to bytes that decode to an equal value, and encoding that value again must give the
/// same bytes (encoders are deterministic). `normalized` maps a decoded value to what its encoding
/// carries when the encoder legitimately rewrites it (sorts, drops what it regenerates). A failure
/// traps, so libFuzzer records the input as a crash.
@_spi(Fuzzing)
public enum FuzzingRoundTrip {
    /// Returns the decoded value, or nil when `bytes` do not decode (not a finding).
    @discardableResult
    public static func check<Bytes, Value: Equatable>(
        _ name: String, _ bytes: Bytes, decode: (Bytes) -> Value?, encode: (Value) -> Bytes,
        normalized: (Value) -> Value = { $0 }
    ) -> Value? where Bytes: Equatable {
        guard let value = decode(bytes) else { return nil }
        let encoded = encode(value)
        guard let again = decode(encoded) else {
            fatalError("\(name): a decoded value encodes to bytes that do not decode: \(value)")
        }
        Self.require(again == normalized(value), "\(name): a decoded value changes through a round trip:\n  \(value)\n  \(again)")
        Self.require(encode(again) == encoded, "\(name): encoding a round-tripped value gives other bytes: \(value)")
        return value
    }

    /// Traps with `message` unless `condition` holds: a finding. (Unlike `precondition`, the
    /// message survives an optimised build, so libFuzzer's report says what failed.)
    public static func require(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { fatalError(message()) }
    }
}

/// One step of a fuzzing input that holds a sequence: a control byte (what the entry point does
/// around it, see each entry point) and the bytes that arrive.
@_spi(Fuzzing)
public struct FuzzingRecord: Sendable {
    public var control: UInt8
    public var bytes: [UInt8]

    public init(control: UInt8, bytes: [UInt8]) {
        self.control = control
        self.bytes = bytes
    }
}
