import Foundation
import NetworkImpairment
import Testing

/// Every Swift block of the README is run by a test: each one is, byte for byte, the text
/// between `// BEGIN README EXAMPLE` and `// END README EXAMPLE` in a file under `Tests/` (a
/// program of `Tests/ReadmeExamples`, or a test's source), whose test runs it. The one exception
/// is the Installation section's manifest fragment, checked against `Package.swift` and
/// `CHANGELOG.md` instead. A README block nobody runs, or a runner whose text left the README,
/// fails here.
@Suite("README snippets")
struct ReadmeSnippetsTests {
    static var root: URL { SandboxScript.packageRoot }

    /// The ```swift blocks of a Markdown text, without their fences.
    static func swiftBlocks(in markdown: String) -> [String] {
        var blocks: [String] = []
        var current: String?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```swift" {
                current = ""
            } else if current != nil, line == "```" {
                blocks.append(current!)
                current = nil
            } else if current != nil {
                current! += line + "\n"
            }
        }
        return blocks
    }

    /// The marked examples of every Swift file under `Tests/`, with the file each came from.
    static func markedExamples() throws -> [(text: String, file: String)] {
        let tests = Self.root.appendingPathComponent("Tests")
        guard let walker = FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil) else { return [] }
        var examples: [(String, String)] = []
        for case let url as URL in walker where url.pathExtension == "swift" {
            var source = try String(contentsOf: url, encoding: .utf8)[...]
            while let start = source.range(of: "// BEGIN README EXAMPLE\n"), let end = source.range(of: "// END README EXAMPLE", range: start.upperBound..<source.endIndex) {
                examples.append((String(source[start.upperBound..<end.lowerBound]), String(url.path.dropFirst(Self.root.path.count + 1))))
                source = source[end.upperBound...]
            }
        }
        return examples
    }

    static func isManifestFragment(_ block: String) -> Bool { block.hasPrefix("dependencies: [\n") }

    @Test func everySwiftBlockIsRunByATest() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let blocks = Self.swiftBlocks(in: readme)
        let examples = try Self.markedExamples()
        #expect(blocks.count >= 9)
        for block in blocks where !Self.isManifestFragment(block) {
            let runner = examples.first { $0.text == block }
            #expect(runner != nil, "no test runs this README block:\n\(block)")
        }
        for example in examples {
            #expect(blocks.contains(example.text), "\(example.file) marks an example that is not in the README")
        }
    }

    /// The Installation section names this package's products, and the version it depends on is
    /// the changelog's latest.
    @Test func theInstallationFragmentMatchesThePackage() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let changelog = try String(contentsOf: Self.root.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let fragment = try #require(Self.swiftBlocks(in: readme).first(where: Self.isManifestFragment))
        let products = fragment.matches(of: /\.product\(name: "([A-Za-z]+)", package: "OpenGameKit"\)/).map { String($0.output.1) }
        #expect(products == ["OpenGameKit", "OpenGameKitVoice"])
        for product in products { #expect(manifest.contains(".library(name: \"\(product)\"")) }
        let version = try #require(fragment.firstMatch(of: /from: "([0-9]+\.[0-9]+\.[0-9]+)"/)).output.1
        let latest = try #require(changelog.firstMatch(of: /\n## ([0-9]+\.[0-9]+\.[0-9]+)\n/)).output.1
        #expect(version == latest)
        #expect(FileManager.default.fileExists(atPath: Self.root.appendingPathComponent("LICENSE").path))
    }
}
