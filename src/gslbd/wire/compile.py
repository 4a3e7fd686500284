"""The answer-table compiler: a `View` turned into the precompiled bytes the fast path sends.

For every existing name the table holds a node: an entry per query type the name answers
specially, and a default entry for every other type (NODATA, or the name's CNAME). An entry holds one
or more variants (a policy plan's possible answers), each as:
  - `heads`: the 10 header bytes after the ID (flags, QDCOUNT=1, ANCOUNT, NSCOUNT, ARCOUNT) for
    the four cases RD clear/set x without/with OPT, indexed by `rd | has_opt << 1`;
  - `tc_heads`: the same for the truncated form (TC set, no records, ARCOUNT = has_opt);
  - `sections`: the answer, authority and additional records as wire bytes, rendered by dnspython
    behind a lower-case question for that name at offset 12. A query's question, in whatever case,
    has the same length and layout, so these bytes follow it unchanged and their compression
    pointers into the question echo the client's letter case.
For every served zone the table holds the NXDOMAIN answer: heads and the SOA record without its
owner; the fast path writes the owner as a pointer to the zone's suffix inside the query's own
question. One REFUSED variant serves names outside every zone and zone transfers.
"""

from __future__ import annotations

import ipaddress
import itertools
import random
import socket
import struct
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import NamedTuple

import dns.name
import dns.rdatatype
import dns.rrset

from gslbd.answer import (
    NOT_AUTHORITATIVE,
    TRANSFER_PROHIBITED,
    Answer,
    Chain,
    Dynamic,
    NameData,
    Negative,
    Outcome,
    Records,
    Rr,
    View,
    negative_soa,
    render,
)
from gslbd.cow import CowMap
from gslbd.types import Rcode
from gslbd.wire.denial import Denier, Key, build_chain, chain_changes, chain_names
from gslbd.wire.dnssec import NSEC, RRSIG, SignedReply, Signer, ZoneKeys, existing_types, type_bitmap
from gslbd.wire.ede import ede_option
from gslbd.wire.render import (
    IN,
    QR,
    build_message,
    carries_aa,
    dns_name,
    message_wire,
    rdata,
    sections_wire,
)

PickFn = Callable[[int, bool, random.Random, int], int]
PolicyCounters = tuple[tuple[str, Iterator[int]], ...]
Heads = tuple[bytes, bytes, bytes, bytes]
# Types whose answer is precompiled at every name besides the name's own types.
ALWAYS_TYPES = ("ANY", "SOA", "NS")
ZONE_TRANSFER_TYPES = (dns.rdatatype.AXFR, dns.rdatatype.IXFR)
_ADDRESS_TYPES = ("A", "AAAA")
_UNUSED_RNG = random.Random(0)  # fixed answers take nothing from it
# Any type string that is no record type: NameData.outcome() of it is what every other type gets.
_OTHER_TYPE = ""
_SERIALS = itertools.count(1)


class Variant(NamedTuple):
    """One possible response: header tails, the records after the question, and the EDNS options
    it adds to the OPT record of a query with EDNS (an Extended DNS Error, RFC 8914), after ECS."""

    heads: Heads
    tc_heads: Heads
    sections: bytes
    options: bytes = b""


class Entry(NamedTuple):
    """The answer to one (name, type): a fixed variant (`pick` None) or a plan's variants."""

    pick: PickFn | None
    counter: Iterator[int]  # this entry's query counter: the plan's `seq`
    variants: tuple[Variant, ...]
    location_dependent: bool


class Node(NamedTuple):
    """An existing name: entries by query type, and the entry of every other type."""

    types: dict[int, Entry]
    default: Entry


class ZoneEntry(NamedTuple):
    """A served zone's NXDOMAIN: header tails and the parts of the SOA record, which C writes per query
    with its names compressed as dnspython compresses them (wire/ctable.py `_soa_parts`).

    `mname` and `rname` are the SOA's names as label lists (wire form, as written); `numbers` the
    five 32-bit fields."""

    heads: Heads
    tc_heads: Heads
    origin: bytes  # the zone's wire key
    rr_head: bytes  # type, class, TTL of the SOA record (RDLENGTH follows)
    mname: tuple[bytes, ...]
    rname: tuple[bytes, ...]
    numbers: bytes


