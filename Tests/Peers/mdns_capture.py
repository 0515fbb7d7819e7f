#!/usr/bin/env python3
"""A passive mDNS packet capture for GameKitDiscovery's conformance tests: every packet that
reaches 224.0.0.251:5353 on one interface, decoded by python-zeroconf's own parser (an
implementation independent of ours) and cross-checked against a minimal parser of this file.

Run it with the project's venv (scripts/peers-venv makes .venv/bin/python), and only inside a
network namespace made by scripts/sandbox (it refuses to start without OGK_SANDBOX=1):

  mdns_capture.py [--seconds S] [--interface IPV4] [--query AT TYPE NAME [KNOWN TTL]] ...

The socket binds 0.0.0.0:5353 with SO_REUSEADDR and SO_REUSEPORT (the kernel gives every socket
on the port a copy of each multicast datagram, so it shares the port with the mDNS stacks under
test), joins 224.0.0.251 on the interface that has address IPV4 (default 127.0.0.1, the
sandbox's loopback) and turns IP_MULTICAST_ALL off, so it hears only that group on that
interface. IPv4 only.

Output: one JSON object per line on stdout, flushed at once; every line has "event" and
"mono_ns" (CLOCK_MONOTONIC, the clock of time.monotonic_ns() and of NIODeadline.now()). For a
packet it is the kernel's receive time (SO_TIMESTAMPNS, taken on CLOCK_REALTIME and moved to
CLOCK_MONOTONIC by the two clocks' offset read at that moment), so the time this process takes
to decode earlier packets does not shift it; "read_mono_ns" is when this process read it.

  {"event":"listening","mono_ns","interface"}   once the socket has joined the group
  {"event":"packet","mono_ns","read_mono_ns","source":"ip:port","ifindex","id","opcode","rcode",
   "qr","aa","tc","valid","own","agree","disagreements","questions":[...],
   "answers":[...],"authorities":[...],"additionals":[...],"hex"}
        one per datagram received. "own": the bytes are those of a query this process sent
        (multicast loops back to the sender). "agree": python-zeroconf's DNSIncoming and the
        parser below read the same questions and the same records (name, type, class, cache-flush
        bit, TTL, data); "disagreements" says what differed otherwise.
        A question: {"name","type","type_code","class","qu"}.
        A record: {"name","type","type_code","class","flush","ttl","rdata_hex"} plus, by type,
          PTR  "alias"               SRV  "priority","weight","port","target"
          TXT  "strings" (each string's bytes in hex; rdata_hex is the whole raw rdata)
          A, AAAA  "address"         NSEC "next","types" (type names, e.g. ["A","AAAA"])
        The section comes from the header counts (DNSIncoming.answers() returns all three
        sections as one list, so the raw parse tells which record sits in which section; the
        typed values come from python-zeroconf). Unknown types carry only the common fields.
        Names are as python-zeroconf decodes them, with the final dot ("x._t._udp.local.").
  {"event":"sent","mono_ns","spec","questions","answers","hex"}   for each --query, as sent
        ("spec": its arguments; "mono_ns": right after sendto returned)
  {"event":"query-skipped","spec"}   a --query whose trigger never came
  {"event":"stopped","mono_ns","packets"}   after S seconds (default 10); exit code 0

--query AT TYPE NAME [KNOWN TTL]
    sends one multicast query (QM, no QU bit; from this socket, so from port 5353: a responder
    answers it by multicast, which this socket then captures) for NAME of TYPE (PTR, SRV, TXT,
    A, AAAA, ANY or a number). AT is "S" (seconds after "listening") or "announce+S": S seconds
    after the first response that has an answer-section record named NAME with a TTL above
    zero, e.g. a service's first announcement for a PTR query of its type. KNOWN and TTL add a
    known answer (RFC 6762 §7.1): a PTR record NAME -> KNOWN with that TTL (only PTR known
    answers are supported; KNOWN is split into labels at dots). Repeatable. The packet is built
    here byte by byte (ID 0, flags 0, no name compression, class IN without the cache-flush bit,
    RFC 6762 §10.2).

Errors (bad arguments too) print {"event":"error","message":...} and exit with code 2. A SIGALRM
watchdog ends the process S + 10 seconds after it started.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from typing import Any

GROUP = "224.0.0.251"
PORT = 5353
IP_MULTICAST_ALL = 49  # Linux; not exported by Python's socket module
IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)  # Linux value; missing from some Python builds
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux value (SCM_TIMESTAMPNS is the same)

TYPE_NAMES = {1: "A", 2: "NS", 5: "CNAME", 12: "PTR", 13: "HINFO", 16: "TXT", 28: "AAAA", 33: "SRV", 47: "NSEC", 255: "ANY"}
TYPE_CODES = {v: k for k, v in TYPE_NAMES.items()}


def emit(event: str, mono_ns: int | None = None, **fields: Any) -> None:
    line = {"event": event, "mono_ns": mono_ns if mono_ns is not None else time.monotonic_ns()}
    line.update(fields)
    sys.stdout.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def fail(message: str) -> None:
    emit("error", message=message)
    os._exit(2)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        fail(f"{self.prog}: {message}")


def type_name(code: int) -> str:
    return TYPE_NAMES.get(code, str(code))


# MARK: - The minimal parser (sections, raw rdata, names with compression)


class RawError(Exception):
    pass


class RawPacket:
    """Header, questions and records of one DNS message, with each record's section and raw
    rdata. Names are decompressed (RFC 1035 §4.1.4), with loop and bounds checks."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        if len(data) < 12:
            raise RawError(f"{len(data)} bytes: shorter than a header")
        (self.id, self.flags, qd, an, ns, ar) = struct.unpack_from("!6H", data, 0)
        self.counts = (qd, an, ns, ar)
        offset = 12
        self.questions: list[dict[str, Any]] = []
        for _ in range(qd):
            name, offset = self.name(offset)
            self.need(offset, 4)
            qtype, qclass = struct.unpack_from("!HH", data, offset)
            offset += 4
            self.questions.append({"name": name, "type_code": qtype, "class": qclass & 0x7FFF, "qu": bool(qclass & 0x8000)})
        self.records: list[dict[str, Any]] = []
        for section, count in (("answers", an), ("authorities", ns), ("additionals", ar)):
            for _ in range(count):
                name, offset = self.name(offset)
                self.need(offset, 10)
                rtype, rclass, ttl, length = struct.unpack_from("!HHIH", data, offset)
                offset += 10
                self.need(offset, length)
                rdata_start = offset
                offset += length
                record = {
                    "section": section,
                    "name": name,
                    "type_code": rtype,
                    "class": rclass & 0x7FFF,
                    "flush": bool(rclass & 0x8000),
                    "ttl": ttl,
                    "rdata_hex": data[rdata_start:offset].hex(),
                }
                record.update(self.rdata(rtype, rdata_start, offset))
                self.records.append(record)
        self.trailing = len(data) - offset

    def need(self, offset: int, length: int) -> None:
        if offset + length > len(self.data):
            raise RawError(f"{length} bytes at offset {offset} overrun the {len(self.data)}-byte packet")

    def name(self, offset: int) -> tuple[str, int]:
        """The name at offset and the offset after it (after the first pointer, if any)."""
        labels: list[str] = []
        end: int | None = None
        jumps = 0
        total = 0
        while True:
            self.need(offset, 1)
            length = self.data[offset]
            if length & 0xC0 == 0xC0:
                self.need(offset, 2)
                target = ((length & 0x3F) << 8) | self.data[offset + 1]
                if end is None:
                    end = offset + 2
                jumps += 1
                # Pointers go backwards (to a name seen earlier), which also rules out loops.
                if target >= offset or jumps > 127:
                    raise RawError(f"compression pointer {target} at offset {offset} does not point backwards")
                offset = target
                continue
            if length & 0xC0:
                raise RawError(f"label type {length:#x} at offset {offset}")
            if length == 0:
                offset += 1
                break
            self.need(offset + 1, length)
            labels.append(self.data[offset + 1 : offset + 1 + length].decode("utf-8", "replace"))
            total += length + 1
            if total > 255:
                raise RawError("name longer than 255 bytes")
            offset += 1 + length
        return ".".join(labels) + ".", (end if end is not None else offset)

    def rdata(self, rtype: int, start: int, end: int) -> dict[str, Any]:
        data = self.data
        try:
            if rtype == 12:  # PTR
                alias, after = self.name(start)
                return {"alias": alias} if after == end else {"rdata_error": "PTR name does not fill the rdata"}
            if rtype == 33:  # SRV
                priority, weight, port = struct.unpack_from("!HHH", data, start)
                target, after = self.name(start + 6)
                fields: dict[str, Any] = {"priority": priority, "weight": weight, "port": port, "target": target}
                if after != end:
                    fields["rdata_error"] = "SRV target does not fill the rdata"
                return fields
            if rtype == 16:  # TXT
                strings = []
                offset = start
                while offset < end:
                    length = data[offset]
                    if offset + 1 + length > end:
                        return {"rdata_error": "TXT string overruns the rdata"}
                    strings.append(data[offset + 1 : offset + 1 + length].hex())
                    offset += 1 + length
                return {"strings": strings}
            if rtype == 1 and end - start == 4:
                return {"address": str(ipaddress.IPv4Address(data[start:end]))}
            if rtype == 28 and end - start == 16:
                return {"address": str(ipaddress.IPv6Address(data[start:end]))}
            if rtype == 47:  # NSEC
                next_name, offset = self.name(start)
                types = []
                while offset < end:
                    if offset + 2 > end:
                        return {"rdata_error": "NSEC window header overruns the rdata"}
                    window, length = data[offset], data[offset + 1]
                    if length == 0 or length > 32 or offset + 2 + length > end:
                        return {"rdata_error": "NSEC bitmap length invalid"}
                    for i in range(length):
                        for bit in range(8):
                            if data[offset + 2 + i] & (0x80 >> bit):
                                types.append(window * 256 + i * 8 + bit)
                    offset += 2 + length
                return {"next": next_name, "types": [type_name(t) for t in types]}
        except (RawError, struct.error, IndexError) as exc:
            return {"rdata_error": str(exc)}
        return {}


