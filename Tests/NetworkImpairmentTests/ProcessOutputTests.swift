import Foundation
import NetworkImpairment
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Reading a child's output to its end while other children come and go.
@Suite("A child's output, read to the end")
struct ProcessOutputTests {
    /// Starts `sleep 30` with posix_spawn and no file actions: it inherits every descriptor not
    /// marked close-on-exec, as the voice tests' PulseAudio tools (ChildProgram) do.
    static func spawnBystander() -> pid_t {
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sleep"), strdup("30"), nil]
        defer { argv.forEach { free($0) } }
        return posix_spawn(&pid, "/bin/sleep", nil, nil, argv, environ) == 0 ? pid : -1
    }

    @Test func aProcessSpawnedMeanwhileDoesNotHoldTheOutputOpen() throws {
        // The voice tests hung when a PulseAudio recorder, started by another test while a
        // script's output pipe was open, inherited its write end: its end of file never came.
        let output = try ChildOutput()
        let reader = Process()
        reader.executableURL = URL(fileURLWithPath: "/bin/sh")
        reader.arguments = ["-c", "sleep 0.3; echo done"]
        var bystander: pid_t = -1
        defer {
            if bystander > 0 {
                kill(bystander, SIGKILL)
                var status: Int32 = 0
                waitpid(bystander, &status, 0)
            }
        }
        bystander = Self.spawnBystander()
        let data = try reader.runCollectingOutput(into: output)
        reader.waitUntilExit()
        #expect(String(decoding: data, as: UTF8.self) == "done\n")
        // The output ended while the bystander still ran: it never held it.
        var status: Int32 = 0
        #expect(bystander > 0 && waitpid(bystander, &status, WNOHANG) == 0)
    }

    @Test func aProgramThatCannotStartThrows() {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/nonexistent/program")
        #expect(throws: (any Error).self) { try process.runCollectingOutput() }
    }
}