class SignedZone(NamedTuple):
    """A signed zone's answer to a DO query for a nonexistent name, as the C table writes it: header tails
    (RFC 9824 compact denial: NOERROR, four authority records), the SOA and its RRSIGs as records after
    their owner (`soa_tails`), and the denier (wire/denial.py: the zone's pre-signed NSEC chain and
    signing budget, which C reads through `Denier.native_parts`)."""

    heads: Heads
    tc_heads: Heads
    soa_tails: tuple[bytes, ...]
    denier: Denier


@dataclass(frozen=True, slots=True)
class AnswerTable:
    """Everything the fast path answers from. Never mutated after `compile_table` (the entries'
    query counters aside). Keys are wire-format names in lower case."""

    names: CowMap[bytes, Node]
    zones: dict[bytes, ZoneEntry]
    refused: Variant  # names outside every zone: REFUSED, EDE 20 (Not Authoritative)
    max_udp_payload: int
    use_client_subnet: bool
    opt_plain: tuple[bytes, bytes]  # our OPT record without options, DO clear / set
    opt_prefix: tuple[bytes, bytes]  # the same up to RDLENGTH, for appending options
    # Per name (a key of `names`): (policy name, query counter) of every entry a policy decides there,
    # for the per-policy metric.
    policy_counters: CowMap[bytes, PolicyCounters] = field(default_factory=CowMap)
    # This table's number, the number of the table it was updated from (0: compiled whole), and the
    # counters of that table's nodes that this one replaced: the responder adds those to its totals.
    serial: int = field(default_factory=lambda: next(_SERIALS))
    derived_from: int = 0
    retired: PolicyCounters = ()
    # DNSSEC (docs/dnssec.md): the nodes of the signed zones' names as answered to DO queries (the
    # same entries' picks and counters, signed variants), each signed zone's compact denial, and the
    # signer whose cached signatures they hold (the slow path signs with it too).
    signed_names: CowMap[bytes, Node] = field(default_factory=CowMap)
    signed_zones: Mapping[bytes, SignedZone] = field(default_factory=dict)
    signer: Signer | None = None
    # AXFR and IXFR (at any name in our zones): REFUSED, EDE 18 (Prohibited).
    refused_transfer: Variant = field(default_factory=lambda: refused_variant(TRANSFER_PROHIBITED))
    # dns.identity with {worker} filled in (None: not configured), and its NSID option (RFC 5001) as
    # it goes into our OPT record when the query asked for it (b"" when there is no identity).
    identity: str | None = None
    nsid: bytes = b""
    # The wire keys of zone cuts and DNAME owners (answer/dname.py): C leaves a nonexistent name below
    # one of them to the slow path, which answers the referral or the DNAME's synthesis.
    # Derived from the zones' static records, so an update (same config) keeps it.
    delegated: frozenset[bytes] = frozenset()
    # Some names of the view are not compiled yet (server/build.py compiles a large view in steps): C
    # leaves every name it does not hold to the slow path, which answers from the view.
    partial: bool = False

    def counters(self) -> Iterator[tuple[str, Iterator[int]]]:
        for found in self.policy_counters.values():
            yield from found

    def policy_answers(self) -> dict[str, int]:
        """Answers decided by each policy, counted by the entries of this table."""
        return count_answers(self.counters())


def count_answers(counters: Iterable[tuple[str, Iterator[int]]]) -> dict[str, int]:
    """Answers per policy, read from (policy, counter) pairs without advancing the counters."""
    out: dict[str, int] = {}
    for policy, counter in counters:
        # itertools.count shows its next value in its repr ("count(7)"): read without advancing.
        out[policy] = out.get(policy, 0) + int(repr(counter)[6:-1])
    return out


def heads(rcode: int, *, authoritative: bool, counts: tuple[int, int, int] = (0, 0, 0)) -> Heads:
    """Header tails (flags and counts) for rd in (0, 1) x OPT in (no, yes); AA as `carries_aa` says.

    CD is 0 here: the fast paths copy the query's CD bit in as they answer (RFC 4035 3.1.6)."""
    return _heads(rcode, authoritative, counts, truncated=False)


def tc_heads(rcode: int, *, authoritative: bool) -> Heads:
    return _heads(rcode, authoritative, (0, 0, 0), truncated=True)


