import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitTransport

@Suite("Delivery")
struct DeliveryTests {
    /// Sends `count` numbered messages from A to B over a fresh link and runs until all arrived.
    static func transfer(
        count: Int,
        size: Int,
        mode: SendMode = .reliable,
        profile: ImpairmentProfile = .perfect,
        configuration: TransportConfiguration = TransportConfiguration(),
        seed: UInt64 = 1,
        limit: TimeAmount = .seconds(120)
    ) -> (network: VirtualNetwork, sender: LinkID, receiver: LinkID) {
        var network = VirtualNetwork()
        let a = network.addNode(configuration: configuration, profile: profile, seed: seed)
        let b = network.addNode(configuration: configuration, profile: profile, seed: seed &+ 1)
        guard let (sender, receiver) = network.openLink(from: a, to: b) else {
            Issue.record("link did not open")
            return (network, LinkID(rawValue: 0), LinkID(rawValue: 0))
        }
        for sequence in 0..<count {
            network.nodes[a].outgoing.append((sender, .numbered(sequence, size: size), mode))
        }
        if mode == .reliable {
            network.run(for: limit) { $0.nodes[b].received(on: receiver, mode: .reliable).count >= count }
        } else {
            network.run(for: limit) { $0.nodes[a].outgoing.isEmpty && $0.nodes[a].machine.links[sender.rawValue]?.machine.unreliableQueue.isEmpty == true }
            network.run(for: .seconds(3))
        }
        return (network, sender, receiver)
    }

    // MARK: - Reliable

    @Test func reliableMessagesArriveOnceAndInOrderOnAPerfectPath() {
        let (network, _, receiver) = Self.transfer(count: 2000, size: 100)
        let received = network.nodes[1].received(on: receiver, mode: .reliable)
        #expect(received.map(\.sequenceNumber) == Array(0..<2000))
        #expect(received.allSatisfy { $0.readableBytes == 100 })
    }

    @Test func reliableMessagesSurviveLossDuplicationAndReordering() {
        let profile = ImpairmentProfile(
            loss: 0.1,
            delay: .milliseconds(10),
            jitter: .milliseconds(5),
            reorderProbability: 0.05,
            reorderDelay: .milliseconds(20),
            duplicateProbability: 0.05
        )
        let (network, sender, receiver) = Self.transfer(count: 1000, size: 700, profile: profile)
        #expect(network.nodes[1].received(on: receiver, mode: .reliable).map(\.sequenceNumber) == Array(0..<1000))
        let stats = network.nodes[0].machine.linkStatistics(sender)!
        #expect(stats.packetsLost > 0)
        #expect(stats.retransmittedBytes > 0)
        #expect(network.nodes[1].machine.endpointStatistics.droppedReplayed > 0)
    }

    @Test(arguments: [1, 1199, 1200, 65_536, 1 << 20])
    func reliableMessagesOfAnySizeUpToTheMaximumArriveWhole(size: Int) {
        let (network, _, receiver) = Self.transfer(count: 3, size: size, profile: ImpairmentProfile(loss: 0.02, delay: .milliseconds(5)))
        let received = network.nodes[1].received(on: receiver, mode: .reliable)
        #expect(received.map(\.readableBytes) == [size, size, size])
        #expect(received.map(\.sequenceNumber) == (size >= 8 ? [0, 1, 2] : [nil, nil, nil]))
    }

    @Test func emptyReliableMessagesAreDelivered() {
        var network = VirtualNetwork()
        let (sender, receiver) = network.openLink(from: network.addNode(), to: network.addNode())!
        for _ in 0..<3 { network.nodes[0].outgoing.append((sender, ByteBuffer(), .reliable)) }
        network.run(for: .seconds(1)) { $0.nodes[1].received(on: receiver, mode: .reliable).count == 3 }
        #expect(network.nodes[1].received(on: receiver, mode: .reliable).map(\.readableBytes) == [0, 0, 0])
    }

