"""The exchange's DNS messages as bytes: queries built once, replies read without dnspython.

A poll asks thousands of questions per peer per interval (A and AAAA of every service's localtargets
name, and the heartbeat TXT), so queries are built once per configuration with ID 0 (`Question.wire`;
the ID is written per send) and replies are read by `read_reply`, a small parser for exactly what the
exchange needs: the header, the echoed question, and the records of the asked type owned by the asked
name. Any reply it cannot read with certainty (an unusual owner encoding, a broken record) is handed to
dnspython, so correctness never depends on the shortcut.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

import dns.exception
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype

A, AAAA, TXT, SOA = 1, 28, 16, 6
NOTIFY_OPCODE = 4
_IN = 1
_QR = 0x80
_TC = 0x02
_OWNER_POINTER = b"\xc0\x0c"


class BadReply(ValueError):
    """A reply that does not answer the question asked (wrong ID, question or opcode; unreadable)."""


@dataclass(frozen=True, slots=True)
class Question:
    """One question of a poll: its name (text, absolute), type and prebuilt query (ID 0, RD clear)."""

    name: str
    rdtype: int
    wire: bytes

    @property
    def section(self) -> bytes:
        """The question section bytes (name, type, class)."""
        return self.wire[12:]


@dataclass(frozen=True, slots=True)
class Reply:
    """What a reply says: its rcode, whether it was truncated, and the data of the asked type at the
    asked name (addresses as normal text for A/AAAA, the joined strings for TXT)."""

    rcode: int
    truncated: bool = False
    data: tuple[str, ...] = ()


def question(name: str, rdtype: int) -> Question:
    """A prebuilt query for (name, type): ID 0, opcode QUERY, no RD, no EDNS."""
    wire = struct.pack("!HHHHHH", 0, 0, 1, 0, 0, 0) + _name_wire(name) + struct.pack("!HH", rdtype, _IN)
    return Question(name, rdtype, wire)


def with_id(q: Question, qid: int) -> bytes:
    return qid.to_bytes(2, "big") + q.wire[2:]


def notify_message(zone: str, qid: int) -> bytes:
    """A DNS NOTIFY (RFC 1996) for `zone`: opcode NOTIFY, AA set, question (zone, SOA, IN)."""
    flags = NOTIFY_OPCODE << 11 | 0x0400
    return struct.pack("!HHHHHH", qid, flags, 1, 0, 0, 0) + _name_wire(zone) + struct.pack("!HH", SOA, _IN)


def _name_wire(name: str) -> bytes:
    return dns.name.from_text(name).to_wire() or b""


def read_reply(data: bytes, q: Question, qid: int) -> Reply:
    """Read a reply to `q` sent with ID `qid`. BadReply when it is not one."""
    if len(data) < 12:
        raise BadReply("shorter than a DNS header")
    rid, flags, qdcount, ancount = struct.unpack_from("!HHHH", data, 0)
    if rid != qid or not flags & (_QR << 8) or (flags >> 11) & 0xF:
        raise BadReply("not a response to this query")
    section = q.section
    end = 12 + len(section)
    if qdcount != 1 or data[12:end].lower() != section.lower():
        raise BadReply("the question was not echoed")
    rcode = flags & 0xF
    truncated = bool(flags & (_TC << 8))
    try:
        found = _records(data, end, ancount, q.rdtype)
    except (IndexError, struct.error, ValueError):
        found = None
    if found is None:  # an owner the shortcut cannot judge, or a broken record: ask dnspython
        found = _records_slow(data, q)
    return Reply(rcode, truncated, found)


def _records(data: bytes, pos: int, count: int, rdtype: int) -> tuple[str, ...] | None:
    """The rdata of `rdtype` records owned by the question name (pointer to offset 12), or None when
    an owner is written in another way (then the caller parses the message fully)."""
    out: list[str] = []
    for _ in range(count):
        if data[pos : pos + 2] != _OWNER_POINTER:
            return None
        pos += 2
        rtype, rclass, _ttl, rdlen = struct.unpack_from("!HHIH", data, pos)
        pos += 10
        rdata = data[pos : pos + rdlen]
        if len(rdata) != rdlen:
            raise ValueError("record runs past the end")
        pos += rdlen
        if rtype != rdtype or rclass != _IN:
            continue
        out.append(_rdata_text(rtype, rdata))
    return tuple(out)


def _rdata_text(rtype: int, rdata: bytes) -> str:
    if rtype == A:
        if len(rdata) != 4:
            raise ValueError("A rdata is not 4 bytes")
        return str(ipaddress.IPv4Address(rdata))
    if rtype == AAAA:
        if len(rdata) != 16:
            raise ValueError("AAAA rdata is not 16 bytes")
        return str(ipaddress.IPv6Address(rdata))
    if rtype == TXT:
        parts: list[bytes] = []
        pos = 0
        while pos < len(rdata):
            n = rdata[pos]
            part = rdata[pos + 1 : pos + 1 + n]
            if len(part) != n:
                raise ValueError("TXT string runs past the end")
            parts.append(part)
            pos += 1 + n
        return b"".join(parts).decode("ascii", "replace")
    raise ValueError(f"unexpected type {rtype}")


def _records_slow(data: bytes, q: Question) -> tuple[str, ...]:
    try:
        msg = dns.message.from_wire(data, ignore_trailing=True)
    except dns.exception.DNSException as exc:
        raise BadReply(f"unreadable reply: {exc}") from None
    except Exception as exc:  # dnspython raises many kinds of errors on malformed input
        raise BadReply(f"unreadable reply: {exc}") from None
    qname = dns.name.from_text(q.name)
    out: list[str] = []
    for rrset in msg.answer:
        if rrset.name != qname or rrset.rdtype != q.rdtype or rrset.rdclass != _IN:
            continue
        for rd in rrset:
            if q.rdtype == TXT:
                out.append(b"".join(rd.strings).decode("ascii", "replace"))
            else:
                out.append(str(ipaddress.ip_address(rd.address)))
    return tuple(out)


def rdtype_text(rdtype: int) -> str:
    return dns.rdatatype.to_text(dns.rdatatype.RdataType(rdtype))


def rcode_text(rcode: int) -> str:
    """An rcode by its name (NOTIMP, REFUSED, ...), or its number when it has none."""
    try:
        return dns.rcode.to_text(dns.rcode.Rcode.make(rcode))
    except (ValueError, dns.rcode.UnknownRcode):
        return str(rcode)