@lru_cache(maxsize=1024)
def _heads(rcode: int, authoritative: bool, counts: tuple[int, int, int], *, truncated: bool) -> Heads:
    an, ns, ar = counts
    authoritative = carries_aa(rcode, authoritative)
    out = []
    for has_opt in (0, 1):
        for rd in (0, 1):
            flags = 0x80 | (0x04 if authoritative else 0) | (0x02 if truncated else 0) | rd
            out.append(struct.pack("!BBHHHH", flags, rcode & 0xF, 1, an, ns, ar + has_opt))
    return (out[0], out[1], out[2], out[3])


# Record types whose data holds names that dnspython compresses (the first two fields of an SOA).
_NAME_DATA = {"NS": 1, "CNAME": 1, "PTR": 1, "DNAME": 1, "MX": 2, "SOA": 2}


@lru_cache(maxsize=4096)  # the zones' names (SOA, NS) recur in the answers of every name
def _labels(name: str) -> tuple[str, ...]:
    return tuple(name.rstrip(".").lower().split(".")) if name != "." else ()


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """How many trailing labels two names share."""
    if a == b:  # most often: a record owned by the question's name
        return len(a)
    n = 0
    for x, y in zip(reversed(a), reversed(b), strict=False):
        if x != y:
            break
        n += 1
    return n


def answer_shape(qname: str, answer: Answer) -> tuple[int, tuple[int, ...]]:
    """What of `qname` the answer's bytes depend on: the question's length, and for every name in the
    records (owners, compressed names in the data), how many trailing labels it shares with `qname`.
    Compression pointers into the question follow from these alone, so two names of the same shape get
    the same section bytes (the NODATA answer of every name of a zone, for one)."""
    q = _labels(qname)
    depths = []
    for rr in (*answer.answer, *answer.authority, *answer.additional):
        depths.append(_common(q, _labels(rr.name)))
        fields = _NAME_DATA.get(rr.rtype, 0)
        if fields:
            parts = rr.rdata.split()
            names = parts[-1:] if rr.rtype == "MX" else parts[:fields]
            depths.extend(_common(q, _labels(n)) for n in names)
    return len(qname) + 1 if qname != "." else 1, tuple(depths)


_SHAPED: dict[tuple[Answer, tuple[int, tuple[int, ...]]], Variant] = {}
_SHAPED_LIMIT = 1 << 16


def compile_answer(qname: str, answer: Answer) -> Variant:
    """A variant for a fixed answer to a question for `qname`. Cached across names and compilations by
    the answer's shape: fixed answers (static records, NODATA, all_down) repeat across names, and rarely
    change when health does."""
    key = (answer, answer_shape(qname, answer))
    found = _SHAPED.get(key)
    if found is None:
        if len(_SHAPED) >= _SHAPED_LIMIT:
            _SHAPED.clear()
        found = _SHAPED[key] = _compile_answer(qname, answer)
    return found


def _compile_answer(qname: str, answer: Answer) -> Variant:
    sections, an, ns, ar = sections_wire(dns_name(qname), answer)
    aa = answer.authoritative
    return Variant(
        heads(answer.rcode, authoritative=aa, counts=(an, ns, ar)),
        tc_heads(answer.rcode, authoritative=aa),
        sections,
        ede_option(*answer.ede) if answer.ede is not None else b"",
    )


def refused_variant(ede: tuple[int, str]) -> Variant:
    """REFUSED without records (not authoritative), with an Extended DNS Error for EDNS queries."""
    return Variant(
        heads(Rcode.REFUSED, authoritative=False),
        tc_heads(Rcode.REFUSED, authoritative=False),
        b"",
        ede_option(*ede),
    )


@lru_cache(maxsize=65536)
def address_record(rtype: str, ttl: int, address: str) -> bytes:
    """An A or AAAA record owned by the question's name (a pointer to offset 12), as dnspython
    writes it behind the question."""
    try:
        packed = socket.inet_pton(socket.AF_INET if rtype == "A" else socket.AF_INET6, address)
    except OSError:  # a form the C parser does not take (an IPv6 scope): ipaddress knows every form
        packed = ipaddress.ip_address(address).packed
    return struct.pack("!HHHIH", 0xC00C, 1 if rtype == "A" else 28, IN, ttl, len(packed)) + packed


