"""The answer table in C: the Python `AnswerTable` copied into C memory for `gslbd.wire._cfast`.

The C module answers exactly what the dnspython slow path (the oracle) answers, byte for byte
(tests/unit/wire/test_ctable.py holds them equal for the same choice), from a copy of the table that
needs no Python object per query:
  - per name (lower-case wire key) a node: its entries (variants + how to pick one) and a type map;
  - per entry one of the kinds below, from the type of the policy plan behind `Entry.pick`:
      none      fixed answer, not counted        (`pick` None)
      fixed     FixedPlan: variant 0, counted
      rotate    RotationPlan: seq % variants     (round_robin, failover, one-place geo)
      weighted  WeightedPlan: bisect of a uniform draw over the cumulative weights
      shuffle   ShufflePlan: int(draw * count)
      geo       GeoPlan: the client's location id (longest topology prefix, exported per locator) picks
                a candidate set (precomputed per location with `GeoPlan.classify_location`), then
                seq % the set's rotations
                PoolPlan (pools and rules) the same way (rules on the address or ASN: every client
                through the GeoIP prefix cache); the ECS scope per location id (policy/scope.py); pools
                whose plans draw, hash or are geo hold per class the pool plan's own entry (wire/_pools.c)
      hash      RendezvousPlan: splitmix64 rendezvous over the endpoint ids, as policy/rendezvous.py
      whash     WeightedRendezvousPlan: the same hashes scored -weight/ln(u) in doubles
      shed      ShedPlan (shed_load): one uniform draw picks a level (bisect over the bands' bounds), each
                level the policy's own entry (any kind above, pools included) over its slice of the
                variants, answering with the shed entry's `seq` (wire/_shed.c)
      python    anything else (a plan type C does not know): the query is answered in Python
  - per variant its EDNS options after ECS (an Extended DNS Error, RFC 8914);
  - per zone the NXDOMAIN heads and the SOA's parts: C writes the record per query, its names compressed
    against the query's name exactly as the slow path does; the REFUSED variants (outside every zone,
    and zone transfers); the OPT records and limits.
Draws come from a per-thread splitmix64 generator in C (Python's `random` in the Python path), so the two
paths agree for the same draw, not for the same seed. The `seq` counters are C's own (one per entry,
atomic, shared by the UDP threads); they also count the answers per policy for the metric.

A query with an NSID option gets the table's `nsid` option (`dns.identity`) from C, after the ECS echo
and before the variant's EDE, as the slow path writes it. Cookies and RRL are the last stage of C's
answers when the responder gives the table its guard (`Table.set_guard`, wire/cguard.py, wire/_guard.c).

Falls back to Python (the query goes to `Responder.handle`'s Python path) for what the C table cannot
answer: the rare shapes only the slow path answers (CHAOS, NXNAME, ...), a plan kind C does not
know (a chain through several policies), the first query of each client prefix only Python can place
(a GeoIP client outside the topology, pools rules on networks/asn: C keeps the answer for the prefix
afterwards, `CTable.learn`, wire/_geocache.c), a
nonexistent name below the parent of a wildcard, and what `Fallback` names: a negative answer to a
query naming an exchange zone (`negative`: the exchange hook owns `_gslbd-exchange-*`; every other
NXDOMAIN, REFUSED or NODATA stays in C), every query (`everything`: RRL or cookies applied in Python,
where the guard is not C's), or a name the table does not hold (`misses`: tables compiled lazily).
Those features live in Python; they can move into C by adding
variants or flags here. A datagram that cannot be a valid query is not among them, whatever the flags:
the C UDP loop answers it (or drops it) as the slow path would, `Table.reject` (docs/wire.md, *Malformed
datagrams*).

Signed zones (docs/wire.md, *Signed zones in C*): `AnswerTable.signed_names` is copied as a second node
table that DO queries look up first; per signed zone the compact-denial and chain-NXDOMAIN heads, the SOA
and RRSIG records and the NSEC chain (`Denier.native_parts`) are copied into the zone, with two objects
shared with Python: the budget's `_cfast.Gate` (C answers from the chain only while the budget is spent)
and the signer's `_cfast.DenialCache` (the compact denials signed before, filled as Python signs them).
Only Python signs.

Updates: `update_ctable` shares every node of the previous C table but the changed ones (found by
identity of the Python nodes, which `update_table` keeps for unchanged names) and copies only those; C
copies only the index shards they fall in (docs/wire.md, *Memory*). Fixed entries (no pick) with the
same bytes are one C entry shared by the names of a build or update, as the Python table shares them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gslbd.cow import CowMap
from gslbd.gcpause import collector_paused
from gslbd.model.exchange_cut import EXCHANGE_PREFIX
from gslbd.policy.base import FixedPlan, Location, NoLocator
from gslbd.policy.geo import GeoPlan
from gslbd.policy.load import ShedPlan
from gslbd.policy.locate import Nets, TopologyLocator
from gslbd.policy.pools import PoolPlan
from gslbd.policy.random_order import ShufflePlan
from gslbd.policy.rendezvous import RendezvousPlan, WeightedRendezvousPlan
from gslbd.policy.round_robin import RotationPlan
from gslbd.policy.scope import client_class
from gslbd.policy.weighted import WeightedPlan
from gslbd.wire.compile import AnswerTable, Entry, Node, Variant, ZoneEntry

try:
    from gslbd.wire import _cfast
except ImportError:  # not compiled here: every query is answered in Python
    _cfast = None  # type: ignore[assignment]

AVAILABLE = _cfast is not None
# Set GSLBD_NATIVE=0 to answer every query in Python (for comparisons; the C table is on by default).
ENV_SWITCH = "GSLBD_NATIVE"

K_NONE, K_FIXED, K_ROTATE, K_WEIGHTED, K_SHUFFLE, K_GEO, K_HASH, K_WHASH, K_PYTHON, K_SHED = range(10)
FB_ALL, FB_NEG, FB_MISS = 8, 16, 64  # bits of _cfast.c's table flags
S_SIGNER = 1 << 16  # with the flags: the table has a signer (CO changes its signed answers)
MAX_POLICIES = 32
_UNCOUNTED = 0  # policy id of entries that no policy counter covers
_POLICY_IDS: dict[str, int] = {}  # policy name -> id in the C counters, process-wide
_EXCHANGE_MARK = EXCHANGE_PREFIX.encode()
_MARK_END = 1 + len(_EXCHANGE_MARK)


def enabled() -> bool:
    """Whether new responders answer from a C table: compiled here and not switched off."""
    return AVAILABLE and os.environ.get(ENV_SWITCH, "1") != "0"


def python_only_notice() -> str | None:
    """What gslbd logs once at start when it answers without the C table (every query through the
    dnspython slow path, the asyncio UDP reader): why, and what to do; None when C answers."""
    if not AVAILABLE:
        return (
            "the C extension gslbd.wire._cfast is not built here (no C compiler when gslbd was installed): "
            "every query is answered in pure Python, slowly; install a C compiler and reinstall gslbd"
        )
    if not enabled():
        return f"{ENV_SWITCH}=0: every query is answered in pure Python, slowly"
    return None


@dataclass(frozen=True, slots=True)
class Fallback:
    """What the C table must leave to Python because a feature in Python changes the answer."""

    everything: bool = False  # every query (RRL, cookies applied in Python: no C guard)
    negative: bool = False  # a negative answer to a query naming `_gslbd-exchange-*` (the exchange hook)
    misses: bool = False  # a name the C table does not hold (names compiled lazily, in Python)

    @property
    def flags(self) -> int:
        return (
            (FB_ALL if self.everything else 0)
            | (FB_NEG if self.negative else 0)
            | (FB_MISS if self.misses else 0)
        )


NO_FALLBACK = Fallback()  # C answers everything the Python fast path answers


def policy_id(name: str) -> int:
    """The C counter slot of a policy name (assigned on first use; slot 0 is never reported)."""
    found = _POLICY_IDS.get(name)
    if found is None:
        found = len(_POLICY_IDS) + 1
        if found >= MAX_POLICIES:
            return _UNCOUNTED
        _POLICY_IDS[name] = found
    return found


@dataclass(slots=True)
class _Locators:
    """The locators exported with one C table lineage: index in the C base and location ids."""

    index: dict[int, int] = field(default_factory=dict)  # id(locator) -> index
    keep: list[object] = field(default_factory=list)  # keeps each locator alive while its id is a key
    locations: list[list[Location]] = field(default_factory=list)  # per index: location of each id
    geoip: list[bool] = field(default_factory=list)  # per index: unmatched clients need the GeoIP database
    specs: list[tuple[Any, ...]] = field(default_factory=list)
    # Variant specs made during one build or update, by id of the Variant (kept alive beside its spec):
    # the compiler shares variants across names (NODATA, REFUSED, the same address sets), so most repeat.
    variants: dict[int, tuple[Variant, tuple[bytes, bytes, bytes, bytes]]] = field(default_factory=dict)

    def add(self, locator: object) -> int:
        found = self.index.get(id(locator))
        if found is not None:
            return found
        if isinstance(locator, TopologyLocator):
            locations: list[Location] = [Location()]
            scopes: list[Nets] = [None]  # per location id: the networks its ECS scope depends on
            families = []
            for v6, levels in ((False, locator.v4), (True, locator.v6)):
                out = []
                for shift, table in levels:
                    keys = []
                    for key, entry in table.items():
                        locations.append(locator.entry_location(entry))
                        scopes.append(locator.scope_networks(entry, v6))
                        keys.append((key, len(locations) - 1))
                    out.append((shift, tuple(keys)))
                families.append(tuple(out))
            outside = (locator.scope_networks(None, False), locator.scope_networks(None, True))
            spec: tuple[Any, ...] = (families[0], families[1], (*outside, tuple(scopes)))
            geoip = locator.reader is not None or locator.asn_reader is not None
        elif isinstance(locator, NoLocator):
            locations, spec, geoip = [Location()], ((), (), ((), (), (None,))), False
        else:
            return -1
        self.index[id(locator)] = len(self.specs)
        self.keep.append(locator)
        self.locations.append(locations)
        self.geoip.append(geoip)
        self.specs.append(spec)
        return len(self.specs) - 1


@dataclass(slots=True)
class CTable:
    """A C table and what it was built from (for cheap updates). `answer` is the C answer function:
    answer(data, ip, v6, tcp) -> bytes, or None when Python must answer."""

    native: _cfast.Table
    source: AnswerTable = field(repr=False)
    locators: _Locators = field(repr=False)
    fallback: Fallback

    @property
    def answer(self) -> Any:
        return self.native.answer

    def learn(self, data: bytes) -> None:
        """After `answer` left a query to Python because C could not place its geo client (outside the
        topology networks with a GeoIP database, or pools whose rules test the address): locate the
        client once here and give C its class and ECS scope for the client's prefix (wire/_geocache.c)."""
        missed = self.native.geo_missed()
        if missed is None:
            return
        which, uid, ip, v6, path = missed
        plan = _plan_of(self.source, data)
        for index in path:  # the shed level, the pool's class whose own geo entry missed
            plan = _below(plan, index)
        found = client_class(plan, ip, v6) if plan is not None else None
        if found is not None:
            self.native.geo_fill(which, uid, ip, v6, found[0], found[1])

    def policy_answers(self) -> dict[str, int]:
        """Answers decided per policy by this table's lineage (every C table built with `inherit`)."""
        counts = self.native.policy_answers()
        return {name: counts[i] for name, i in _POLICY_IDS.items() if counts[i]}


