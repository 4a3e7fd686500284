"""Building the view: every name of every zone with its outcomes, in parts that can be rebuilt alone.

A view is the union of
  - the base names of the config: each zone's apex (SOA, NS), static records and in-zone nameservers;
  - per service, the names it owns: its own name (on top of any static records there), its locality
    names (answer/locality.py) and its localtargets name (answer/exchange_names.py);
  - the heartbeat name of each zone;
  - the empty non-terminals above all of them.

Only a service's own names depend on the health of its endpoints. `ViewBuilder` keeps, per service,
the health inputs it was last built from; when a new snapshot arrives for the same config and policy
environment, it rebuilds only the services whose inputs changed and says which names changed, so the
wire compiler recompiles those names alone. A verdict then costs a few names, not every name of every
zone: at 1,000 services a full build takes over 100 ms of the event loop, a one-service update well
under a millisecond plus a pass over the services' inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from gslbd.answer.chain import ChainIndex, follow_all
from gslbd.answer.exchange_names import (
    LOCALTARGETS_PREFIX,
    heartbeat_rrsets,
    localtargets_rrsets,
    merged_endpoints,
    peer_site_names,
)
from gslbd.answer.locality import locality_names
from gslbd.answer.ttl import change_bound, dynamic_ttl
from gslbd.answer.view import (
    SERVICE_TYPES,
    NameData,
    Outcome,
    Records,
    Referral,
    Rr,
    View,
    https_outcome,
    negative_soa_ttl,
    service_outcome,
    soa_rr,
    srv_outcome,
)
from gslbd.cow import MASK as SHARD_MASK
from gslbd.cow import CowMap
from gslbd.model.config import Config
from gslbd.model.service import Endpoint, Service
from gslbd.model.zone import Zone
from gslbd.policy import PolicyEnv
from gslbd.policy.load import uses_load
from gslbd.state.snapshot import Snapshot
from gslbd.types import EndpointKind


def _apex_outcomes(zone: Zone) -> dict[str, Outcome]:
    ns = tuple(Rr(zone.origin, "NS", zone.ttl, n.name) for n in zone.nameservers)
    glue: list[Rr] = []
    for n in zone.nameservers:
        if n.name == zone.origin or n.name.endswith("." + zone.origin):
            for addr in n.addresses:
                glue.append(Rr(n.name, "AAAA" if ":" in addr else "A", zone.ttl, addr))
    out: dict[str, Outcome] = {"SOA": Records((soa_rr(zone, zone.ttl),))}
    if ns:
        out["NS"] = Records(ns, tuple(glue))
    out.update(keyset_outcomes(zone))
    return out


def keyset_outcomes(zone: Zone) -> dict[str, Outcome]:
    """A signed zone's DNSKEY RRset (every key, published or signing) and, for the parent, CDS and
    CDNSKEY of its SEP keys (RFC 7344); nothing for an unsigned zone."""
    d = zone.dnssec
    if d is None:
        return {}
    out: dict[str, Outcome] = {
        "DNSKEY": Records(tuple(Rr(zone.origin, "DNSKEY", zone.ttl, k.dnskey_text) for k in d.keys))
    }
    sep = [k for k in d.keys if k.sep]
    if sep:
        out["CDS"] = Records(tuple(Rr(zone.origin, "CDS", zone.ttl, ds) for ds in d.cds))
        out["CDNSKEY"] = Records(tuple(Rr(zone.origin, "CDNSKEY", zone.ttl, k.dnskey_text) for k in sep))
    return out


def base_names(config: Config) -> dict[str, NameData]:
    """The names that do not depend on health: apexes, static records, in-zone nameservers."""
    names: dict[str, NameData] = {}

    def node(name: str, zone: Zone) -> NameData:
        data = names.get(name)
        if data is None:
            data = names[name] = NameData(name, zone)
        return data

    for zone in config.zones:
        apex = _apex_outcomes(zone)
        node(zone.origin, zone).outcomes.update(apex)
        grouped: dict[tuple[str, str], list[Rr]] = {}
        for rec in zone.records:
            grouped.setdefault((rec.name, rec.rtype), []).append(Rr(rec.name, rec.rtype, rec.ttl, rec.value))
        for (name, rtype), rrs in grouped.items():
            node(name, zone).outcomes[rtype] = Records(tuple(rrs))
        _mark_cuts(zone, names, node)
        # In-zone nameservers answer their own addresses (resolvers re-query glue names).
        ns = apex.get("NS")
        glue = ns.additional if isinstance(ns, Records) else ()
        for rr in glue:
            outcomes = node(rr.name, zone).outcomes
            if rr.rtype not in outcomes:
                same = tuple(g for g in glue if g.name == rr.name and g.rtype == rr.rtype)
                outcomes[rr.rtype] = Records(same)
    return names


def zone_cuts(zone: Zone) -> tuple[str, ...]:
    """The zone cuts of a zone: the owners of its static NS records below the apex."""
    return tuple(dict.fromkeys(r.name for r in zone.records if r.rtype == "NS" and r.name != zone.origin))


def _mark_cuts(zone: Zone, names: dict[str, NameData], node: Callable[[str, Zone], NameData]) -> None:
    """Give the names at and below each zone cut of `zone` the cut's referral (answer/view.py
    `Referral`), making the empty non-terminals between the cut and its glue names."""
    cuts = zone_cuts(zone)
    if not cuts:
        return
    ttl = negative_soa_ttl(zone)
    for cut in cuts:
        at = names[cut]
        ns = at.outcomes["NS"]
        ds = at.outcomes.get("DS")
        assert isinstance(ns, Records)
        below = "." + cut
        targets = dict.fromkeys(rr.rdata.lower() for rr in ns.answer)
        glue = tuple(
            rr
            for target in targets
            if target == cut or target.endswith(below)
            for rtype in ("A", "AAAA")
            if isinstance(found := names[target].outcomes.get(rtype) if target in names else None, Records)
            for rr in found.answer
        )
        referral = Referral(cut, ns.answer, glue, ds.answer if isinstance(ds, Records) else (), ttl)
        at.referral = referral
        for name in [n for n in names if n.endswith(below)]:
            names[name].referral = referral
            for parent in _ancestors(name, cut):
                node(parent, zone).referral = referral


def _on_base(name: str, zone: Zone, base: Mapping[str, NameData]) -> NameData:
    """A new node for `name`, holding what the base names already have there (static records)."""
    found = base.get(name)
    if found is None:
        return NameData(name, zone)
    return NameData(name, zone, dict(found.outcomes), found.service)


def service_names(
    service: Service,
    config: Config,
    snapshot: Snapshot,
    env: PolicyEnv,
    base: Mapping[str, NameData],
    taken: Container[str],
) -> dict[str, NameData]:
    """The names one service owns under `snapshot`: its own, its locality names (leaving out those in
    `taken`, the other names of the view) and its localtargets name."""
    zone = next(z for z in config.zones if z.origin == service.zone)
    top = _on_base(service.name, zone, base)
    endpoints = merged_endpoints(service, snapshot, peer_site_names(config))
    if service.ttl_range is not None:  # answer/ttl.py: the TTL of this build's answers
        holds = snapshot.holds.get(service.name, ())
        bound = change_bound(service, endpoints, snapshot, snapshot.statuses, holds, snapshot.taken_at)
        service = replace(service, ttl=dynamic_ttl(service, bound))
    top.service = service
    for rtype in SERVICE_TYPES:
        top.outcomes[rtype] = service_outcome(service, rtype, endpoints, snapshot, env)
    if service.https is not None:
        top.outcomes["HTTPS"] = https_outcome(service, top.outcomes["A"], top.outcomes["AAAA"])
    out = {service.name: top}
    if service.srv is not None and service.srv.name not in taken:
        owner = out.setdefault(service.srv.name, _on_base(service.srv.name, zone, base))
        owner.outcomes["SRV"] = srv_outcome(service, endpoints, snapshot)
    out.update(locality_names(service, top, taken, config, snapshot, env))
    for name, owner_zone, rtype, rdatas in localtargets_rrsets(config, service, zone, snapshot):
        data = out.get(name)
        if data is None:
            data = out[name] = _on_base(name, owner_zone, base)
        data.outcomes[rtype] = Records(tuple(Rr(name, rtype, ttl, rd) for ttl, rd in rdatas))
    return out


def heartbeat_names(config: Config, snapshot: Snapshot, base: Mapping[str, NameData]) -> dict[str, NameData]:
    """The heartbeat TXT of this site in every zone."""
    out: dict[str, NameData] = {}
    for name, zone, rtype, rdatas in heartbeat_rrsets(config, snapshot):
        data = out[name] = _on_base(name, zone, base)
        data.outcomes[rtype] = Records(tuple(Rr(name, rtype, ttl, rd) for ttl, rd in rdatas))
    return out


def _ancestors(name: str, origin: str) -> list[str]:
    """Names strictly between `name` and `origin` (the empty non-terminal candidates)."""
    out: list[str] = []
    current = name
    while True:
        dot = current.find(".")
        current = current[dot + 1 :]
        if len(current) <= len(origin):
            return out
        out.append(current)


def empty_non_terminals(names: Mapping[str, NameData]) -> dict[str, NameData]:
    """A node without data for every name that only has names below it."""
    out: dict[str, NameData] = {}
    for data in names.values():
        for parent in _ancestors(data.name, data.zone.origin):
            if parent not in names and parent not in out:
                out[parent] = NameData(parent, data.zone)
    return out


@dataclass(frozen=True, slots=True)
class ServiceDiff:
    """How the services of one config differ from those of the config before (by name)."""

    changed: frozenset[str]  # in both, but not equal
    added: frozenset[str]
    removed: frozenset[str]
    new: Mapping[str, Service]  # the new config's services by name

    @property
    def touched(self) -> frozenset[str]:
        """The services a build must look at: changed and added."""
        return self.changed | self.added


def diff_services(old: Mapping[str, Service], new: Mapping[str, Service]) -> ServiceDiff:
    """Which services differ between two configs' services (by name). A services file reuses the
    same objects for unchanged lines (config/service_file.py), which makes this a pass of identity
    checks; otherwise services are compared by value."""
    missing = _MISSING
    differ = [name for name, service in new.items() if old.get(name, missing) is not service]
    added = frozenset(name for name in differ if name not in old)
    changed = frozenset(name for name in differ if name not in added and old[name] != new[name])
    same_names = len(new) - len(added) == len(old)  # every old name is still there
    removed = frozenset() if same_names else frozenset(old.keys() - new.keys())
    return ServiceDiff(changed, added, removed, new)


_MISSING = Service(name="", zone="", label="")


def same_but_services(old: Config, new: Config) -> bool:
    """Whether two configs differ at most in their services."""
    return replace(old, services=()) == replace(new, services=())


def service_inputs(service: Service, snapshot: Snapshot) -> tuple[object, ...]:
    """Everything of a snapshot that a service's names depend on: the verdict and admin override of
    each configured endpoint, the endpoints peers publish for it (with theirs) and the delays holding
    its answers. (A health-driven TTL is computed whenever the service is built, not a reason to.)"""
    learned = snapshot.peer_endpoints.get(service.name, ())
    holds = snapshot.holds.get(service.name) if snapshot.holds else None
    if uses_load(service):  # load feedback: what the answers use of each endpoint's load state
        loads = snapshot.loads
        states = tuple(loads.get(e.key) for e in service.endpoints)
        states += tuple(loads.get(e.endpoint_key) for e in learned)  # as their sites publish them
        figures = tuple(None if s is None else (s.used, s.out) for s in states)
        health, admin = snapshot.health, snapshot.admin
        keys = [e.key for e in service.endpoints] + [e.key for e in learned]
        return (
            tuple(health.get(k) for k in keys),
            tuple(admin.get(k) for k in keys),
            learned,
            holds,
            figures,
        )
    if snapshot.plain and holds is None:  # no verdict, no override: one value per service size
        return _plain_inputs(len(service.endpoints) + len(learned), learned)
    health, admin = snapshot.health, snapshot.admin
    keys = [e.key for e in service.endpoints] + [e.key for e in learned]
    return (tuple(health.get(k) for k in keys), tuple(admin.get(k) for k in keys), learned, holds)


def _plain_inputs(count: int, learned: tuple[Endpoint, ...]) -> tuple[object, ...]:
    nones = _NONES.get(count)
    if nones is None:
        nones = _NONES.setdefault(count, (None,) * count)
    return (nones, nones, learned, None)


_NONES: dict[int, tuple[None, ...]] = {}


def deferrable(service: Service, base: Container[str]) -> bool:
    """Whether a service's names may be built after the first answer (`Deferred`): it owns no name but
    its own and its localtargets name (no locality names, no SRV name), none of its answers is a CNAME
    (no hostname endpoint or fallback, so no chain starts at its names) and its name holds nothing else
    (no static records, not a wildcard)."""
    if service.locality_names or service.srv is not None or service.https is not None or service.fallback:
        return False
    if service.name.startswith("*.") or service.name in base:
        return False
    return _HOSTNAME not in [endpoint.kind for endpoint in service.endpoints]


_HOSTNAME = EndpointKind.HOSTNAME


@dataclass(frozen=True, slots=True)
class Deferred:
    """The services a large view has not built yet (`ViewBuilder(eager_services=...)`), and what
    building one of them needs. The view answers a name such a service owns by building that service's
    names when the name is first asked for (kept in `memo`, shared by the views that defer the same
    services under the same inputs); the builder's `fill` builds them into the view in steps.

    A deferred service is `deferrable`: it owns its name and its localtargets name only, and no CNAME
    chain starts or ends at them (a service some CNAME points at is built first), so nothing else in
    the view depends on them but the empty non-terminals above them, which the view holds already.
    `snapshot` is the one the services were deferred under: every service still deferred has the same
    inputs (`service_inputs`) in it as in the view's own snapshot, or it would have been built."""

    services: Mapping[str, Service]  # a dict at first (made fast), a CowMap once some are built
    config: Config
    snapshot: Snapshot
    env: PolicyEnv
    base: Mapping[str, NameData]
    memo: dict[str, dict[str, NameData]] = field(default_factory=dict)

    def owner(self, name: str) -> Service | None:
        """The deferred service whose name or localtargets name `name` is."""
        service = self.services.get(name)
        if service is None and name.startswith(LOCALTARGETS_PREFIX):
            service = self.services.get(name[_PREFIX_LENGTH:])
        return service

    def node(self, name: str) -> NameData | None:
        service = self.owner(name)
        if service is None:
            return None
        made = self.memo.get(service.name)
        if made is None:
            made = service_names(service, self.config, self.snapshot, self.env, self.base, ())
            self.memo[service.name] = made
        return made.get(name)

    def without(self, names: Collection[str]) -> Deferred | None:
        """These deferred services less `names` (built since); None when none is left."""
        services = _cow_services(self.services).evolve((), names)
        if not services:
            return None
        return replace(self, services=services)


