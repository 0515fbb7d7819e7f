import Foundation
import NIOCore
import Testing

@testable import NetworkImpairment

@Suite("ImpairmentProfile")
struct ImpairmentProfileTests {
    // MARK: - Defaults

    @Test("the default profile is a valid perfect network")
    func defaultProfileIsValidAndPerfect() throws {
        let profile = ImpairmentProfile()
        try profile.validate()
        #expect(profile == .perfect)
        #expect(profile.loss == 0 && profile.burstLoss == nil)
        #expect(profile.delay == .zero && profile.jitter == .zero && profile.reorderDelay == .zero)
        #expect(profile.reorderProbability == 0 && profile.duplicateProbability == 0 && profile.corruptProbability == 0)
    }

    // MARK: - Validation

    @Test(
        "probabilities outside 0...1 are rejected and named",
        arguments: [
            (ImpairmentProfile(loss: -0.01), "loss"),
            (ImpairmentProfile(loss: 1.5), "loss"),
            (ImpairmentProfile(loss: .nan), "loss"),
            (ImpairmentProfile(reorderProbability: 2), "reorderProbability"),
            (ImpairmentProfile(duplicateProbability: -1), "duplicateProbability"),
            (ImpairmentProfile(corruptProbability: .infinity), "corruptProbability"),
        ]
    )
    func invalidProbabilitiesThrow(profile: ImpairmentProfile, field: String) {
        #expect {
            try profile.validate()
        } throws: { error in
            guard case .probabilityOutOfRange(let named, _) = error as? ImpairmentProfile.ValidationError else {
                return false
            }
            return named == field && "\(error)".contains(field)
        }
    }

    @Test(
        "negative durations are rejected and named",
        arguments: [
            (ImpairmentProfile(delay: .milliseconds(-1)), "delay", TimeAmount.milliseconds(-1)),
            (ImpairmentProfile(jitter: .nanoseconds(-1)), "jitter", .nanoseconds(-1)),
            (ImpairmentProfile(reorderProbability: 0.1, reorderDelay: .seconds(-3)), "reorderDelay", .seconds(-3)),
        ]
    )
    func negativeDurationsThrow(profile: ImpairmentProfile, field: String, value: TimeAmount) {
        #expect(throws: ImpairmentProfile.ValidationError.negativeDuration(field: field, value: value)) {
            try profile.validate()
        }
    }

    @Test(
        "unreachable or malformed burst loss is rejected",
        arguments: [
            BurstLoss(averageLoss: 1, meanBurstLength: 3),
            BurstLoss(averageLoss: -0.1, meanBurstLength: 3),
            BurstLoss(averageLoss: 0.1, meanBurstLength: 0.5),
            BurstLoss(averageLoss: 0.1, meanBurstLength: .infinity),
            // With bursts of mean length 1 at most half the datagrams can be lost.
            BurstLoss(averageLoss: 0.6, meanBurstLength: 1),
        ]
    )
    func invalidBurstLossThrows(burst: BurstLoss) {
        #expect(throws: ImpairmentProfile.ValidationError.self) {
            try ImpairmentProfile(burstLoss: burst).validate()
        }
    }

    @Test("burst loss derives the Gilbert–Elliott transition probabilities")
    func burstLossDerivesTransitionProbabilities() throws {
        let burst = BurstLoss(averageLoss: 0.2, meanBurstLength: 4)
        try burst.validate()
        #expect(burst.badToGoodProbability == 0.25)
        #expect(abs(burst.goodToBadProbability - 0.0625) < 1e-12)
        try BurstLoss(averageLoss: 0.5, meanBurstLength: 1).validate()
    }

    // MARK: - Codable

    @Test("a profile survives a JSON round trip")
    func profileSurvivesJSONRoundTrip() throws {
        let profile = ImpairmentProfile(
            loss: 0.01,
            burstLoss: BurstLoss(averageLoss: 0.05, meanBurstLength: 3),
            delay: .milliseconds(40),
            jitter: .microseconds(7_500),
            reorderProbability: 0.02,
            reorderDelay: .milliseconds(15),
            duplicateProbability: 0.003,
            corruptProbability: 0.0001
        )
        let data = try JSONEncoder().encode(profile)
        #expect(try JSONDecoder().decode(ImpairmentProfile.self, from: data) == profile)
        #expect(String(decoding: data, as: UTF8.self).contains(#""delayNanoseconds":40000000"#))
    }

    @Test("missing JSON keys decode as no impairment")
    func missingKeysDecodeAsNoImpairment() throws {
        let profile = try JSONDecoder().decode(ImpairmentProfile.self, from: Data(#"{"loss":0.1}"#.utf8))
        #expect(profile == ImpairmentProfile(loss: 0.1))
    }
}
