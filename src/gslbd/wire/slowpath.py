"""The complete DNS behaviour, with dnspython: every query the fast path does not take.

The order of checks (each answers or drops, the first that applies wins):
  1. shorter than a header (12 bytes), or QR set: dropped (None);
  2. the message does not parse: NOTIMP for an opcode other than QUERY, else BADVERS when a readable
     OPT record has a version above 0, else FORMERR; the question is echoed when it can be read, an
     OPT record is added when one could be found (written from bytes by wire/precheck.py, which the
     responder asks first: a message whose structure breaks never reaches dnspython); a TSIG
     signature that does not verify with the exchange's key (`peers.tsig`; without one every key is
     unknown): NOTAUTH with the TSIG error record of RFC 8945 5.2 and, with EDNS, an EDE naming it
     (wire/tsig.py);
  3. opcode other than QUERY: NOTIMP (NOTIFY goes to the `on_notify` hook when there is one);
  4. QDCOUNT != 1: FORMERR without a question;
  5. EDNS version above 0: BADVERS (extended rcode 16, in the OPT record);
  6. more than one ECS option: FORMERR (a malformed ECS option already fails step 2);
  7. type NXNAME (128, RFC 9824): FORMERR; AXFR, IXFR: REFUSED (EDE 18; this site's exchange zone is
     answered before, by `Responder.on_exchange`, wire/transfer.py); CHAOS id.server.,
     hostname.bind., version.bind., version.server. when dns.identity/dns.version are set: their TXT;
     any other class than IN: REFUSED (EDE 20);
  8. the view's answer for (name, type) at the client's location (a nonexistent name below a
     wildcard service: the wildcard's answer, RFC 4592).
NSID (RFC 5001) is answered with `identity` when the query asks for it; EDE (RFC 8914) options follow
ECS and NSID in the OPT record.
Error responses (FORMERR, NOTIMP, BADVERS) and SERVFAIL never have AA; errors never echo ECS. Every
response copies the query's CD bit (RFC 4035 3.1.6). Every other response
echoes ECS when `use_client_subnet` is on and the query carried it. The response to a query with a
verified TSIG signature is signed with the same key.
"""

from __future__ import annotations

import ipaddress
import random
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import dns.edns
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from gslbd.answer import (
    NOT_AUTHORITATIVE,
    TRANSFER_PROHIBITED,
    Answer,
    NameData,
    Rr,
    View,
    negative_soa,
    render,
    wildcard_at,
)
from gslbd.answer.dname import beneath
from gslbd.model.tsig import TsigKey
from gslbd.model.zone import Zone
from gslbd.policy.scope import echoed as echoed_scope
from gslbd.types import Rcode
from gslbd.wire.compile import SignedZone
from gslbd.wire.dnssec import CO, NXNAME, SignedReply, Signer, ZoneKeys
from gslbd.wire.metatypes import meta_reply
from gslbd.wire.notify import NotifyHook, notify_response
from gslbd.wire.precheck import error_response, scan
from gslbd.wire.render import (
    DO,
    IN,
    TCP_LIMIT,
    EdnsReply,
    build_message,
    carries_aa,
    message_wire,
    response_flags,
    to_wire_limited,
    udp_limit,
)
from gslbd.wire.tsig import ERROR_NAMES, TsigRefused, error_reply, read_signed, sign_reply

BADVERS = 16
ZONE_TRANSFERS = (dns.rdatatype.AXFR, dns.rdatatype.IXFR)


