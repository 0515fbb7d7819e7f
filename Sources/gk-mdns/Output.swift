import NIOCore
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// One JSON object per line on standard output, flushed at once, each with `mono_ns`
/// (CLOCK_MONOTONIC, the clock of `NIODeadline.now()` and Python's `time.monotonic_ns()`).
enum Output {
    private static let lock = NIOLock()

    static func line(_ fields: [String: any Sendable]) {
        var fields = fields
        fields["mono_ns"] = Int(NIODeadline.now().uptimeNanoseconds)
        let text = "{" + fields.keys.sorted().map { "\(json($0)):\(value($0 == "" ? nil : fields[$0]))" }.joined(separator: ",") + "}\n"
        lock.withLock {
            var bytes = Array(text.utf8)[...]
            while !bytes.isEmpty {
                let written = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
                guard written > 0 else { return }
                bytes = bytes.dropFirst(written)
            }
        }
    }

    private static func value(_ value: (any Sendable)?) -> String {
        switch value {
        case nil: return "null"
        case let string as String: return json(string)
        case let optional as String?: return optional.map(json) ?? "null"
        case let number as Int: return String(number)
        case let list as [String]: return "[" + list.map(json).joined(separator: ",") + "]"
        case let map as [String: String?]:
            return "{" + map.keys.sorted().map { "\(json($0)):\(map[$0]!.map(json) ?? "null")" }.joined(separator: ",") + "}"
        default: return json("\(value!)")
        }
    }

    static func json(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "\""
    }
}
