import ArgumentParser
import Foundation
import GameKitVoiceEngine

/// PESQ-WB and STOI through Tests/Peers/voice_quality.py.
struct SpeechQuality {
    let python: String
    /// Where the pairs are written for the script.
    let workspace: String
    /// Whether the pairs stay there after scoring (`gk-bench voice --keep-audio`).
    var keepsFiles = false
    /// The script's servers, shared by every copy of this value.
    let pool = Pool()

    struct Score {
        /// PESQ-WB; 1.0, the scale's floor, when PESQ could not score the signal (it found no
        /// speech in it: a listener that heard nothing), so that such a listener counts as the
        /// worst, never vanishes.
        var pesq: Double
        /// Whether PESQ scored it (false: `pesq` is the floor).
        var pesqScored: Bool
        /// STOI with each utterance aligned on its own (a playout delay that moves is not lost
        /// intelligibility).
        var stoi: Double
        /// STOI under the one global alignment.
        var stoiGlobal: Double
        var delayMilliseconds: Double
        /// How far the utterances' own alignments spread, in ms.
        var delaySpreadMilliseconds: Double
    }

    /// One pair to score; `name` names its files.
    struct Pair {
        var reference: [Int16]
        var degraded: [Int16]
        var name: String
    }

    func measure(reference: [Int16], degraded: [Int16], name: String) throws -> Score {
        try self.measure([Pair(reference: reference, degraded: degraded, name: name)])[0]
    }

    /// Scores the pairs, in order. The script runs as a server (`--serve`) for the whole
    /// benchmark, so that its start (numpy and the two libraries, about as long as scoring a
    /// pair) is paid once, not once per row; a batch is shared among up to one server per core.
    func measure(_ pairs: [Pair]) throws -> [Score] {
        guard !pairs.isEmpty else { return [] }
        var paths: [String] = []
        for pair in pairs {
            let referencePath = "\(workspace)/\(pair.name)-ref.wav"
            let degradedPath = "\(workspace)/\(pair.name)-deg.wav"
            try WAVFile.write(pair.reference, path: referencePath)
            try WAVFile.write(pair.degraded, path: degradedPath)
            paths += [referencePath, degradedPath]
        }
        defer {
            if !self.keepsFiles {
                for path in paths { try? FileManager.default.removeItem(atPath: path) }
            }
        }
        let servers = try self.pool.servers(min(pairs.count, SpeechQuality.Pool.limit), python: python)
        // Pair i goes to server i % n; each answers its own in order.
        for index in pairs.indices {
            try servers[index % servers.count].send(reference: paths[2 * index], degraded: paths[2 * index + 1])
        }
        let lines = try pairs.indices.map { try servers[$0 % servers.count].receive() }
        return try zip(lines, pairs).map { line, pair in
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                throw ValidationError("voice_quality.py answered \(pair.name) with \(line)")
            }
            if let error = object["error"] as? String { throw ValidationError("voice_quality.py could not score \(pair.name): \(error)") }
            guard let stoi = object["stoi"] as? Double else { throw ValidationError("voice_quality.py gave no STOI for \(pair.name): \(line)") }
            let pesq = object["pesq_wb"] as? Double
            return Score(
                pesq: pesq ?? 1, pesqScored: pesq != nil, stoi: stoi, stoiGlobal: object["stoi_global"] as? Double ?? stoi,
                delayMilliseconds: object["delay_ms"] as? Double ?? 0, delaySpreadMilliseconds: object["delay_spread_ms"] as? Double ?? 0)
        }
    }

    /// The scoring servers of one benchmark run, started as batches first need them; they end
    /// when their input closes (`finish()`, or this process's exit).
    final class Pool {
        static let limit = max(1, min(ProcessInfo.processInfo.activeProcessorCount, 4))
        private var running: [Server] = []

        func servers(_ count: Int, python: String) throws -> [Server] {
            while running.count < count { running.append(try Server(python: python)) }
            return Array(running.prefix(count))
        }

        /// Closes every server's input and waits for it to end.
        func finish() {
            for server in running { server.finish() }
            running.removeAll()
        }
    }

    /// One `voice_quality.py --serve`: a pair per line in, a JSON object per line out.
    final class Server {
        private let process = Process()
        private let input = Pipe()
        private let output = Pipe()
        private var buffered = Data()

        init(python: String) throws {
            // A server that died is an error on the next write, not this process's end.
            signal(SIGPIPE, SIG_IGN)
            process.executableURL = URL(fileURLWithPath: python)
            process.arguments = ["Tests/Peers/voice_quality.py", "--serve"]
            process.standardInput = input
            process.standardOutput = output
            do { try process.run() } catch { throw ValidationError("could not start \(python) Tests/Peers/voice_quality.py: \(error)") }
        }

        func send(reference: String, degraded: String) throws {
            try input.fileHandleForWriting.write(contentsOf: Data("\(reference)\t\(degraded)\n".utf8))
        }

        /// The next line the server prints; an error if it ended first.
        func receive() throws -> String {
            while true {
                if let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffered[buffered.startIndex..<newline], as: UTF8.self)
                    buffered.removeSubrange(buffered.startIndex...newline)
                    return line
                }
                let chunk = output.fileHandleForReading.availableData
                guard !chunk.isEmpty else {
                    throw ValidationError("voice_quality.py ended before answering (is \(process.executableURL?.path ?? "?") the peers venv?)")
                }
                buffered.append(chunk)
            }
        }

        func finish() {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }
    }
}
