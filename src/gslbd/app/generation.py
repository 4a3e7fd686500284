"""One generation: everything the data plane and the operators see at one moment, built in one place.

    resolve(config, rng) -> Resolved          everything of a config that can fail (the GeoIP database
                                              opened and looked up once, Redis URL, probe targets,
                                              NOTIFY sources): raises ConfigError with located problems
    GenerationBuilder.first(resolved, snapshot)          the first generation
    GenerationBuilder.next(previous, change) -> Generation   a change is `NewConfig(resolved)` or
                                              `NewSnapshot(snapshot, touched)` (verdicts, admin state,
                                              peer view, heartbeat: all enter through the health book)

A `Generation` is frozen and holds the config, the resolved environment, the snapshot, the view, the
answer table, the endpoints that count per service (`counts`: what the gauges and the API show, from
the same rule the answers use), this site's publication and the zones to NOTIFY because it changed.
The composition root commits a generation with one assignment and hands it to every consumer; nothing
downstream derives these rules again. A build that raises leaves the builder as it was, so the previous
generation keeps serving: a failed reload loses nothing.

Builds are incremental: a snapshot change revisits only the services the book says it touched, shares
every other node of the view and the table (copy-on-write maps), and recounts only those services.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from collections.abc import Collection, Container, Mapping
from dataclasses import dataclass, field, replace

from gslbd.answer import ServiceDiff, View, diff_services, same_but_services
from gslbd.answer.exchange_names import (
    changed_zones,
    counted_endpoints,
    peer_site_names,
    published,
    republished,
)
from gslbd.app.reconcile import probe_targets, probed_endpoints
from gslbd.app.serials import stamp_serials
from gslbd.app.usable import resolved_env
from gslbd.cow import CowMap
from gslbd.exchange.notify import notify_sources
from gslbd.gcpause import collector_paused, keep_long_lived
from gslbd.model.config import Config
from gslbd.model.service import Endpoint, EndpointKey, Service
from gslbd.policy import PolicyEnv
from gslbd.server import build as answer_build
from gslbd.server.build import AnswerBuilder
from gslbd.state.snapshot import Snapshot
from gslbd.wire import AnswerTable

Publication = dict[str, dict[str, tuple[str, ...]]]


_SERIALS = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Resolved:
    """A validated config with everything resolved that can still fail, done before any commit."""

    config: Config
    env: PolicyEnv
    services: Mapping[str, Service]  # by name
    probed: Mapping[EndpointKey, Endpoint]  # the endpoints this instance probes
    # One probe per target: the probed endpoint -> every endpoint that shares its probe and verdict.
    targets: Mapping[EndpointKey, tuple[EndpointKey, ...]]
    peer_sites: frozenset[str]
    notify_sources: Mapping[str, tuple[str, ...]]  # peer nameserver address -> its peer sites
    geoip_stamp: tuple[int, ...] | None = None  # the GeoIP database file as opened (see `_stamp`)
    serial: int = field(default_factory=lambda: next(_SERIALS))
    # How the services differ from those of the Resolved with serial `diff_base` (resolve(previous=)).
    diff: ServiceDiff | None = None
    diff_base: int = 0


def _stamp(config: Config) -> tuple[int, ...] | None:
    """The GeoIP database file's identity and version (inode, size, mtime), or None without one."""
    path = config.topology.geoip_database
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return (-1,)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def resolve(
    config: Config, rng: random.Random, previous: Resolved | None = None, wall: float | None = None
) -> Resolved:
    """Resolve `config`: open its GeoIP database (and look one address up), parse its Redis URL, group
    its probes by target. ConfigError with located problems when something cannot be used.

    With `previous` (the running config's): when the new config differs only in its services and the
    GeoIP database file is the one opened before, its environment is reused as it is, which lets the
    generation builder rebuild only the services that changed. Zones without a configured
    `soa.serial` get theirs here (app/serials.py; `wall`: Unix seconds, the clock when None)."""
    now = time.time() if wall is None else wall
    config = stamp_serials(config, previous.config if previous is not None else None, now)
    stamp = _stamp(config)
    if previous is not None and previous.geoip_stamp == stamp and same_but_services(previous.config, config):
        return _re_resolved(previous, config)
    return _resolved(config, resolved_env(config, rng), stamp)