    @Test func singleLossIsRepairedByFastRetransmitWithoutTimeout() {
        var network = VirtualNetwork()
        let a = network.addNode(profile: ImpairmentProfile(delay: .milliseconds(20)))
        let b = network.addNode(profile: ImpairmentProfile(delay: .milliseconds(20)))
        let (sender, receiver) = network.openLink(from: a, to: b)!
        var dataPackets = 0
        network.interceptor = { datagram in
            guard datagram.bytes.getInteger(at: 0, as: UInt8.self) == PacketType.data.rawValue, datagram.destination == VirtualNetwork.address(2) else { return true }
            dataPackets += 1
            return dataPackets != 5  // drop one packet in the middle
        }
        for sequence in 0..<20 { network.nodes[a].outgoing.append((sender, .numbered(sequence, size: 1000), .reliable)) }
        network.run(for: .seconds(10)) { $0.nodes[b].received(on: receiver, mode: .reliable).count == 20 }
        let stats = network.nodes[a].machine.linkStatistics(sender)!
        #expect(network.nodes[b].received(on: receiver, mode: .reliable).count == 20)
        #expect(stats.packetsLost == 1)
        #expect(stats.retransmissionTimeouts == 0)
    }

    @Test func blackHoledPathBacksOffTheRetransmissionTimeoutAndRecovers() {
        var network = VirtualNetwork()
        var configuration = TransportConfiguration()
        configuration.disconnectTimeout = .seconds(60)
        let a = network.addNode(configuration: configuration, profile: ImpairmentProfile(delay: .milliseconds(5)))
        let b = network.addNode(configuration: configuration, profile: ImpairmentProfile(delay: .milliseconds(5)))
        let (sender, receiver) = network.openLink(from: a, to: b)!
        final class Switch { var blocked = true }
        let path = Switch()
        network.interceptor = { _ in !path.blocked }
        let before = network.nodes[a].machine.linkStatistics(sender)!.retransmissionTimeout
        network.nodes[a].outgoing.append((sender, .numbered(0, size: 10), .reliable))
        network.run(for: .seconds(3))
        let during = network.nodes[a].machine.linkStatistics(sender)!
        #expect(during.retransmissionTimeouts >= 3)
        // Doubled at each expiry (RFC 6298 5.5).
        #expect(during.retransmissionTimeout.nanoseconds == before.nanoseconds << during.retransmissionTimeouts)
        path.blocked = false
        network.run(for: .seconds(10)) { $0.nodes[b].received(on: receiver, mode: .reliable).count == 1 }
        #expect(network.nodes[b].received(on: receiver, mode: .reliable).count == 1)
        network.run(for: .milliseconds(100))
        // New data acknowledged: the back-off is gone.
        #expect(network.nodes[a].machine.linkStatistics(sender)!.retransmissionTimeout < before * 2)
    }

    @Test func statisticsReflectTheRoundTripAndTheLoss() {
        let (network, sender, receiver) = Self.transfer(count: 3000, size: 1000, profile: ImpairmentProfile(loss: 0.05, delay: .milliseconds(25)))
        #expect(network.nodes[1].received(on: receiver, mode: .reliable).count == 3000)
        let stats = network.nodes[0].machine.linkStatistics(sender)!
        let rtt = stats.smoothedRTT!
        #expect(rtt >= .milliseconds(50) && rtt < .milliseconds(80))
        #expect(stats.lossRate > 0.02 && stats.lossRate < 0.1)
        #expect(stats.reliableMessagesSent == 3000)
        #expect(stats.messageBytesSent == 3_000_000)
        #expect(stats.congestionWindow >= 2 * 1200)
        let receiverStats = network.nodes[1].machine.linkStatistics(receiver)!
        #expect(receiverStats.reliableMessagesReceived == 3000)
        #expect(receiverStats.messageBytesReceived == 3_000_000)
    }

    // MARK: - Unreliable