def _plan_of(table: AnswerTable, data: bytes) -> object | None:
    """The plan behind the entry that answers the query's question (a name without a zero byte: the
    only ones whose geo clients C asks about), as C found it (a signed node shares its picks)."""
    end = data.find(b"\0", 12)
    if end < 0 or end + 3 > len(data):
        return None
    node = table.names.get(data[12 : end + 1].lower())
    if node is None:
        return None
    entry = node.types.get(int.from_bytes(data[end + 1 : end + 3], "big"), node.default)
    return getattr(entry.pick, "__self__", None)


def _below(plan: object, index: int) -> object | None:
    """The plan at `index` below `plan` as C's entries nest them: a shed level, a pool's plan."""
    if isinstance(plan, ShedPlan) and index < len(plan.levels):
        return plan.levels[index]
    if isinstance(plan, PoolPlan) and index < len(plan.inner):
        return plan.inner[index]
    return None


def geo_counts() -> dict[str, int]:
    """The GeoIP prefix cache's counters for the process: C answered from it, C asked Python, Python
    filled it (metrics: gslbd_geo_cache_total)."""
    if _cfast is None:
        return {"hit": 0, "miss": 0, "fill": 0}
    hits, misses, fills = _cfast.geo_counts()
    return {"hit": hits, "miss": misses, "fill": fills}