def compile_records(name: str, records: tuple[Rr, ...]) -> Variant:
    """A positive answer at `name`. Plain address answers (the policies' usual variants, localtargets
    and ANY at a service: A and AAAA records at the question's name with one TTL) are written directly,
    byte for byte as dnspython writes them (RRsets in order of first appearance, repeats left out);
    anything else is rendered by dnspython."""
    ttl = records[0].ttl
    groups: dict[str, dict[str, None]] = {}
    for rr in records:
        if rr.name != name or rr.rtype not in _ADDRESS_TYPES or rr.ttl != ttl:
            return compile_answer(name, Answer(Rcode.NOERROR, answer=records))
        groups.setdefault(rr.rtype, {})[rr.rdata] = None
    parts = [address_record(rtype, ttl, rdata) for rtype, rdatas in groups.items() for rdata in rdatas]
    return Variant(
        heads(Rcode.NOERROR, authoritative=True, counts=(len(parts), 0, 0)),
        tc_heads(Rcode.NOERROR, authoritative=True),
        b"".join(parts),
    )


def compile_outcome(data: NameData, outcome: Outcome) -> Entry:
    """The entry of one outcome at one name: every variant of a plan, or the one fixed answer.

    A policy's entry always has a `pick` (even with one variant) so that its counter also counts
    the answers the policy decided, for the per-policy metric."""
    if isinstance(outcome, Chain):
        variants = tuple(compile_answer(data.name, answer) for answer in outcome.answers)
        return Entry(outcome.pick, itertools.count(), variants, outcome.location_dependent)
    if isinstance(outcome, Dynamic):
        plan = outcome.plan
        variants = tuple(compile_records(data.name, outcome.records(i)) for i in range(len(plan.variants)))
        return Entry(plan.pick, itertools.count(), variants, plan.location_dependent)
    # Records and Negative answers do not depend on the client, the rng or the counter.
    fixed = render(data, outcome, 0, False, _UNUSED_RNG, 0)
    plain = fixed.rcode == Rcode.NOERROR and fixed.answer and not fixed.authority and not fixed.additional
    if plain and fixed.authoritative:
        return fixed_entry(compile_records(data.name, fixed.answer))
    return fixed_entry(compile_answer(data.name, fixed))


_FIXED: dict[Variant, Entry] = {}


def fixed_entry(variant: Variant) -> Entry:
    """The entry of one fixed variant, shared by every name and type with the same bytes (the NODATA
    of most types at most names, for one): a fixed entry has no plan, so its counter is never read."""
    found = _FIXED.get(variant)
    if found is None:
        if len(_FIXED) >= _SHAPED_LIMIT:
            _FIXED.clear()
        found = _FIXED[variant] = Entry(None, itertools.count(), (variant,), False)
    return found


def compile_node(data: NameData, refused: Entry) -> Node:
    """Entries for every type this name answers specially, and its default entry."""
    # Types sharing an outcome share its entry: plans and records by identity, negatives by value.
    compiled: dict[object, Entry] = {}
    seen: list[Outcome] = []  # keeps every outcome alive while its id() is a key above
    types: dict[int, Entry] = {}

    def entry_of(rtype: str) -> Entry:
        outcome = data.outcome(rtype)
        key = outcome if isinstance(outcome, Negative) else id(outcome)
        found = compiled.get(key)
        if found is None:
            seen.append(outcome)
            found = compiled[key] = compile_outcome(data, outcome)
        return found

    default = entry_of(_OTHER_TYPE)
    for rtype in (*data.special_types(), *ALWAYS_TYPES):
        entry = entry_of(rtype)
        if entry is not default:  # a lookup that misses gets the default (a dict of 5 is 128 B smaller)
            types[_type_code(rtype)] = entry
    for rdtype in ZONE_TRANSFER_TYPES:
        types[int(rdtype)] = refused
    return Node(types, default)


def compile_zone(origin: str, view: View) -> ZoneEntry:
    """A zone's NXDOMAIN: the SOA with the negative TTL; its names are compressed per query (in C)."""
    zone = view.zones[origin]
    soa = negative_soa(zone)
    rd = rdata("SOA", soa.rdata)
    mname = _name_labels(rd.mname)  # type: ignore[attr-defined]
    rname = _name_labels(rd.rname)  # type: ignore[attr-defined]
    origin_key = _wire_key(origin)
    s = zone.soa
    return ZoneEntry(
        heads(Rcode.NXDOMAIN, authoritative=True, counts=(0, 1, 0)),
        tc_heads(Rcode.NXDOMAIN, authoritative=True),
        origin_key,
        struct.pack("!HHI", dns.rdatatype.SOA, IN, soa.ttl),
        mname,
        rname,
        struct.pack("!IIIII", s.serial, s.refresh, s.retry, s.expire, s.minimum),
    )


