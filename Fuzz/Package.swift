// swift-tools-version: 6.1
// A libFuzzer harness for GameKitTransport's packet decoding. Deliberately a separate package so
// that neither the main build nor CI ever compiles it; run it with scripts/fuzz (see README.md).
import PackageDescription

let package = Package(
    name: "OpenGameKitFuzz",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "OpenGameKit", path: ".."),
    ],
    targets: [
        .executableTarget(
            name: "PacketDecoderFuzzer",
            dependencies: [
                "LibFuzzerDriver",
                .product(name: "OpenGameKit", package: "OpenGameKit"),
            ]
        ),
        // Declares libFuzzer's LLVMFuzzerRunDriver for Swift (no code of its own).
        .target(name: "LibFuzzerDriver"),
    ],
    swiftLanguageModes: [.v6]
)