def _variant(v: Variant) -> tuple[bytes, bytes, bytes, bytes]:
    return (b"".join(v.heads), b"".join(v.tc_heads), v.sections, v.options)


_VARIANT_MEMO = 65536  # variant specs kept during one build: the shared ones repeat early and often


def _variant_specs(variants: tuple[Variant, ...], locators: _Locators) -> tuple[Any, ...]:
    memo = locators.variants
    out = []
    for v in variants:
        found = memo.get(id(v))
        if found is None:
            if len(memo) >= _VARIANT_MEMO:  # most variants are one name's own: keep memory bounded
                memo.clear()
            found = memo[id(v)] = (v, _variant(v))
        out.append(found[1])
    return tuple(out)


def _entry_spec(entry: Entry, policy: int, locators: _Locators) -> tuple[Any, ...]:
    variants = _variant_specs(entry.variants, locators)
    pick = entry.pick
    if pick is None:  # C shares one entry between the nodes whose fixed entries have the same bytes
        return (K_NONE, _UNCOUNTED, False, variants, None)
    return _plan_spec(getattr(pick, "__self__", None), policy, entry.location_dependent, variants, locators)


def _shed_spec(
    plan: ShedPlan, policy: int, dependent: bool, variants: tuple[Any, ...], locators: _Locators
) -> tuple[Any, ...]:
    """A shed entry: per level the policy's own entry over that level's slice of the variants (no
    counter of its own, the shed entry's dependence on the client), and the levels' bounds."""
    levels = tuple(
        _plan_spec(level, _UNCOUNTED, dependent, variants[start : start + len(level.variants)], locators)
        for level, start in zip(plan.levels, plan.offsets, strict=True)
    )
    if any(spec[0] in (K_PYTHON, K_SHED) for spec in levels):
        return (K_PYTHON, policy, dependent, variants, None)
    return (K_SHED, policy, dependent, (), (tuple(map(float, plan.bounds)), levels))


