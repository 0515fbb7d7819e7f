// libFuzzer harness for the session layer's messages (OpenGameKit): every input is passed whole
// to the decoders of what peers send each other, `SessionHello` (in the transport's initiation),
// `SessionWelcome` (in its accept) and `SessionMessage` (data, roster, joined, left, relay,
// relayed, drop on an established link). Whatever decodes must survive a round trip: encoding it
// and decoding that gives an equal message, and encoding that again the same bytes; a failure
// traps and libFuzzer records the input as a crash. Rejections are the decoders' job.
import FuzzingSupport
@_spi(Fuzzing) import OpenGameKit

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    SessionWireFuzzingEntryPoints.decode(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

@main
enum SessionWireFuzzer {
    static func main() { runLibFuzzer { data, size in fuzz(data, size) } }
}
