"""Serving this site's exchange zones: the apex SOA (with the heartbeat), AXFR and IXFR.

`ExchangeZones` keeps one `ZoneJournal` per served zone (exchange/zone.py), fed by `Exchange.after_commit`
with this site's publication, and answers through the responder's exchange hook (wire/transfer.py):

    <apex> SOA        anyone: NOERROR, AA, the SOA (its serial) and, in the additional section,
                      `heartbeat-<site>.<origin>` TXT (the peer's one query per interval)
    <apex> AXFR       TCP, from a configured peer nameserver's address, signed when peers.tsig is set:
                      SOA, NS, every A/AAAA, SOA, in messages of about 32 KB (each one signed)
    <apex> IXFR=N     likewise (RFC 1995): the SOA alone when N is current; the condensed difference
                      (SOA, SOA N, deleted, SOA, added, SOA) when the journal reaches back to N; else the
                      whole zone. Over UDP: the SOA alone (the client asks again over TCP).
    <apex> NS         the zone's nameservers (the public apex's NS set), when it lists any
    other types       NODATA (the SOA in the authority section)
    <label>.<apex>    its A/AAAA RRset (what a transfer holds), NODATA for another type, NXDOMAIN for a
                      name the zone does not hold (the SOA in authority)

Every answer is unsigned and authoritative, with and without DO: in a signed public zone the exchange
zone is an insecure child (model/exchange_cut.py), whose one parent-side question, DS at the apex, is
left to the responder (a signed NODATA at the cut). A transfer from any other address, or an unsigned
one when a key is configured, is REFUSED (AXFR and IXFR of any other name stay REFUSED,
wire/slowpath.py).

`handle` also reads the serial that a peer's NOTIFY carries (`on_serial(peer, origin, serial)`), before
the NOTIFY itself is answered and the peer polled. It runs on the DNS threads for UDP: it reads only
the `_serials` mapping, which the event loop replaces whole; transfers (TCP) run on the event loop.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType

import dns.message
import dns.rdatatype

from gslbd.answer.exchange_names import heartbeat_name, heartbeat_rdata, localtargets_name
from gslbd.exchange.notify import notify_sources, source_address
from gslbd.exchange.xfrwire import (
    APEX_POINTER,
    AXFR,
    IXFR,
    BadMessage,
    Soa,
    label_wire,
    messages,
    name_labels,
    name_wire,
    read_message,
    record,
    response_flags,
    rr_serial,
    sign_one,
    sign_stream,
    soa_record,
    txt_rdata,
)
from gslbd.exchange.zone import (
    AAAA,
    NS,
    SOA,
    TXT,
    A,
    Change,
    Key,
    RRset,
    ZoneJournal,
    content_of,
    publication_keys,
    publication_rrsets,
    record_diff,
)
from gslbd.metrics import EXCHANGE_TRANSFERS
from gslbd.model.config import Config
from gslbd.model.exchange_cut import EXCHANGE_PREFIX, exchange_apex, exchange_cut
from gslbd.wire.names import read_name
from gslbd.wire.transfer import Framed
from gslbd.wire.tsig import TsigRefused, read_signed

log = logging.getLogger(__name__)

NOERROR, FORMERR, NXDOMAIN, REFUSED = 0, 1, 3, 5
DS = 43
IN = 1
_MARK = EXCHANGE_PREFIX.encode()
Publication = Mapping[str, Mapping[str, tuple[str, ...]]]
SerialHook = Callable[[str, str, int], None]


def service_ttls(config: Config) -> dict[str, int]:
    """localtargets name -> the service's TTL."""
    return {localtargets_name(s): s.ttl for s in config.services}