def _name_labels(name: dns.name.Name) -> tuple[bytes, ...]:
    """A name's labels in wire form (length byte + label), without the root."""
    return tuple(bytes((len(label),)) + label for label in name.labels if label)


def opt_record(payload: int, do: bool, rdlen: int | None) -> bytes:
    """Our OPT record: root owner, type 41, class = payload, version 0, DO as asked; with RDLENGTH
    0 when `rdlen` is 0, or without RDLENGTH when `rdlen` is None (options are appended later)."""
    head = struct.pack("!BHHBBH", 0, 41, payload, 0, 0, 0x8000 if do else 0)
    return head if rdlen is None else head + struct.pack("!H", rdlen)


def identity_text(identity: str | None, worker: int) -> str | None:
    """`dns.identity` as worker `worker` says it: "{worker}" replaced by its number."""
    return identity.replace("{worker}", str(worker)) if identity is not None else None


def nsid_option(identity: str | None) -> bytes:
    """The NSID option (code 3) carrying `identity`, or b"" when there is none."""
    if identity is None:
        return b""
    data = identity.encode("utf-8")
    return struct.pack("!HH", 3, len(data)) + data


def compile_table(
    view: View,
    *,
    max_udp_payload: int,
    use_client_subnet: bool,
    signer: Signer | None = None,
    worker: int = 0,
    defer: Container[str] = (),
) -> AnswerTable:
    """Precompile every answer of a view for the fast path. `worker` is the number of the DNS worker
    process that answers from the table (1..dns.workers; 0 in a process without workers): it fills
    the "{worker}" placeholder of `dns.identity`. `defer`: names left out for now (unsigned views
    only); the table is then `partial` until `update_table` has compiled them."""
    assert signer is None or not defer, "a signed view is compiled whole (its NSEC chain needs every name)"
    identity = identity_text(view.config.dns.identity, worker)
    refused = refused_variant(NOT_AUTHORITATIVE)
    refused_transfer = refused_variant(TRANSFER_PROHIBITED)
    refused_entry = Entry(None, itertools.count(), (refused_transfer,), False)
    names: dict[bytes, Node] = {}
    counters: dict[bytes, PolicyCounters] = {}
    for name, data in view.names.items():
        if name in defer:
            continue
        key = _wire_key(name)
        node = names[key] = compile_node(data, refused_entry)
        found = _policy_counters(data, node)
        if found:
            counters[key] = found
    zones = {_wire_key(origin): compile_zone(origin, view) for origin in view.zones}
    signed_names: dict[bytes, Node] = {}
    signed_zones: dict[bytes, SignedZone] = {}
    if signer is not None:
        linked = chain_names(view, (origin for origin in signer.zones if origin in view.zones))
        for origin in view.zones:
            zone_signed = compile_signed_zone(origin, view, signer, linked.get(origin, {}))
            if zone_signed is not None:
                signed_zones[_wire_key(origin)] = zone_signed
        for name, data in view.names.items():
            key = _wire_key(name)
            signed_node = compile_signed_node(data, names[key], signer, signed_zones)
            if signed_node is not None:
                signed_names[key] = signed_node
    payload = max_udp_payload  # 512..65535, checked by the config loader
    return AnswerTable(
        names=CowMap(names),
        zones=zones,
        refused=refused,
        max_udp_payload=max_udp_payload,
        use_client_subnet=use_client_subnet,
        opt_plain=(opt_record(payload, False, 0), opt_record(payload, True, 0)),
        opt_prefix=(opt_record(payload, False, None), opt_record(payload, True, None)),
        policy_counters=CowMap(counters),
        signed_names=CowMap(signed_names),
        signed_zones=signed_zones,
        signer=signer,
        refused_transfer=refused_transfer,
        identity=identity,
        nsid=nsid_option(identity),
        delegated=delegated_keys(view),
        partial=bool(defer),
    )


def delegated_keys(view: View) -> frozenset[bytes]:
    """The wire keys of the zone cuts (static NS below an apex) and DNAME owners of the view's zones."""
    return frozenset(
        _wire_key(r.name)
        for zone in view.zones.values()
        for r in zone.records
        if r.rtype == "DNAME" or (r.rtype == "NS" and r.name != zone.origin)
    )