def _re_resolved(previous: Resolved, config: Config) -> Resolved:
    """`config`, which differs from `previous.config` only in services, resolved from `previous`: the
    probes are grouped again (in config order, as `resolve` does) only when an endpoint with a check
    came, went or changed."""
    services, diff = _services_diff(previous, config)
    before = [previous.services[name] for name in diff.changed | diff.removed]
    after = [services[name] for name in diff.touched]
    gone, came = probed_endpoints(previous.config, before), probed_endpoints(config, after)
    probed = probed_endpoints(config) if gone or came else previous.probed
    return replace(
        previous,
        config=config,
        services=services,
        probed=probed,
        targets=probe_targets(probed.values()) if gone or came else previous.targets,
        serial=next(_SERIALS),
        diff=diff,
        diff_base=previous.serial,
    )


def _services_diff(previous: Resolved, config: Config) -> tuple[Mapping[str, Service], ServiceDiff]:
    """`config`'s services by name, and how they differ from `previous`'s. When the services are
    the same in number and each position holds the same service or one of the same name (a services
    file with lines edited, as config/service_file.py keeps the others' objects), the map is evolved
    from the previous one and only those positions are looked at."""
    old, new = previous.config.services, config.services
    if len(old) == len(new):
        moved = [i for i, pair in enumerate(zip(old, new, strict=True)) if pair[0] is not pair[1]]
        if all(old[i].name == new[i].name for i in moved):
            services = _cow(previous.services).evolve((new[i].name, new[i]) for i in moved)
            changed = frozenset(new[i].name for i in moved if old[i] != new[i])
            return services, ServiceDiff(changed, frozenset(), frozenset(), services)
    services = CowMap((s.name, s) for s in new)
    return services, diff_services(previous.services, services)


def _cow(services: Mapping[str, Service]) -> CowMap[str, Service]:
    return services if isinstance(services, CowMap) else CowMap(services.items())


def _resolved(config: Config, env: PolicyEnv, stamp: tuple[int, ...] | None) -> Resolved:
    probed = probed_endpoints(config)
    return Resolved(
        config=config,
        env=env,
        services=CowMap((s.name, s) for s in config.services),
        probed=probed,
        targets=probe_targets(probed.values()),
        peer_sites=peer_site_names(config),
        notify_sources=notify_sources(config),
        geoip_stamp=stamp,
    )


@dataclass(frozen=True, slots=True)
class ServiceCount:
    """What counts of one service now: endpoints answerable (`up`, the addresses in `up_addresses`)
    out of every endpoint known (configured here, or learned from peers)."""

    up: int
    known: int
    up_addresses: tuple[str, ...]  # in the order of the service's candidates (a few: a tuple is small)


def count_service(service: Service, snapshot: Snapshot, peer_sites: frozenset[str]) -> ServiceCount:
    """The one rule of what counts, shared by answers (answer/exchange_names.py), gauges and API."""
    up = counted_endpoints(service, snapshot, peer_sites)
    learned = snapshot.peer_endpoints.get(service.name, ())
    known = {e.address for e in service.endpoints} | {e.address for e in learned}
    return ServiceCount(len(up), len(known), tuple([e.address for e in up]))


@dataclass(frozen=True, slots=True)
class NewConfig:
    """A resolved config, answered under `snapshot` (the verdicts it keeps). `touched`: the services
    whose health inputs changed since the previous generation (None: any, which builds everything)."""

    resolved: Resolved
    snapshot: Snapshot
    touched: Collection[str] | None = None


@dataclass(frozen=True, slots=True)
class NewSnapshot:
    """A new snapshot; `touched`: the services whose inputs may differ (None: any)."""

    snapshot: Snapshot
    touched: Collection[str] | None = None


Change = NewConfig | NewSnapshot