_PREFIX_LENGTH = len(LOCALTARGETS_PREFIX)


def build_view(config: Config, snapshot: Snapshot, env: PolicyEnv) -> View:
    """Decide every answer for this config and snapshot."""
    return ViewBuilder().build(config, snapshot, env)[0]


@dataclass(frozen=True, slots=True)
class Change:
    """What a build changed against the previous view of the same builder. `full`: everything (the
    first build, or a new config or policy environment); else the names whose node is new or different
    (`changed`), the names that are gone (`removed`) and the services that were rebuilt (`services`)."""

    full: bool
    changed: frozenset[str] = frozenset()
    removed: frozenset[str] = frozenset()
    services: frozenset[str] = frozenset()


class ViewBuilder:
    """Builds views for a sequence of snapshots, rebuilding only the services whose inputs changed.

    Not thread-safe; one per process (the control plane, or a worker). Views it returned earlier are
    never modified: every build makes a new names map (a CowMap) that shares the unchanged nodes.
    `touched` (the services a change may have affected, from the health book) limits the services
    that are looked at; None looks at every service."""

    def __init__(self, eager_services: int | None = None, defer_over: int = 0) -> None:
        # A full build of an unsigned config with more than `defer_over` services builds at most
        # `eager_services` deferrable services (None: every service) and defers the rest (`Deferred`).
        self._eager_services = eager_services
        self._defer_over = defer_over
        self._deferred: Deferred | None = None
        self._deferred_ents: dict[str, Zone] = {}  # the empty non-terminals above deferred names only
        self._fill_order: list[str] = []  # deferred services, the next one last
        self._fill_sorted = False  # whether `_fill_order` is in shard order
        self._force: set[str] = set()  # services the next build must build (deferred, now CNAME targets)
        self.filled: tuple[str, ...] = ()  # the services the last `fill` built
        self._config: Config | None = None
        self._env: PolicyEnv | None = None
        self._view: View | None = None
        self._base: dict[str, NameData] = {}
        self._inputs: dict[str, tuple[object, ...]] = {}  # service name -> service_inputs when built
        self._owned: dict[str, tuple[str, ...]] = {}  # service name -> the names it owns
        self._order: dict[str, int] = {}  # service name -> its position in the config
        self._services: dict[str, Service] = {}
        self._ents: frozenset[str] = frozenset()
        self._beat = -1.0
        self._chains = ChainIndex()
        self._dropped: set[str] = set()  # names of services a rebase removed, gone at the next build

    @property
    def deferred(self) -> int:
        """How many services the last view defers (0: it holds every name)."""
        return len(self._deferred.services) if self._deferred is not None else 0

    def service_owned(self) -> Iterator[str]:
        """The names the last build's services own (their own, locality, SRV and localtargets names),
        service by service in config order."""
        owned = self._owned
        for service in self._services:
            yield from owned.get(service, ())

    def rebase(self, config: Config, env: PolicyEnv, services: ServiceDiff) -> bool:
        """Take `config` as the next build's config without a full build, when it differs from the
        last one only in the services of `services` (and `env` is the last build's): the next build must
        then be given `touched` covering the changed and added services. False (nothing done) when a
        full build is needed."""
        if self._view is None or self._config is None or env is not self._env:
            return False
        if not same_but_services(self._config, config):
            return False
        for name in services.removed:
            self._dropped.update(self._owned.pop(name, ()))
            self._inputs.pop(name, None)
        for name in services.changed:
            self._inputs.pop(name, None)  # rebuilt by the next build
        if self._deferred is not None:
            self._rebase_deferred(self._deferred, services)
        if services.added or services.removed:
            self._order = {s.name: i for i, s in enumerate(config.services)}
            self._services = {s.name: s for s in config.services}
        else:
            for name in services.changed:
                self._services[name] = services.new[name]
        self._config = config
        return True

    def _rebase_deferred(self, deferred: Deferred, services: ServiceDiff) -> None:
        """Deferred services that a reload removed are gone; those it changed stay deferred with their
        new value when they still may be (else the next build builds them), and so does a deferred
        service that a changed or added service now points a CNAME at."""
        new = services.new
        gone = [name for name in services.removed if name in deferred.services]
        swapped: list[tuple[str, Service]] = []
        for name in services.changed:
            if name in deferred.services:
                if deferrable(new[name], self._base):
                    swapped.append((name, new[name]))
                else:
                    gone.append(name)
        targets = _cname_targets([new[name] for name in services.touched if name in new], {})
        for name in targets:
            if name in deferred.services and name not in gone:
                gone.append(name)
                self._force.add(name)
        if not gone and not swapped:
            return
        kept = _cow_services(deferred.services).evolve(swapped, gone)
        stale = {name for name, _ in swapped}
        memo = {k: v for k, v in deferred.memo.items() if k in kept and k not in stale}
        self._deferred = replace(deferred, services=kept, memo=memo) if kept else None
        if self._deferred_ents and any(name in services.removed for name in gone):
            self._deferred_ents = _ents_above(kept.values(), self._view_zones(), kept.__contains__)

    def _made(
        self, service: Service, config: Config, snapshot: Snapshot, env: PolicyEnv, taken: Container[str]
    ) -> dict[str, NameData]:
        """The names `service` owns under `snapshot` (`service_names`), recorded as its own with the
        inputs they were built from."""
        made = service_names(service, config, snapshot, env, self._base, taken)
        self._owned[service.name] = tuple(made)
        self._inputs[service.name] = service_inputs(service, snapshot)
        return made

    def _ents_now(self, names: _Overlay) -> dict[str, NameData]:
        """The empty non-terminals above the names in `names` and above the deferred services'."""
        current = names.merged()
        ents = empty_non_terminals(current)
        for name, zone in self._deferred_ents.items():
            if name not in current and name not in ents:
                ents[name] = NameData(name, zone)
        return ents

    def _view_zones(self) -> Mapping[str, Zone]:
        return self._view.zones if self._view is not None else {}

    def fill(self, most: int, first: Iterable[str] = ()) -> frozenset[str]:
        """Build `most` deferred services (fewer when fewer are left) into the view: the names made
        (their nodes are in `view`), none when nothing is deferred. The view's answers do not change,
        only where they come from. `first`: names clients asked for; the deferred services owning them
        (their name or localtargets name) are built before the others, within `most`."""
        view, deferred, config, env = self._view, self._deferred, self._config, self._env
        self.filled = ()
        if view is None or deferred is None or config is None or env is None:
            return frozenset()
        snapshot = view.snapshot
        order, services = self._fill_order, deferred.services
        if not self._fill_sorted:
            # By the CowMap shard of their names: a step then copies few shards of the view's names
            # and of the deferred services (in config order, a step of 50 would copy 50 of each).
            order.sort(key=lambda name: hash(name) & SHARD_MASK, reverse=True)
            self._fill_sorted = True
        built: list[str] = []
        made: dict[str, NameData] = {}
        asked = {service.name: service for name in first if (service := deferred.owner(name)) is not None}
        for name, service in asked.items():  # still in `order`: skipped there once built
            if len(built) == most:
                break
            made.update(self._made(service, config, snapshot, env, ()))
            built.append(name)
        done = set(built)
        while order and len(built) != most:
            name = order.pop()
            service = services.get(name)
            if service is None or name in done:  # built by a build since, removed, or just now
                continue
            made.update(self._made(service, config, snapshot, env, ()))
            built.append(name)
        self.filled = tuple(built)
        self._deferred = deferred.without(built) if order else None
        if not self._ents.isdisjoint(made):  # a deferred name some name below had made an ENT
            self._ents = self._ents - made.keys()
        merged = _cow_names(view.names).evolve(made)
        sources = set(made) | self._chains.affected(made)
        replaced = self._chains.refollow_map(merged, sources, view.find_zone)
        if replaced:
            merged = merged.evolve(replaced)
        self._view = View(view.zones, merged, config, snapshot, self._deferred)
        return frozenset(made)

    @property
    def view(self) -> View | None:
        """The last view built or filled."""
        return self._view

    def build(
        self, config: Config, snapshot: Snapshot, env: PolicyEnv, touched: Collection[str] | None = None
    ) -> tuple[View, Change]:
        """The view of `config` under `snapshot`, and what changed against the previous build."""
        view = self._view
        if view is None or config is not self._config or env is not self._env:
            return self._full(config, snapshot, env), Change(True)
        if self._force:
            touched = None if touched is None else {*touched, *self._force}
            self._force = set()
        if touched is None:
            candidates: Iterable[Service] = config.services
        else:
            found = (self._services.get(name) for name in touched)
            candidates = sorted((s for s in found if s is not None), key=lambda s: self._order[s.name])
        deferred = self._deferred
        inputs = self._inputs
        if deferred is None:
            dirty = [s for s in candidates if service_inputs(s, snapshot) != inputs.get(s.name)]
        else:  # a deferred service is built when its inputs differ from those it was deferred under
            dirty = [
                s
                for s in candidates
                if service_inputs(s, snapshot)
                != (
                    inputs.get(s.name)
                    if s.name in inputs or s.name not in deferred.services
                    else service_inputs(s, deferred.snapshot)
                )
            ]
            built = [s.name for s in dirty if s.name in deferred.services]
            if built:
                self._deferred = deferred.without(built)
        names = _Overlay(view.names)
        for name in self._ents:  # out while services are rebuilt: a new name may take an old ENT's place
            del names[name]
        changed: set[str] = set()
        gone: set[str] = set()
        reshaped = bool(self._dropped)
        for name in self._dropped:  # the names of services a rebase removed
            if name in names:
                del names[name]
            gone.add(name)
        self._dropped = set()
        if snapshot.evaluated_at != self._beat:
            beat = heartbeat_names(config, snapshot, self._base)
            names.update(beat)
            changed.update(beat)
            self._beat = snapshot.evaluated_at
        deferred_names = deferred.services if deferred is not None else {}
        built_too: set[str] = set()  # deferred services built because a name was made below theirs

        def was_deferred(name: str) -> bool:
            return name in deferred_names

        for service in dirty:
            owned = self._owned.get(service.name, ())
            for name in owned:
                del names[name]
            made = self._made(service, config, snapshot, env, names)
            names.update(made)
            old, now = frozenset(owned), frozenset(made)
            changed.update(now)
            gone.update(old - now)
            # A deferred service built now (it owned nothing): its names lie below names or empty
            # non-terminals the view holds already (`Deferred`), so they reshape nothing.
            reshaped |= old != now and (bool(old) or not was_deferred(service.name))
        for name in gone - changed:
            found_base = self._base.get(name)
            if found_base is not None:  # the service no longer owns a name that holds static records
                names[name] = found_base
                changed.add(name)
        if reshaped:
            ents = self._ents_now(names)
            clash = _deferred_owners(ents, self._deferred.services if self._deferred is not None else {})
            if clash:  # a name made below a deferred name: that service is built now
                assert self._deferred is not None
                for name in clash:
                    made = self._made(self._services[name], config, snapshot, env, names)
                    names.update(made)
                    changed.update(made)
                self._deferred = self._deferred.without(clash)
                built_too.update(clash)
                ents = self._ents_now(names)
            changed.update(ents.keys() - self._ents)
            gone.update(self._ents - ents.keys())
            self._ents = frozenset(ents)
            names.update(ents)
        else:
            names.update((name, view.names[name]) for name in self._ents)
        merged = names.commit()
        removed = frozenset(n for n in gone if n not in merged)
        # CNAME chains: follow again those of the changed names and of every name whose chain passes
        # through a changed or removed name (answer/chain.py).
        sources = {n for n in changed if n in merged} | self._chains.affected(changed | gone)
        replaced = self._chains.refollow_map(merged, sources, view.find_zone)
        if replaced:
            changed.update(replaced)
            merged = merged.evolve(replaced, ())
        self._view = View(view.zones, merged, config, snapshot, self._deferred)
        rebuilt = frozenset(s.name for s in dirty) | built_too
        return self._view, Change(False, frozenset(changed), removed, rebuilt)

    def _full(self, config: Config, snapshot: Snapshot, env: PolicyEnv) -> View:
        self._config, self._env = config, env
        self._dropped = set()
        self._force = set()
        self._base = base_names(config)
        names = dict(self._base)
        self._inputs.clear()
        self._owned.clear()
        self._order = {s.name: i for i, s in enumerate(config.services)}
        self._services = {s.name: s for s in config.services}
        zones = {z.origin: z for z in config.zones}
        later = self._to_defer(config)
        skip = frozenset(s.name for s in later)
        # Every service's own name is taken before any locality name is made.
        taken = _Taken(names, self._services)
        for service in config.services:
            if service.name not in skip:
                names.update(self._made(service, config, snapshot, env, taken))
        names.update(heartbeat_names(config, snapshot, self._base))
        self._beat = snapshot.evaluated_at
        ents = empty_non_terminals(names)
        clash = _deferred_owners(ents, skip)
        if clash:  # a deferred name with names below it: built now, then it is no empty non-terminal
            later = [s for s in later if s.name not in clash]
            skip = skip - clash
            for name in clash:
                names.update(self._made(self._services[name], config, snapshot, env, taken))
            ents = empty_non_terminals(names)
        self._deferred_ents = _ents_above(later, zones, lambda n: n in names or n in skip or n in ents)
        for name, zone in self._deferred_ents.items():
            ents[name] = NameData(name, zone)
        names.update(ents)
        self._ents = frozenset(ents)
        self._chains = follow_all(names, lambda name: _find_zone(zones, name))
        self._deferred = None
        self._fill_order = []
        if later:
            self._deferred = Deferred({s.name: s for s in later}, config, snapshot, env, self._base)
            self._fill_order = [s.name for s in later]
            self._fill_sorted = False
        self._view = View(zones, CowMap(names), config, snapshot, self._deferred)
        return self._view

    def _to_defer(self, config: Config) -> list[Service]:
        """The services a full build of `config` leaves for later (none for a small or a signed config:
        a signed zone's NSEC chain needs every name)."""
        services = config.services
        if (
            self._eager_services is None
            or len(services) <= self._defer_over
            or any(z.dnssec is not None for z in config.zones)
            or any(r.rtype == "DNAME" for z in config.zones for r in z.records)  # targets anywhere
        ):
            return []
        base = self._base
        candidates: list[Service] = []
        others: list[Service] = []
        for service in services:
            (candidates if deferrable(service, base) else others).append(service)
        if len(candidates) <= self._eager_services:
            return []
        targets = _cname_targets(others, base)
        return [s for s in candidates[self._eager_services :] if s.name not in targets]