def slow_response(
    data: bytes,
    view: View,
    src_ip: int,
    src_v6: bool,
    *,
    tcp: bool,
    max_udp_payload: int,
    use_client_subnet: bool,
    rng: random.Random,
    seq: int,
    on_notify: NotifyHook | None = None,
    identity: str | None = None,
    version: str | None = None,
    signer: Signer | None = None,
    signed_zones: Mapping[bytes, SignedZone] | None = None,
) -> bytes | None:
    """The response to one query packet (without the TCP length prefix), or None to drop it.
    `on_notify` answers DNS NOTIFY (wire/notify.py); without it NOTIFY gets NOTIMP like any opcode.
    `identity` (dns.identity, {worker} filled in) answers NSID and CHAOS id.server./hostname.bind.;
    `version` answers CHAOS version.bind./version.server.; None hides them (REFUSED, no NSID)."""
    if len(data) < 12 or data[2] & 0x80:
        return None
    qid = int.from_bytes(data[0:2], "big")
    qflags = int.from_bytes(data[2:4], "big")
    key = exchange_key(view)
    try:
        query = read_signed(data, key)
    except TsigRefused as refused:
        if (qflags >> 11) & 0xF == dns.opcode.NOTIFY and on_notify is not None:
            on_notify("", src_ip, src_v6)  # counted as refused, like any NOTIFY it does not accept
        return _tsig_error(data, qid, qflags, refused, key, max_udp_payload)
    except Exception:  # dnspython raises many kinds of errors on malformed input
        return _unparsed(data, max_udp_payload)
    wire = _respond(
        query,
        qid,
        qflags,
        view,
        src_ip,
        src_v6,
        tcp,
        max_udp_payload,
        use_client_subnet,
        rng,
        seq,
        on_notify,
        _Identity(identity, version),
        signer,
        signed_zones,
    )
    if not query.had_tsig:
        return wire
    return _signed(
        wire, query, key, TCP_LIMIT if tcp else udp_limit(query.edns >= 0, query.payload, max_udp_payload)
    )


def exchange_key(view: View) -> TsigKey | None:
    """The key that signs the multi-site exchange, when the config has one."""
    peers = view.config.peers
    return peers.tsig if peers is not None else None


def _signed(wire: bytes, query: dns.message.Message, key: TsigKey | None, limit: int) -> bytes:
    """A response (wire form) signed like the verified query; records dropped and TC set when the
    signature makes it too long for `limit`."""
    reply = dns.message.from_wire(wire)
    sign_reply(reply, query, key)
    return to_wire_limited(reply, limit)


