// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "OpenGameKit",
    platforms: [.macOS(.v14)],
    products: [
        // The core product: Game Kit sessions over discovery and the transport. Toolchain and
        // Swift packages only, no system library.
        .library(name: "OpenGameKit", targets: ["OpenGameKit"]),
        // Voice chat. Adds the system audio libraries: libopus, speexdsp,
        // webrtc-audio-processing and libpulse (Debian's -dev packages).
        .library(name: "OpenGameKitVoice", targets: ["OpenGameKitVoice"]),
        .executable(name: "gk-bench", targets: ["gk-bench"]),
        .executable(name: "gk-link", targets: ["gk-link"]),
        .executable(name: "gk-impair", targets: ["gk-impair"]),
        .executable(name: "gk-mdns", targets: ["gk-mdns"]),
        .executable(name: "gk-session", targets: ["gk-session"]),
        .executable(name: "gk-chat", targets: ["gk-chat"]),
        .executable(name: "gk-voice", targets: ["gk-voice"]),
        .executable(name: "gk-rendezvous", targets: ["gk-rendezvous"]),
    ],
    traits: [
        .trait(
            name: "PulseAudio",
            description: "PulseAudio devices for voice (libpulse). Without it, voice uses WAV files or the application's own devices, and libpulse is not linked."
        ),
        .trait(
            name: "OpenSSL",
            description: "Data packets sealed and opened by OpenSSL's libcrypto (libssl-dev) with one cipher context per key: no allocation or key setup per packet. Off by default: swift-crypto does the same work with no system library."
        ),
        .default(enabledTraits: ["PulseAudio"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        // PostgreSQL for gk-rendezvous's scale-out (several instances sharing rooms); the
        // libraries do not use it.
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        // Counts heap allocations for gk-bench's allocations-per-message figure (benchmark only).
        .package(url: "https://github.com/ordo-one/malloc-interposer.git", from: "1.6.1"),
    ],
    targets: [
        // MARK: - Lower modules (no Game Kit types)
        // The datagram machine contract, the one NIO driver of every machine, and its sockets.
        .target(
            name: "GameKitMachine",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        // NAT traversal: STUN, TURN, ICE and the real-time (media) connection they set up.
        .target(
            name: "GameKitTraversal",
            dependencies: [
                "GameKitMachine",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Encrypted links over UDP; for an online session, the online layer runs under the
        // endpoint on the same socket, as one machine (SocketMachine).
        .target(
            name: "GameKitTransport",
            dependencies: [
                "GameKitMachine",
                "GameKitOnline",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "DequeModule", package: "swift-collections"),
                .target(name: "COpenSSL", condition: .when(traits: ["OpenSSL"])),
                "CSodium",
            ]
        ),
        // Online rooms: the rendezvous and relay (server side), and the session's side of them
        // (registration, relayed datagrams on the transport's own socket).
        .target(
            name: "GameKitOnline",
            dependencies: [
                "GameKitMachine",
                "GameKitTraversal",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        .target(
            name: "GameKitDiscovery",
            dependencies: [
                "GameKitMachine",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // A seeded model of a bad network (loss, delay, jitter, reordering, duplication,
        // corruption) and a UDP relay that applies it, and what the tools share (JSON lines, stop
        // conditions, HOST:PORT options). Used by tests, benchmarks and the tools, not the libraries.
        .target(
            name: "NetworkImpairment",
            dependencies: [
                "GameKitMachine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),

        // MARK: - Public Game Kit API
        .target(
            name: "OpenGameKit",
            dependencies: [
                "GameKitMachine",
                "GameKitTransport",
                "GameKitDiscovery",
                "GameKitOnline",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .target(
            name: "OpenGameKitVoice",
            dependencies: [
                "OpenGameKit", "GameKitTransport", "GameKitTraversal", "GameKitVoiceEngine",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),

        // MARK: - Voice engine and the system libraries it needs (OpenGameKitVoice only)
        .target(
            name: "GameKitVoiceEngine",
            dependencies: [
                "COpus", "CSpeexDSP", "CWebRTCShim",
                .target(name: "CPulse", condition: .when(traits: ["PulseAudio"])),
            ]
        ),
        // The C libraries' headers are in the compiler's default search path on Debian (the
        // module maps include <opus/opus.h>, <speex/…>, <pulse/…>), so no pkg-config is needed.
        .systemLibrary(name: "COpus"),
        .systemLibrary(name: "CSpeexDSP"),
        .systemLibrary(name: "CPulse"),
        // OpenSSL's libcrypto for the transport's optional packet-cipher backend (trait OpenSSL).
        .systemLibrary(name: "COpenSSL"),
        // libsodium's ristretto255 group for the handshake's PAKE (CPace; libsodium-dev).
        .systemLibrary(name: "CSodium"),
        // Its headers live in /usr/include/webrtc_audio_processing, reached through the symlink
        // Sources/CWebRTCShim/system (pkg-config would bring flags SwiftPM refuses, with warnings).
        .target(
            name: "CWebRTCShim",
            cxxSettings: [
                .headerSearchPath("system"),
                .define("WEBRTC_POSIX"),
                .define("WEBRTC_AUDIO_PROCESSING_ONLY_BUILD"),
            ],
            linkerSettings: [.linkedLibrary("webrtc_audio_processing"), .linkedLibrary("stdc++")]
        ),

        // Group calls in virtual time, for the engine's tests and the benchmark.
        .target(
            name: "VoiceSimulation",
            dependencies: ["GameKitVoiceEngine", "NetworkImpairment", .product(name: "NIOCore", package: "swift-nio")]
        ),
        // MARK: - Executables
        .executableTarget(
            name: "gk-bench",
            dependencies: [
                "OpenGameKitVoice",
                "GameKitOnline",
                .product(name: "Crypto", package: "swift-crypto"),
                "GameKitTransport",
                "GameKitVoiceEngine",
                "OpenGameKit",
                "NetworkImpairment",
                "VoiceSimulation",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "MallocInterposerSwift", package: "malloc-interposer"),
            ]
        ),
        .executableTarget(
            name: "gk-link",
            dependencies: [
                "GameKitTransport",
                "NetworkImpairment",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "gk-session",
            dependencies: [
                "OpenGameKit",
                "NetworkImpairment",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "gk-chat",
            dependencies: [
                "OpenGameKit", "NetworkImpairment",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "gk-voice",
            dependencies: [
                "OpenGameKit", "OpenGameKitVoice", "GameKitTransport", "GameKitTraversal", "NetworkImpairment",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "gk-mdns",
            dependencies: [
                "GameKitDiscovery",
                "NetworkImpairment",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "gk-rendezvous",
            dependencies: [
                "GameKitOnline",
                "GameKitMachine",
                "NetworkImpairment",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "gk-impair",
            dependencies: [
                "NetworkImpairment",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // MARK: - Tests

        // The lecture's and the guide's Game Kit code as a porter brings it over (Tests/Porting),
        // built twice from the same files: in Swift 6 and in Swift 5 language mode.
        .executableTarget(
            name: "gk-port",
            dependencies: ["OpenGameKit", "OpenGameKitVoice"],
            path: "Tests/Porting/Lecture"
        ),
        .executableTarget(
            name: "gk-port-swift5",
            dependencies: ["OpenGameKit", "OpenGameKitVoice"],
            path: "Tests/Porting/Swift5",
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        // The README's examples that are programs, each as written there (ReadmeSnippetsTests
        // checks the text, ReadmeProgramTests and GoodbyeProcessTests run them).
        .executableTarget(
            name: "gk-readme-goodbye",
            dependencies: ["OpenGameKit"],
            path: "Tests/ReadmeExamples/Goodbye"
        ),
        .executableTarget(
            name: "gk-readme-transport",
            dependencies: ["GameKitTransport", .product(name: "NIOCore", package: "swift-nio")],
            path: "Tests/ReadmeExamples/Transport"
        ),
        .executableTarget(
            name: "gk-readme-discovery",
            dependencies: ["GameKitDiscovery"],
            path: "Tests/ReadmeExamples/Discovery"
        ),
        .executableTarget(
            name: "gk-readme-async-server",
            dependencies: ["OpenGameKit"],
            path: "Tests/ReadmeExamples/AsyncServer"
        ),
        .executableTarget(
            name: "gk-readme-voice",
            dependencies: ["OpenGameKit", "OpenGameKitVoice"],
            path: "Tests/ReadmeExamples/Voice"
        ),
        .executableTarget(
            name: "gk-readme-voice-async",
            dependencies: ["OpenGameKit", "OpenGameKitVoice"],
            path: "Tests/ReadmeExamples/VoiceAsync"
        ),
        .executableTarget(
            name: "gk-readme-group-voice",
            dependencies: ["OpenGameKit", "OpenGameKitVoice"],
            path: "Tests/ReadmeExamples/GroupVoice"
        ),
        .executableTarget(
            name: "gk-readme-voice-engine",
            dependencies: ["GameKitVoiceEngine"],
            path: "Tests/ReadmeExamples/VoiceEngine"
        ),
        .testTarget(
            name: "PortingTests",
            dependencies: [
                "OpenGameKit", "NetworkImpairment",
            ]
        ),
        .testTarget(
            name: "GameKitMachineTests",
            dependencies: [
                "GameKitMachine",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "GameKitTraversalTests",
            dependencies: [
                "GameKitTraversal",
                "GameKitMachine",
                "NetworkImpairment",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "GameKitOnlineTests",
            dependencies: [
                "GameKitOnline",
                "GameKitMachine",
                "GameKitTraversal",
                "NetworkImpairment",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "GameKitTransportTests",
            dependencies: [
                "GameKitTransport",
                "GameKitMachine",
                "NetworkImpairment",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "GameKitDiscoveryTests",
            dependencies: [
                "GameKitDiscovery",
                "GameKitMachine",
                "NetworkImpairment",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "OpenGameKitTests",
            dependencies: [
                .product(name: "Prometheus", package: "swift-prometheus"),
                "OpenGameKit",
                "GameKitTransport",
                "GameKitDiscovery",
                "GameKitOnline",
                "NetworkImpairment",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .target(
            name: "VoiceTestSupport",
            dependencies: ["GameKitVoiceEngine", "NetworkImpairment"],
            path: "Tests/VoiceTestSupport"
        ),
        .testTarget(
            name: "GameKitVoiceEngineTests",
            dependencies: ["GameKitVoiceEngine", "VoiceTestSupport", "NetworkImpairment", "VoiceSimulation"]
        ),
        .testTarget(
            name: "OpenGameKitVoiceTests",
            dependencies: [
                "OpenGameKitVoice", "OpenGameKit", "GameKitTransport", "GameKitTraversal", "GameKitVoiceEngine", "NetworkImpairment", "VoiceTestSupport",
                "GameKitOnline", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "NetworkImpairmentTests",
            dependencies: [
                "NetworkImpairment",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
