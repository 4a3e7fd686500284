"""The answer table in C: the Python `AnswerTable` copied into C memory for `gslbd.wire._cfast`.

The C module answers exactly what `fast_answer` answers, byte for byte (tests/unit/wire/test_ctable.py
holds them equal for the same choice), from a copy of the table that needs no Python object per query:
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
      hash      RendezvousPlan: splitmix64 rendezvous over the endpoint ids, as policy/rendezvous.py
      python    anything else (a plan type C does not know): the query is answered in Python
  - per zone the NXDOMAIN heads and SOA tail; the REFUSED heads; the OPT records and limits.
Draws come from a per-thread splitmix64 generator in C (Python's `random` in the Python path), so the two
paths agree for the same draw, not for the same seed. The `seq` counters are C's own (one per entry,
atomic, shared by the UDP threads); they also count the answers per policy for the metric.

Falls back to Python (the query goes to `Responder.handle`'s Python path) for what the C table cannot
answer: any shape `fast_answer` leaves to the slow path, a plan kind C does not know, a geo client that
only the GeoIP database can place, and what `Fallback` names: DO set (`do`, for signed answers), a DNS
cookie (`cookie`, for server cookies), any EDNS option but ECS and cookies (`options`, e.g. NSID), or
every query (`everything`, e.g. RRL or dnstap on). Those features live in Python; they can move into C by
adding variants or flags here.

Updates: `update_ctable` shares every node of the previous C table but the changed ones (found by
identity of the Python nodes, which `update_table` keeps for unchanged names) and copies only those.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gslbd.policy.base import FixedPlan, Location, NoLocator
from gslbd.policy.geo import GeoPlan
from gslbd.policy.locate import TopologyLocator
from gslbd.policy.random_order import ShufflePlan
from gslbd.policy.rendezvous import RendezvousPlan
from gslbd.policy.round_robin import RotationPlan
from gslbd.policy.weighted import WeightedPlan
from gslbd.wire.compile import AnswerTable, Entry, Node, Variant, ZoneEntry

try:
    from gslbd.wire import _cfast
except ImportError:  # not compiled here: every query is answered in Python
    _cfast = None  # type: ignore[assignment]

AVAILABLE = _cfast is not None
# Set GSLBD_NATIVE=0 to answer every query in Python (for comparisons; the C table is on by default).
ENV_SWITCH = "GSLBD_NATIVE"

K_NONE, K_FIXED, K_ROTATE, K_WEIGHTED, K_SHUFFLE, K_GEO, K_HASH, K_PYTHON = range(8)
FB_DO, FB_COOKIE, FB_OPTIONS, FB_ALL = 1, 2, 4, 8
MAX_POLICIES = 32
_UNCOUNTED = 0  # policy id of entries that no policy counter covers
_POLICY_IDS: dict[str, int] = {}  # policy name -> id in the C counters, process-wide


def enabled() -> bool:
    """Whether new responders answer from a C table: compiled here and not switched off."""
    return AVAILABLE and os.environ.get(ENV_SWITCH, "1") != "0"


@dataclass(frozen=True, slots=True)
class Fallback:
    """What the C table must leave to Python because a feature in Python changes the answer."""

    do: bool = False  # DO set (signed answers)
    cookie: bool = False  # a COOKIE option (server cookies)
    options: bool = False  # any option but ECS and COOKIE (NSID, ...)
    everything: bool = False  # every query (RRL, dnstap, ...)

    @property
    def flags(self) -> int:
        return (
            (FB_DO if self.do else 0)
            | (FB_COOKIE if self.cookie else 0)
            | (FB_OPTIONS if self.options else 0)
            | (FB_ALL if self.everything else 0)
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
    specs: list[tuple[Any, Any]] = field(default_factory=list)

    def add(self, locator: object) -> int:
        found = self.index.get(id(locator))
        if found is not None:
            return found
        if isinstance(locator, TopologyLocator):
            locations: list[Location] = [Location()]
            families = []
            for levels in (locator.v4, locator.v6):
                out = []
                for shift, table in levels:
                    keys = []
                    for key, entry in table.items():
                        locations.append(locator.entry_location(entry))
                        keys.append((key, len(locations) - 1))
                    out.append((shift, tuple(keys)))
                families.append(tuple(out))
            spec: tuple[Any, Any] = (families[0], families[1])
            geoip = locator.reader is not None
        elif isinstance(locator, NoLocator):
            locations, spec, geoip = [Location()], ((), ()), False
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

    def policy_answers(self) -> dict[str, int]:
        """Answers decided per policy by this table's lineage (every C table built with `inherit`)."""
        counts = self.native.policy_answers()
        return {name: counts[i] for name, i in _POLICY_IDS.items() if counts[i]}