def _plan_spec(
    plan: object, policy: int, dependent: bool, variants: tuple[Any, ...], locators: _Locators
) -> tuple[Any, ...]:
    if isinstance(plan, ShedPlan):
        return _shed_spec(plan, policy, dependent, variants, locators)
    if isinstance(plan, FixedPlan):
        return (K_FIXED, policy, dependent, variants, None)
    if isinstance(plan, RotationPlan):
        return (K_ROTATE, policy, dependent, variants, None)
    if isinstance(plan, WeightedPlan):
        return (K_WEIGHTED, policy, dependent, variants, (plan.bounds, plan.total))
    if isinstance(plan, ShufflePlan):
        return (K_SHUFFLE, policy, dependent, variants, plan.count)
    if isinstance(plan, RendezvousPlan):
        return (K_HASH, policy, dependent, variants, plan.ids)
    if isinstance(plan, WeightedRendezvousPlan):
        return (K_WHASH, policy, dependent, variants, (plan.ids, tuple(map(float, plan.weights))))
    if isinstance(plan, GeoPlan | PoolPlan):
        classes = _classes(plan, locators)
        if classes is not None:
            if isinstance(plan, PoolPlan) and not plan.seq_picked:
                return _drawing_pools_spec(plan, policy, dependent, variants, locators, classes)
            return (K_GEO, policy, dependent, variants, classes)
    return (K_PYTHON, policy, dependent, variants, None)


def _classes(plan: GeoPlan | PoolPlan, locators: _Locators) -> tuple[Any, ...] | None:
    """A geo entry's (locator, starts, counts, class per location id); None: C cannot locate its
    clients. Class -1: only Python places the client (the GeoIP prefix cache, wire/_geocache.c):
    outside every topology network when a GeoIP/ASN database is set, every client of rules that test
    the address or the ASN."""
    which = locators.add(plan.locator)
    if which < 0:
        return None
    if isinstance(plan, PoolPlan) and not plan.by_location:
        classes = [-1] * len(locators.locations[which])
    else:
        classes = [plan.classify_location(loc)[0] for loc in locators.locations[which]]
        if locators.geoip[which]:
            classes[0] = -1
    return (which, plan.starts, plan.counts, tuple(classes))


_POOL_INNER_KINDS = frozenset((K_FIXED, K_ROTATE, K_WEIGHTED, K_SHUFFLE, K_HASH, K_WHASH, K_GEO))