def _respond(
    query: dns.message.Message,
    qid: int,
    qflags: int,
    view: View,
    src_ip: int,
    src_v6: bool,
    tcp: bool,
    max_udp_payload: int,
    use_client_subnet: bool,
    rng: random.Random,
    seq: int,
    on_notify: NotifyHook | None,
    ident: _Identity,
    signer: Signer | None = None,
    signed_zones: Mapping[bytes, SignedZone] | None = None,
) -> bytes:
    """The response to a parsed (and, when signed, verified) query."""
    has_edns = query.edns >= 0
    edns = EdnsReply(max_udp_payload, query.ednsflags & DO) if has_edns else None
    if query.opcode() == dns.opcode.NOTIFY and on_notify is not None:
        required = exchange_key(view) is not None
        return notify_response(query, view, src_ip, src_v6, on_notify, edns, signature_required=required)
    if query.opcode() != dns.opcode.QUERY:
        echoed = query.question if len(query.question) == 1 else []
        return _error(qid, qflags, echoed, Rcode.NOTIMP, edns)
    if len(query.question) != 1:
        return _error(qid, qflags, [], Rcode.FORMERR, edns)
    question = query.question[0]
    if query.edns > 0:
        return _error(qid, qflags, [question], BADVERS, edns)
    ecs_options = [o for o in query.options if isinstance(o, dns.edns.ECSOption)]
    if len(ecs_options) > 1:
        return _error(qid, qflags, [question], Rcode.FORMERR, edns)
    ecs = ecs_options[0] if ecs_options and use_client_subnet else None
    ip, v6 = src_ip, src_v6
    if ecs is not None and ecs.srclen > 0:
        ip, v6 = int(ipaddress.ip_address(ecs.address)), ecs.family == 2
    if question.rdtype == NXNAME:  # RFC 9824 3.5: a meta-type that is never asked
        return _error(qid, qflags, [question], Rcode.FORMERR, edns)
    if question.rdtype in ZONE_TRANSFERS:
        answer = Answer(Rcode.REFUSED, authoritative=False, ede=TRANSFER_PROHIBITED)
    elif question.rdclass == CH and (found := ident.chaos(question)) is not None:
        answer = found
    elif question.rdclass != IN:
        answer = Answer(Rcode.REFUSED, authoritative=False, ede=NOT_AUTHORITATIVE)
    else:
        answer = resolve(view, question.name, question.rdtype, ip=ip, v6=v6, rng=rng, seq=seq)
    flags = response_flags(qflags, authoritative=carries_aa(answer.rcode, answer.authoritative))
    signed = None
    located = answer.ecs_scope  # the ECS scope: the client prefix what is sent depends on (0: none)
    co_echo = False
    if (
        signer is not None
        and edns is not None
        and edns.flags & DO
        and answer.rcode != Rcode.REFUSED
        and question.rdclass == IN
    ):
        qname = question.name.canonicalize().to_text()
        compact_ok = bool(query.ednsflags & CO)
        deniers = {k: z.denier for k, z in signed_zones.items()} if signed_zones else None
        data, _, synthesized = answering_node(view, question.name) or (None, None, False)

        def signatures_of(rdtype: int) -> list[dns.rrset.RRset]:
            nonlocal located
            found = resolve(
                view, question.name, dns.rdatatype.RdataType.make(rdtype), ip=ip, v6=v6, rng=rng, seq=seq
            )
            located = max(located, found.ecs_scope)
            reply = signer.signed_reply(qname, data, found, synthesized=synthesized)
            return reply.answer if reply is not None else []

        signed = meta_reply(
            signer,
            qname,
            question.rdtype,
            data,
            answer,
            synthesized=synthesized,
            deniers=deniers,
            signatures_of=signatures_of,
        ) or signer.signed_reply(
            qname, data, answer, compact_ok=compact_ok, deniers=deniers, synthesized=synthesized
        )
        co_echo = signed is not None and compact_ok and signed.rcode == Rcode.NXDOMAIN and signed.compact_nx
        if signed is not None and _is_denial(signed):  # written as C writes it
            signed = replace(
                signed, authority=_denial_records(signed.authority, question.name, signer.zone_of(qname))
            )
    if edns is not None:
        options: list[dns.edns.Option] = []
        if ecs is not None:
            scope = echoed_scope(located, ecs.srclen)
            options.append(dns.edns.ECSOption(ecs.address, ecs.srclen, scope))
        if ident.identity is not None and any(o.otype == dns.edns.NSID for o in query.options):
            options.append(dns.edns.NSIDOption(ident.identity.encode("utf-8")))
        if answer.ede is not None:
            options.append(dns.edns.EDEOption(dns.edns.EDECode.make(answer.ede[0]), answer.ede[1] or None))
        if options:
            edns = EdnsReply(edns.payload, edns.flags, tuple(options))
        if co_echo:
            edns = EdnsReply(edns.payload, edns.flags | CO, edns.options)
    if signed is not None:
        msg = build_message(qid, flags, [question], rcode=signed.rcode, edns=edns)
        msg.answer, msg.authority, msg.additional = signed.answer, signed.authority, signed.additional
    else:
        msg = build_message(qid, flags, [question], rcode=answer.rcode, answer=answer, edns=edns)
        if question.rdclass == CH and answer.answer:
            msg.answer = chaos_rrsets(answer)
    limit = TCP_LIMIT if tcp else udp_limit(has_edns, query.payload, max_udp_payload)
    return to_wire_limited(msg, limit)


class _Owned(dns.name.Name):
    """A name written as its labels below `zone` and a pointer to the zone's name (no zone: in full),
    never compressed against the other names of the message nor a target for them."""

    __slots__ = ("zone",)
    zone: dns.name.Name | None

    def __init__(self, name: dns.name.Name, zone: dns.name.Name | None) -> None:
        super().__init__(name.labels)
        object.__setattr__(self, "zone", zone)

    def to_wire(
        self,
        file: Any = None,
        compress: dns.name.CompressType | None = None,
        origin: dns.name.Name | None = None,
        canonicalize: bool = False,
    ) -> bytes | None:
        if file is None or compress is None:
            return super().to_wire(file, compress, origin, canonicalize)
        at = compress.get(self.zone) if self.zone is not None else None
        only: dns.name.CompressType = {self.zone: at} if self.zone is not None and at is not None else {}
        return super().to_wire(file, only, origin, canonicalize)