# MARK: - python-zeroconf's view


def zeroconf_view(data: bytes, source: tuple[str, int]) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]]]:
    """python-zeroconf's parse: the DNSIncoming, its questions and its records (all sections,
    in packet order, as DNSIncoming.answers() returns them)."""
    from zeroconf import DNSAddress, DNSNsec, DNSPointer, DNSService, DNSText
    from zeroconf._protocol.incoming import DNSIncoming

    incoming = DNSIncoming(data, source)
    questions = [
        {"name": q.name, "type_code": q.type, "class": q.class_, "qu": bool(q.unique)} for q in incoming.questions
    ]
    records = []
    for r in incoming.answers():
        record: dict[str, Any] = {"name": r.name, "type_code": r.type, "class": r.class_, "flush": bool(r.unique), "ttl": int(r.ttl)}
        if isinstance(r, DNSPointer):
            record["alias"] = r.alias
        elif isinstance(r, DNSService):
            record.update(priority=r.priority, weight=r.weight, port=r.port, target=r.server)
        elif isinstance(r, DNSText):
            record["txt_raw"] = bytes(r.text).hex()
        elif isinstance(r, DNSAddress):
            record["address"] = str(ipaddress.ip_address(bytes(r.address)))
        elif isinstance(r, DNSNsec):
            record["next"] = r.next_name
            record["types"] = [type_name(t) for t in r.rdtypes]
        records.append(record)
    return incoming, questions, records


