import Foundation

/// Reading and writing WAV files of 16-bit PCM.
public enum WAVFile {
    /// Reads a 16-bit PCM WAV file at 16 kHz. Stereo is mixed down to mono; other rates are an
    /// error (convert with `sox in.wav -r 16000 -c 1 out.wav`).
    public static func read(path: String) throws(VoiceEngineError) -> [Int16] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .wavFile(FileManager.default.fileExists(atPath: path) ? "\(path) cannot be read (permissions?)" : "\(path) does not exist")
        }
        return try parse([UInt8](data), path: path)
    }

    static func parse(_ bytes: [UInt8], path: String) throws(VoiceEngineError) -> [Int16] {
        func u32(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24 }
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        guard bytes.count >= 12, bytes[0..<4] == [0x52, 0x49, 0x46, 0x46], bytes[8..<12] == [0x57, 0x41, 0x56, 0x45] else {
            throw .wavFile("\(path) is not a RIFF/WAVE file")
        }
        var offset = 12
        var channels = 0
        var format = 0
        while offset + 8 <= bytes.count {
            let id = String(decoding: bytes[offset..<offset + 4], as: UTF8.self)
            let size = u32(offset + 4)
            let body = offset + 8
            guard size >= 0, body + min(size, bytes.count - body) <= bytes.count else { break }
            if id == "fmt " {
                guard size >= 16, body + 16 <= bytes.count else { throw .wavFile("\(path): short fmt chunk") }
                format = u16(body)
                channels = u16(body + 2)
                let rate = u32(body + 4)
                let bits = u16(body + 14)
                guard format == 1 || format == 0xFFFE, bits == 16 else {
                    throw .wavFile("\(path) is not 16-bit PCM (format \(format), \(bits) bits; convert it: sox \(path) -r \(VoiceFormat.sampleRate) -c 1 -b 16 out.wav)")
                }
                guard rate == VoiceFormat.sampleRate else {
                    throw .wavFile("\(path) is at \(rate) Hz, but the engine runs at \(VoiceFormat.sampleRate) Hz (convert it: sox \(path) -r \(VoiceFormat.sampleRate) -c 1 -b 16 out.wav)")
                }
                guard (1...8).contains(channels) else { throw .wavFile("\(path): \(channels) channels") }
            } else if id == "data" {
                guard channels > 0 else { throw .wavFile("\(path): data before fmt") }
                let end = min(bytes.count, body + size)
                let frames = (end - body) / (2 * channels)
                var samples = [Int16]()
                samples.reserveCapacity(frames)
                for frame in 0..<frames {
                    var sum = 0
                    for channel in 0..<channels {
                        let at = body + (frame * channels + channel) * 2
                        sum += Int(Int16(bitPattern: UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8))
                    }
                    samples.append(Int16(sum / channels))
                }
                return samples
            }
            offset = body + size + (size & 1)
        }
        throw .wavFile("\(path): no data chunk")
    }

    /// The 44-byte header of a mono 16-bit 16 kHz file holding `sampleCount` samples.
    static func header(sampleCount: Int) -> [UInt8] {
        func le32(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
        func le16(_ value: Int) -> [UInt8] { (0..<2).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
        let dataBytes = sampleCount * 2
        var header = Array("RIFF".utf8) + le32(36 + dataBytes) + Array("WAVE".utf8)
        header += Array("fmt ".utf8) + le32(16) + le16(1) + le16(1) + le32(VoiceFormat.sampleRate)
        header += le32(VoiceFormat.sampleRate * 2) + le16(2) + le16(16)
        header += Array("data".utf8) + le32(dataBytes)
        return header
    }

    /// Writes `samples` as a mono 16-bit 16 kHz WAV file.
    public static func write(_ samples: [Int16], path: String) throws(VoiceEngineError) {
        var bytes = header(sampleCount: samples.count)
        bytes.reserveCapacity(bytes.count + samples.count * 2)
        for sample in samples {
            bytes.append(UInt8(truncatingIfNeeded: sample))
            bytes.append(UInt8(truncatingIfNeeded: sample >> 8))
        }
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else {
            throw .wavFile("cannot write \(path)")
        }
    }
}

/// A WAV file as a microphone: in real time (each read waits for its frame's time) or as fast as
/// it is read.
public final class WAVFileCaptureDevice: AudioCaptureDevice, @unchecked Sendable {
    /// How reads are paced.
    public enum Pacing: Sendable { case realTime, asFastAsPossible }

    private let memory: MemoryCaptureDevice
    private let pacing: Pacing
    private let pacer = RealTimePacer()
    public let name: String

    /// Opens `path` (16-bit PCM at 16 kHz).
    public init(path: String, pacing: Pacing) throws(VoiceEngineError) {
        memory = MemoryCaptureDevice(samples: try WAVFile.read(path: path), name: path)
        self.pacing = pacing
        name = path
    }

    public func read(count: Int) throws(VoiceEngineError) -> [Int16]? {
        guard let frame = try memory.read(count: count) else { return nil }
        if pacing == .realTime { pacer.pace(count) }
        return frame
    }

    public func close() { memory.close() }
}

/// A loudspeaker that records to a WAV file, streaming; the header's sizes are set on close.
public final class WAVFilePlaybackDevice: AudioPlaybackDevice, @unchecked Sendable {
    private let lock = NSLock()
    private let handle: FileHandle
    private var count = 0
    private var closed = false
    public let name: String

    /// Creates (or truncates) `path`.
    public init(path: String) throws(VoiceEngineError) {
        guard FileManager.default.createFile(atPath: path, contents: Data(WAVFile.header(sampleCount: 0))),
            let handle = FileHandle(forWritingAtPath: path)
        else { throw .wavFile("cannot create \(path)") }
        handle.seekToEndOfFile()
        self.handle = handle
        name = path
    }

    public func write(_ samples: [Int16]) throws(VoiceEngineError) {
        lock.lock()
        defer { lock.unlock() }
        guard !closed else { throw .device("\(name) is closed") }
        var bytes = [UInt8]()
        bytes.reserveCapacity(samples.count * 2)
        for sample in samples {
            bytes.append(UInt8(truncatingIfNeeded: sample))
            bytes.append(UInt8(truncatingIfNeeded: sample >> 8))
        }
        do { try handle.write(contentsOf: bytes) } catch { throw .wavFile("\(name): \(error)") }
        count += samples.count
    }

    /// Writes the final sizes and closes the file.
    public func close() {
        lock.withLock {
            guard !closed else { return }
            closed = true
            handle.seek(toFileOffset: 0)
            handle.write(Data(WAVFile.header(sampleCount: count)))
            handle.closeFile()
        }
    }

    deinit { close() }
}