def _is_denial(reply: SignedReply) -> bool:
    """Whether a signed reply is a denial: no answer records, the zone's SOA in the authority section (a
    referral has none)."""
    return not reply.answer and any(r.rdtype == dns.rdatatype.SOA for r in reply.authority)


def _denial_records(
    authority: list[dns.rrset.RRset], qname: dns.name.Name, zone: ZoneKeys | None
) -> list[dns.rrset.RRset]:
    """A signed denial's authority records (NODATA, NXDOMAIN, RFC 9824's compact denial) written as
    the compiled tables hold them for every query name (wire/compile.py `soa_tails`, wire/denial.py's
    chain links, wire/_cfast.c), so the slow path writes the bytes C writes: the SOA's names in full,
    and each owner but the question's name as its labels below the zone and a pointer to the zone."""
    if zone is None:
        return authority
    zone_name = dns.name.from_text(zone.origin)
    out = []
    for rrset in authority:
        owner = rrset.name if rrset.name == qname else _Owned(rrset.name, zone_name)
        copy = dns.rrset.RRset(owner, rrset.rdclass, rrset.rdtype, rrset.covers)
        for rd in rrset:
            if rrset.rdtype == dns.rdatatype.SOA:
                copy.add(rd.replace(mname=_Owned(rd.mname, None), rname=_Owned(rd.rname, None)), rrset.ttl)
            else:
                copy.add(rd, rrset.ttl)
        out.append(copy)
    return out


CH = dns.rdataclass.CH
IDENTITY_NAMES = frozenset(dns.name.from_text(n) for n in ("id.server.", "hostname.bind."))
VERSION_NAMES = frozenset(dns.name.from_text(n) for n in ("version.bind.", "version.server."))


@dataclass(frozen=True, slots=True)
class _Identity:
    """What this server says about itself: dns.identity ({worker} filled in) and dns.version."""

    identity: str | None
    version: str | None

    def chaos(self, question: dns.rrset.RRset) -> Answer | None:
        """The answer to a CHAOS question for id.server./hostname.bind./version.bind./version.server.
        when configured (TXT or ANY: the text; another type: NODATA); None otherwise (REFUSED)."""
        name = question.name
        text = self.identity if name in IDENTITY_NAMES else self.version if name in VERSION_NAMES else None
        if text is None:
            return None
        # Not authoritative data (no AA), as Knot and NSD answer these (docs/conformance.md).
        if question.rdtype not in (dns.rdatatype.TXT, dns.rdatatype.ANY):
            return Answer(Rcode.NOERROR, authoritative=False)
        quoted = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        record = Rr(name.to_text().lower(), "TXT", 0, quoted)
        return Answer(Rcode.NOERROR, answer=(record,), authoritative=False)


def chaos_rrsets(answer: Answer) -> list[dns.rrset.RRset]:
    """The answer's TXT records in class CH (the answer model's records are class IN)."""
    out = []
    for rr in answer.answer:
        rrset = dns.rrset.RRset(dns.name.from_text(rr.name), CH, dns.rdatatype.TXT)
        rrset.add(dns.rdata.from_text(CH, dns.rdatatype.TXT, rr.rdata), rr.ttl)
        out.append(rrset)
    return out


def resolve(
    view: View,
    qname: dns.name.Name,
    rdtype: dns.rdatatype.RdataType,
    *,
    ip: int,
    v6: bool,
    rng: random.Random,
    seq: int,
) -> Answer:
    """The view's answer for a question (any letter case), like `View.resolve`, but finding the zone
    of a nonexistent name label by label, so that an escaped dot inside a label is not a boundary."""
    found = answering_node(view, qname)
    if found is None:
        return Answer(Rcode.REFUSED, authoritative=False, ede=NOT_AUTHORITATIVE)
    data, zone, synthesized = found
    if data is None or synthesized:  # a name of no node: below a zone cut or a DNAME first
        encloser = _encloser(view, qname.canonicalize(), zone.origin)
        if encloser is not None and (encloser.referral is not None or "DNAME" in encloser.outcomes):
            text = qname.canonicalize().to_text()  # (answer/dname.py)
            return beneath(view, encloser, text, dns.rdatatype.to_text(rdtype), ip, v6, rng, seq)
    if data is None:
        return Answer(Rcode.NXDOMAIN, authority=(negative_soa(zone),))
    answer = render(data, data.outcome(dns.rdatatype.to_text(rdtype)), ip, v6, rng, seq)
    return wildcard_at(answer, data.name, qname.canonicalize().to_text()) if synthesized else answer


