// gk-port (Swift 6 language mode) and gk-port-swift5 (Swift 5): the lecture's and the guide's
// Game Kit code as a porter would bring it over, run as an application would run it.
//
//   gk-port chat|voice|guide [--loop runloop|dispatch-main]   a demo; commands on standard input
//   gk-port symbols                                          runs the reference's symbol table
//   gk-port mask-without-nearby                              a picker offered online only
//
// The main queue runs under `RunLoop.main.run()` (the README's recommended way: delegates on the
// main thread) unless `--loop dispatch-main` asks for `dispatchMain()`.
import Foundation
import OpenGameKit

let arguments = Array(CommandLine.arguments.dropFirst())
let loop = arguments.firstIndex(of: "--loop").map { arguments.index(after: $0) }.flatMap { arguments.indices.contains($0) ? arguments[$0] : nil } ?? "runloop"

switch arguments.first {
case "mask-without-nearby":
    // The reference: "an exception is thrown if your application does not include" nearby.
    let picker = GKPeerPickerController()
    picker.connectionTypesMask = .online
    Screen.show(["refused": false])
    exit(0)
case "symbols":
    let (failures, count) = ReferenceTable.check()
    Screen.show(["symbols": count, "failures": failures])
    exit(failures.isEmpty ? 0 : 1)
case let name?:
    guard let demo = Harness.Demo(rawValue: name) else {
        FileHandle.standardError.write(Data("usage: gk-port chat|voice|guide|symbols [--loop runloop|dispatch-main]\n".utf8))
        exit(2)
    }
    DispatchQueue.main.async {
        MainActor.assumeIsolated {
            let harness = Harness(demo)
            harness.start()
            Harness.current = harness
        }
    }
case nil:
    FileHandle.standardError.write(Data("usage: gk-port chat|voice|guide|symbols [--loop runloop|dispatch-main]\n".utf8))
    exit(2)
}

switch loop {
case "dispatch-main":
    dispatchMain()
default:
    RunLoop.main.run()
}
