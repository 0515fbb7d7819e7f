// swift-tools-version: 6.1
// libFuzzer harnesses for GameKitTransport's packet decoding and GameKitDiscovery's DNS message
// codec. Deliberately a separate package so that neither the main build nor CI ever compiles it;
// run them with scripts/fuzz and scripts/fuzz dns (see README.md).
import PackageDescription

let package = Package(
    name: "OpenGameKitFuzz",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "OpenGameKit", path: ".."),
        // The same swift-nio as the root package's (ByteBuffer, for the DNS harness).
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        .executableTarget(
            name: "PacketDecoderFuzzer",
            dependencies: [
                "LibFuzzerDriver",
                .product(name: "OpenGameKit", package: "OpenGameKit"),
            ]
        ),
        .executableTarget(
            name: "DNSMessageFuzzer",
            dependencies: [
                "LibFuzzerDriver",
                .product(name: "OpenGameKit", package: "OpenGameKit"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // Declares libFuzzer's LLVMFuzzerRunDriver for Swift (no code of its own).
        .target(name: "LibFuzzerDriver"),
    ],
    swiftLanguageModes: [.v6]
)