def answering_node(view: View, qname: dns.name.Name) -> tuple[NameData | None, Zone, bool] | None:
    """The node that answers `qname` (any letter case), its zone, and whether that node is the
    wildcard that makes the name (RFC 4592); the node is None when the name does not exist, and the
    whole None when no zone holds it. The zone of a nonexistent name is found label by label, so that
    an escaped dot inside a label is not a boundary."""
    name = qname.canonicalize()
    data = view.get(name.to_text())
    if data is not None:
        return data, data.zone, False
    while True:
        zone = view.zones.get(name.to_text())
        if zone is not None:
            wild = _wildcard(view, qname.canonicalize(), zone.origin)
            return wild, zone, wild is not None
        if name == dns.name.root:
            return None
        name = name.parent()


def _encloser(view: View, qname: dns.name.Name, origin: str) -> NameData | None:
    """The closest encloser of the nonexistent `qname` (its longest existing ancestor), found label by
    label like the zone."""
    name = qname
    while name != dns.name.root:
        name = name.parent()
        found = view.get(name.to_text())
        if found is not None or name.to_text() == origin:
            return found
    return None


def _wildcard(view: View, qname: dns.name.Name, origin: str) -> NameData | None:
    """The wildcard node answering the nonexistent `qname` (RFC 4592: `*.` of the closest encloser),
    found label by label like the zone."""
    name = qname
    while name != dns.name.root:
        name = name.parent()
        text = name.to_text()
        if text == origin or view.get(text) is not None:
            return view.get("*." + text)
    return None


def _error(
    qid: int,
    qflags: int,
    question: list[dns.rrset.RRset],
    rcode: int,
    edns: EdnsReply | None,
) -> bytes:
    msg = build_message(qid, response_flags(qflags, authoritative=False), question, rcode=rcode, edns=edns)
    return message_wire(msg)


def _tsig_error(
    data: bytes, qid: int, qflags: int, refused: TsigRefused, key: TsigKey | None, max_udp_payload: int
) -> bytes:
    """NOTAUTH with the TSIG error record of RFC 8945 5.2 (wire/tsig.py), the question echoed, and our
    OPT record with an EDE naming the TSIG error when the query had EDNS."""
    opt = scan_opt(data)
    edns = None
    if opt is not None:
        ede = dns.edns.EDEOption(dns.edns.EDECode.OTHER, f"TSIG error {ERROR_NAMES[refused.error]}")
        edns = EdnsReply(max_udp_payload, opt[1] & DO, (ede,))
    wire = _error(qid, qflags, readable_question(data), Rcode.NOTAUTH, edns)
    return error_reply(wire, data, refused.error, key, int(time.time()))


def _unparsed(data: bytes, max_udp_payload: int) -> bytes | None:
    """The error response to a packet dnspython cannot parse (wire/precheck.py writes it)."""
    return error_response(data, scan(data), max_udp_payload)


def readable_question(data: bytes) -> list[dns.rrset.RRset]:
    """The question of a packet whose rest may be broken: only when QDCOUNT is 1 and it reads
    (wire/precheck.py)."""
    question = scan(data)[1]
    if not question:
        return []
    name, end = dns.name.from_wire(question, 0)
    rdtype, rdclass = struct.unpack_from("!HH", question, end)
    return [dns.rrset.RRset(name, rdclass, rdtype)]


def scan_opt(data: bytes) -> tuple[int, int] | None:
    """(payload, ttl) of the first OPT record in the additional section of a possibly broken packet,
    found by skipping records without parsing them (wire/precheck.py); None when there is none or the
    walk fails before it."""
    return scan(data)[2]
