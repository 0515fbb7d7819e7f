import ArgumentParser
import NIOCore
import NetworkImpairment

/// The impairment options given on the command line for one direction, and how they turn
/// into an ``ImpairmentProfile``.
///
/// Kept apart from the option declarations so that the forward options and the `--back-*`
/// overrides share one set of rules and one set of error messages (which name the flag the
/// user typed, not the profile field).
struct ProfileOverrides {
    /// `--` or `--back-`, for error messages.
    var prefix: String
    var loss: Double?
    var burstLoss: Double?
    var burstLength: Double?
    var delayMilliseconds: Double?
    var jitterMilliseconds: Double?
    var reorder: Double?
    var reorderDelayMilliseconds: Double?
    var duplicate: Double?
    var corrupt: Double?

    /// `base` with every given option applied, validated.
    func applied(to base: ImpairmentProfile) throws -> ImpairmentProfile {
        var profile = base
        if let loss { profile.loss = try self.probability(loss, flag: "loss") }
        if let reorder { profile.reorderProbability = try self.probability(reorder, flag: "reorder") }
        if let duplicate { profile.duplicateProbability = try self.probability(duplicate, flag: "duplicate") }
        if let corrupt { profile.corruptProbability = try self.probability(corrupt, flag: "corrupt") }
        if let value = self.delayMilliseconds { profile.delay = try self.duration(value, flag: "delay-ms") }
        if let value = self.jitterMilliseconds { profile.jitter = try self.duration(value, flag: "jitter-ms") }
        if let value = self.reorderDelayMilliseconds {
            profile.reorderDelay = try self.duration(value, flag: "reorder-delay-ms")
        }
        if self.burstLoss != nil || self.burstLength != nil {
            profile.burstLoss = try self.burst(base: base.burstLoss)
        }
        if profile.reorderProbability > 0, profile.reorderDelay == .zero {
            throw ValidationError("\(self.prefix)reorder has no effect without \(self.prefix)reorder-delay-ms")
        }
        do {
            try profile.validate()
        } catch {
            throw ValidationError("\(error)")
        }
        return profile
    }

    // MARK: - Conversions

    private func probability(_ value: Double, flag: String) throws -> Double {
        guard value >= 0, value <= 1 else {
            throw ValidationError("\(self.prefix)\(flag) must be a probability from 0 to 1 (0.05 means 5 %)")
        }
        return value
    }

    private func duration(_ milliseconds: Double, flag: String) throws -> TimeAmount {
        guard milliseconds.isFinite, milliseconds >= 0, milliseconds <= 86_400_000 else {
            throw ValidationError("\(self.prefix)\(flag) must be a number of milliseconds from 0 to 86400000")
        }
        return .nanoseconds(Int64((milliseconds * 1_000_000).rounded()))
    }

    private func burst(base: BurstLoss?) throws -> BurstLoss? {
        guard let average = self.burstLoss ?? base?.averageLoss else {
            throw ValidationError("\(self.prefix)burst-length needs \(self.prefix)burst-loss")
        }
        guard let length = self.burstLength ?? base?.meanBurstLength else {
            throw ValidationError("\(self.prefix)burst-loss needs \(self.prefix)burst-length")
        }
        return average == 0 ? nil : BurstLoss(averageLoss: average, meanBurstLength: length)
    }
}
