#!/usr/bin/env python3
"""Writes the seed corpus of Fuzz/DNSMessageFuzzer to Fuzz/Corpus/dns/, deterministically.

Each seed is one mDNS datagram, encoded here from RFC 1035 §4.1 and RFC 6762 §18 independently of
the Swift encoder: realistic traffic of a Game Kit peer (probe, announcement, browse query with
known answers, goodbye, negative answer with NSEC, unicast reply, service enumeration, a reverse
address lookup, an EDNS0 OPT record as macOS adds), then hostile packets that each hit one of
DNSDecodingError's cases.

Python standard library only. Run: python3 Fuzz/make-dns-corpus.py
"""
import os
import struct

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Corpus", "dns")

A, PTR, TXT, AAAA, SRV, OPT, NSEC, ANY = 1, 12, 16, 28, 33, 41, 47, 255
IN, FLUSH, QU = 1, 0x8000, 0x8000
QR, AA, TC = 0x8000, 0x0400, 0x0200


def u8(v): return struct.pack(">B", v)
def u16(v): return struct.pack(">H", v)
def u32(v): return struct.pack(">I", v)


def labels(name):
    """Dotted text to labels; a label given as bytes inside a tuple is kept whole (instance names
    may contain dots)."""
    if isinstance(name, tuple):
        return [name[0]] + labels(name[1])
    return [part.encode() for part in name.split(".") if part]


class Message:
    """A message under construction, with RFC 1035 §4.1.4 compression keyed by lowercase suffix."""

    def __init__(self, flags=0, ident=0, compress=True):
        self.flags, self.ident, self.compress = flags, ident, compress
        self.body = b""
        self.counts = [0, 0, 0, 0]
        self.offsets = {}

    def offset(self):
        return 12 + len(self.body)

    def name(self, name, at=None):
        """Encodes `name` as if it started at message offset `at` (default: the end of the body)."""
        at = self.offset() if at is None else at
        out = b""
        parts = labels(name)
        for i in range(len(parts)):
            key = tuple(p.lower() for p in parts[i:])
            if self.compress and key in self.offsets:
                return out + u16(0xC000 | self.offsets[key])
            if self.compress and at + len(out) < 0x4000:
                self.offsets[key] = at + len(out)
            out += u8(len(parts[i])) + parts[i]
        return out + b"\x00"

    def question(self, name, qtype, qclass=IN):
        self.body += self.name(name) + u16(qtype) + u16(qclass)
        self.counts[0] += 1
        return self

    def record(self, section, name, rtype, ttl, rdata_fn, rclass=IN):
        head = self.name(name) + u16(rtype) + u16(rclass) + u32(ttl)
        # The data starts after the head and its 2-byte length; names inside may be compressed.
        rdata = rdata_fn(self, self.offset() + len(head) + 2)
        self.body += head + u16(len(rdata)) + rdata
        self.counts[section] += 1
        return self

    def bytes(self):
        return u16(self.ident) + u16(self.flags) + b"".join(u16(c) for c in self.counts) + self.body


# Record data builders: each takes the message and the data's offset, for compression.
def a(*octets): return lambda m, at: bytes(octets)
def aaaa(text): return lambda m, at: bytes.fromhex(text)
def ptr(name): return lambda m, at: m.name(name, at)
def srv(port, target, priority=0, weight=0):
    return lambda m, at: u16(priority) + u16(weight) + u16(port) + m.name(target, at + 6)
def txt(*strings):
    return lambda m, at: b"".join(u8(len(s)) + s for s in strings) if strings else b"\x00"
def raw(data): return lambda m, at: data


