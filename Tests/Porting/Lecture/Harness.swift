// What UIKit's application object and nib loader did for the ported controllers: make them, wire
// their outlets to the stand-ins, call their lifecycle methods on the main queue, and turn input
// lines into the taps and typing a user would do. Everything it prints is a JSON line.
import Foundation
import OpenGameKit
import OpenGameKitVoice

@MainActor
final class Harness {
    enum Demo: String {
        case chat, voice, guide
    }

    /// The harness of this process, kept for its life.
    static var current: Harness?

    private let demo: Demo
    private var chat: ChatViewController?
    private var voice: VoiceChatViewController?
    private var guide: GuideGameController?
    private var guideClient: MyChatClient?
    private var lines = InputLines()
    private var listening = false
    private var pickerShown: Bool?
    private var lastVoice: [String: String] = [:]
    private var reported: [String: String] = [:]
    private var ticker: DispatchSourceTimer?

    init(_ demo: Demo) {
        self.demo = demo
    }

    /// Loads the demo's controller, as the application's nib would, and starts watching it.
    func start() {
        switch self.demo {
        case .chat:
            let controller = ChatViewController()
            controller.messagesView = UITextView(name: "messagesView")
            controller.messageField = UITextField()
            controller.viewDidLoad()
            controller.viewWillAppear(false)
            self.chat = controller
        case .voice:
            // The devices are the application's choice (the lecture's app delegate set up the
            // phone's audio session): this machine has no sound card.
            GKVoiceChatService.default().configuration.audio = .silent
            let controller = VoiceChatViewController()
            controller.muteMicrophone = UISwitch()
            controller.status = UILabel(name: "status")
            controller.viewDidLoad()
            self.voice = controller
        case .guide:
            let controller = GuideGameController()
            controller.findPeers()
            self.guide = controller
        }
        let ticker = DispatchSource.makeTimerSource(queue: .main)
        ticker.schedule(deadline: .now() + .milliseconds(50), repeating: .milliseconds(50))
        ticker.setEventHandler { MainActor.assumeIsolated { self.watch() } }
        ticker.resume()
        self.ticker = ticker
    }

    private var picker: GKPeerPickerController? {
        self.chat?.picker ?? self.voice?.picker
    }

    /// Reports what changed, and takes standard input back when the picker has gone.
    private func watch() {
        // The guide's picker is a local of its own: it is up until the guide has a session.
        let shown = self.guide.map { $0.gameSession == nil } ?? self.picker?.isVisible ?? false
        if shown != self.pickerShown {
            self.pickerShown = shown
            Screen.show(["picker": shown ? "shown" : "hidden"])
            // A shown picker's line presenter reads standard input; a dismissed one gives it up.
            self.listening = false
        }
        if !shown, !self.listening {
            self.listening = true
            StandardInput.shared.listen { [weak self] chunk in self?.input(chunk) }
        }
        if self.demo == .voice || self.guideClient != nil {
            let service: GKVoiceChatService = GKVoiceChatService.default()
            let received = service.engineStatistics?.packetsReceived ?? 0
            let now = [
                "participant": service.currentParticipantID ?? "",
                "path": service.currentPath.map { "\($0)" } ?? "",
                "audio": received > 0 ? "flowing" : "none",
                "muted": "\(service.isMicrophoneMuted)",
                "volume": "\(service.remoteParticipantVolume)",
            ]
            if now != self.lastVoice {
                self.lastVoice = now
                Screen.show(["voice": now])
            }
        }
        if let guide = self.guide {
            self.report("guideSession", guide.gameSession?.sessionID ?? "")
            self.report("guidePeers", guide.connectedPeers.joined(separator: ","))
            self.report("guideReceived", guide.received.joined(separator: "|"))
        }
    }

    private func report(_ key: String, _ value: String) {
        guard self.reported[key] != value else { return }
        self.reported[key] = value
        Screen.show([key: value])
    }

    private func input(_ chunk: StandardInput.Chunk) {
        guard case .bytes(let bytes) = chunk else { exit(0) }
        for line in self.lines.lines(from: bytes) { self.command(line) }
    }

    /// One user action.
    private func command(_ line: String) {
        let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
        let argument = parts.count > 1 ? parts[1] : ""
        switch (self.demo, parts.first ?? "") {
        case (_, "quit"):
            exit(0)
        case (.chat, "type"):
            guard let chat = self.chat else { return }
            chat.messageField.text = argument
            _ = chat.textFieldShouldReturn(chat.messageField)
        case (.chat, "clear"):
            self.chat?.clear()
        case (.chat, "disconnect"):
            self.chat?.disconnect()
        case (.voice, "mute"):
            guard let voice = self.voice else { return }
            voice.muteMicrophone.isOn.toggle()
            voice.toggleMute()
        case (.voice, "volume"):
            let slider = UISlider()
            slider.value = Float(argument) ?? 1
            self.voice?.setVolume(slider)
        case (.voice, "disconnect"):
            self.voice?.disconnect()
        case (.guide, "send"):
            self.guide?.mySendDataToPeers(Data(argument.utf8))
        case (.guide, "voice"):
            guard let guide = self.guide, let session = guide.gameSession, let other = guide.connectedPeers.first else { return }
            GKVoiceChatService.default().configuration.audio = .silent
            self.guideClient = MyChatClient.attach(to: session, calling: other)
            Screen.show(["guideVoice": "calling"])
        case (.guide, "cleanup"):
            self.guide?.cleanUp()
        default:
            Screen.show(["unknown": line])
        }
    }
}