COMMON = ("name", "type_code", "class", "flush", "ttl")
TYPED = ("alias", "priority", "weight", "port", "target", "address", "next", "types")


def decode(data: bytes, source: tuple[str, int]) -> dict[str, Any]:
    """The packet's JSON fields: python-zeroconf's values, placed in sections by the raw parse,
    and whether the two parsers agree."""
    disagreements: list[str] = []
    raw: RawPacket | None
    try:
        raw = RawPacket(data)
    except (RawError, struct.error) as exc:
        raw = None
        disagreements.append(f"raw parse failed: {exc}")
    incoming, zq, zr = zeroconf_view(data, source)
    flags = incoming.flags
    fields: dict[str, Any] = {
        "id": incoming.id,
        "opcode": (flags >> 11) & 0xF,
        "rcode": flags & 0xF,
        "qr": bool(flags & 0x8000),
        "aa": bool(flags & 0x0400),
        "tc": bool(flags & 0x0200),
        "valid": bool(incoming.valid),
    }
    if not incoming.valid:
        disagreements.append("python-zeroconf found the packet invalid")
    questions = [dict(q, type=type_name(q["type_code"])) for q in zq]
    if raw is not None:
        if raw.id != incoming.id or raw.flags != flags:
            disagreements.append("header")
        if [tuple(q[k] for k in ("name", "type_code", "class", "qu")) for q in raw.questions] != [
            tuple(q[k] for k in ("name", "type_code", "class", "qu")) for q in zq
        ]:
            disagreements.append("questions")
        if raw.trailing:
            disagreements.append(f"{raw.trailing} bytes after the last record")
    sections: dict[str, list[dict[str, Any]]] = {"answers": [], "authorities": [], "additionals": []}
    if raw is not None:
        known = [r for r in raw.records if r["type_code"] in (1, 5, 12, 13, 16, 28, 33, 47)]
        if len(known) != len(zr):
            disagreements.append(f"python-zeroconf read {len(zr)} records, the raw parse {len(known)} of known types")
        zi = iter(zr)
        for r in raw.records:
            out = {k: r[k] for k in ("name", "type_code", "class", "flush", "ttl", "rdata_hex")}
            out["type"] = type_name(r["type_code"])
            if r in known:
                z = next(zi, None)
                if z is None:
                    disagreements.append(f"no python-zeroconf record for {r['name']} {out['type']}")
                    z = {}
                for k in COMMON:
                    if k in z and z[k] != r[k]:
                        disagreements.append(f"{r['name']} {out['type']}: {k} {z[k]!r} (zeroconf) vs {r[k]!r} (raw)")
                for k in TYPED:
                    if k in z or k in r:
                        if z.get(k) != r.get(k):
                            disagreements.append(f"{r['name']} {out['type']}: {k} {z.get(k)!r} (zeroconf) vs {r.get(k)!r} (raw)")
                        out[k] = z.get(k, r.get(k))
                if "txt_raw" in z and z["txt_raw"] != r["rdata_hex"]:
                    disagreements.append(f"{r['name']} TXT: rdata {z['txt_raw']} (zeroconf) vs {r['rdata_hex']} (raw)")
            else:
                for k in TYPED:
                    if k in r:
                        out[k] = r[k]
            if "strings" in r:
                out["strings"] = r["strings"]
            if "rdata_error" in r:
                out["rdata_error"] = r["rdata_error"]
                disagreements.append(f"{r['name']} {out['type']}: {r['rdata_error']}")
            sections[r["section"]].append(out)
    else:
        # Without the raw parse the sections are unknown: everything is listed as an answer.
        for z in zr:
            out = {k: z[k] for k in COMMON}
            out["type"] = type_name(z["type_code"])
            sections["answers"].append(out)
    fields["questions"] = questions
    fields.update(sections)
    fields["agree"] = not disagreements
    fields["disagreements"] = disagreements
    return fields