def update_table(
    table: AnswerTable,
    view: View,
    changed: Iterable[str],
    removed: Iterable[str],
    *,
    partial: bool | None = None,
) -> AnswerTable:
    """`table` with the nodes of `changed` names compiled anew from `view` and those of `removed` names
    gone; every other node is shared with `table` (its counters keep counting). Zones, payload limit
    and ECS setting come from `table`: a config change needs `compile_table`. `partial`: whether names
    are still left out (None: as `table`)."""
    names: dict[bytes, Node] = {}
    counters: dict[bytes, PolicyCounters] = {}
    dropped: list[bytes] = []
    refused_entry = Entry(None, itertools.count(), (table.refused_transfer,), False)
    for name in removed:
        dropped.append(_wire_key(name))
    signed: dict[bytes, Node] = {}
    for name in changed:
        data = view.names[name]
        key = _wire_key(name)
        node = names[key] = compile_node(data, refused_entry)
        if table.signer is not None:
            found_signed = compile_signed_node(data, node, table.signer, table.signed_zones)
            if found_signed is not None:
                signed[key] = found_signed
        found = _policy_counters(data, node)
        if found:
            counters[key] = found
        else:
            dropped.append(key)
    old = table.policy_counters
    retired = tuple(pc for key in (*names, *dropped) for pc in old.get(key, ()))
    new_names = table.names.evolve(names, (k for k in dropped if k not in names))
    return replace(
        table,
        signed_zones=_updated_chains(table, view, changed, removed),
        names=new_names,
        signed_names=table.signed_names.evolve(signed, (k for k in dropped if k not in signed)),
        policy_counters=old.evolve(counters, (k for k in dropped if k not in counters)),
        serial=next(_SERIALS),
        derived_from=table.serial,
        retired=retired,
        partial=table.partial if partial is None else partial,
    )


def _policy_counters(data: NameData, node: Node) -> PolicyCounters:
    """(policy, counter) of every distinct entry of a service's node that a policy decides."""
    if data.service is None:
        return ()
    policy = data.service.policy.value
    seen: dict[int, tuple[str, Iterator[int]]] = {}
    for entry in (*node.types.values(), node.default):
        if entry.pick is not None:
            seen[id(entry.counter)] = (policy, entry.counter)
    return tuple(seen.values())


@lru_cache(maxsize=512)
def _type_code(rtype: str) -> int:
    return int(dns.rdatatype.from_text(rtype))


def _wire_key(name: str) -> bytes:
    """The lower-case wire form of an absolute name. Names of the view are validated (letters,
    digits, '-', '_' and a leading '*'), so their text needs no escaping; anything else goes through
    dnspython."""
    text = name.lower()
    if text == ".":
        return b"\0"
    labels = text[:-1].split(".")
    if text.isascii() and "\\" not in text and all(0 < len(label) < 64 for label in labels):
        raw = text.encode()
        return b"".join(bytes((len(label),)) + label.encode() for label in labels) + b"\0" if raw else b"\0"
    return dns_name(name).to_wire(canonicalize=True) or b""


def wire_key(name: str) -> bytes:
    """The table key of a name: its wire form in lower case."""
    return _wire_key(name)


def key_name(key: bytes) -> str:
    """The name a table key stands for (wire_key's inverse), as the view writes names."""
    return dns.name.from_wire(key, 0)[0].to_text()


def _sig_records(sigs: tuple[bytes, ...], ttl: int) -> bytes:
    """RRSIG records owned by the question's name (a pointer to offset 12)."""
    return b"".join(struct.pack("!HHHIH", 0xC00C, RRSIG, IN, ttl, len(sig)) + sig for sig in sigs)


def signed_sections_wire(qname: str, reply: SignedReply) -> tuple[bytes, int, int, int]:
    """Like `sections_wire`, for a signed reply's RRsets."""
    name = dns_name(qname)
    msg = build_message(0, QR, [dns.rrset.RRset(name, IN, dns.rdatatype.A)])
    msg.answer, msg.authority, msg.additional = reply.answer, reply.authority, reply.additional
    wire = message_wire(msg)
    start = 12 + len(name.to_wire() or b"") + 4
    counts = struct.unpack("!HHH", wire[6:12])
    return wire[start:], counts[0], counts[1], counts[2]


