/// Counters of one endpoint: what arrived, what was dropped and why, what the handshake did.
public struct EndpointStatistics: Sendable, Equatable {
    /// Datagrams received on the socket (after splitting receive-offload batches).
    public var datagramsReceived: UInt64 = 0
    /// Datagrams handed to the socket.
    public var datagramsSent: UInt64 = 0
    /// Too short, unknown type, or a handshake message that does not parse.
    public var droppedMalformed: UInt64 = 0
    /// Data packets for a link this endpoint does not have (unknown source).
    public var droppedUnknownLink: UInt64 = 0
    /// Data packets that did not authenticate (corrupted or forged).
    public var droppedUnauthenticated: UInt64 = 0
    /// Data packets already received (replayed or duplicated).
    public var droppedReplayed: UInt64 = 0
    /// Handshake messages that match no handshake in progress.
    public var droppedStrayHandshake: UInt64 = 0
    /// Initiations dropped because too many requests await an answer.
    public var droppedOverload: UInt64 = 0
    /// Initiations of a protocol version this endpoint does not speak.
    public var unsupportedVersions: UInt64 = 0
    /// Handshakes that failed on a wrong password: requests that did not open (as responder),
    /// challenges whose confirmation was wrong (as initiator).
    public var handshakeAuthenticationFailures: UInt64 = 0
    /// Challenges sent: each answers one password guess of its initiator (PROTOCOL §6.3).
    public var challengesSent: UInt64 = 0
    /// Challenges that expired with no request after them: failed guesses, or initiators gone.
    public var challengesExpired: UInt64 = 0
    /// Challenges answered with an authenticated cancel: initiators that had given up before the
    /// challenge reached them (a timeout, a path that lost the race), with the right password.
    public var challengesCancelled: UInt64 = 0
    /// Initiations left unanswered because their source spent its password guesses.
    public var guessesLimited: UInt64 = 0
    /// Cookie replies sent to initiations while under load.
    public var cookieRepliesSent: UInt64 = 0
    /// Authenticated initiations reported as connection requests.
    public var connectionRequestsReceived: UInt64 = 0
    /// Links opened, on either side.
    public var linksOpened: UInt64 = 0
    /// Links closed, for any reason.
    public var linksClosed: UInt64 = 0
    /// Datagrams not sent because the kernel has no route to their destination.
    public var droppedUnroutable: UInt64 = 0
    /// Times the socket was closed under the endpoint (by a send error) and bound again.
    public var socketsReopened: UInt64 = 0
    /// Liveness probes sent to watched peers.
    public var livenessProbesSent: UInt64 = 0
    /// Liveness probes answered.
    public var livenessProbesAnswered: UInt64 = 0
    /// Liveness probes dropped unanswered: malformed, unauthenticated, or over a budget.
    public var livenessProbesDropped: UInt64 = 0
    /// Liveness cookies sent to probes of unknown keys while under load.
    public var livenessCookiesSent: UInt64 = 0
    /// Answers to this endpoint's probes accepted (authenticated, for an outstanding probe).
    public var livenessAnswersAccepted: UInt64 = 0
    /// Answers ignored: no outstanding probe has their nonce, or their MAC is wrong.
    public var livenessAnswersIgnored: UInt64 = 0
    /// Links moved to another of their peer's addresses (PROTOCOL §6.7).
    public var linkMoves: UInt64 = 0
    /// Silences suspected and then cleared by an answer before their confirmation: answers that
    /// waited in the socket while this endpoint's process was held up (PROTOCOL §6.6).
    public var livenessSuspicionsCleared: UInt64 = 0

    /// Challenges awaiting their initiator's request right now.
    public var pendingChallenges: Int = 0
    /// Requests awaiting the application's answer right now.
    public var pendingRequests: Int = 0
    /// Links accepted but not yet confirmed by their initiator.
    public var unconfirmedLinks: Int = 0
    /// Handshakes this side initiated, awaiting a response.
    public var pendingInitiations: Int = 0
    /// Links, including those closing.
    public var links: Int = 0

    /// All zeros.
    public init() {}
}