def _drawing_pools_spec(
    plan: PoolPlan,
    policy: int,
    dependent: bool,
    variants: tuple[Any, ...],
    locators: _Locators,
    classes: tuple[Any, ...],
) -> tuple[Any, ...]:
    """Pools whose plans draw, hash or are geo (wire/_pools.c): a geo entry whose classes are found as for
    the pools that rotate, with per class the pool's own entry over that class's slice of the variants (no
    counter of its own, the geo entry's dependence on the client; a geo plan's entry on the pools'
    locator). A pool plan C does not answer (a locator C cannot export, ...) leaves the whole entry to
    Python."""
    inner = tuple(
        _plan_spec(p, _UNCOUNTED, dependent, variants[start : start + count], locators)
        for p, start, count in zip(plan.inner, plan.starts, plan.counts, strict=True)
    )
    if any(spec[0] not in _POOL_INNER_KINDS or not spec[3] or _no_ids(spec) for spec in inner):
        return (K_PYTHON, policy, dependent, variants, None)
    if any(spec[0] == K_GEO and (len(spec[4]) != 4 or spec[4][0] != classes[0]) for spec in inner):
        return (K_PYTHON, policy, dependent, variants, None)  # geo in C only on the pools' own locator
    return (K_GEO, policy, dependent, variants, (*classes, inner))


def _no_ids(spec: tuple[Any, ...]) -> bool:
    """A hash entry over no endpoint (C would leave it to Python, so the pools entry goes there whole)."""
    return (spec[0] == K_HASH and not spec[4]) or (spec[0] == K_WHASH and not spec[4][0])


def _node_spec(key: bytes, node: Node, policies: Mapping[int, str], locators: _Locators) -> tuple[Any, ...]:
    """(key, entries, ((qtype, entry index), ...), default index); entries shared by types once."""
    order: dict[int, int] = {}
    entries: list[tuple[Any, ...]] = []

    def index(entry: Entry) -> int:
        found = order.get(id(entry))
        if found is None:
            name = policies.get(id(entry.counter))
            pid = policy_id(name) if name is not None else _UNCOUNTED
            found = order[id(entry)] = len(entries)
            entries.append(_entry_spec(entry, pid, locators))
        return found

    types = tuple((qtype, index(entry)) for qtype, entry in node.types.items())
    default = index(node.default)
    return (key, tuple(entries), types, default)


def _policies(table: AnswerTable, key: bytes) -> dict[int, str]:
    return {id(counter): name for name, counter in table.policy_counters.get(key, ())}


def _soa_parts(zone: ZoneEntry) -> tuple[bytes, bytes, bytes, bytes] | None:
    """What C needs to write the zone's NXDOMAIN SOA per query as the slow path does: type, class and
    TTL, MNAME and RNAME as labels (without the root), the five numbers. None leaves the zone's NXDOMAIN
    to Python."""
    if len(zone.rr_head) != 8 or len(zone.numbers) != 20:
        return None
    return (zone.rr_head, b"".join(zone.mname), b"".join(zone.rname), zone.numbers)


def _signed_parts(table: AnswerTable, key: bytes) -> tuple[Any, ...] | bool:
    """A zone's denial of nonexistent names to DO queries as C writes it (the cached compact denials, and
    NXDOMAIN from the NSEC chain past the budget), False for an unsigned zone, True when C cannot."""
    signed = table.signed_zones.get(key)
    if signed is None:
        return False
    parts = signed.denier.native_parts()
    if parts is None:
        return True
    nx1, nx2, nx_tc, flat, links, gate, cache = parts
    compact = (b"".join(signed.heads), b"".join(signed.tc_heads))
    return (*compact, nx1, nx2, nx_tc, signed.soa_tails, flat, links, gate, cache)


def _exchange_cut(table: AnswerTable, key: bytes) -> bool:
    """Whether `key` is the cut at an exchange apex (model/exchange_cut.py): its questions are the
    exchange hook's (but DS, which Python answers from the table), so C does not hold the name: with the
    hook set (FB_NEG) C leaves a name it does not hold to Python."""
    return key[1:_MARK_END] == _EXCHANGE_MARK and key in table.delegated


