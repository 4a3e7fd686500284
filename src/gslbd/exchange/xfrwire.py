"""The exchange zone's DNS messages as bytes: SOA answers, AXFR/IXFR streams, NOTIFY with a serial.

An exchange zone holds one RRset per service and address family, up to hundreds of thousands of
records, so transfers are written and read here without dnspython message objects: every owner is
its label(s) and a compression pointer to the apex in the question (offset 12), and the reader walks
records with the one wire name reader (wire/names.py). TSIG (RFC 8945) is computed over these bytes
with dnspython's `dns.tsig.sign`/`validate`; in a stream of several messages each one is signed and
the MACs chain (RFC 8945 5.3.1), as dnspython and BIND do.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.TSIG
import dns.tsig

from gslbd.exchange.zone import SOA, TXT
from gslbd.model.tsig import TsigKey
from gslbd.wire import names
from gslbd.wire.names import labels_of
from gslbd.wire.tsig import keyring

IN = 1
TSIG_TYPE = 250
AXFR, IXFR = 252, 251
NOTIFY_OPCODE = 4
APEX_POINTER = b"\xc0\x0c"
MESSAGE_TARGET = 32000  # bytes of records per transfer message (a message may hold 65535)
_SOA_TIMERS = struct.Struct("!IIIII")
_RR = struct.Struct("!HHIH")


class BadMessage(ValueError):
    """A message that cannot be read (or whose signature does not verify: `tsig` is then True)."""

    def __init__(self, reason: str, *, tsig: bool = False) -> None:
        super().__init__(reason)
        self.tsig = tsig


@lru_cache(maxsize=4096)
def name_wire(name: str) -> bytes:
    """The uncompressed wire form of an absolute name."""
    return dns.name.from_text(name).to_wire() or b""


def label_wire(label: str) -> bytes:
    """The wire form of a relative name (one or more labels, no root byte)."""
    if "\\" in label:
        return _escaped(label)
    parts = label.split(".")
    return b"".join(bytes((len(p),)) + p.encode("ascii") for p in parts)


def _escaped(label: str) -> bytes:
    wire = dns.name.from_text(label, origin=dns.name.root).to_wire() or b"\x00"
    return wire[:-1]


# -- writing ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Soa:
    """The SOA of one exchange zone."""

    mname: str
    rname: str
    serial: int
    refresh: int
    retry: int
    expire: int
    minimum: int = 0

    def rdata(self) -> bytes:
        timers = _SOA_TIMERS.pack(self.serial, self.refresh, self.retry, self.expire, self.minimum)
        return name_wire(self.mname) + name_wire(self.rname) + timers


def record(owner: bytes, rtype: int, ttl: int, rdata: bytes, rclass: int = IN) -> bytes:
    """One resource record; `owner` in wire form (APEX_POINTER for the apex)."""
    return owner + _RR.pack(rtype, rclass, ttl, len(rdata)) + rdata


def soa_record(soa: Soa, ttl: int = 0) -> bytes:
    return record(APEX_POINTER, SOA, ttl, soa.rdata())


def txt_rdata(text: str) -> bytes:
    data = text.encode("ascii")
    return bytes((len(data),)) + data


def header(qid: int, flags: int, an: int, ns: int = 0, ar: int = 0) -> bytes:
    return struct.pack("!HHHHHH", qid, flags, 1, an, ns, ar)


def response_flags(qflags: int, rcode: int, *, authoritative: bool = True) -> int:
    """QR, the query's opcode and RD, AA when `authoritative`, and the rcode."""
    return 0x8000 | (qflags & 0x7900) | (0x0400 if authoritative else 0) | rcode


def messages(
    qid: int, flags: int, question: bytes, records: Iterable[bytes], target: int | None = None
) -> Iterator[bytes]:
    """The records cut into messages of about `target` (MESSAGE_TARGET) bytes each, each with the
    question."""
    target = target if target is not None else MESSAGE_TARGET
    chunk: list[bytes] = []
    size = 0
    for rr in records:
        if chunk and size + len(rr) > target:
            yield header(qid, flags, len(chunk)) + question + b"".join(chunk)
            chunk, size = [], 0
        chunk.append(rr)
        size += len(rr)
    if chunk:
        yield header(qid, flags, len(chunk)) + question + b"".join(chunk)


