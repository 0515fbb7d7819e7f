import Testing

@testable import NetworkImpairment

@Suite("NetworkSandbox")
struct NetworkSandboxTests {
    @Test("isolation requires OGK_SANDBOX=1")
    func isolationRequiresSandboxVariable() {
        let missing = NetworkSandbox.isolationProblem(sandboxVariable: nil, interfaces: ["lo"])
        let wrong = NetworkSandbox.isolationProblem(sandboxVariable: "0", interfaces: ["lo"])
        #expect(missing != nil)
        #expect(wrong != nil)
        #expect(missing?.description.contains("scripts/sandbox") == true)
    }

    @Test("isolation accepts only lo and ogk interfaces")
    func isolationAcceptsOnlyLoopbackAndProjectInterfaces() {
        #expect(NetworkSandbox.isolationProblem(sandboxVariable: "1", interfaces: ["lo"]) == nil)
        #expect(NetworkSandbox.isolationProblem(sandboxVariable: "1", interfaces: ["lo", "ogk0a", "ogk0b"]) == nil)
        let leaky = NetworkSandbox.isolationProblem(sandboxVariable: "1", interfaces: ["lo", "eth0", "wlan0"])
        #expect(leaky?.reason.contains("eth0, wlan0") == true)
        #expect(NetworkSandbox.isolationProblem(sandboxVariable: "1", interfaces: nil) != nil)
        // Interfaces a test made and declared pass only in a namespace of the sandbox's own.
        let made = ["lo", "docker0", "veth1"]
        #expect(NetworkSandbox.isolationProblem(sandboxVariable: "1", interfaces: made, declared: ["docker0", "veth1"], privateNamespace: true) == nil)
        #expect(NetworkSandbox.isolationProblem(sandboxVariable: "1", interfaces: made, declared: ["docker0", "veth1"], privateNamespace: false) != nil)
        #expect(NetworkSandbox.isolationProblem(sandboxVariable: "1", interfaces: made, declared: ["docker0"], privateNamespace: true)?.reason.contains("veth1") == true)
    }

    @Test("interface names are parsed from /proc/net/dev")
    func interfaceNamesAreParsedFromProcNetDev() {
        let text = """
            Inter-|   Receive                                                |  Transmit
             face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets
                lo:       0       0    0    0    0     0          0         0        0       0
              eth0: 1234 5 0 0 0 0 0 0 99 1
            ogk1a:0 0 0 0 0 0 0 0 0 0

            """
        #expect(NetworkSandbox.interfaceNames(procNetDev: text) == ["lo", "eth0", "ogk1a"])
    }
}