def _cname_targets(services: Iterable[Service], base: Mapping[str, NameData]) -> set[str]:
    """The names a CNAME of `services` (hostname endpoints, hostname fallbacks) or of the static
    records in `base` may point at: a service there is never deferred, so every chain finds it built."""
    out: set[str] = set()
    for service in services:
        out.update(e.address.lower() for e in service.endpoints if e.kind is EndpointKind.HOSTNAME)
        out.update(target.lower() for target in service.fallback)
    for data in base.values():
        for outcome in data.outcomes.values():
            if isinstance(outcome, Records):
                out.update(rr.rdata.lower() for rr in outcome.answer if rr.rtype == "CNAME")
    return out


def _deferred_owners(ents: Iterable[str], deferred: Container[str]) -> set[str]:
    """The deferred services (names in `deferred`) that own a name of `ents`, their own or their
    localtargets name."""
    out: set[str] = set()
    for name in ents:
        if name in deferred:
            out.add(name)
        elif name.startswith(LOCALTARGETS_PREFIX) and name[_PREFIX_LENGTH:] in deferred:
            out.add(name[_PREFIX_LENGTH:])
    return out


def _ents_above(
    services: Iterable[Service], zones: Mapping[str, Zone], exists: Callable[[str], bool]
) -> dict[str, Zone]:
    """The empty non-terminals above deferred services' names (a localtargets name has the same
    ancestors as its service's): the names between each name and its zone's apex that do not exist."""
    out: dict[str, Zone] = {}
    for service in services:
        if "." not in service.label:  # right below the apex: nothing between
            continue
        for parent in _ancestors(service.name, service.zone):
            if parent not in out and not exists(parent):
                out[parent] = zones[service.zone]
    return out


