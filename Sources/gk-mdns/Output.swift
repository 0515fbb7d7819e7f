import Foundation
import NIOCore

/// One JSON object per line on standard output, written at once, each with `mono_ns`
/// (CLOCK_MONOTONIC, the clock of `NIODeadline.now()` and Python's `time.monotonic_ns()`).
enum Output {
    private static let lock = NSLock()

    static func line(_ fields: [String: Any]) {
        var fields = fields
        fields["mono_ns"] = Int(NIODeadline.now().uptimeNanoseconds)
        let data = try! JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
        lock.lock()
        FileHandle.standardOutput.write(data + Data("\n".utf8))
        lock.unlock()
    }
}
