import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where a child process's standard output goes when the parent reads it to the end: a channel
/// whose two descriptors close on exec.
///
/// Foundation's `Pipe` leaves its descriptors inheritable. A process that another thread spawns
/// without closing what it inherits (the voice tests' PulseAudio tools, started with
/// `posix_spawn`) while a pipe's write end is still open in the parent keeps that end open for
/// as long as it lives, and reading the pipe to its end then waits as long: a PulseAudio recorder
/// held a speech-generation script's pipe and the voice tests hung. Here the descriptors close on
/// exec, so the only other holder of the write end is the child it is given to, as its standard
/// output. It is a socket pair made close-on-exec in the same call (Glibc's module has no
/// `pipe2`), so no spawn can slip in before the flag is set; programs write to it as to a pipe.
public final class ChildOutput: @unchecked Sendable {
    /// The parent's end.
    public let reading: FileHandle
    /// The child's end (its standard output); the parent closes its own copy once the child runs.
    public let writing: FileHandle

    public init() throws {
        var descriptors: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &descriptors) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        self.reading = FileHandle(fileDescriptor: descriptors[0], closeOnDealloc: true)
        self.writing = FileHandle(fileDescriptor: descriptors[1], closeOnDealloc: true)
    }
}

extension Process {
    /// Runs the process with its standard output going to `output` (a new ``ChildOutput`` by
    /// default), calls `started` once it runs, and returns everything it wrote, once its output
    /// is closed (normally: when it exits).
    public func runCollectingOutput(into output: ChildOutput? = nil, started: () -> Void = {}) throws -> Data {
        let output = try output ?? ChildOutput()
        self.standardOutput = output.writing
        do {
            try self.run()
        } catch {
            try? output.writing.close()
            throw error
        }
        // The child has its copy (as descriptor 1); ours would keep the end of file away.
        try? output.writing.close()
        started()
        return output.reading.readDataToEndOfFile()
    }
}