def _zone_specs(table: AnswerTable) -> tuple[tuple[Any, ...], ...]:
    """The zones as C reads them; a zone cut or DNAME owner (`AnswerTable.delegated`) is a zone whose
    nonexistent names C leaves to Python (no SOA parts), found before the zone around it."""
    zones = tuple(
        (key, b"".join(z.heads), b"".join(z.tc_heads), _soa_parts(z), _signed_parts(table, key))
        for key, z in table.zones.items()
    )
    if not table.delegated or not zones:
        return zones
    _, any_heads, any_tc, _, _ = zones[0]
    return tuple((key, any_heads, any_tc, None, False) for key in table.delegated) + zones


def _settings(table: AnswerTable, fallback: Fallback) -> tuple[Any, ...]:
    return (
        table.max_udp_payload,
        table.use_client_subnet,
        table.opt_plain[0],
        table.opt_plain[1],
        table.opt_prefix[0],
        table.opt_prefix[1],
        _variant(table.refused),
        _variant(table.refused_transfer),
        _flags(table, fallback),
        table.nsid,
    )


def _flags(table: AnswerTable, fallback: Fallback) -> int:
    return fallback.flags | (S_SIGNER if table.signer is not None else 0)


def build_ctable(
    table: AnswerTable, fallback: Fallback = NO_FALLBACK, inherit: CTable | None = None
) -> CTable:
    """The C copy of `table`. `inherit`: the table it replaces, whose policy answer counts it continues."""
    assert _cfast is not None, "gslbd.wire._cfast is not compiled here"
    locators = _Locators()
    with collector_paused():  # a tuple per name and entry, all kept until C has copied them
        nodes = tuple(
            _node_spec(key, node, _policies(table, key), locators)
            for key, node in table.names.items()
            if not _exchange_cut(table, key)
        )
        signed = tuple(
            _node_spec(key, node, _policies(table, key), locators)
            for key, node in table.signed_names.items()
            if not _exchange_cut(table, key)
        )
    zones = _zone_specs(table)
    native = _cfast.build(
        _settings(table, fallback),
        zones,
        tuple(locators.specs),
        nodes,
        inherit.native if inherit is not None else None,
        signed,
    )
    locators.variants.clear()
    return CTable(native, table, locators, fallback)


def update_ctable(old: CTable, table: AnswerTable, fallback: Fallback = NO_FALLBACK) -> CTable:
    """The C copy of `table`, sharing with `old` every node whose Python node `table` shares with the
    table `old` was built from (what `update_table` produces); a full build when more than names changed
    (what it leaves to Python, `fallback`, may change: that is one word of the new table)."""
    base = old.source
    same_base = (
        table.zones is base.zones
        and table.refused is base.refused
        and table.refused_transfer is base.refused_transfer
        and table.max_udp_payload == base.max_udp_payload
        and table.use_client_subnet == base.use_client_subnet
        and table.opt_plain == base.opt_plain
        and table.signed_zones is base.signed_zones
        and table.delegated == base.delegated
        and table.nsid == base.nsid
    )
    if not same_base:
        return build_ctable(table, fallback, old)
    assert _cfast is not None
    old.locators.variants.clear()
    removed, specs = _changed(base.names, table.names, table, old.locators)
    signed_removed, signed_specs = _changed(base.signed_names, table.signed_names, table, old.locators)
    old.locators.variants.clear()
    native = old.native.update(removed, specs, signed_removed, signed_specs, _flags(table, fallback))
    return CTable(native, table, old.locators, fallback)


def _changed(
    before: CowMap[bytes, Node], after: CowMap[bytes, Node], table: AnswerTable, locators: _Locators
) -> tuple[tuple[bytes, ...], tuple[Any, ...]]:
    """The keys gone from `before` and the specs of the nodes new or changed in `after`."""
    assert _cfast is not None
    if before is after:  # e.g. no signed names before or after
        return (), ()
    keys: list[bytes] = []
    removed: list[bytes] = []
    for old_shard, new_shard in zip(before.shards, after.shards, strict=True):
        if old_shard is not new_shard:  # a CowMap shares the shards an update did not touch
            found, gone = _cfast.diff(old_shard, new_shard)
            keys += found
            removed += gone
    specs = tuple(
        _node_spec(key, after[key], _policies(table, key), locators)
        for key in keys
        if not _exchange_cut(table, key)
    )
    return tuple(removed), specs


def new_slot() -> Any:
    """A slot for the current C table of a responder, read by the C UDP loops."""
    assert _cfast is not None
    return _cfast.Slot()
