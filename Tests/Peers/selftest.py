#!/usr/bin/env python3
"""Checks the test-peer plumbing: zeroconf_peer.py against itself, on the sandbox's loopback
and across scripts/veth-pair, IPv4 and IPv6.

    scripts/peers-venv && scripts/sandbox .venv/bin/python Tests/Peers/selftest.py

For each case one `register` and one `browse` process run; the browser must print "found" with
the port, an address and the TXT record, and "lost" after the registering process gets EOF on
its stdin (goodbye packets). The veth cases run the registering peer in the other namespace
(nsenter --net=$OGK_PEER_NETNS); this script re-runs itself under scripts/veth-pair for them.
Prints one line per case and a closing "N passed, N failed"; exit code 1 if any failed. Every
process is bounded (about 10 s per case).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PEER = os.path.join(HERE, "zeroconf_peer.py")
PYTHON = os.path.join(ROOT, ".venv", "bin", "python")

LOOPBACK_CASES = [
    ("loopback IPv4, all interfaces", [], [], None),
    ("loopback IPv4, --interface 127.0.0.1", ["--interface", "127.0.0.1"], ["--interface", "127.0.0.1"], None),
    ("loopback IPv6, all interfaces", ["--ipv6"], ["--ipv6"], None),
    ("loopback IPv6, --interface lo", ["--ipv6", "--interface", "lo"], ["--ipv6", "--interface", "lo"], None),
]
VETH_CASES = [
    ("veth IPv6 ogk0 <-> ogk1", ["--ipv6", "--interface", "ogk0"], ["--ipv6", "--interface", "ogk1"], "fd00:6b::2"),
    ("veth IPv6, all interfaces", ["--ipv6"], ["--ipv6"], "fd00:6b::2"),
    ("veth IPv4 ogk0 <-> ogk1", ["--interface", "ogk0"], ["--interface", "ogk1"], "10.107.0.2"),
    ("veth IPv4, all interfaces", [], [], "10.107.0.2"),
]


class Peer:
    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[dict] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.lines.put(json.loads(line))
            except json.JSONDecodeError:
                self.lines.put({"event": "bad-line", "line": line})

    def expect(self, event: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {event!r} within {timeout} s")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line["event"] == "error":
                raise AssertionError(f"peer error: {line['message']}")
            if line["event"] == event:
                return line

    def close(self) -> int:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def run_case(name: str, here: list[str], there: list[str], want_addr: str | None, veth: bool) -> str | None:
    common = ["--type", "_selftest._udp", "--seconds", "15"]
    browse = Peer([PYTHON, PEER, "browse", *common, *here])
    prefix = ["nsenter", f"--net={os.environ['OGK_PEER_NETNS']}", "--"] if veth else []
    reg = None
    try:
        browse.expect("browsing", 5)
        reg = Peer(
            [*prefix, PYTHON, PEER, "register", *common, "--name", "Bob's peer", "--port", "7000",
             "--txt", "version=1", "--txt", "flag", *there]
        )
        registering = reg.expect("registering", 5)
        found = browse.expect("found", 5)
        assert found["name"] == "Bob's peer._selftest._udp.local.", found
        assert found["port"] == 7000, found
        assert found["txt"] == {"version": "1", "flag": None}, found
        assert found["addresses"], found
        if want_addr:
            assert want_addr in found["addresses"], found
        took = (found["mono_ns"] - registering["mono_ns"]) / 1e6
        reg.expect("registered", 5)
        if reg.proc.stdin:
            reg.proc.stdin.close()  # EOF: unregister, goodbyes
        lost = browse.expect("lost", 5)
        assert lost["name"] == found["name"], lost
        reg.expect("unregistered", 5)
        rc = reg.close()
        assert rc == 0, f"register exit code {rc}"
        rc = browse.close()
        assert rc == 0, f"browse exit code {rc}"
        print(f"PASS {name}: found {found['addresses']} {took:.0f} ms after registering; lost on EOF", flush=True)
        return None
    except AssertionError as exc:
        print(f"FAIL {name}: {exc}", flush=True)
        for p, label in ((reg, "register"), (browse, "browse")):
            if p is not None:
                p.close()
                err = p.proc.stderr.read() if p.proc.stderr else ""
                if err.strip():
                    print(f"  {label} stderr: {err.strip()[-800:]}", flush=True)
        return str(exc)


def main() -> int:
    if os.environ.get("OGK_SANDBOX") != "1":
        print("selftest: run it inside scripts/sandbox", file=sys.stderr)
        return 2
    if "--veth-cases" in sys.argv:
        failed = [c for c in VETH_CASES if run_case(*c, veth=True)]
        return len(failed)  # the parent counts them
    failed = [c for c in LOOPBACK_CASES if run_case(*c, veth=False)]
    veth = subprocess.run(
        [os.path.join(ROOT, "scripts", "veth-pair"), sys.executable, os.path.abspath(__file__), "--veth-cases"],
        timeout=120,
    )
    total = len(LOOPBACK_CASES) + len(VETH_CASES)
    # The veth run prints its own PASS/FAIL lines and exits with its number of failures.
    veth_failed = veth.returncode if 0 <= veth.returncode <= len(VETH_CASES) else len(VETH_CASES)
    nfail = len(failed) + veth_failed
    print(f"{total - nfail} passed, {nfail} failed")
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
