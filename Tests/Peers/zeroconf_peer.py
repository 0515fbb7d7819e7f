#!/usr/bin/env python3
"""A python-zeroconf test peer for GameKitDiscovery's interoperability tests.

Run it with the project's venv (scripts/peers-venv makes .venv/bin/python), and only inside a
network namespace made by scripts/sandbox (it refuses to start without OGK_SANDBOX=1):

  zeroconf_peer.py register --type _chat._udp --name "Bob's peer" --port 7000
                   [--txt key=value ...] [--address IP ...] [--host NAME.local.]
                   [--ipv6] [--interface IF ...] [--seconds S] [--ignore-stdin]
  zeroconf_peer.py browse --type _chat._udp
                   [--ipv6] [--interface IF ...] [--seconds S] [--ignore-stdin]

Output: one JSON object per line on stdout, flushed at once; every line has "event" and
"mono_ns" (time.monotonic_ns(), CLOCK_MONOTONIC: the clock of NIODeadline.now()). Logging and
tracebacks go to stderr.

register  prints {"event":"registering"} once its sockets are open, then, when python-zeroconf
          has probed for the name, {"event":"registered","name":<full instance name, e.g.
          "Bob's peer._chat._udp.local.", or "Bob's peer-2._chat._udp.local." after a conflict>,
          "instance","type","port","host","addresses","scoped_addresses","txt"}: from then on it
          answers queries, and its first announcement is on the wire (a browser's "found" comes
          within a millisecond or two, sometimes just before this line). {"event":"announced"}
          follows when its three announcements (225 ms apart) are sent. It stays up until stdin
          reaches EOF, SIGTERM/SIGINT, or S seconds (default 30) pass; then it unregisters
          (three goodbye packets, TTL 0, 125 ms apart), prints {"event":"unregistered","name",
          "reason"} ("stdin-eof", "SIGTERM", "SIGINT" or "timeout") and exits 0. Name conflicts
          rename (allow_name_change=True: "NAME-2", "NAME-3", ...).
          Timing (python-zeroconf 0.154.0, measured on loopback): start to "registering" 0.1-0.25
          s; "registering" to "registered" 1.15-1.25 s (a random 150-250 ms wait, then three
          probes 500 ms apart, and it registers right after the third, without waiting for
          answers to it); EOF to the browser's "lost" about 1 ms, to "unregistered" 250 ms.
browse    prints {"event":"browsing"} once the browser runs, then for each instance
          {"event":"found"|"updated","name","instance","type","port","host","addresses",
          "scoped_addresses","txt"} once it has been resolved (AsyncServiceInfo, 3 s timeout;
          {"event":"unresolved","name",...} if that fails) and {"event":"lost","name",...} when it
          goes away (goodbye or expiry). "updated" comes when python-zeroconf reports a change
          (e.g. a new TXT record) of an instance already "found". Stops after S seconds (default
          30) or at stdin EOF, prints {"event":"stopped","reason"} and exits 0.
          "addresses" are plain strings; "scoped_addresses" add "%<ifindex>" to link-local IPv6
          addresses when python-zeroconf knows the scope (a response sent from a link-local
          source). "txt" maps each key to its value (a string) or null for a key without "=".

--txt      key=value, key= (empty value) or key (no "=": null on the browsing side).
--address  addresses put in the A/AAAA records; default: the addresses (of the --ipv6 family)
           of the chosen interfaces, or of all interfaces (loopback included).
--host     the SRV target; default: the instance name made DNS-safe, plus ".local.".
--ipv6     IPVersion.V6Only (default V4Only): python-zeroconf then uses ff02::fb only.
--interface
           IPv4: an IPv4 address, or an interface name (its IPv4 addresses are used).
           IPv6: an interface index, an interface name (turned into its index) or an IPv6
           address of the interface. (python-zeroconf itself takes only IPv4 addresses, IPv6
           addresses and IPv6 indexes.) For an index or a name, python-zeroconf binds its sending
           socket to the interface's first IPv6 address as ifaddr lists it (fd00:6b::N on the
           veth-pair links, so packets come from the ULA); give the fe80:: address to send from
           the link-local one. Default: InterfaceChoice.All, which python-zeroconf does not
           filter: in a sandbox it is lo (127.0.0.1, or ::1 with index 1), in veth-pair also
           ogk0/ogk1. Loopback works for both families (IPv6 needs the sandbox's local ff00::/8
           route).
--ignore-stdin
           do not stop at stdin EOF (for `peer ... &` in a non-interactive shell, whose background
           jobs get /dev/null as stdin).

Errors (bad arguments too) print {"event":"error","message":...} and exit with code 2. As a
last resort a SIGALRM watchdog ends the process S + 20 seconds after it started.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import re
import signal
import socket
import sys
import threading
import time
from typing import Any

_print_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    line = {"event": event, "mono_ns": time.monotonic_ns()}
    line.update(fields)
    text = json.dumps(line, ensure_ascii=False, separators=(",", ":"))
    with _print_lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def fail(message: str) -> None:
    emit("error", message=message)
    sys.stdout.flush()
    os._exit(2)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        fail(f"{self.prog}: {message}")


def service_type(value: str) -> str:
    t = value.strip()
    if not t.endswith("."):
        t += "."
    if not t.endswith(".local."):
        t += "local."
    return t


def parse_txt(items: list[str]) -> dict[str, str | None]:
    txt: dict[str, str | None] = {}
    for item in items:
        if "=" in item:
            key, value = item.split("=", 1)
            txt[key] = value
        else:
            txt[item] = None
    return txt


def _adapters():
    import ifaddr

    return ifaddr.get_adapters()


def _adapter_by_name(name: str):
    for adapter in _adapters():
        if adapter.name == name or adapter.nice_name == name:
            return adapter
    raise ValueError(f"no interface named {name!r}")


def resolve_interfaces(items: list[str], ipv6: bool) -> list[str | int]:
    """Turn --interface arguments into what Zeroconf(interfaces=...) accepts."""
    result: list[str | int] = []
    for item in items:
        if ipv6:
            if item.isdigit():
                result.append(int(item))
                continue
            try:
                addr = ipaddress.ip_address(item.split("%", 1)[0])
            except ValueError:
                try:
                    result.append(socket.if_nametoindex(item))
                except OSError:
                    raise ValueError(f"no interface named {item!r}") from None
                continue
            if addr.version != 6:
                raise ValueError(f"--ipv6 needs IPv6 interfaces, got {item!r}")
            result.append(item)
        else:
            try:
                addr = ipaddress.ip_address(item)
            except ValueError:
                v4 = [ip.ip for ip in _adapter_by_name(item).ips if ip.is_IPv4]
                if not v4:
                    raise ValueError(f"interface {item!r} has no IPv4 address") from None
                result.extend(v4)
                continue
            if addr.version != 4:
                raise ValueError(f"IPv4 mode needs IPv4 interfaces, got {item!r} (use --ipv6)")
            result.append(item)
    return result


def interface_addresses(interfaces: list[str | int] | None, ipv6: bool) -> list[str]:
    """The addresses to advertise: those of the chosen interfaces (all interfaces by default)."""
    adapters = _adapters()
    if interfaces is None:
        chosen = adapters
    else:
        indexes = {i for i in interfaces if isinstance(i, int)}
        addrs = {i.split("%", 1)[0] for i in interfaces if isinstance(i, str)}
        chosen = []
        for adapter in adapters:
            ips = [ip.ip[0] if isinstance(ip.ip, tuple) else ip.ip for ip in adapter.ips]
            if adapter.index in indexes or any(ip in addrs for ip in ips):
                chosen.append(adapter)
    out: list[str] = []
    for adapter in chosen:
        for ip in adapter.ips:
            if ipv6 and ip.is_IPv6:
                out.append(ip.ip[0])
            elif not ipv6 and ip.is_IPv4:
                out.append(ip.ip)
    # Globally routable/ULA addresses first, link-local last.
    out.sort(key=lambda a: ipaddress.ip_address(a).is_link_local)
    return list(dict.fromkeys(out))


def dns_label(text: str) -> str:
    label = re.sub(r"[^A-Za-z0-9-]+", "-", text).strip("-")
    return (label or "peer")[:63]


def decode_txt(properties: dict[bytes, bytes | None]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for key, value in properties.items():
        k = key.decode("utf-8", "backslashreplace") if isinstance(key, bytes) else str(key)
        if value is None:
            out[k] = None
        else:
            out[k] = value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)
    return out


def instance_of(name: str, type_: str) -> str:
    suffix = "." + type_
    return name[: -len(suffix)] if name.endswith(suffix) else name


def info_fields(info: Any, type_: str) -> dict[str, Any]:
    from zeroconf import IPVersion

    return {
        "name": info.name,
        "instance": instance_of(info.name, type_),
        "type": type_,
        "port": info.port,
        "host": info.server,
        "addresses": info.parsed_addresses(IPVersion.All),
        "scoped_addresses": info.parsed_scoped_addresses(IPVersion.All),
        "txt": decode_txt(info.properties),
    }


class Stopper:
    """Sets an asyncio event on stdin EOF, SIGTERM/SIGINT or the deadline."""

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float, watch_stdin: bool) -> None:
        self.event = asyncio.Event()
        self.reason = "timeout"
        self._loop = loop
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop, signal.Signals(sig).name)
        loop.call_later(seconds, self.stop, "timeout")
        if watch_stdin:
            threading.Thread(target=self._read_stdin, daemon=True).start()

    def stop(self, reason: str) -> None:
        if not self.event.is_set():
            self.reason = reason
            self.event.set()

    def _read_stdin(self) -> None:
        try:
            while sys.stdin.buffer.read1(65536):
                pass
        except (OSError, ValueError):
            pass
        self._loop.call_soon_threadsafe(self.stop, "stdin-eof")


async def make_zeroconf(args: argparse.Namespace):
    from zeroconf import InterfaceChoice, IPVersion
    from zeroconf.asyncio import AsyncZeroconf

    interfaces = resolve_interfaces(args.interface, args.ipv6) if args.interface else None
    ip_version = IPVersion.V6Only if args.ipv6 else IPVersion.V4Only
    azc = AsyncZeroconf(
        interfaces=interfaces if interfaces is not None else InterfaceChoice.All,
        ip_version=ip_version,
    )
    await asyncio.wait_for(azc.zeroconf.async_wait_for_start(), timeout=10)
    if not azc.zeroconf.engine.senders:
        raise RuntimeError(
            f"python-zeroconf opened no usable socket for interfaces={interfaces!r} "
            f"({ip_version.name}); is the address there and not tentative (DAD)?"
        )
    return azc, interfaces


async def run_register(args: argparse.Namespace) -> None:
    from zeroconf.asyncio import AsyncServiceInfo

    type_ = service_type(args.type)
    loop = asyncio.get_running_loop()
    stopper = Stopper(loop, args.seconds, not args.ignore_stdin)
    azc, interfaces = await make_zeroconf(args)
    try:
        addresses = args.address or interface_addresses(interfaces, args.ipv6)
        host = args.host or f"{dns_label(args.name)}.local."
        if not host.endswith("."):
            host += "."
        info = AsyncServiceInfo(
            type_,
            f"{args.name}.{type_}",
            port=args.port,
            properties=parse_txt(args.txt),
            server=host,
            parsed_addresses=addresses,
        )
        emit("registering", name=info.name, interfaces=interfaces)
        # Returns once probing is done (the service then answers queries); the returned task
        # sends the announcements.
        announcing = await asyncio.wait_for(
            azc.async_register_service(info, allow_name_change=True), timeout=15
        )
        emit("registered", **info_fields(info, type_))
        await asyncio.wait_for(announcing, timeout=15)
        emit("announced", name=info.name)
        await stopper.event.wait()
        goodbyes = await asyncio.wait_for(azc.async_unregister_service(info), timeout=10)
        await asyncio.wait_for(goodbyes, timeout=10)
        emit("unregistered", name=info.name, reason=stopper.reason)
    finally:
        await asyncio.wait_for(azc.async_close(), timeout=10)


async def run_browse(args: argparse.Namespace) -> None:
    from zeroconf import ServiceStateChange
    from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo

    type_ = service_type(args.type)
    loop = asyncio.get_running_loop()
    stopper = Stopper(loop, args.seconds, not args.ignore_stdin)
    azc, interfaces = await make_zeroconf(args)
    pending: dict[str, asyncio.Task] = {}
    announced: set[str] = set()

    async def resolve(name: str) -> None:
        info = AsyncServiceInfo(type_, name)
        ok = await info.async_request(azc.zeroconf, 3000)
        if not ok:
            emit("unresolved", name=name, instance=instance_of(name, type_), type=type_)
            return
        kind = "updated" if name in announced else "found"
        announced.add(name)
        emit(kind, **info_fields(info, type_))

    def on_change(zeroconf: Any, service_type: str, name: str, state_change: ServiceStateChange) -> None:
        old = pending.pop(name, None)
        if old is not None and not old.done():
            old.cancel()
        if state_change is ServiceStateChange.Removed:
            announced.discard(name)
            emit("lost", name=name, instance=instance_of(name, type_), type=type_)
            return
        task = loop.create_task(resolve(name))
        pending[name] = task
        task.add_done_callback(lambda t, n=name: pending.get(n) is t and pending.pop(n))

    browser = AsyncServiceBrowser(azc.zeroconf, [type_], handlers=[on_change])
    emit("browsing", type=type_, interfaces=interfaces)
    try:
        await stopper.event.wait()
    finally:
        for task in list(pending.values()):
            task.cancel()
        await asyncio.wait_for(browser.async_cancel(), timeout=5)
        await asyncio.wait_for(azc.async_close(), timeout=10)
    emit("stopped", reason=stopper.reason)


def main(argv: list[str]) -> int:
    parser = _Parser(prog="zeroconf_peer.py", description="python-zeroconf test peer (JSON lines)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--type", required=True, help="service type, e.g. _chat._udp")
        p.add_argument("--ipv6", action="store_true", help="IPv6 only (default IPv4 only)")
        p.add_argument("--interface", action="append", default=[], help="address, name or index")
        p.add_argument("--seconds", type=float, default=30.0, help="stop after S seconds")
        p.add_argument("--ignore-stdin", action="store_true", help="don't stop at stdin EOF")

    reg = sub.add_parser("register", help="register a service until EOF/signal/timeout")
    common(reg)
    reg.add_argument("--name", required=True, help="instance name, e.g. \"Bob's peer\"")
    reg.add_argument("--port", type=int, required=True)
    reg.add_argument("--txt", action="append", default=[], help="key=value, key= or key")
    reg.add_argument("--address", action="append", default=[], help="address to advertise")
    reg.add_argument("--host", help="SRV target host name, e.g. bob.local.")

    br = sub.add_parser("browse", help="browse a service type and resolve what is found")
    common(br)

    args = parser.parse_args(argv)
    if os.environ.get("OGK_SANDBOX") != "1":
        fail("refusing to open sockets outside scripts/sandbox (OGK_SANDBOX=1 is not set)")
    if args.seconds <= 0:
        fail("--seconds must be positive")

    def watchdog(signum: int, frame: Any) -> None:
        fail("watchdog: still running long after --seconds")

    signal.signal(signal.SIGALRM, watchdog)
    signal.alarm(int(args.seconds) + 20)

    runner = run_register if args.command == "register" else run_browse
    try:
        asyncio.run(runner(args))
    except Exception as exc:  # noqa: BLE001 - every failure becomes an error line
        import traceback

        traceback.print_exc(file=sys.stderr)
        fail(f"{type(exc).__name__}: {exc}")
    signal.alarm(0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
