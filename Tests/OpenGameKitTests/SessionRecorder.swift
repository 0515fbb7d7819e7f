import NetworkImpairment
import Dispatch
import Foundation
import NIOConcurrencyHelpers
@testable import OpenGameKit
import Testing

/// What a session told its delegate and data handler.
enum Heard: Equatable, Sendable {
    case state(String, GKPeerConnectionState)
    case request(String, name: String?)
    case failed(String, GKSessionError.Code)
    case sessionFailed(GKSessionError.Code)
    case data(String, Data)

    /// The peer the event is about, if any.
    var peer: String? {
        switch self {
        case .state(let peer, _), .request(let peer, _), .failed(let peer, _), .data(let peer, _): peer
        case .sessionFailed: nil
        }
    }
}

/// A delegate and data handler that records everything, on its own serial queue, and can
/// accept or deny requests as they come.
final class SessionRecorder: GKSessionDelegate, GKSessionDataReceiveHandler, @unchecked Sendable {
    enum Answer { case accept, deny, none }

    let session: GKSession
    let queue: DispatchQueue
    private let heard = NIOLockedValueBox<[Heard]>([])
    private let answerBox: NIOLockedValueBox<Answer>
    let context = UnsafeMutableRawPointer(bitPattern: 0x5EED)
    private let contexts = NIOLockedValueBox<[UnsafeMutableRawPointer?]>([])
    /// The words of the last failed connection with each peer (the delegate's error).
    let failureWords = NIOLockedValueBox<[String: String]>([:])
    /// More state for a failed wait's message (for instance the rendezvous's statistics).
    let surroundings = NIOLockedValueBox<(@Sendable () -> String)?>(nil)

    /// Every live recorder by its session's peer ID: a failed wait for an event about a peer also
    /// says what that peer heard and its counters (the other side of a failed connection).
    private static let byPeer = NIOLockedValueBox<[String: WeakRecorder]>([:])
    private struct WeakRecorder { weak var recorder: SessionRecorder? }

    init(_ session: GKSession, answer: Answer = .accept) {
        self.session = session
        self.queue = DispatchQueue(label: "recorder \(session.displayName!)")
        self.answerBox = NIOLockedValueBox(answer)
        session.delegateQueue = self.queue
        session.delegate = self
        session.setDataReceiveHandler(self, withContext: self.context)
        if let peerID = session.peerID {
            Self.byPeer.withLockedValue { table in
                table = table.filter { $0.value.recorder != nil }
                table[peerID] = WeakRecorder(recorder: self)
            }
        }
    }

    var answer: Answer {
        get { self.answerBox.withLockedValue { $0 } }
        set { self.answerBox.withLockedValue { $0 = newValue } }
    }

    var events: [Heard] { self.heard.withLockedValue { $0 } }

    /// Every context the data handler was called with.
    var receivedContexts: [UnsafeMutableRawPointer?] { self.contexts.withLockedValue { $0 } }

    func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState) {
        self.heard.withLockedValue { $0.append(.state(peerID, state)) }
    }

    func session(_ session: GKSession, didReceiveConnectionRequestFromPeer peerID: String) {
        self.heard.withLockedValue { $0.append(.request(peerID, name: session.displayName(forPeer: peerID))) }
        switch self.answer {
        case .accept:
            do {
                try session.acceptConnection(fromPeer: peerID)
            } catch {
                FileHandle.standardError.write(Data("\(session.displayName!) could not accept \(peerID): \(error)\n".utf8))
            }
        case .deny: session.denyConnection(fromPeer: peerID)
        case .none: break
        }
    }

    func session(_ session: GKSession, connectionWithPeerFailed peerID: String, withError error: Error) {
        self.failureWords.withLockedValue { $0[peerID] = error.localizedDescription }
        self.heard.withLockedValue { $0.append(.failed(peerID, (error as! GKSessionError).code)) }
    }

    func session(_ session: GKSession, didFailWithError error: Error) {
        self.heard.withLockedValue { $0.append(.sessionFailed((error as! GKSessionError).code)) }
    }

    func receiveData(_ data: Data, fromPeer peer: String, inSession session: GKSession, context: UnsafeMutableRawPointer?) {
        self.heard.withLockedValue { $0.append(.data(peer, data)) }
        self.contexts.withLockedValue { $0.append(context) }
    }

    /// Waits (bounded: a broken run cannot hang the suite) until `condition` holds for what was
    /// heard; returns whether it did.
    @discardableResult
    func wait(seconds: Double = 20, about peer: String? = nil, until condition: ([Heard]) -> Bool) async -> Bool {
        if await waitUntil(seconds: seconds, every: .milliseconds(10), { condition(self.events) }) { return true }
        // A failed wait says what was heard instead, and what the peer it was about heard, so a
        // flaky run can be read afterwards.
        var line = "\(self.session.displayName!) (\(self.session.peerID!)) waited \(seconds) s in vain; it heard \(self.events); \(self.diagnostics)"
        if let peer, let other = Self.byPeer.withLockedValue({ $0[peer]?.recorder }), other !== self {
            line += "\n  its peer \(other.session.displayName!) (\(peer)) heard \(other.events); \(other.diagnostics)"
        }
        if let surroundings = self.surroundings.withLockedValue({ $0 }) { line += "\n  \(surroundings())" }
        FileHandle.standardError.write(Data((line + "\n").utf8))
        return false
    }

    /// Waits until `event` has been heard.
    @discardableResult
    func wait(for event: Heard, seconds: Double = 20) async -> Bool {
        await self.wait(seconds: seconds, about: event.peer) { $0.contains(event) }
    }

    /// Waits until `peer` is seen available.
    func waitUntilSees(_ other: GKSession, seconds: Double = 20) async -> Bool {
        await self.wait(for: .state(other.peerID, .stateAvailable), seconds: seconds)
    }

    /// The session's and its transport's counters, for a failure's message.
    var diagnostics: String {
        "session \(self.session.statistics); transport \(self.session.transportStatistics.map { "\($0)" } ?? "not bound")"
    }

    func count(_ event: Heard) -> Int { self.events.filter { $0 == event }.count }
}