def compile_signed_answer(data: NameData, answer: Answer, signer: Signer, unsigned: Variant) -> Variant:
    """The variant a DO query gets for a fixed answer (`unsigned` when the answer is not signed)."""
    reply = signer.signed_reply(data.name, data, answer)
    if reply is None:
        return unsigned
    sections, an, ns, ar = signed_sections_wire(data.name, reply)
    aa = answer.authoritative  # a referral is not
    return Variant(
        heads(reply.rcode, authoritative=aa, counts=(an, ns, ar)),
        tc_heads(reply.rcode, authoritative=aa),
        sections,
        unsigned.options,
    )


def compile_signed_records(
    data: NameData, records: tuple[Rr, ...], signer: Signer, zone: ZoneKeys, unsigned: Variant
) -> Variant:
    """A signed positive answer; plain address answers are written directly (their RRSIGs after)."""
    first = records[0]
    plain = first.rtype in _ADDRESS_TYPES and len({rr.rdata for rr in records}) == len(records)
    plain = plain and all(
        rr.name == data.name and rr.rtype == first.rtype and rr.ttl == first.ttl for rr in records
    )
    if plain:
        rdtype = 1 if first.rtype == "A" else 28
        wires = [ipaddress.ip_address(rr.rdata).packed for rr in records]
        sigs = signer.rrsig_rdatas(zone, _wire_key(data.name), rdtype, first.ttl, wires)
        return Variant(
            heads(Rcode.NOERROR, authoritative=True, counts=(len(records) + len(sigs), 0, 0)),
            unsigned.tc_heads,
            unsigned.sections + _sig_records(sigs, first.ttl),
        )
    return compile_signed_answer(data, Answer(Rcode.NOERROR, answer=records), signer, unsigned)


def compile_signed_negative(
    data: NameData, outcome: Negative, signer: Signer, zone: ZoneKeys, signed_zone: SignedZone
) -> Variant:
    """A signed NODATA (or all_down=nxdomain, as RFC 9824 compact denial) written directly: the zone's
    SOA and its RRSIGs owned by a pointer to the zone's suffix of the question, then the NSEC at the
    question name and its RRSIGs."""
    owner = _wire_key(data.name)
    pointer = struct.pack("!H", 0xC000 | (12 + len(owner) - len(zone.origin_wire)))
    exists = outcome.rcode == Rcode.NOERROR
    ttl = data.zone.negative_ttl
    if exists:
        nsec_rdata = b"\x01\x00" + owner + type_bitmap((*existing_types(data), RRSIG, NSEC))
        sigs = signer.rrsig_rdatas(zone, owner, NSEC, ttl, (nsec_rdata,))
        nsec = struct.pack("!HHHIH", 0xC00C, NSEC, IN, ttl, len(nsec_rdata)) + nsec_rdata
        denial = nsec + _sig_records(sigs, ttl)
        count = 1 + len(sigs)
    else:
        denial = signer.denial_records(zone, owner, ttl)
        count = 1 + len(signed_zone.soa_tails) - 1  # NSEC + as many RRSIGs as the SOA has
    sections = b"".join(pointer + tail for tail in signed_zone.soa_tails) + denial
    return Variant(
        heads(Rcode.NOERROR, authoritative=True, counts=(0, len(signed_zone.soa_tails) + count, 0)),
        tc_heads(Rcode.NOERROR, authoritative=True),
        sections,
    )