# MARK: - Queries


def encode_name(name: str) -> bytes:
    out = b""
    for label in name.rstrip(".").split("."):
        encoded = label.encode("utf-8")
        if not 0 < len(encoded) < 64:
            raise ValueError(f"bad label {label!r} in {name!r}")
        out += bytes([len(encoded)]) + encoded
    return out + b"\x00"


def build_query(qtype: int, name: str, known: str | None, ttl: int) -> bytes:
    header = struct.pack("!6H", 0, 0, 1, 1 if known else 0, 0, 0)
    packet = header + encode_name(name) + struct.pack("!HH", qtype, 1)
    if known:
        rdata = encode_name(known)
        packet += encode_name(name) + struct.pack("!HHIH", 12, 1, ttl, len(rdata)) + rdata
    return packet


class Query:
    def __init__(self, spec: list[str]) -> None:
        if len(spec) not in (3, 5):
            raise ValueError(f"--query takes AT TYPE NAME [KNOWN TTL], got {spec!r}")
        self.spec = spec
        at, qtype, name = spec[0], spec[1].upper(), spec[2]
        self.after_announce = at.startswith("announce+")
        self.delay = float(at[len("announce+") :] if self.after_announce else at)
        self.qtype = int(qtype) if qtype.isdigit() else TYPE_CODES[qtype]
        self.name = name if name.endswith(".") else name + "."
        self.known = spec[3] if len(spec) == 5 else None
        if self.known and not self.known.endswith("."):
            self.known += "."
        self.ttl = int(spec[4]) if len(spec) == 5 else 0
        if self.known and self.qtype not in (12, 255):
            raise ValueError("known answers are PTR records: use TYPE PTR")
        self.packet = build_query(self.qtype, self.name, self.known, self.ttl)
        self.due_ns: int | None = None
        self.sent = False


