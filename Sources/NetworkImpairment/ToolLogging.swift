import Foundation
import Logging

/// The project's tools' logging: swift-log to standard error, at the level the environment
/// variable `OGK_LOG_LEVEL` names (`trace`, `debug`, `info`, `notice`, `warning`, `error`,
/// `critical`); warnings and worse without it. `OGK_LOG_LEVEL=debug gk-session …` shows what
/// the session, its transport and discovery do.
public enum ToolLogging {
    /// The environment variable.
    public static let variable = "OGK_LOG_LEVEL"

    /// The level `OGK_LOG_LEVEL` names in `environment`, `.warning` when unset; nil (with the
    /// reason) when it names no level.
    public static func level(in environment: [String: String]) -> Result<Logger.Level, LevelError> {
        guard let text = environment[Self.variable], !text.isEmpty else { return .success(.warning) }
        guard let level = Logger.Level(rawValue: text.lowercased()) else { return .failure(LevelError(text: text)) }
        return .success(level)
    }

    /// A value of `OGK_LOG_LEVEL` that is not a level.
    public struct LevelError: Error, CustomStringConvertible {
        public var text: String
        public var description: String {
            "\(ToolLogging.variable)=\(self.text) is not a log level (trace, debug, info, notice, warning, error, critical); using warning"
        }
    }

    /// Bootstraps swift-log once for the process (call it first thing in `main`). A value that
    /// is not a level is reported on standard error, and warnings are logged.
    public static func bootstrap(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let level: Logger.Level
        switch Self.level(in: environment) {
        case .success(let chosen): level = chosen
        case .failure(let error):
            FileHandle.standardError.write(Data("\(error)\n".utf8))
            level = .warning
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }
}