def _find_zone(zones: Mapping[str, Zone], qname: str) -> Zone | None:
    """The most specific zone of `zones` that contains `qname` (as View.find_zone)."""
    name = qname
    while True:
        zone = zones.get(name)
        if zone is not None:
            return zone
        if name == ".":
            return None
        name = name[name.find(".") + 1 :] or "."


def _cow_names(names: Mapping[str, NameData]) -> CowMap[str, NameData]:
    return names if isinstance(names, CowMap) else CowMap(names)


def _cow_services(services: Mapping[str, Service]) -> CowMap[str, Service]:
    return services if isinstance(services, CowMap) else CowMap(services)


class _Overlay(Container[str]):
    """Changes to a CowMap of names, collected until `commit` makes the new map."""

    def __init__(self, base: Mapping[str, NameData]) -> None:
        self._base = _cow_names(base)
        self._set: dict[str, NameData] = {}
        self._deleted: set[str] = set()

    def __contains__(self, name: object) -> bool:
        if name in self._set:
            return True
        return name not in self._deleted and name in self._base

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._set.pop(name, None)
        self._deleted.add(name)

    def __setitem__(self, name: str, data: NameData) -> None:
        self._set[name] = data
        self._deleted.discard(name)

    def update(self, items: Mapping[str, NameData] | Iterable[tuple[str, NameData]]) -> None:
        for name, data in items.items() if isinstance(items, Mapping) else items:
            self[name] = data

    def merged(self) -> dict[str, NameData]:
        """Every name now, as a plain dict (costs a pass over all names)."""
        out = {n: d for n, d in self._base.items() if n not in self._deleted}
        out.update(self._set)
        return out

    def commit(self) -> CowMap[str, NameData]:
        return self._base.evolve(self._set, self._deleted - self._set.keys())


class _Taken(Container[str]):
    """The names in `names` or in `extra`."""

    def __init__(self, names: Mapping[str, NameData], extra: Iterable[str]) -> None:
        self._names = names
        self._extra = frozenset(extra)

    def __contains__(self, name: object) -> bool:
        return name in self._names or name in self._extra