def clock_offset_ns() -> int:
    """CLOCK_REALTIME minus CLOCK_MONOTONIC now (the smallest of a few readings' brackets)."""
    best: tuple[int, int] | None = None
    for _ in range(3):
        before = time.monotonic_ns()
        real = time.clock_gettime_ns(time.CLOCK_REALTIME)
        after = time.monotonic_ns()
        if best is None or after - before < best[0]:
            best = (after - before, real - (before + after) // 2)
    assert best is not None
    return best[1]


def main(argv: list[str]) -> int:
    parser = _Parser(prog="mdns_capture.py", description="capture mDNS packets as JSON lines")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interface", default="127.0.0.1", help="IPv4 address of the interface to join on")
    parser.add_argument("--query", nargs="+", action="append", default=[], metavar="ARG", help="AT TYPE NAME [KNOWN TTL]")
    args = parser.parse_args(argv)
    if os.environ.get("OGK_SANDBOX") != "1":
        fail("refusing to open sockets outside scripts/sandbox (OGK_SANDBOX=1 is not set)")
    if args.seconds <= 0:
        fail("--seconds must be positive")
    try:
        queries = [Query(spec) for spec in args.query]
    except (ValueError, KeyError) as exc:
        fail(f"bad --query: {exc}")

    def watchdog(signum: int, frame: Any) -> None:
        fail("watchdog: still running long after --seconds")

    signal.signal(signal.SIGALRM, watchdog)
    signal.alarm(int(args.seconds) + 10)

    # Loaded now, not while the first packet waits to be timed and decoded.
    zeroconf_view(bytes(12), ("127.0.0.1", PORT))

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.setsockopt(socket.IPPROTO_IP, IP_MULTICAST_ALL, 0)
    sock.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(("0.0.0.0", PORT))
    interface = socket.inet_aton(args.interface)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(GROUP) + interface)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, interface)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)

    start = time.monotonic_ns()
    end = start + int(args.seconds * 1e9)
    for q in queries:
        if not q.after_announce:
            q.due_ns = start + int(q.delay * 1e9)
    emit("listening", start, interface=args.interface)
    sent_packets: set[bytes] = set()
    count = 0
    while True:
        now = time.monotonic_ns()
        for q in queries:
            if not q.sent and q.due_ns is not None and q.due_ns <= now:
                sock.sendto(q.packet, (GROUP, PORT))
                q.sent = True
                sent_packets.add(q.packet)
                raw = RawPacket(q.packet)
                emit(
                    "sent",
                    time.monotonic_ns(),
                    spec=q.spec,
                    questions=[dict(x, type=type_name(x["type_code"])) for x in raw.questions],
                    answers=[{k: r[k] for k in ("name", "type_code", "ttl", "alias") if k in r} for r in raw.records],
                    hex=q.packet.hex(),
                )
        now = time.monotonic_ns()
        if now >= end:
            break
        wake = min([end] + [q.due_ns for q in queries if not q.sent and q.due_ns is not None])
        ready, _, _ = select.select([sock], [], [], max(0, wake - now) / 1e9)
        if not ready:
            continue
        data, ancillary, _, source = sock.recvmsg(9000, socket.CMSG_SPACE(12) + socket.CMSG_SPACE(16))
        read = time.monotonic_ns()
        received = read
        ifindex = None
        for level, kind, value in ancillary:
            if level == socket.IPPROTO_IP and kind == IP_PKTINFO and len(value) >= 12:
                ifindex = struct.unpack_from("=i", value, 0)[0]
            elif level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= 16:
                seconds, nanoseconds = struct.unpack_from("=qq", value, 0)
                received = min(read, seconds * 1_000_000_000 + nanoseconds - clock_offset_ns())
        fields = decode(data, source)
        count += 1
        emit("packet", received, read_mono_ns=read, source=f"{source[0]}:{source[1]}", ifindex=ifindex, own=data in sent_packets, **fields, hex=data.hex())
        if fields["qr"]:
            for q in queries:
                if q.after_announce and q.due_ns is None and any(
                    r["name"].lower() == q.name.lower() and r["ttl"] > 0 for r in fields["answers"]
                ):
                    q.due_ns = received + int(q.delay * 1e9)
    for q in queries:
        if not q.sent:
            emit("query-skipped", spec=q.spec)
    sock.close()
    emit("stopped", packets=count)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception as exc:  # noqa: BLE001 - every failure becomes an error line
        import traceback

        traceback.print_exc()
        fail(f"{type(exc).__name__}: {exc}")
