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
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import NamedTuple

import dns.rdatatype

from gslbd.answer import Answer, Dynamic, NameData, Negative, Outcome, Rr, View, render, soa_rr
from gslbd.cow import CowMap
from gslbd.types import Rcode
from gslbd.wire.render import IN, dns_name, rdata, sections_wire

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
    """One possible response: header tails and the records after the question."""

    heads: Heads
    tc_heads: Heads
    sections: bytes


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
    """A served zone's NXDOMAIN: header tails and the SOA record after its owner name."""

    heads: Heads
    tc_heads: Heads
    soa_tail: bytes


@dataclass(frozen=True, slots=True)
class AnswerTable:
    """Everything the fast path answers from. Never mutated after `compile_table` (the entries'
    query counters aside). Keys are wire-format names in lower case."""

    names: CowMap[bytes, Node]
    zones: dict[bytes, ZoneEntry]
    refused: Variant
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
    """Header tails (flags and counts) for rd in (0, 1) x OPT in (no, yes)."""
    return _heads(rcode, authoritative, counts, truncated=False)


def tc_heads(rcode: int, *, authoritative: bool) -> Heads:
    return _heads(rcode, authoritative, (0, 0, 0), truncated=True)


@lru_cache(maxsize=1024)
def _heads(rcode: int, authoritative: bool, counts: tuple[int, int, int], *, truncated: bool) -> Heads:
    an, ns, ar = counts
    out = []
    for has_opt in (0, 1):
        for rd in (0, 1):
            flags = 0x80 | (0x04 if authoritative else 0) | (0x02 if truncated else 0) | rd
            out.append(struct.pack("!BBHHHH", flags, rcode & 0xF, 1, an, ns, ar + has_opt))
    return (out[0], out[1], out[2], out[3])


# Record types whose data holds names that dnspython compresses (the first two fields of an SOA).
_NAME_DATA = {"NS": 1, "CNAME": 1, "PTR": 1, "DNAME": 1, "MX": 2, "SOA": 2}


def _labels(name: str) -> list[str]:
    return name.rstrip(".").lower().split(".") if name != "." else []


def _common(a: list[str], b: list[str]) -> int:
    """How many trailing labels two names share."""
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
    aa = answer.authoritative and answer.rcode != Rcode.REFUSED
    return Variant(
        heads(answer.rcode, authoritative=aa, counts=(an, ns, ar)),
        tc_heads(answer.rcode, authoritative=aa),
        sections,
    )


@lru_cache(maxsize=65536)
def address_record(rtype: str, ttl: int, address: str) -> bytes:
    """An A or AAAA record owned by the question's name (a pointer to offset 12), as dnspython
    writes it behind the question."""
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
    if isinstance(outcome, Dynamic):
        plan = outcome.plan
        variants = tuple(compile_records(data.name, outcome.records(i)) for i in range(len(plan.variants)))
        return Entry(plan.pick, itertools.count(), variants, plan.location_dependent)
    # Records and Negative answers do not depend on the client, the rng or the counter.
    fixed = render(data, outcome, 0, False, _UNUSED_RNG, 0)
    plain = fixed.rcode == Rcode.NOERROR and fixed.answer and not fixed.authority and not fixed.additional
    if plain and fixed.authoritative:
        return Entry(None, itertools.count(), (compile_records(data.name, fixed.answer),), False)
    return Entry(None, itertools.count(), (compile_answer(data.name, fixed),), False)


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

    for rtype in (*data.outcomes, *ALWAYS_TYPES):
        types[_type_code(rtype)] = entry_of(rtype)
    default = entry_of(_OTHER_TYPE)
    for rdtype in ZONE_TRANSFER_TYPES:
        types[int(rdtype)] = refused
    return Node(types, default)


def compile_zone(origin: str, view: View) -> ZoneEntry:
    """A zone's NXDOMAIN variant: the SOA with TTL negative_ttl, its owner left to the fast path."""
    zone = view.zones[origin]
    soa = soa_rr(zone, zone.negative_ttl)
    rdata_wire = rdata("SOA", soa.rdata).to_wire()
    assert rdata_wire is not None  # to_wire() without a file returns the bytes
    tail = struct.pack("!HHIH", dns.rdatatype.SOA, IN, soa.ttl, len(rdata_wire)) + rdata_wire
    return ZoneEntry(
        heads(Rcode.NXDOMAIN, authoritative=True, counts=(0, 1, 0)),
        tc_heads(Rcode.NXDOMAIN, authoritative=True),
        tail,
    )


def opt_record(payload: int, do: bool, rdlen: int | None) -> bytes:
    """Our OPT record: root owner, type 41, class = payload, version 0, DO as asked; with RDLENGTH
    0 when `rdlen` is 0, or without RDLENGTH when `rdlen` is None (options are appended later)."""
    head = struct.pack("!BHHBBH", 0, 41, payload, 0, 0, 0x8000 if do else 0)
    return head if rdlen is None else head + struct.pack("!H", rdlen)


def compile_table(view: View, *, max_udp_payload: int, use_client_subnet: bool) -> AnswerTable:
    """Precompile every answer of a view for the fast path."""
    refused = Variant(
        heads(Rcode.REFUSED, authoritative=False),
        tc_heads(Rcode.REFUSED, authoritative=False),
        b"",
    )
    refused_entry = Entry(None, itertools.count(), (refused,), False)
    names: dict[bytes, Node] = {}
    counters: dict[bytes, PolicyCounters] = {}
    for name, data in view.names.items():
        key = _wire_key(name)
        node = names[key] = compile_node(data, refused_entry)
        found = _policy_counters(data, node)
        if found:
            counters[key] = found
    zones = {_wire_key(origin): compile_zone(origin, view) for origin in view.zones}
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
    )


def update_table(
    table: AnswerTable, view: View, changed: Iterable[str], removed: Iterable[str]
) -> AnswerTable:
    """`table` with the nodes of `changed` names compiled anew from `view` and those of `removed` names
    gone; every other node is shared with `table` (its counters keep counting). Zones, payload limit
    and ECS setting come from `table`: a config change needs `compile_table`."""
    names: dict[bytes, Node] = {}
    counters: dict[bytes, PolicyCounters] = {}
    dropped: list[bytes] = []
    refused_entry = Entry(None, itertools.count(), (table.refused,), False)
    for name in removed:
        dropped.append(_wire_key(name))
    for name in changed:
        data = view.names[name]
        key = _wire_key(name)
        node = names[key] = compile_node(data, refused_entry)
        found = _policy_counters(data, node)
        if found:
            counters[key] = found
        else:
            dropped.append(key)
    old = table.policy_counters
    retired = tuple(pc for key in (*names, *dropped) for pc in old.get(key, ()))
    return replace(
        table,
        names=table.names.evolve(names, (k for k in dropped if k not in names)),
        policy_counters=old.evolve(counters, (k for k in dropped if k not in counters)),
        serial=next(_SERIALS),
        derived_from=table.serial,
        retired=retired,
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