def sign_stream(wires: Iterable[bytes], key: TsigKey, request_mac: bytes) -> Iterator[bytes]:
    """Each message signed with `key`; the first over the query's MAC, the next ones chained."""
    ctx: object | None = None
    for wire in wires:
        signed, ctx = _sign(wire, key, request_mac, ctx, multi=True)
        yield signed


def sign_one(wire: bytes, key: TsigKey, request_mac: bytes) -> bytes:
    """A single message signed with `key` over the query's MAC (not part of a stream)."""
    return _sign(wire, key, request_mac, None, multi=False)[0]


def _sign(
    wire: bytes, key: TsigKey, request_mac: bytes, ctx: object | None, *, multi: bool
) -> tuple[bytes, object]:
    dkey = next(iter(keyring(key).values()))
    now = int(time.time())
    qid = int.from_bytes(wire[:2], "big")
    rdata = dns.rdtypes.ANY.TSIG.TSIG(  # type: ignore[no-untyped-call]
        dns.rdataclass.ANY, dns.rdatatype.TSIG, dkey.algorithm, now, 300, b"", qid, 0, b""
    )
    tsig, ctx = dns.tsig.sign(wire, dkey, rdata, now, request_mac, ctx, multi)  # type: ignore[no-untyped-call]
    arcount = int.from_bytes(wire[10:12], "big") + 1
    rr = record(name_wire(key.name), TSIG_TYPE, 0, tsig.to_wire() or b"", dns.rdataclass.ANY)
    return wire[:10] + arcount.to_bytes(2, "big") + wire[12:] + rr, ctx


def transfer_query(apex: str, rtype: int, qid: int, serial: int | None = None) -> bytes:
    """An AXFR query, or an IXFR query from `serial` (its SOA in the authority section, RFC 1995)."""
    question = name_wire(apex) + struct.pack("!HH", rtype, IN)
    if rtype != IXFR or serial is None:
        return struct.pack("!HHHHHH", qid, 0, 1, 0, 0, 0) + question
    soa = Soa(".", ".", serial, 0, 0, 0)
    return struct.pack("!HHHHHH", qid, 0, 1, 0, 1, 0) + question + soa_record(soa)


def soa_query(apex: str, qid: int) -> bytes:
    return struct.pack("!HHHHHH", qid, 0, 1, 0, 0, 0) + name_wire(apex) + struct.pack("!HH", SOA, IN)


def notify_with_serial(zone: str, qid: int, apex: str, serial: int) -> bytes:
    """A NOTIFY (RFC 1996) for the served `zone` that carries the exchange zone's serial: the apex SOA
    in the answer section (RFC 1996 3.7); receivers that do not know it look at the question only."""
    flags = NOTIFY_OPCODE << 11 | 0x0400
    owner = name_wire(apex)
    rdata = Soa(apex, apex, serial, 0, 0, 0).rdata()
    return (
        struct.pack("!HHHHHH", qid, flags, 1, 1, 0, 0)
        + name_wire(zone)
        + struct.pack("!HH", SOA, IN)
        + record(owner, SOA, 0, rdata)
    )


# -- reading ---------------------------------------------------------------------------------------


def read_name(data: bytes, pos: int) -> tuple[tuple[bytes, ...], int]:
    """(the labels in lower case, the offset after the name at `pos`), read by wire/names.py."""
    try:
        wire, end = names.read_name(data, pos)
    except names.BadName as exc:
        raise BadMessage(str(exc)) from None
    return labels_of(wire.lower()), end


def name_labels(name: str) -> tuple[bytes, ...]:
    return tuple(p.encode("ascii").lower() for p in name.rstrip(".").split(".") if p)


@dataclass(frozen=True, slots=True)
class Rr:
    owner: tuple[bytes, ...]
    rtype: int
    rclass: int
    ttl: int
    rdata: bytes
    start: int  # offset of the record in the message


@dataclass(frozen=True, slots=True)
class Message:
    qid: int
    flags: int
    question: tuple[tuple[bytes, ...], int] | None
    answer: tuple[Rr, ...]
    authority: tuple[Rr, ...]
    additional: tuple[Rr, ...]

    @property
    def rcode(self) -> int:
        return self.flags & 0xF

    @property
    def opcode(self) -> int:
        return (self.flags >> 11) & 0xF


