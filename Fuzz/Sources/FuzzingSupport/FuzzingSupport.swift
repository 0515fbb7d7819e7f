// What the harnesses share: the process entry point that hands control to libFuzzer, and the
// selector byte and record framing of the harnesses that take one message or a sequence.
@_spi(Fuzzing) import GameKitMachine
@_spi(Fuzzing) import GameKitTransport
import LibFuzzerDriver

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs libFuzzer's driver with the process's command line and `test` as the function under test,
/// then exits with its status.
///
/// SwiftPM links every executable target with `main` aliased to the module's own (renamed) Swift
/// entry point, which would leave libFuzzer's main() unused and the link failing without one; so
/// each harness's Swift entry point calls this instead, and the binary takes the same command line
/// as any libFuzzer binary.
public func runLibFuzzer(_ test: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> Never {
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argc, &argv, test))
}

/// Runs one input of a harness whose first byte selects what the rest is (the byte is not part of
/// any message): when its bit 0 is clear, `one` gets the rest as one message; when it is set,
/// `sequence` gets the selector and the rest split into records of a control byte, a 2-byte
/// big-endian length and that many bytes (the last may be cut short). A sequence lets one input
/// build the state a later record depends on, so such findings reproduce from that input alone.
@_spi(Fuzzing)
public func runSelected(
    _ data: UnsafePointer<UInt8>?, _ size: Int, one: ([UInt8]) -> Void, sequence: (UInt8, [FuzzingRecord]) -> Void
) {
    guard let data, size > 0 else { return }
    let rest = UnsafeRawBufferPointer(start: data + 1, count: size - 1)
    guard data[0] & 1 == 1 else { return one(Array(rest)) }
    var records: [FuzzingRecord] = []
    var start = 0
    while records.count < 64, rest.count - start >= 3 {
        let length = Int(rest[start + 1]) << 8 | Int(rest[start + 2])
        let end = min(start + 3 + length, rest.count)
        records.append(FuzzingRecord(control: rest[start], bytes: Array(rest[(start + 3)..<end])))
        start = end
    }
    sequence(data[0], records)
}