def compile_signed_node(
    data: NameData, node: Node, signer: Signer, signed_zones: Mapping[bytes, SignedZone]
) -> Node | None:
    """The node a DO query gets at a name of a signed zone: the entries of `node` (same picks and
    counters) with signed variants; None outside the signed zones."""
    zone = signer.zone_of(data.name)
    if zone is None:
        return None
    signed_zone = signed_zones.get(_wire_key(zone.origin))
    done: dict[int, Entry] = {}

    def signed(entry: Entry, outcome: Outcome) -> Entry:
        found = done.get(id(entry))
        if found is not None:
            return found
        if isinstance(outcome, Chain):  # a CNAME chain: every RRset of each possible answer signed
            variants = tuple(
                compile_signed_answer(data, answer, signer, entry.variants[i])
                for i, answer in enumerate(outcome.answers)
            )
        elif isinstance(outcome, Dynamic):
            variants = tuple(
                compile_signed_records(data, outcome.records(i), signer, zone, entry.variants[i])
                for i in range(len(entry.variants))
            )
        elif (
            isinstance(outcome, Negative)
            and outcome.rcode in (Rcode.NOERROR, Rcode.NXDOMAIN)
            and signed_zone is not None
            and data.zone.origin == zone.origin
        ):
            variants = (compile_signed_negative(data, outcome, signer, zone, signed_zone),)
        elif isinstance(outcome, Records) and outcome.answer and not outcome.additional:
            variants = (compile_signed_records(data, outcome.answer, signer, zone, entry.variants[0]),)
        else:
            fixed = render(data, outcome, 0, False, _UNUSED_RNG, 0)
            variants = (compile_signed_answer(data, fixed, signer, entry.variants[0]),)
        found = done[id(entry)] = entry._replace(variants=variants)
        return found

    types: dict[int, Entry] = {}
    for rtype in (*data.special_types(), *ALWAYS_TYPES):  # the types compile_node answers specially
        rdtype = _type_code(rtype)
        types[rdtype] = signed(node.types.get(rdtype, node.default), data.outcome(rtype))
    for rdtype, entry in node.types.items():
        types.setdefault(rdtype, entry)  # zone transfers: REFUSED
    return Node(types, signed(node.default, data.outcome(_OTHER_TYPE)))


def _updated_chains(
    table: AnswerTable, view: View, changed: Iterable[str], removed: Iterable[str]
) -> Mapping[bytes, SignedZone]:
    """The signed zones of `table` with their NSEC chains following an incremental change (the same
    mapping when no chain changes: health changes leave the chains alone)."""
    if table.signer is None or not table.signed_zones:
        return table.signed_zones
    changed, removed = list(changed), list(removed)
    out = dict(table.signed_zones)
    for origin in table.signer.zones:
        key = _wire_key(origin)
        signed_zone = out.get(key)
        if signed_zone is None:
            continue
        denier = signed_zone.denier
        chain = denier.chain.updated(
            table.signer, table.signer.zones[origin], chain_changes(view, origin, changed, removed)
        )
        if chain is not denier.chain:
            new = denier.with_chain(chain)
            out[key] = signed_zone._replace(denier=new)
    return out if any(out[k] is not table.signed_zones[k] for k in out) else table.signed_zones


def compile_signed_zone(
    origin: str, view: View, signer: Signer, linked: Mapping[Key, tuple[int, ...]]
) -> SignedZone | None:
    """A signed zone's denial of nonexistent names (None for an unsigned zone): compact denial, and
    the NSEC chain over `linked` (wire/denial.py chain_names) past the signing budget."""
    keys = signer.zones.get(origin)
    if keys is None:
        return None
    zone = view.zones[origin]
    soa = negative_soa(zone)  # TTL min(SOA TTL, MINIMUM) as in every negative answer (RFC 2308 3)
    rdata_wire = rdata("SOA", soa.rdata).to_wire()
    assert rdata_wire is not None
    sigs = signer.rrsig_rdatas(keys, keys.origin_wire, dns.rdatatype.SOA, soa.ttl, (rdata_wire,))
    tails = [struct.pack("!HHIH", dns.rdatatype.SOA, IN, soa.ttl, len(rdata_wire)) + rdata_wire]
    tails += [struct.pack("!HHIH", RRSIG, IN, soa.ttl, len(sig)) + sig for sig in sigs]
    ttl = soa.ttl
    nscount = len(tails) + 1 + len(sigs)
    compact = (
        heads(Rcode.NOERROR, authoritative=True, counts=(0, nscount, 0)),
        tc_heads(Rcode.NOERROR, authoritative=True),
    )
    # RFC 4035 3.1.3.2 from the chain: the SOA, the NSEC covering the name and the one covering the
    # wildcard at its closest encloser (one NSEC when it covers both), each with its RRSIGs.
    chain = build_chain(signer, keys, ttl, {(): (), **linked})
    per_link = 1 + chain.sig_count
    nxdomain = (
        heads(Rcode.NXDOMAIN, authoritative=True, counts=(0, len(tails) + per_link, 0)),
        heads(Rcode.NXDOMAIN, authoritative=True, counts=(0, len(tails) + 2 * per_link, 0)),
        tc_heads(Rcode.NXDOMAIN, authoritative=True),
    )
    denier = Denier(signer, keys, nxdomain, chain)
    return SignedZone(compact[0], compact[1], tuple(tails), denier)
