"""The answer model rendered with dnspython: shared by the slow path and the table compiler.

Both paths build their records here, from the same `answer.Answer`, so the bytes the compiler stores
for the fast path and the message the slow path renders per query are the same records in the same
order. Size limits work like dnspython's renderer: a response that does not fit is sent with TC set,
no records, and only its OPT record.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import dns.edns
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from gslbd.answer import Answer, Rr
from gslbd.types import Rcode

IN = dns.rdataclass.IN
# Header flag bits (RFC 1035 4.1.1) in the 16-bit flags word.
QR = 0x8000
OPCODE_MASK = 0x7800
AA = 0x0400
TC = 0x0200
RD = 0x0100
CD = 0x0010  # copied from the query into every response (RFC 4035 3.1.6)
DO = 0x8000  # in the OPT record's flags (RFC 3225)
TCP_LIMIT = 65535
NO_EDNS_LIMIT = 512


@lru_cache(maxsize=8192)
def dns_name(text: str) -> dns.name.Name:
    """An absolute name from its text (model names are absolute)."""
    return dns.name.from_text(text)


@lru_cache(maxsize=8192)
def rdata(rtype: str, text: str) -> dns.rdata.Rdata:
    """Rdata of class IN from presentation text; rdata objects are immutable, so they are shared."""
    return dns.rdata.from_text(IN, dns.rdatatype.from_text(rtype), text)


def to_rrsets(rrs: Iterable[Rr]) -> list[dns.rrset.RRset]:
    """Records grouped into RRsets by (owner, type), in the order each RRset first appears."""
    out: dict[tuple[str, str], dns.rrset.RRset] = {}
    for rr in rrs:
        key = (rr.name, rr.rtype)
        rrset = out.get(key)
        if rrset is None:
            rrset = out[key] = dns.rrset.RRset(dns_name(rr.name), IN, dns.rdatatype.from_text(rr.rtype))
        rrset.add(rdata(rr.rtype, rr.rdata), rr.ttl)
    return list(out.values())


@dataclass(frozen=True, slots=True)
class EdnsReply:
    """The OPT record of a response: our payload size, the query's DO bit, and options (ECS echo)."""

    payload: int
    flags: int = 0
    options: tuple[dns.edns.Option, ...] = ()


def carries_aa(rcode: int, authoritative: bool) -> bool:
    """Whether a response has AA: authoritative data, never REFUSED or SERVFAIL (BIND takes a SERVFAIL
    with AA for a lame server). The one rule for every path (the compiled heads and the slow path)."""
    return authoritative and rcode not in (Rcode.REFUSED, Rcode.SERVFAIL)


def response_flags(query_flags: int, *, authoritative: bool) -> int:
    """QR, the query's opcode, RD and CD, AA when authoritative; RA (and every other bit) clear."""
    flags = QR | (query_flags & (OPCODE_MASK | RD | CD))
    if authoritative:
        flags |= AA
    return flags


def build_message(
    qid: int,
    flags: int,
    question: Sequence[dns.rrset.RRset],
    *,
    rcode: int = 0,
    answer: Answer | None = None,
    edns: EdnsReply | None = None,
) -> dns.message.Message:
    """A response message with header `flags` (see `response_flags`) and `rcode`, which may be an
    extended rcode (BADVERS) when `edns` is given."""
    msg = dns.message.Message(id=qid)
    msg.flags = dns.flags.Flag(flags)
    msg.question = list(question)
    if answer is not None:
        msg.answer = to_rrsets(answer.answer)
        msg.authority = to_rrsets(answer.authority)
        msg.additional = to_rrsets(answer.additional)
    if edns is not None:
        msg.use_edns(0, edns.flags, edns.payload, options=list(edns.options))
    msg.set_rcode(dns.rcode.Rcode.make(rcode))
    return msg


def message_wire(msg: dns.message.Message, max_size: int = TCP_LIMIT) -> bytes:
    """The message's wire form with records in the order given: dnspython shuffles the records of
    every RRset by default, which would undo the policies' orders (round robin, failover...)."""
    return msg.to_wire(max_size=max_size, want_shuffle=False)


def to_wire_limited(msg: dns.message.Message, limit: int) -> bytes:
    """The message's wire form in at most `limit` bytes; when it does not fit: TC, no records, OPT kept."""
    try:
        return message_wire(msg, limit)
    except dns.exception.TooBig:
        msg.answer = []
        msg.authority = []
        msg.additional = []
        msg.flags |= dns.flags.TC
        return message_wire(msg)


def udp_limit(has_edns: bool, client_payload: int, max_udp_payload: int) -> int:
    """The largest UDP response: min(max(client payload, 512), max_udp_payload) with EDNS, else 512.
    A max_udp_payload below 512 counts as 512 (every DNS client accepts 512 bytes)."""
    if not has_edns:
        return NO_EDNS_LIMIT
    return min(max(client_payload, NO_EDNS_LIMIT), max(max_udp_payload, NO_EDNS_LIMIT))


def sections_wire(qname: dns.name.Name, answer: Answer) -> tuple[bytes, int, int, int]:
    """The answer's three sections as wire bytes, compressed against a question for `qname` that
    starts at offset 12, and their record counts (answer, authority, additional).

    A query's question has the same length and label layout whatever its letter case, so these bytes
    stay valid after any question with the same name (in any case) and compression pointers into the
    question then echo the client's case.
    """
    question = [dns.rrset.RRset(qname, IN, dns.rdatatype.A)]
    msg = build_message(0, QR, question, answer=answer)
    wire = message_wire(msg)
    start = 12 + len(qname.to_wire() or b"") + 4
    return (
        wire[start:],
        int.from_bytes(wire[6:8], "big"),
        int.from_bytes(wire[8:10], "big"),
        int.from_bytes(wire[10:12], "big"),
    )