    @Test func unreliableMessagesOnAPerfectPathAllArrive() {
        let (network, _, receiver) = Self.transfer(count: 500, size: 64, mode: .unreliable)
        let received = network.nodes[1].received(on: receiver, mode: .unreliable)
        #expect(Set(received.compactMap(\.sequenceNumber)) == Set(0..<500))
    }

    @Test func smallUnreliableMessagesShareDatagrams() {
        let (network, sender, _) = Self.transfer(count: 100, size: 20, mode: .unreliable)
        let stats = network.nodes[0].machine.linkStatistics(sender)!
        // 100 messages of 20 bytes fit in a few packets, not 100.
        #expect(stats.packetsSent < 20)
    }

    @Test func largeUnreliableMessagesArriveWholeOrNotAtAll() {
        let size = 95_000
        let (network, _, receiver) = Self.transfer(count: 40, size: size, mode: .unreliable, profile: ImpairmentProfile(loss: 0.01, delay: .milliseconds(5)))
        let received = network.nodes[1].received(on: receiver, mode: .unreliable)
        #expect(received.count < 40)  // ~80 fragments each: most lose one
        for message in received {
            #expect(message.readableBytes == size)
            let sequence = message.sequenceNumber!
            #expect(message.getSlice(at: message.readerIndex, length: size) == ByteBuffer.numbered(sequence, size: size))
        }
        let stats = network.nodes[1].machine.linkStatistics(receiver)!
        #expect(stats.unreliableMessagesDropped + UInt64(received.count) <= 40)
        #expect(stats.unreliableMessagesDropped > 0)
    }

    @Test func unreliableMessagesAreNeverRetransmitted() {
        let (network, sender, receiver) = Self.transfer(count: 300, size: 500, mode: .unreliable, profile: ImpairmentProfile(loss: 0.2))
        let received = network.nodes[1].received(on: receiver, mode: .unreliable).compactMap(\.sequenceNumber)
        #expect(received.count < 300)
        #expect(Set(received).count == received.count)
        #expect(network.nodes[0].machine.linkStatistics(sender)!.retransmittedBytes == 0)
    }

    // MARK: - Backpressure and limits

    @Test func sendBeyondTheBufferCapacityFailsWithBufferFullAndMemoryStaysBounded() throws {
        var configuration = TransportConfiguration()
        configuration.sendBufferCapacity = 10_000
        var network = VirtualNetwork()
        let a = network.addNode(configuration: configuration)
        let b = network.addNode(configuration: configuration)
        let (sender, receiver) = network.openLink(from: a, to: b)!
        var accepted = 0
        var refusal: TransportError?
        while refusal == nil {
            do {
                try network.nodes[a].machine.send(.numbered(accepted, size: 3000), on: sender, mode: .reliable)
                accepted += 1
            } catch {
                refusal = error
            }
        }
        #expect(refusal == .bufferFull)
        let queued = network.nodes[a].machine.links[sender.rawValue]!.machine.bytesQueued
        #expect(queued <= 10_000 + 3000 + 16)
        // Nothing refused was lost: once drained, sending works again and all accepted messages arrive.
        network.run(for: .seconds(5)) { $0.nodes[b].received(on: receiver, mode: .reliable).count == accepted }
        #expect(network.nodes[b].received(on: receiver, mode: .reliable).map(\.sequenceNumber) == Array(0..<accepted))
        #expect(network.nodes[a].events.contains { if case .sendBufferAvailable(sender) = $0 { true } else { false } })
        try network.nodes[a].machine.send(.numbered(accepted, size: 3000), on: sender, mode: .reliable)
    }

