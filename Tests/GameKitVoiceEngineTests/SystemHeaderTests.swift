import Foundation
import NetworkImpairment
import Testing

/// A machine without the voice libraries' -dev packages gets, for each, a build error that names
/// the Debian package to install (not a bare "file not found"): the shims check for their
/// headers with `__has_include`. Compiled here with the system's headers hidden (`-nostdinc`).
@Suite("System library headers")
struct SystemHeaderTests {
    static let cases: [(file: String, language: String, package: String)] = [
        ("Sources/COpus/shim.h", "c", "libopus-dev"),
        ("Sources/CSpeexDSP/shim.h", "c", "libspeexdsp-dev"),
        ("Sources/CPulse/shim.h", "c", "libpulse-dev"),
        ("Sources/CWebRTCShim/ogk_webrtc_apm.cpp", "c++", "libwebrtc-audio-processing-dev"),
    ]

    @Test(arguments: Self.cases.map(\.file))
    func aMissingLibraryNamesItsPackage(_ file: String) throws {
        let entry = try #require(Self.cases.first { $0.file == file })
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let include = SandboxScript.packageRoot.appendingPathComponent("Sources/CWebRTCShim/include").path
        process.arguments = ["clang", "-fsyntax-only", "-x", entry.language, "-nostdinc", "-I", include, SandboxScript.packageRoot.appendingPathComponent(file).path]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus != 0)
        #expect(text.contains("install Debian's \(entry.package)"), "\(text.prefix(400))")
    }
}
