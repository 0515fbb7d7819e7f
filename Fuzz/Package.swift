// swift-tools-version: 6.1
// libFuzzer harnesses for every decoder of network input: GameKitTransport's packets,
// GameKitDiscovery's DNS messages, the session layer's messages, voice call signalling, NAT
// traversal (STUN/TURN/ICE, media), online rooms (rendezvous and relay) and the voice engine's
// packets. Deliberately a separate
// package so that neither the main build nor CI ever compiles it; run them with scripts/fuzz
// [NAME] (see README.md).
import PackageDescription

/// A harness: one executable target on the shared driver and one of the root package's libraries.
func harness(_ name: String, library: String) -> Target {
    .executableTarget(name: name, dependencies: ["FuzzingSupport", .product(name: library, package: "OpenGameKit")])
}

let package = Package(
    name: "OpenGameKitFuzz",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "OpenGameKit", path: ".."),
        // The same swift-nio as the root package's (ByteBuffer, for the DNS harness).
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        harness("PacketDecoderFuzzer", library: "OpenGameKit"),
        .executableTarget(
            name: "DNSMessageFuzzer",
            dependencies: [
                "FuzzingSupport",
                .product(name: "OpenGameKit", package: "OpenGameKit"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        harness("SessionWireFuzzer", library: "OpenGameKit"),
        harness("TraversalFuzzer", library: "OpenGameKitVoice"),
        harness("OnlineFuzzer", library: "OpenGameKit"),
        // The voice harnesses link the system audio libraries, as OpenGameKitVoice does.
        harness("VoiceSignalFuzzer", library: "OpenGameKitVoice"),
        harness("VoicePacketFuzzer", library: "OpenGameKitVoice"),
        // The entry point every harness shares (libFuzzer's driver) and the record framing of
        // the sequence modes.
        .target(name: "FuzzingSupport", dependencies: ["LibFuzzerDriver", .product(name: "OpenGameKit", package: "OpenGameKit")]),
        // Declares libFuzzer's LLVMFuzzerRunDriver for Swift (no code of its own).
        .target(name: "LibFuzzerDriver"),
    ],
    swiftLanguageModes: [.v6]
)