    @Test func aMessageLargerThanTheCapacityIsAcceptedIntoAnEmptyBuffer() throws {
        var configuration = TransportConfiguration()
        configuration.sendBufferCapacity = 1000
        var network = VirtualNetwork()
        let (sender, _) = network.openLink(from: network.addNode(configuration: configuration), to: network.addNode(configuration: configuration))!
        try network.nodes[0].machine.send(ByteBuffer(repeating: 1, count: 50_000), on: sender, mode: .reliable)
        #expect(throws: TransportError.bufferFull) {
            try network.nodes[0].machine.send(ByteBuffer(repeating: 1, count: 1), on: sender, mode: .reliable)
        }
    }

    @Test(arguments: [(SendMode.reliable, 1 << 20), (SendMode.unreliable, 96 << 10)])
    func messagesOverTheMaximumFailWithDataTooBig(mode: SendMode, limit: Int) {
        var network = VirtualNetwork()
        let (sender, _) = network.openLink(from: network.addNode(), to: network.addNode())!
        #expect(throws: TransportError.dataTooBig(size: limit + 1, limit: limit)) {
            try network.nodes[0].machine.send(ByteBuffer(repeating: 0, count: limit + 1), on: sender, mode: mode)
        }
        #expect(throws: Never.self) {
            try network.nodes[0].machine.send(ByteBuffer(repeating: 0, count: limit), on: sender, mode: mode)
        }
    }

    @Test func theSmallerSidesMessageLimitApplies() {
        var small = TransportConfiguration()
        small.maxReliableMessageSize = 5000
        var network = VirtualNetwork()
        let (sender, _) = network.openLink(from: network.addNode(), to: network.addNode(configuration: small))!
        #expect(throws: TransportError.dataTooBig(size: 5001, limit: 5000)) {
            try network.nodes[0].machine.send(ByteBuffer(repeating: 0, count: 5001), on: sender, mode: .reliable)
        }
    }

    @Test func sendingOnAnUnknownLinkFailsWithLinkNotOpen() {
        var network = VirtualNetwork()
        network.addNode()
        #expect(throws: TransportError.linkNotOpen) {
            try network.nodes[0].machine.send(ByteBuffer(), on: LinkID(rawValue: 12345), mode: .reliable)
        }
    }

    @Test func aSmallReceiveWindowLimitsTheSenderWithoutBreakingTheLink() {
        var configuration = TransportConfiguration()
        configuration.receiveWindow = 20_000
        configuration.maxReliableMessageSize = 10_000
        let (network, _, receiver) = Self.transfer(count: 500, size: 2000, profile: ImpairmentProfile(delay: .milliseconds(10)), configuration: configuration)
        #expect(network.nodes[1].received(on: receiver, mode: .reliable).count == 500)
        #expect(network.nodes[1].closeReasons.isEmpty)
    }

    // MARK: - Liveness and closing

    @Test func idleLinkStaysOpenThroughKeepalives() {
        var configuration = TransportConfiguration()
        configuration.disconnectTimeout = .seconds(2)
        var network = VirtualNetwork()
        let a = network.addNode(configuration: configuration)
        let b = network.addNode(configuration: configuration)
        let (sender, _) = network.openLink(from: a, to: b)!
        network.run(for: .seconds(20))
        #expect(network.nodes[a].closeReasons.isEmpty)
        #expect(network.nodes[b].closeReasons.isEmpty)
        #expect(network.nodes[a].machine.linkStatistics(sender)!.packetsSent >= 20)
    }

    @Test func silentPeerIsDeclaredGoneAfterTheDisconnectTimeout() {
        var configuration = TransportConfiguration()
        configuration.disconnectTimeout = .seconds(3)
        var network = VirtualNetwork()
        let a = network.addNode(configuration: configuration)
        let b = network.addNode(configuration: configuration)
        _ = network.openLink(from: a, to: b)!
        let silencedAt = network.now
        let silenced = network.nodes[b].address
        network.interceptor = { $0.source != silenced }
        network.run(for: .seconds(10)) { !$0.nodes[a].closeReasons.isEmpty }
        #expect(network.nodes[a].closeReasons == [.timedOut])
        let elapsed = network.now - silencedAt
        #expect(elapsed >= .seconds(3) && elapsed <= .seconds(4))
    }

    @Test func gracefulCloseDeliversQueuedDataThenTellsThePeer() throws {
        var network = VirtualNetwork()
        let a = network.addNode(profile: ImpairmentProfile(loss: 0.05, delay: .milliseconds(10)))
        let b = network.addNode(profile: ImpairmentProfile(loss: 0.05, delay: .milliseconds(10)))
        let (sender, receiver) = network.openLink(from: a, to: b)!
        for sequence in 0..<200 { try network.nodes[a].machine.send(.numbered(sequence, size: 1000), on: sender, mode: .reliable) }
        try network.nodes[a].machine.close(sender, code: 9, now: network.now)
        #expect(throws: TransportError.linkNotOpen) {
            try network.nodes[a].machine.send(ByteBuffer(), on: sender, mode: .reliable)
        }
        network.run(for: .seconds(10)) { !$0.nodes[b].closeReasons.isEmpty }
        #expect(network.nodes[b].received(on: receiver, mode: .reliable).map(\.sequenceNumber) == Array(0..<200))
        #expect(network.nodes[b].closeReasons == [.closedByPeer(code: 9)])
        #expect(network.nodes[a].closeReasons == [.closedLocally(code: 9)])
        network.run(for: .seconds(5))
        #expect(network.nodes[a].machine.links.isEmpty)
        #expect(network.nodes[b].machine.links.isEmpty)
    }

    @Test func closeReachesThePeerAtOnceWhenNothingIsQueued() throws {
        var network = VirtualNetwork()
        let a = network.addNode(profile: ImpairmentProfile(delay: .milliseconds(10)))
        let b = network.addNode(profile: ImpairmentProfile(delay: .milliseconds(10)))
        let (sender, _) = network.openLink(from: a, to: b)!
        network.run(for: .milliseconds(100))
        let start = network.now
        try network.nodes[a].machine.close(sender, code: 1, now: network.now)
        network.run(for: .seconds(5)) { !$0.nodes[b].closeReasons.isEmpty }
        #expect(network.now - start == .milliseconds(10))
    }

    @Test func shuttingDownClosesEveryLinkAndTellsThePeers() {
        var network = VirtualNetwork()
        let server = network.addNode()
        let clients = (0..<3).map { _ in network.addNode() }
        for client in clients { _ = network.openLink(from: client, to: server) }
        network.nodes[server].machine.closeAll(now: network.now)
        network.run(for: .seconds(1))
        for client in clients {
            #expect(network.nodes[client].closeReasons == [.closedByPeer(code: endpointClosingCode)])
        }
        #expect(network.nodes[server].closeReasons.count == 3)
    }

    /// The socket closes right after shutdown, so no late packet could draw the CLOSE again:
    /// it goes out in three packets, and the peer hears it when two of them are lost.
    @Test func shutdownSendsItsCloseThreeTimesSoTwoLossesDoNotStrandThePeer() {
        var network = VirtualNetwork()
        let server = network.addNode()
        let client = network.addNode()
        _ = network.openLink(from: client, to: server)
        network.run(for: .milliseconds(100))
        var fromServer = 0
        var fromClient = 0
        network.interceptor = { datagram in
            if datagram.destination == VirtualNetwork.address(2) {
                fromServer += 1
                return fromServer > 2
            }
            fromClient += 1
            return true
        }
        network.nodes[server].machine.closeAll(now: network.now)
        network.run(for: .seconds(1))
        #expect(fromServer == EndpointMachine.shutdownCloseCopies)
        #expect(network.nodes[client].closeReasons == [.closedByPeer(code: endpointClosingCode)])
        // Copies after the first are absorbed silently: no CLOSE comes back.
        #expect(fromClient == 0)
    }

    // MARK: - Packet protection

    @Test func tamperedReplayedAndUnknownDatagramsAreDroppedAndCounted() {
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode()
        let (sender, receiver) = network.openLink(from: a, to: b)!
        var captured: [SimulatedDatagram] = []
        network.interceptor = { datagram in
            guard datagram.destination == VirtualNetwork.address(2), datagram.bytes.getInteger(at: 0, as: UInt8.self) == PacketType.data.rawValue else {
                return true
            }
            captured.append(datagram)
            switch captured.count {
            case 3: datagram.bytes.flipBit(at: 8 * 40)  // a bit of the ciphertext
            case 5: datagram.bytes.flipBit(at: 8 * 8)  // the top bit of the packet number
            default: break
            }
            return true
        }
        // One message per packet, so that there are packets to replay and tamper with.
        for sequence in 0..<10 { network.nodes[a].outgoing.append((sender, .numbered(sequence, size: 1100), .reliable)) }
        network.run(for: .seconds(1)) { $0.nodes[b].received(on: receiver, mode: .reliable).count == 10 }
        network.interceptor = nil
        let afterTampering = network.nodes[b].machine.endpointStatistics
        #expect(afterTampering.droppedUnauthenticated == 2)

        // Replayed.
        network.injected.append(captured[6])
        // Unknown link index, from an unknown source.
        var unknown = captured[7]
        unknown.source = VirtualNetwork.address(77)
        unknown.bytes.setInteger(UInt32(0xDEAD_BEEF), at: 4)
        network.injected.append(unknown)
        // Garbage.
        network.injected.append(SimulatedDatagram(source: VirtualNetwork.address(78), destination: VirtualNetwork.address(2), bytes: ByteBuffer(bytes: [0x42, 1, 2, 3])))
        network.run(for: .milliseconds(100))

        let after = network.nodes[b].machine.endpointStatistics
        #expect(after.droppedReplayed == afterTampering.droppedReplayed + 1)
        #expect(after.droppedUnknownLink == afterTampering.droppedUnknownLink + 1)
        #expect(after.droppedMalformed == afterTampering.droppedMalformed + 1)
        #expect(after.droppedUnauthenticated == 2)
        // Nothing was lost or delivered twice, and the link survived.
        #expect(network.nodes[b].received(on: receiver, mode: .reliable).map(\.sequenceNumber) == Array(0..<10))
        #expect(network.nodes[b].closeReasons.isEmpty)
    }

    @Test func peerThatMovesToANewAddressKeepsItsLink() {
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode()
        let (sender, receiver) = network.openLink(from: a, to: b)!
        let moved = VirtualNetwork.address(1, port: 5555)
        let original = network.nodes[a].address
        // A's NAT mapping changes: B sees A's packets from a new port, and replies reach A there.
        network.interceptor = { datagram in
            if datagram.source == original { datagram.source = moved }
            if datagram.destination == moved { datagram.destination = original }
            return true
        }
        for sequence in 0..<50 { network.nodes[a].outgoing.append((sender, .numbered(sequence, size: 100), .reliable)) }
        network.run(for: .seconds(2)) { $0.nodes[b].received(on: receiver, mode: .reliable).count == 50 }
        #expect(network.nodes[b].received(on: receiver, mode: .reliable).count == 50)
        #expect(network.nodes[b].machine.links[receiver.rawValue]?.machine.remoteAddress == moved)
    }

    // MARK: - Timeouts: spurious or genuine

    enum StallEnding {
        /// Everything held is delivered late: the timeouts were spurious.
        case releaseAll
        /// Everything held is lost: the timeouts were genuine.
        case dropAll
        /// Only what was sent after the first timeout (the probes) gets through: genuine, and an
        /// acknowledgement of a probe sent between two timeouts must not pass for an original.
        case releaseProbesOnly
    }

    /// Holds every data packet A sends for a while (a stall spanning several timeouts), then ends
    /// the stall as `ending` says. Returns the window before, the window after, and the timeouts.
    static func stall(ending: StallEnding) -> (before: Int, after: Int, timeouts: UInt64) {
        var network = VirtualNetwork()
        let a = network.addNode(profile: ImpairmentProfile(delay: .milliseconds(5)))
        let b = network.addNode(profile: ImpairmentProfile(delay: .milliseconds(5)))
        let (sender, receiver) = network.openLink(from: a, to: b)!
        for sequence in 0..<400 { network.nodes[a].outgoing.append((sender, .numbered(sequence, size: 1000), .reliable)) }
        network.run(for: .milliseconds(200))
        // The window before the stall: measured now, because with a low timeout floor the first
        // timeout can come within the 20 ms below.
        let before = network.nodes[a].machine.linkStatistics(sender)!.congestionWindow
        final class Stash { var held: [SimulatedDatagram] = []; var holding = true }
        let stash = Stash()
        network.interceptor = { datagram in
            guard stash.holding, datagram.destination == VirtualNetwork.address(2) else { return true }
            stash.held.append(datagram)
            return false
        }
        for sequence in 400..<800 { network.nodes[a].outgoing.append((sender, .numbered(sequence, size: 1000), .reliable)) }
        network.run(for: .milliseconds(20))
        // The first packet number sent at or after the first timeout: everything from there on is
        // a timeout probe (the window is full, so nothing else goes out during the stall).
        var firstProbe: UInt64?
        for _ in 0..<400 {  // 400 ms: at least two timeouts pass
            let next = network.nodes[a].machine.links[sender.rawValue]!.machine.nextPacketNumber
            network.run(for: .milliseconds(1))
            if firstProbe == nil, network.nodes[a].machine.linkStatistics(sender)!.retransmissionTimeouts >= 1 {
                firstProbe = next
            }
        }
        stash.holding = false
        switch ending {
        case .releaseAll: network.injected.append(contentsOf: stash.held)
        case .dropAll: break
        case .releaseProbesOnly:
            network.injected.append(contentsOf: stash.held.filter { $0.bytes.getInteger(at: 8, as: UInt64.self)! >= firstProbe! })
        }
        network.run(for: .milliseconds(30))
        let stats = network.nodes[a].machine.linkStatistics(sender)!
        network.run(for: .seconds(10)) { $0.nodes[b].received(on: receiver, mode: .reliable).count == 800 }
        #expect(network.nodes[b].received(on: receiver, mode: .reliable).map(\.sequenceNumber) == Array(0..<800))
        return (before, stats.congestionWindow, stats.retransmissionTimeouts)
    }

    @Test func aSpuriousTimeoutGivesTheWindowBack() {
        let (before, after, timeouts) = Self.stall(ending: .releaseAll)
        #expect(timeouts >= 2)
        #expect(after >= before)
    }

    @Test(arguments: [StallEnding.dropAll, .releaseProbesOnly])
    func aGenuineTimeoutKeepsTheWindowSmall(ending: StallEnding) {
        let (before, after, timeouts) = Self.stall(ending: ending)
        #expect(timeouts >= 2)
        #expect(after < before / 2)
    }

    @Test func noTimerStaysDueWhileAVanishedPeerHoldsTheWindowFull() {
        // Data in flight when the peer vanishes: timeouts shrink the window below what is in
        // flight, and the keepalive interval passes while a PING could not go out. The virtual
        // network records an issue if any deadline stays due (a real event loop would spin).
        var network = VirtualNetwork()
        let a = network.addNode(profile: ImpairmentProfile(delay: .milliseconds(10)))
        let b = network.addNode(profile: ImpairmentProfile(delay: .milliseconds(10)))
        let (sender, _) = network.openLink(from: a, to: b)!
        network.run(for: .milliseconds(200))
        network.interceptor = { _ in false }
        for sequence in 0..<30 { try! network.nodes[a].machine.send(.numbered(sequence, size: 1000), on: sender, mode: .reliable) }
        network.run(for: .seconds(25))
        #expect(network.nodes[a].closeReasons == [.timedOut])
    }

    @Test func aMaximumSizeMessageBehindASmallOneGetsThroughTheWindow() {
        // The receive window is only as large as the largest message plus its prefix; a small
        // message ahead of it must not leave the credit one message short forever.
        var configuration = TransportConfiguration()
        configuration.maxReliableMessageSize = 4 << 20
        configuration.sendBufferCapacity = 8 << 20
        var network = VirtualNetwork()
        let a = network.addNode(configuration: configuration, profile: ImpairmentProfile(delay: .milliseconds(1)))
        let b = network.addNode(configuration: configuration, profile: ImpairmentProfile(delay: .milliseconds(1)))
        let (sender, receiver) = network.openLink(from: a, to: b)!
        network.nodes[a].outgoing.append((sender, .numbered(0, size: 100), .reliable))
        network.nodes[a].outgoing.append((sender, .numbered(1, size: 4 << 20), .reliable))
        network.nodes[a].outgoing.append((sender, .numbered(2, size: 4 << 20), .reliable))
        network.run(for: .seconds(60)) { $0.nodes[b].received(on: receiver, mode: .reliable).count == 3 }
        #expect(network.nodes[b].received(on: receiver, mode: .reliable).map(\.sequenceNumber) == [0, 1, 2])
    }

    @Test func aRetransmissionAcknowledgedBeforeItsOriginalIsDeclaredLostIsHarmless() {
        // On a LAN (1 ms each way), the first chunk of a short burst and its first retransmission
        // are lost; a tail loss probe sends the chunk again while that retransmission is still
        // outstanding. The probe's acknowledgement releases the bytes, and the retransmission is
        // declared lost afterwards, in the same acknowledgement: its bytes are already released.
        var network = VirtualNetwork()
        let a = network.addNode(profile: ImpairmentProfile(delay: .milliseconds(1)))
        let b = network.addNode(profile: ImpairmentProfile(delay: .milliseconds(1)))
        let (sender, receiver) = network.openLink(from: a, to: b)!
        network.run(for: .milliseconds(200))
        let opener = network.nodes[b].machine.links[receiver.rawValue]!.machine.opener
        final class Counter { var firstChunk = 0 }
        let counter = Counter()
        network.interceptor = { datagram in
            guard datagram.destination == VirtualNetwork.address(2),
                datagram.bytes.getInteger(at: 0, as: UInt8.self) == PacketType.data.rawValue,
                let plaintext = opener.open(datagram.bytes)
            else { return true }
            var reader = FrameReader(plaintext)
            while let frame = try? reader.next() {
                if case .reliable(0, _) = frame {
                    counter.firstChunk += 1
                    return counter.firstChunk > 2
                }
            }
            return true
        }
        for sequence in 0..<2 { try! network.nodes[a].machine.send(.numbered(sequence, size: 1000), on: sender, mode: .reliable) }
        network.run(for: .seconds(5)) { $0.nodes[b].received(on: receiver, mode: .reliable).count == 2 }
        network.run(for: .seconds(1))
        #expect(network.nodes[b].received(on: receiver, mode: .reliable).map(\.sequenceNumber) == [0, 1])
        #expect(counter.firstChunk >= 3)
        #expect(network.nodes[a].closeReasons.isEmpty)
    }

    @Test func aPeerThatNeverAcknowledgesCannotGrowTheSentPacketLog() {
        // B sends thousands of PINGs and never an ACK; A answers each with an
        // acknowledgement-only packet, which nobody ever acknowledges.
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode()
        let (sender, receiver) = network.openLink(from: a, to: b)!
        network.run(for: .milliseconds(100))
        let peer = network.nodes[b].machine.links[receiver.rawValue]!
        var now = network.now
        for _ in 0..<5000 {
            now = now + .milliseconds(1)
            peer.machine.pendingPing = true
            peer.machine.probePending = true
            var datagram = ByteBuffer()
            #expect(peer.machine.pollTransmit(now: now, into: &datagram))
            network.nodes[a].machine.handle(datagram: datagram, from: network.nodes[b].address, now: now)
            var dropped = ByteBuffer()
            while network.nodes[a].machine.pollTransmit(now: now, into: &dropped) != nil { dropped.clear() }
        }
        let link = network.nodes[a].machine.links[sender.rawValue]!.machine
        #expect(link.statistics.packetsReceived >= 5000)
        #expect(link.statistics.packetsSent >= 2500)
        #expect(link.sentLog.count <= 2)
    }
}