def _variant(v: Variant) -> tuple[bytes, bytes, bytes]:
    return (b"".join(v.heads), b"".join(v.tc_heads), v.sections)


def _entry_spec(entry: Entry, policy: int, locators: _Locators) -> tuple[Any, ...]:
    variants = tuple(_variant(v) for v in entry.variants)
    pick = entry.pick
    if pick is None:
        return (K_NONE, _UNCOUNTED, False, variants, None)
    plan = getattr(pick, "__self__", None)
    dependent = entry.location_dependent
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
    if isinstance(plan, GeoPlan):
        which = locators.add(plan.locator)
        if which >= 0:
            classes = [plan.classify_location(loc)[0] for loc in locators.locations[which]]
            if locators.geoip[which]:
                classes[0] = -1  # not in a topology network: only the GeoIP database knows
            return (K_GEO, policy, dependent, variants, (which, plan.starts, plan.counts, tuple(classes)))
    return (K_PYTHON, policy, dependent, variants, None)


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


def _soa_tail(zone: ZoneEntry) -> bytes | None:
    """The zone's NXDOMAIN records after the owner pointer, when they are the same for every query; None
    (NXDOMAIN answered in Python) for a zone entry without a fixed tail, e.g. one whose SOA names are
    compressed against each query's name."""
    tail = getattr(zone, "soa_tail", None)
    return tail if isinstance(tail, bytes) else None


def _settings(table: AnswerTable, fallback: Fallback) -> tuple[Any, ...]:
    return (
        table.max_udp_payload,
        table.use_client_subnet,
        table.opt_plain[0],
        table.opt_plain[1],
        table.opt_prefix[0],
        table.opt_prefix[1],
        b"".join(table.refused.heads),
        b"".join(table.refused.tc_heads),
        fallback.flags,
    )


def build_ctable(
    table: AnswerTable, fallback: Fallback = NO_FALLBACK, inherit: CTable | None = None
) -> CTable:
    """The C copy of `table`. `inherit`: the table it replaces, whose policy answer counts it continues."""
    assert _cfast is not None, "gslbd.wire._cfast is not compiled here"
    locators = _Locators()
    nodes = tuple(_node_spec(key, node, _policies(table, key), locators) for key, node in table.names.items())
    zones = tuple(
        (key, b"".join(z.heads), b"".join(z.tc_heads), _soa_tail(z)) for key, z in table.zones.items()
    )
    native = _cfast.build(
        _settings(table, fallback),
        zones,
        tuple(locators.specs),
        nodes,
        inherit.native if inherit is not None else None,
    )
    return CTable(native, table, locators, fallback)


def update_ctable(old: CTable, table: AnswerTable, fallback: Fallback = NO_FALLBACK) -> CTable:
    """The C copy of `table`, sharing with `old` every node whose Python node `table` shares with the
    table `old` was built from (what `update_table` produces); a full build when more than names changed."""
    base = old.source
    same_base = (
        fallback == old.fallback
        and table.zones is base.zones
        and table.refused is base.refused
        and table.max_udp_payload == base.max_udp_payload
        and table.use_client_subnet == base.use_client_subnet
        and table.opt_plain == base.opt_plain
    )
    if not same_base:
        return build_ctable(table, fallback, old)
    assert _cfast is not None
    keys, removed = _cfast.diff(base.names, table.names)
    names = table.names
    changed = tuple(_node_spec(key, names[key], _policies(table, key), old.locators) for key in keys)
    return CTable(old.native.update(tuple(removed), changed), table, old.locators, fallback)


def new_slot() -> Any:
    """A slot for the current C table of a responder, read by the C UDP loops."""
    assert _cfast is not None
    return _cfast.Slot()