def read_message(data: bytes) -> Message:
    """Every record of a message (rdata raw). BadMessage when it is not a well formed message."""
    try:
        qid, flags, qd, an, ns, ar = struct.unpack_from("!HHHHHH", data, 0)
        pos = 12
        question = None
        for _ in range(qd):
            qname, pos = read_name(data, pos)
            (qtype,) = struct.unpack_from("!H", data, pos)
            question = (qname, qtype)
            pos += 4
        sections: list[list[Rr]] = [[], [], []]
        for index, count in enumerate((an, ns, ar)):
            for _ in range(count):
                start = pos
                owner, pos = read_name(data, pos)
                rtype, rclass, ttl, rdlen = _RR.unpack_from(data, pos)
                pos += 10
                rdata = data[pos : pos + rdlen]
                if len(rdata) != rdlen:
                    raise BadMessage("a record runs past the end")
                sections[index].append(Rr(owner, rtype, rclass, ttl, rdata, start))
                pos += rdlen
    except struct.error as exc:
        raise BadMessage(f"truncated message: {exc}") from None
    return Message(qid, flags, question, tuple(sections[0]), tuple(sections[1]), tuple(sections[2]))


def soa_serial(rdata: bytes, data: bytes | None = None, offset: int = 0) -> int:
    """The serial of an SOA rdata (names in it may be compressed when `data`/`offset` are given)."""
    if data is None:
        _, pos = read_name(rdata, 0)
        _, pos = read_name(rdata, pos)
        return int(struct.unpack_from("!I", rdata, pos)[0])
    _, pos = read_name(data, offset)
    _, pos = read_name(data, pos)
    return int(struct.unpack_from("!I", data, pos)[0])


def rr_serial(data: bytes, rr: Rr) -> int:
    """The serial of an SOA record read from `data`."""
    _, pos = read_name(data, rr.start)
    return soa_serial(rr.rdata, data, pos + 10)


def txt_text(rdata: bytes) -> str:
    parts: list[bytes] = []
    pos = 0
    while pos < len(rdata):
        n = rdata[pos]
        parts.append(rdata[pos + 1 : pos + 1 + n])
        pos += 1 + n
    return b"".join(parts).decode("ascii", "replace")


def heartbeat_of(message: Message, owner: tuple[bytes, ...]) -> float | None:
    """The heartbeat TXT (`owner`) in a message's additional section, as Unix seconds."""
    for rr in message.additional:
        if rr.rtype == TXT and rr.owner == owner:
            try:
                return float(txt_text(rr.rdata).strip())
            except ValueError:
                return None
    return None


class StreamVerifier:
    """Verifies the TSIG of each message of a reply stream to a query signed with MAC `request_mac`."""

    def __init__(self, key: TsigKey, request_mac: bytes) -> None:
        self._key = next(iter(keyring(key).values()))
        self._request_mac = request_mac
        self._ctx: object | None = None
        self.first = True

    def verify(self, data: bytes, message: Message, *, multi: bool = True) -> None:
        """BadMessage(tsig=True) unless the message is signed with the key and verifies."""
        tsig = message.additional[-1] if message.additional else None
        if tsig is None or tsig.rtype != TSIG_TYPE:
            raise BadMessage("TSIG: the reply is not signed", tsig=True)
        try:
            rdata = _tsig_rdata(data, tsig)
            owner = dns.name.Name([*tsig.owner, b""])
            self._ctx = dns.tsig.validate(  # type: ignore[no-untyped-call]
                data,
                self._key,
                owner,
                rdata,
                int(time.time()),
                self._request_mac,
                tsig.start,
                self._ctx,
                multi,
            )
        except dns.tsig.BadTime:
            raise BadMessage("TSIG: the reply's TSIG time is outside the fudge", tsig=True) from None
        except (dns.tsig.BadSignature, dns.tsig.BadKey, dns.tsig.BadAlgorithm, dns.tsig.PeerError):
            raise BadMessage("TSIG: the reply's TSIG signature does not verify", tsig=True) from None
        except Exception as exc:  # dnspython's errors for an unreadable TSIG record
            raise BadMessage(f"TSIG: the reply cannot be read ({exc})", tsig=True) from None
        self.first = False


def _tsig_rdata(data: bytes, rr: Rr) -> dns.rdata.Rdata:
    _, pos = read_name(data, rr.start)
    return dns.rdata.from_wire(dns.rdataclass.ANY, dns.rdatatype.TSIG, data, pos + 10, len(rr.rdata))