@dataclass(frozen=True, slots=True)
class Generation:
    number: int
    resolved: Resolved
    snapshot: Snapshot
    view: View
    table: AnswerTable
    counts: CowMap[str, ServiceCount]
    # Services whose answers or counts may differ from the previous generation (None: all of them).
    changed: frozenset[str] | None
    publication: Publication
    notify_zones: tuple[str, ...]  # zones whose publication differs from the previous generation

    @property
    def config(self) -> Config:
        return self.resolved.config

    def count(self, name: str) -> ServiceCount | None:
        """What counts of service `name` now (None: no such service). `counts` leaves out the services
        a large view defers until they are built (answer/build.py Deferred): those are counted here."""
        found = self.counts.get(name)
        if found is not None:
            return found
        service = self.resolved.services.get(name)
        if service is None:
            return None
        return count_service(service, self.snapshot, self.resolved.peer_sites)

    @property
    def env(self) -> PolicyEnv:
        return self.resolved.env


class GenerationBuilder:
    """Builds generations for one process. Keeps the incremental answer builder's memory; a build
    that raises leaves it as it was before that build."""

    def __init__(self, eager_names: int | None = None) -> None:
        # Larger views are compiled in steps (server/build.py).
        self._eager_names = answer_build.EAGER_NAMES if eager_names is None else eager_names
        self._answers = AnswerBuilder(eager_names=self._eager_names)

    @property
    def filling(self) -> bool:
        """Whether the last table built is partial: `fill` has names to compile."""
        return self._answers.filling

    @property
    def pending(self) -> int:
        """How many names `fill` may still compile (0 when the last table is whole)."""
        return self._answers.pending

    def fill(
        self, previous: Generation, seconds: float, most: int | None = None, wanted: Collection[str] = ()
    ) -> Generation | None:
        """`previous` with more of its names compiled, for about `seconds` (the answers are the same:
        names not compiled yet are answered by the slow path); None when its table is whole or is not
        the last one this builder built. `most`: compile at most that many names. `wanted`: names
        clients asked for, compiled first (AnswerBuilder.fill)."""
        if previous.table is not self._answers.table:
            return None
        table = self._answers.fill(seconds, most, wanted)
        if table is None:
            return None
        view = self._answers.view
        assert view is not None
        counts = previous.counts
        built = self._answers.filled
        if built:  # deferred services built into the view: counted now
            services, peers = previous.resolved.services, previous.resolved.peer_sites
            snapshot = previous.snapshot
            counts = counts.evolve((name, count_service(services[name], snapshot, peers)) for name in built)
        number = previous.number + 1
        return replace(
            previous,
            number=number,
            view=view,
            table=table,
            counts=counts,
            changed=frozenset(),
            notify_zones=(),
        )

    def _fresh_answers(self) -> AnswerBuilder:
        """A new answer builder (its next build compiles everything) keeping the DNSSEC signatures."""
        return AnswerBuilder(signer=self._answers.signer, eager_names=self._eager_names)

    def resign_at(self) -> float | None:
        """DNSSEC: when the earliest cached signature is due for refresh (None: nothing is signed)."""
        return self._answers.resign_at()

    def resign_due(self) -> bool:
        """DNSSEC: whether signatures are due; if so, the next build compiles every name and re-signs."""
        return self._answers.resign_due()

    def first(self, resolved: Resolved, snapshot: Snapshot) -> Generation:
        return self._full(None, resolved, snapshot)

    def next(self, previous: Generation, change: Change) -> Generation:
        if isinstance(change, NewConfig):
            return self._new_config(previous, change)
        return self._incremental(previous, change.snapshot, change.touched)

    def _new_config(self, previous: Generation, change: NewConfig) -> Generation:
        """A new config; one that differs from the previous only in some services (and resolved to the
        same environment) rebuilds those services' names alone, as a verdict would."""
        before, resolved, snapshot = previous.resolved, change.resolved, change.snapshot
        if resolved.env is not before.env or self._answers.empty or change.touched is None:
            return self._full(previous, resolved, snapshot)
        diff = resolved.diff
        if diff is None or resolved.diff_base != before.serial:
            diff = diff_services(before.services, resolved.services)
        if not self._answers.rebase(resolved.config, resolved.env, diff):
            return self._full(previous, resolved, snapshot)
        # Services whose health changed since the previous generation are rebuilt as well.
        touched = diff.touched | (frozenset(change.touched) - diff.removed)
        try:
            view, table = self._answers.build(resolved.config, snapshot, resolved.env, touched)
        except BaseException:
            self._answers = self._fresh_answers()  # half updated: rebuild whole
            raise
        config = resolved.config
        # The snapshot may differ too (verdicts dropped for endpoints that changed): the builder looked
        # at the touched services only (and at deferred services it had to build: a name made below
        # theirs, a CNAME now pointing at them), so the counts and the publication follow those.
        touched = touched | self._answers.last_change.services
        rebuilt = [resolved.services[name] for name in touched if name in resolved.services]
        gone = [before.services[name] for name in diff.removed]
        counts = previous.counts.evolve(
            ((s.name, count_service(s, snapshot, resolved.peer_sites)) for s in rebuilt), diff.removed
        )
        publication, zones = republished(previous.publication, config, snapshot, rebuilt, gone)
        changed = touched | diff.removed
        return _generation(previous, resolved, snapshot, view, table, counts, changed, publication, zones)

    def _full(self, previous: Generation | None, resolved: Resolved, snapshot: Snapshot) -> Generation:
        # A new config compiles everything; the old builder stays intact (its DNSSEC signatures are
        # shared: an RRset signed before with the same keys is not signed again).
        answers = self._fresh_answers()
        config = resolved.config
        with collector_paused():
            view, table = answers.build(config, snapshot, resolved.env)
            # Deferred services are counted as they are built (`fill`), or when asked (`Generation.count`).
            later: Container[str] = view.deferred.services if view.deferred is not None else ()
            counts = CowMap(
                (s.name, count_service(s, snapshot, resolved.peer_sites))
                for s in config.services
                if s.name not in later
            )
            publication = published(config, snapshot)
            if len(view.names) > self._eager_names:  # millions of objects that live on (gcpause.py)
                keep_long_lived()
        self._answers = answers
        return _generation(previous, resolved, snapshot, view, table, counts, None, publication)

    def _incremental(
        self, previous: Generation, snapshot: Snapshot, touched: Collection[str] | None
    ) -> Generation:
        resolved = previous.resolved
        config = resolved.config
        if self._answers.empty:  # the last build failed: build everything
            return self._full(previous, resolved, snapshot)
        try:
            view, table = self._answers.build(config, snapshot, resolved.env, touched)
        except BaseException:
            # Its memory may be half updated: the next build is whole.
            self._answers = self._fresh_answers()
            raise
        change = self._answers.last_change
        if change.full:
            return self._full(previous, resolved, snapshot)
        services = change.services
        rebuilt = [resolved.services[name] for name in services]
        counts = previous.counts.evolve(
            (s.name, count_service(s, snapshot, resolved.peer_sites)) for s in rebuilt
        )
        voted = rebuilt
        if (snapshot.votes or snapshot.loads) and touched is not None:
            # peers.quorum: a vote that changed no answer still changes what this site publishes
            # (and so does a load figure)
            extra = [resolved.services[n] for n in touched if n not in services and n in resolved.services]
            voted = rebuilt + extra
        publication, zones = republished(previous.publication, config, snapshot, voted)
        return _generation(previous, resolved, snapshot, view, table, counts, services, publication, zones)


def _generation(
    previous: Generation | None,
    resolved: Resolved,
    snapshot: Snapshot,
    view: View,
    table: AnswerTable,
    counts: CowMap[str, ServiceCount],
    changed: frozenset[str] | None,
    publication: Publication,
    notify: list[str] | None = None,
) -> Generation:
    """The generation after `previous` (None: the first), with the zones whose publication changed
    (`notify` when the caller knows them)."""
    before = previous.publication if previous is not None else {}
    if notify is None:
        notify = changed_zones(before, publication)
    return Generation(
        number=previous.number + 1 if previous is not None else 1,
        resolved=resolved,
        snapshot=snapshot,
        view=view,
        table=table,
        counts=counts,
        changed=changed,
        publication=publication,
        notify_zones=tuple(notify),
    )