def nsec(next_name, types):
    def build(m, at):
        name = m.name(next_name, at)
        if not types:
            return name
        bitmap = bytearray(max(types) // 8 + 1)
        for t in types:
            bitmap[t // 8] |= 0x80 >> (t % 8)
        return name + u8(0) + u8(len(bitmap)) + bytes(bitmap)
    return build


ANSWER, AUTHORITY, ADDITIONAL = 1, 2, 3
SERVICE = "_gamekit._udp.local"
ALICE = (b"Alice's Mac.Chess", SERVICE)  # one label, dot included
HOST = "alice-mac.local"
LINK_LOCAL = "fe800000000000000211" + "22fffe334455"
SESSION_TXT = (b"txtvers=1", b"session=Chess", b"", b"players=2")


def announcement(compress=True):
    m = Message(QR | AA, compress=compress)
    m.record(ANSWER, SERVICE, PTR, 4500, ptr(ALICE))
    m.record(ANSWER, ALICE, SRV, 120, srv(51234, HOST), IN | FLUSH)
    m.record(ANSWER, ALICE, TXT, 4500, txt(*SESSION_TXT), IN | FLUSH)
    m.record(ANSWER, HOST, A, 120, a(192, 168, 0, 20), IN | FLUSH)
    m.record(ANSWER, HOST, AAAA, 120, aaaa(LINK_LOCAL), IN | FLUSH)
    m.record(ADDITIONAL, ALICE, NSEC, 4500, nsec(ALICE, [TXT, SRV]), IN | FLUSH)
    m.record(ADDITIONAL, HOST, NSEC, 120, nsec(HOST, [A, AAAA]), IN | FLUSH)
    return m.bytes()


def seeds():
    # Probe (RFC 6762 §8.1): QU questions of type ANY, proposed records in the authority section.
    m = Message()
    m.question(ALICE, ANY, IN | QU).question(HOST, ANY, IN | QU)
    m.record(AUTHORITY, ALICE, SRV, 120, srv(51234, HOST))
    m.record(AUTHORITY, ALICE, TXT, 4500, txt(*SESSION_TXT))
    m.record(AUTHORITY, HOST, A, 120, a(192, 168, 0, 20))
    m.record(AUTHORITY, HOST, AAAA, 120, aaaa(LINK_LOCAL))
    yield "probe", m.bytes()

    # Announcement (RFC 6762 §8.3), cache-flush on unique records, NSEC in additionals.
    yield "announcement", announcement()
    yield "announcement-uncompressed", announcement(compress=False)

    # Browse query with known answers (RFC 6762 §7.1), more in the next packet (TC), which holds
    # only known answers.
    m = Message(TC)
    m.question(SERVICE, PTR)
    for peer in (b"Bob", b"Carol's PC", b"dave"):
        m.record(ANSWER, SERVICE, PTR, 3000, ptr((peer, SERVICE)))
    yield "query-known-answers", m.bytes()
    m = Message()
    m.record(ANSWER, SERVICE, PTR, 2900, ptr((b"Eve", SERVICE)))
    yield "query-known-answers-continued", m.bytes()

    # Goodbye (RFC 6762 §10.1): TTL 0.
    m = Message(QR | AA)
    m.record(ANSWER, SERVICE, PTR, 0, ptr(ALICE))
    m.record(ANSWER, ALICE, SRV, 0, srv(51234, HOST), IN | FLUSH)
    yield "goodbye", m.bytes()

    # Negative answer (RFC 6762 §6.1): the host has an A record and no AAAA.
    m = Message(QR | AA)
    m.record(ANSWER, HOST, A, 120, a(10, 0, 0, 7), IN | FLUSH)
    m.record(ADDITIONAL, HOST, NSEC, 120, nsec(HOST, [A]), IN | FLUSH)
    yield "nsec-negative", m.bytes()

    # Unicast reply to a QU question (RFC 6762 §6.7): the query's ID echoed, the question repeated.
    m = Message(QR | AA, ident=0x5A17)
    m.question(HOST, A)
    m.record(ANSWER, HOST, A, 10, a(169, 254, 12, 34), IN | FLUSH)
    yield "unicast-reply", m.bytes()

    # Service type enumeration (RFC 6763 §9) and its answer.
    yield "enumeration-query", Message().question("_services._dns-sd._udp.local", PTR).bytes()
    m = Message(QR | AA)
    m.record(ANSWER, "_services._dns-sd._udp.local", PTR, 4500, ptr(SERVICE))
    m.record(ANSWER, "_services._dns-sd._udp.local", PTR, 4500, ptr("_http._tcp.local"))
    yield "enumeration-answer", m.bytes()

    # Reverse address answer, and an EDNS0 OPT record (class: UDP payload size 1440) with one
    # option, as macOS adds to its queries.
    m = Message(QR | AA)
    m.record(ANSWER, "20.0.168.192.in-addr.arpa", PTR, 120, ptr(HOST), IN | FLUSH)
    yield "reverse-answer", m.bytes()
    m = Message()
    m.question(SERVICE, PTR)
    m.record(ADDITIONAL, "", OPT, 0, raw(u16(4) + u16(14) + bytes(range(14))), 1440)
    yield "query-edns-opt", m.bytes()

    # Empty TXT in both accepted forms, and an unknown type.
    m = Message(QR | AA)
    m.record(ANSWER, ALICE, TXT, 4500, txt())
    m.record(ANSWER, ALICE, TXT, 4500, raw(b""))
    m.record(ANSWER, HOST, 99, 120, raw(b"\x01\x02\x03"))
    yield "txt-empty-and-unknown-type", m.bytes()

    # --- Hostile --------------------------------------------------------------------------------
    header = lambda qd=0, an=0: u16(0) + u16(QR | AA) + u16(qd) + u16(an) + u16(0) + u16(0)
    question_tail = u16(A) + u16(IN)
    yield "bad-self-pointer", header(qd=1) + b"\xc0\x0c" + question_tail
    yield "bad-mutual-pointers", header(qd=2) + b"\xc0\x12" + question_tail + b"\xc0\x0c" + question_tail
    yield "bad-pointer-past-end", header(qd=1) + b"\xff\xff" + question_tail
    yield "bad-reserved-label", header(qd=1) + b"\x40" + b"a" * 64 + b"\x00" + question_tail
    yield "bad-counts", u16(0) + u16(0) + b"\xff\xff" * 4
    chain = b"\x00" + u16(0xC000 | 23) + b"".join(u16(0xC000 | (24 + 2 * i)) for i in range(129))
    yield "bad-pointer-chain", (header(an=2) + b"\x00" + u16(99) + u16(IN) + u32(0) + u16(len(chain)) + chain
                                + u16(0xC000 | (24 + 2 * 129)) + u16(A) + u16(IN) + u32(0) + u16(4) + b"\x01\x02\x03\x04")
    # Each question puts a 63-byte label in front of the previous question's name: 65, 129, 193,
    # then 257 bytes.
    long_name, previous = header(qd=4) + u8(63) + b"a" * 63 + b"\x00" + question_tail, 12
    for letter in b"bcd":
        start = len(long_name)
        long_name += u8(63) + bytes([letter]) * 63 + u16(0xC000 | previous) + question_tail
        previous = start
    yield "bad-name-too-long", long_name
    nsec33 = b"\x00" + u8(0) + u8(33) + b"\xff" * 33
    yield "bad-nsec-window", header(an=1) + b"\x00" + u16(NSEC) + u16(IN) + u32(120) + u16(len(nsec33)) + nsec33
    yield "bad-txt-overrun", header(an=1) + b"\x00" + u16(TXT) + u16(IN) + u32(120) + u16(3) + b"\x05ab"
    yield "bad-a-length", header(an=1) + b"\x00" + u16(A) + u16(IN) + u32(120) + u16(5) + b"\x01\x02\x03\x04\x05"
    yield "bad-cut-short", announcement()[:-7]  # the last record's data is cut


def main():
    os.makedirs(CORPUS, exist_ok=True)
    for name in os.listdir(CORPUS):
        os.remove(os.path.join(CORPUS, name))
    count = 0
    for name, data in seeds():
        assert len(data) <= 1500, name  # an Ethernet-sized datagram; scripts/fuzz dns allows 9000
        with open(os.path.join(CORPUS, name), "wb") as f:
            f.write(data)
        count += 1
    print(f"wrote {count} seeds to {CORPUS}")


if __name__ == "__main__":
    main()
