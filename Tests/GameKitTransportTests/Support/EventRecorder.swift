import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NetworkImpairment

@testable import GameKitTransport

/// Collects an endpoint's events and waits (with a generous bound) for a condition on them.
final class EventRecorder: Sendable {
    private let events = NIOLockedValueBox<[TransportEvent]>([])
    let endpoint = NIOLockedValueBox<TransportEndpoint?>(nil)
    /// How connection requests are answered automatically (nil: left to the test).
    let answer: NIOLockedValueBox<Answer?>

    enum Answer: Sendable {
        case accept
        case deny(UInt16)
    }

    init(answer: Answer? = .accept) {
        self.answer = NIOLockedValueBox(answer)
    }

    func record(_ event: TransportEvent) {
        self.events.withLockedValue { $0.append(event) }
        if case .connectionRequest(let request) = event, let endpoint = self.endpoint.withLockedValue({ $0 }) {
            switch self.answer.withLockedValue({ $0 }) {
            case .accept: _ = try? endpoint.accept(request.id)
            case .deny(let code): try? endpoint.deny(request.id, code: code)
            case nil: break
            }
        }
    }

    var all: [TransportEvent] { self.events.withLockedValue { $0 } }

    func messages(on link: LinkID? = nil) -> [ByteBuffer] {
        self.all.compactMap {
            if case .received(let message, let l, _) = $0, link == nil || l == link { return message } else { return nil }
        }
    }

    var openedLinks: [LinkID] { self.all.compactMap { if case .linkOpened(let link, _, _) = $0 { return link } else { return nil } } }
    var closeReasons: [LinkCloseReason] { self.all.compactMap { if case .linkClosed(_, let reason) = $0 { return reason } else { return nil } } }

    /// Waits until `condition` holds; false if it still does not after `seconds` (a bound that
    /// only stops a broken test from hanging, not a timing requirement).
    func wait(seconds: Double = 20, until condition: ([TransportEvent]) -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition(self.all) { return true }
            try? await Task.sleep(nanoseconds: 5_000_000)
        }
        return condition(self.all)
    }
}

extension TransportEndpoint {
    /// Binds on loopback with a recorder as the event handler.
    static func loopback(
        _ recorder: EventRecorder,
        configuration: TransportConfiguration = TransportConfiguration(),
        host: String = "127.0.0.1"
    ) async throws -> TransportEndpoint {
        try NetworkSandbox.requireIsolation()
        let endpoint = try await TransportEndpoint.bind(host: host, port: 0, configuration: configuration) { recorder.record($0) }
        recorder.endpoint.withLockedValue { $0 = endpoint }
        return endpoint
    }
}