class ExchangeZones:
    """This site's exchange zones (one per served zone), their journals, and the hook that serves them."""

    def __init__(self, config: Config, publication: Publication, wall: float, on_serial: SerialHook) -> None:
        self._on_serial = on_serial
        self._journals: dict[str, ZoneJournal] = {}
        self._axfr: dict[str, tuple[int, list[bytes]]] = {}  # origin -> (serial, AXFR records)
        self._labels: dict[str, bytes] = {}
        self._config = config
        self._ttls: dict[str, int] = {}
        self._publication: Publication = {}  # the publication the journals hold
        self._serials: Mapping[tuple[bytes, ...], tuple[str, int]] = MappingProxyType({})
        self._peers: Mapping[str, tuple[str, ...]] = {}
        self._cut_origins: frozenset[str] = frozenset()  # signed zones: DS at the apex is the parent's
        self.configure(config, publication, wall)

    # -- content ---------------------------------------------------------------------------------

    def configure(self, config: Config, publication: Publication, wall: float) -> None:
        """A (new) configuration: every zone's content follows the publication; zones come and go."""
        self._config = config
        self._ttls = service_ttls(config)
        self._peers = notify_sources(config)
        limit = config.peers.journal if config.peers is not None else 1000
        journals: dict[str, ZoneJournal] = {}
        for zone in config.zones:
            content = self._content(zone.origin, publication.get(zone.origin, {}))
            journal = self._journals.get(zone.origin)
            if journal is None:
                journal = ZoneJournal(content, wall, limit)
            else:
                journal.limit = limit
                journal.replace(content, wall)
            journals[zone.origin] = journal
        self._journals = journals
        site = config.site.name
        self._cut_origins = frozenset(z.origin for z in config.zones if exchange_cut(z, site))
        self._publication = publication
        self._publish_serials()

    @property
    def config(self) -> Config:
        return self._config

    def update(self, publication: Publication, zones: Iterable[str], wall: float) -> None:
        """This site's publication changed in `zones`: each zone's journal gets the names whose
        addresses differ from the previous publication (compared here: the generation shares the
        unchanged zones' dicts, and a zone of 100,000 names compares in milliseconds)."""
        for origin in zones:
            journal = self._journals.get(origin)
            if journal is None:
                continue
            before = self._publication.get(origin, {})
            after = publication.get(origin, {})
            if before is after:
                continue
            changes: dict[Key, RRset | None] = {}
            for name in before.keys() | after.keys():
                addresses = after.get(name)
                if before.get(name) == addresses:
                    continue
                for key in publication_keys(name, origin):
                    changes[key] = None
                if addresses:
                    changes.update(publication_rrsets(name, origin, addresses, self._ttls))
            journal.update(changes, wall)
        self._publication = publication
        self._publish_serials()

    def serial(self, origin: str) -> int | None:
        journal = self._journals.get(origin)
        return journal.serial if journal is not None else None

    def journal(self, origin: str) -> ZoneJournal | None:
        return self._journals.get(origin)

    def _content(self, origin: str, published: Mapping[str, tuple[str, ...]]) -> dict[Key, RRset]:
        content: dict[Key, RRset] = {}
        zone = next((z for z in self._config.zones if z.origin == origin), None)
        if zone is not None and zone.nameservers:  # first, so that AXFR lists them after the SOA
            rdatas = tuple(sorted({name_wire(ns.name) for ns in zone.nameservers}))
            content[("", NS)] = (zone.ttl, rdatas)
        content.update(content_of(origin, published, self._ttls))
        return content

    def _publish_serials(self) -> None:
        site = self._config.site.name
        self._serials = MappingProxyType(
            {
                name_labels(exchange_apex(site, origin)): (origin, journal.serial)
                for origin, journal in self._journals.items()
            }
        )

    def soa(self, origin: str, serial: int) -> Soa:
        apex = exchange_apex(self._config.site.name, origin)
        zone = next((z for z in self._config.zones if z.origin == origin), None)
        mname = zone.nameservers[0].name if zone is not None and zone.nameservers else apex
        peers = self._config.peers
        refresh = max(1, round(peers.interval)) if peers is not None else 5
        expire = max(1, round(peers.stale_after)) if peers is not None else 300
        return Soa(mname, f"hostmaster.{origin}", serial, refresh, refresh, expire, 0)

    # -- answering -------------------------------------------------------------------------------

    def handle(self, data: bytes, evaluated_at: float, src_ip: int, src_v6: bool, tcp: bool) -> bytes | None:
        """The answer to a question about an exchange zone, or None: not ours (the responder answers
        as ever). A NOTIFY's carried serial is noted here (None is returned: the NOTIFY hook answers)."""
        if len(data) < 17 or data[2] & 0x80:
            return None
        opcode = (data[2] >> 3) & 0xF
        if opcode == 4:
            self._carried(data, src_ip, src_v6)
            return None
        if opcode != 0 or _MARK not in data[12:].lower():
            return None
        try:
            head = read_message(data)
        except BadMessage:
            return None
        if head.question is None or data[4:6] != b"\x00\x01":
            return None
        qname, qtype = head.question
        found = self._serials.get(qname)
        below: tuple[bytes, ...] = ()  # the labels of a name below the apex, before it
        if found is None:
            found, below = self._below(qname)
            if found is None:
                return None
        origin, serial = found
        if qtype == DS and not below and origin in self._cut_origins:
            return None  # the parent's: the signed NODATA at the cut (model/exchange_cut.py)
        key = self._config.peers.tsig if self._config.peers is not None else None
        try:
            query = read_signed(data, key)
        except TsigRefused:
            return None  # the responder answers NOTAUTH
        except Exception:  # dnspython's errors for a malformed message
            return None
        if query.question[0].rdclass != IN:
            return None
        question = _question(data)
        qflags = int.from_bytes(data[2:4], "big")
        qid = head.qid
        signed = query.had_tsig
        mac = (query.mac or b"") if signed else b""

        def one(wire: bytes) -> bytes:
            return sign_one(wire, key, mac) if signed and key is not None else wire

        soa = self.soa(origin, serial)
        if below:
            if qtype in (AXFR, IXFR):
                return one(header_only(qid, qflags, question, REFUSED))
            return one(self._below_answer(qid, qflags, question, origin, soa, below, qtype))
        if qtype in (AXFR, IXFR):
            address = source_address(src_ip, src_v6)
            if address not in self._peers or (key is not None and not signed):
                EXCHANGE_TRANSFERS.labels(kind="refused").inc()
                return one(header_only(qid, qflags, question, REFUSED))
            if not tcp:
                if qtype == AXFR:
                    return one(header_only(qid, qflags, question, REFUSED))
                return one(_message(qid, qflags, question, [soa_record(soa)]))
            client = _ixfr_serial(query) if qtype == IXFR else None
            if qtype == IXFR and client is None:
                return one(header_only(qid, qflags, question, FORMERR))
            records, kind = self._transfer(origin, soa, client)
            EXCHANGE_TRANSFERS.labels(kind=kind).inc()
            flags = response_flags(qflags, NOERROR)
            wires: Iterable[bytes] = messages(qid, flags, question, records)
            if signed and key is not None:
                wires = sign_stream(wires, key, mac)
            return Framed(b"".join(len(w).to_bytes(2, "big") + w for w in wires))
        if qtype == SOA:
            beat = name_wire(heartbeat_name(self._config.site.name, origin))
            extra = record(beat, TXT, 0, txt_rdata(heartbeat_rdata(evaluated_at).strip('"')))
            wire = header_any(qid, response_flags(qflags, NOERROR), 1, 0, 1) + question
            return one(wire + soa_record(soa) + extra)
        journal = self._journals.get(origin)
        ns = journal.content.get(("", NS)) if journal is not None and qtype == NS else None
        if ns is not None:  # the zone's nameservers, as the public apex lists them
            ttl, rdatas = ns
            answers = b"".join(record(APEX_POINTER, NS, ttl, rdata) for rdata in rdatas)
            return one(
                header_any(qid, response_flags(qflags, NOERROR), len(rdatas), 0, 0) + question + answers
            )
        wire = header_any(qid, response_flags(qflags, NOERROR), 0, 1, 0) + question + soa_record(soa)
        return one(wire)

    def _below(self, qname: tuple[bytes, ...]) -> tuple[tuple[str, int] | None, tuple[bytes, ...]]:
        """(origin, serial) of the exchange zone `qname` lies below, and the labels before its apex."""
        for cut in range(1, len(qname)):
            found = self._serials.get(qname[cut:])
            if found is not None:
                return found, qname[:cut]
        return None, ()

    def _below_answer(
        self,
        qid: int,
        qflags: int,
        question: bytes,
        origin: str,
        soa: Soa,
        below: tuple[bytes, ...],
        qtype: int,
    ) -> bytes:
        """The answer for a name below an exchange apex, from the zone's content (what a transfer
        holds): its A/AAAA RRset, else NODATA for a name that has one, else NXDOMAIN (the SOA owned by
        the apex in authority, as every answer of the zone, AA)."""
        journal = self._journals.get(origin)
        content = journal.content if journal is not None else {}
        label = ".".join(part.decode("ascii", "replace") for part in below)
        found = content.get((label, qtype))
        if found is not None:
            ttl, rdatas = found
            wires = b"".join(record(APEX_POINTER, qtype, ttl, rdata) for rdata in rdatas)
            return header_any(qid, response_flags(qflags, NOERROR), len(rdatas), 0, 0) + question + wires
        exists = (label, A) in content or (label, AAAA) in content
        apex = name_wire(exchange_apex(self._config.site.name, origin))
        authority = record(apex, SOA, 0, soa.rdata())
        rcode = NOERROR if exists else NXDOMAIN
        return header_any(qid, response_flags(qflags, rcode), 0, 1, 0) + question + authority

    def _transfer(self, origin: str, soa: Soa, client: int | None) -> tuple[list[bytes], str]:
        """The records of a transfer: incremental from `client` when the journal allows, else full."""
        journal = self._journals[origin]
        first = soa_record(soa)
        if client is not None:
            changes = journal.since(client)
            if changes is not None and not changes and client == soa.serial:
                return [first], "current"
            if changes is not None:
                return [first, *self._diff(origin, soa, client, changes), first], "ixfr"
        return [first, *self._axfr_records(origin, journal), first], "axfr"

    def _diff(self, origin: str, soa: Soa, client: int, changes: Mapping[Key, Change]) -> list[bytes]:
        deleted: list[bytes] = []
        added: list[bytes] = []
        for (label, rtype), change in changes.items():
            owner = self._owner(label)
            gone, came = record_diff(change)
            deleted += [record(owner, rtype, ttl, rdata) for ttl, rdata in gone]
            added += [record(owner, rtype, ttl, rdata) for ttl, rdata in came]
        old = soa_record(Soa(soa.mname, soa.rname, client, soa.refresh, soa.retry, soa.expire, soa.minimum))
        return [old, *deleted, soa_record(soa), *added]

    def _axfr_records(self, origin: str, journal: ZoneJournal) -> list[bytes]:
        cached = self._axfr.get(origin)
        if cached is not None and cached[0] == journal.serial:
            return cached[1]
        out = [
            record(self._owner(label), rtype, ttl, rdata)
            for (label, rtype), (ttl, rdatas) in journal.content.items()
            for rdata in rdatas
        ]
        self._axfr[origin] = (journal.serial, out)
        return out

    def _owner(self, label: str) -> bytes:
        if not label:
            return APEX_POINTER
        wire = self._labels.get(label)
        if wire is None:
            wire = label_wire(label) + APEX_POINTER
            self._labels[label] = wire
        return wire

    def _carried(self, data: bytes, src_ip: int, src_v6: bool) -> None:
        """Note the exchange serial a peer's NOTIFY carries (verified first when a key is set)."""
        peers = self._config.peers
        if peers is None:
            return
        names = self._peers.get(source_address(src_ip, src_v6), ())
        if not names:
            return
        try:
            message = read_message(data)
            if peers.tsig is not None and not read_signed(data, peers.tsig).had_tsig:
                return
        except (BadMessage, TsigRefused):
            return
        except Exception:  # dnspython's errors for a malformed message
            return
        if message.question is None:
            return
        zone = message.question[0]
        for rr in message.answer:
            if rr.rtype != SOA or len(rr.owner) != len(zone) + 1 or rr.owner[1:] != zone:
                continue
            label = rr.owner[0].decode("ascii", "replace")
            peer = label[len(EXCHANGE_PREFIX) :] if label.startswith(EXCHANGE_PREFIX) else ""
            if peer in names:
                try:
                    serial = rr_serial(data, rr)
                except (BadMessage, struct.error):
                    return
                origin = ".".join(p.decode("ascii", "replace") for p in zone) + "."
                self._on_serial(peer, origin, serial)


def _question(data: bytes) -> bytes:
    """The query's question written again (its name uncompressed, in the letter case sent), never its
    bytes copied: a name may end in a compression pointer (into the header even), which the reply's
    question cannot keep. The message was read whole before (read_message), so the name reads."""
    wire, end = read_name(data, 12)
    return wire + data[end : end + 4]


def _ixfr_serial(query: dns.message.Message) -> int | None:
    for rrset in query.authority:
        if rrset.rdtype == dns.rdatatype.SOA and len(rrset):
            return int(rrset[0].serial)
    return None


def header_any(qid: int, flags: int, an: int, ns: int, ar: int) -> bytes:
    return struct.pack("!HHHHHH", qid, flags, 1, an, ns, ar)


def header_only(qid: int, qflags: int, question: bytes, rcode: int) -> bytes:
    return header_any(qid, response_flags(qflags, rcode, authoritative=False), 0, 0, 0) + question


def _message(qid: int, qflags: int, question: bytes, records: list[bytes]) -> bytes:
    return header_any(qid, response_flags(qflags, NOERROR), len(records), 0, 0) + question + b"".join(records)
