"""The health book: what is known about every endpoint now, and the snapshots built from it.

The book is the one mutable holder of health: each probe result makes a new `EndpointStatus` that the
book records; admin overrides set at run time live here too. `snapshot()` turns both into the next
immutable `Snapshot` that the answers are built from.

Verdicts and overrides are kept in copy-on-write maps (gslbd.cow), so a snapshot costs a few shard
copies, not a copy of every endpoint, and the book remembers which services a change touched since the
last snapshot (`take_touched`): the answer builder then revisits those services only.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from types import MappingProxyType

from gslbd.cow import CowMap
from gslbd.model.load import LoadState
from gslbd.model.service import Endpoint, EndpointKey
from gslbd.state.hold import Hold
from gslbd.state.quorum import Votes, verdict
from gslbd.state.snapshot import Snapshot
from gslbd.state.status import EndpointStatus
from gslbd.types import AdminState

_UNKNOWN = EndpointStatus()
RELEASE_AFTER = 2  # results after a heal that release a frozen vote (see HealthBook.set_partitioned)
_NO_VOTES: Mapping[EndpointKey, bool] = MappingProxyType({})


class HealthBook:
    """Endpoint statuses and run-time admin overrides by endpoint key (not a value: updated in place)."""

    def __init__(self, admin: Mapping[EndpointKey, AdminState] | None = None, version: int = 0) -> None:
        self._statuses: dict[EndpointKey, EndpointStatus] = {}
        self._health: CowMap[EndpointKey, bool] = CowMap()
        self._admin: CowMap[EndpointKey, AdminState] = CowMap(admin or {})
        self._version = version
        self._peers: Mapping[str, tuple[Endpoint, ...]] = MappingProxyType({})
        self._evaluated_at = 0.0
        self._holds: Mapping[str, tuple[Hold, ...]] = MappingProxyType({})
        self._touched: set[str] | None = None  # services changed since the last take; None: all
        # peers.quorum (state/quorum.py): the votes K, this site, the owner site of every voted
        # endpoint (by service), the fresh peers' votes, and the health answered (raw verdicts with
        # the quorum's applied), kept up to date for the services in `_undecided` (None: all)
        self._votes: int | None = None
        self._site = ""
        self._owners: dict[str, dict[EndpointKey, str]] = {}
        self._peer_votes: Votes = MappingProxyType({})
        self._answering: CowMap[EndpointKey, bool] = CowMap()
        self._undecided: set[str] | None = None
        self._partitioned = False
        # A partitioned site publishes the agreed verdicts of remote endpoints as its votes (its own
        # probes of them fail with the partition); after the heal each stays until this site's probes
        # confirm it or RELEASE_AFTER results have come (the first may have been under way across it)
        self._frozen: dict[EndpointKey, bool] = {}
        self._since_heal: dict[EndpointKey, int] = {}
        self._loads: CowMap[EndpointKey, LoadState] = CowMap()  # load feedback (policy/load.py)
        # the figures of endpoints learned from peer sites (their site publishes them), in _loads too
        self._peer_loads: Mapping[EndpointKey, LoadState] = MappingProxyType({})

    @property
    def version(self) -> int:
        """The version of the last snapshot built."""
        return self._version

    def status(self, key: EndpointKey) -> EndpointStatus:
        """The status of an endpoint; an empty one (no verdict) when nothing was recorded."""
        return self._statuses.get(key, _UNKNOWN)

    def known(self, key: EndpointKey) -> EndpointStatus | None:
        """The recorded status of an endpoint, or None when it was never probed."""
        return self._statuses.get(key)

    def statuses(self) -> Mapping[EndpointKey, EndpointStatus]:
        return MappingProxyType(self._statuses)

    def record(self, key: EndpointKey, status: EndpointStatus) -> bool:
        """Keep `status` for `key`; True when its verdict (`healthy`) differs from the previous one."""
        before = self._statuses.get(key, _UNKNOWN).healthy
        self._statuses[key] = status
        if key in self._frozen and not self._partitioned:
            self._release(key, status.healthy)
        if status.healthy == before:
            return False
        if status.healthy is None:
            self._health = self._health.evolve(removals=(key,))
        else:
            self._health = self._health.evolve(((key, status.healthy),))
        self._touch(key[0])
        return True

    def record_check(self, key: EndpointKey, status: EndpointStatus) -> None:
        """Keep the status of one check of an endpoint with several (a unit key, Endpoint.key): it is
        not a verdict the answers read; `record` keeps the endpoint's combined one (health/combine.py)."""
        self._statuses[key] = status

    def _touch(self, service: str) -> None:
        if self._touched is not None:
            self._touched.add(service)
        if self._undecided is not None:
            self._undecided.add(service)

    # -- quorum ------------------------------------------------------------------------------------

    def configure_quorum(self, votes: int | None, site: str, owners: Mapping[EndpointKey, str]) -> None:
        """`peers.quorum.votes` (None: off), this site's name, and the owner site of every endpoint
        voted on (every probed endpoint with a check). Every service is decided again when any of them
        changed (a reload or an overlay change that keeps them rebuilds nothing for it)."""
        by_service: dict[str, dict[EndpointKey, str]] = {}
        for key, owner in owners.items():
            by_service.setdefault(key[0], {})[key] = owner
        if (votes, site, by_service) == (self._votes, self._site, self._owners):
            return
        self._votes, self._site = votes, site
        self._owners = by_service
        voted = {k for owners in by_service.values() for k, owner in owners.items() if owner != site}
        self._frozen = {k: v for k, v in self._frozen.items() if k in voted}
        self._since_heal = {k: n for k, n in self._since_heal.items() if k in voted}
        self._undecided = None
        self._touched = None

    @property
    def quorum(self) -> int | None:
        return self._votes

    def set_peer_votes(self, votes: Votes) -> None:
        """The votes of the fresh peers (site -> endpoint -> up). Ignored while partitioned: the
        votes heard before the partition stay (fail static)."""
        if self._partitioned:
            return
        before = self._peer_votes
        for site in before.keys() | votes.keys():
            old, new = before.get(site, {}), votes.get(site, {})
            if old == new:
                continue
            for key in old.keys() | new.keys():
                if old.get(key) != new.get(key):
                    self._touch(key[0])
        self._peer_votes = MappingProxyType({site: dict(v) for site, v in votes.items()})

    @property
    def own_votes(self) -> CowMap[EndpointKey, bool]:
        """This site's votes, what it publishes: its raw verdicts, except the remote endpoints' frozen by
        a partition (their agreed verdict at its start, until released after the heal)."""
        if not self._frozen:
            return self._health
        return self._health.evolve(self._frozen.items())

    def _release(self, key: EndpointKey, healthy: bool | None) -> None:
        """One more result for `key` since the heal: its frozen vote goes once this site's probes
        agree with it or after RELEASE_AFTER results."""
        seen = self._since_heal.get(key, 0) + 1
        if healthy is not self._frozen[key] and seen < RELEASE_AFTER:
            self._since_heal[key] = seen
            return
        del self._frozen[key]
        self._since_heal.pop(key, None)
        self._touch(key[0])

    @property
    def peer_votes(self) -> Votes:
        return self._peer_votes

    def set_partitioned(self, partitioned: bool) -> bool:
        """This site hears fewer than a majority of the sites (True): remote endpoints keep the
        verdicts they had (fail static) and the peers' votes stay as they were; this site's votes on
        remote endpoints become those agreed verdicts (frozen), so that the down votes its probes cast
        during the partition do not take endpoints out once it is heard again. After the heal (False)
        each frozen vote stays until a result agrees with it or RELEASE_AFTER results came (the first
        one may be a probe that was under way across the heal). True when it changed."""
        if partitioned is self._partitioned:
            return False
        self._partitioned = partitioned
        if partitioned:  # freeze: the agreed verdict of every remote endpoint becomes this site's vote
            self._decide()  # (as the votes heard so far give it)
            for owners in self._owners.values():
                for key, owner in owners.items():
                    agreed = self._answering.get(key)
                    if owner != self._site and agreed is not None:
                        self._frozen.setdefault(key, agreed)
        self._since_heal.clear()  # counted from the heal
        self._undecided = None
        self._touched = None
        return True

    @property
    def partitioned(self) -> bool:
        return self._partitioned

    def _decide(self) -> None:
        """Bring the answered health up to date for the services whose inputs changed."""
        votes = self._votes
        if votes is None:
            return
        services = self._owners.keys() if self._undecided is None else self._undecided
        health, answering = self.own_votes, self._answering
        updates: list[tuple[EndpointKey, bool]] = []
        removals: list[EndpointKey] = []
        for service in list(services):
            owners = self._owners.get(service)
            if owners is None:
                continue
            for key, owner in owners.items():
                remote = owner != self._site
                if remote and self._partitioned and key in answering:
                    continue  # fail static: the last agreed verdict stays
                found = verdict(key, owner, self._site, health, self._peer_votes, votes)
                if found is None and remote:
                    found = True  # nobody voted: as its owner publishes it
                if found is None:
                    if key in answering:
                        removals.append(key)
                elif answering.get(key) is not found:
                    updates.append((key, found))
        if self._undecided is None:  # everything: endpoints with a verdict but no vote follow it
            voted = {k for owners in self._owners.values() for k in owners}
            updates += [(k, v) for k, v in health.items() if k not in voted and answering.get(k) is not v]
        if updates or removals:
            self._answering = answering.evolve(updates, removals=removals)
        self._undecided = set()

    def answering_health(self) -> CowMap[EndpointKey, bool]:
        """The health the answers use: the raw verdicts, with the quorum's applied when it is set."""
        if self._votes is None:
            return self._health
        self._decide()
        return self._answering

    def take_touched(self) -> frozenset[str] | None:
        """The services whose verdicts, overrides or learned endpoints changed since the last call
        (None: any may have); the next call starts from nothing."""
        touched, self._touched = self._touched, set()
        return None if touched is None else frozenset(touched)

    def pending(self) -> frozenset[str] | None:
        """What `take_touched` would return now, without starting over."""
        return None if self._touched is None else frozenset(self._touched)

    def retain(self, keys: Collection[EndpointKey]) -> None:
        """Forget the status of every endpoint not in `keys` (they start over as unknown)."""
        gone = [k for k in self._statuses if k not in keys]
        for key in gone:
            del self._statuses[key]
        self._health = self._health.evolve(removals=gone)
        for key in gone:
            self._touch(key[0])
        if self._votes is not None:
            self._answering = self._answering.evolve(removals=[k for k in gone if k in self._answering])
        for key in gone:
            self._frozen.pop(key, None)
            self._since_heal.pop(key, None)

    def set_load(self, key: EndpointKey, state: LoadState) -> bool:
        """Keep an endpoint's load state; True (and its service touched) when what the answers use of
        it changed (the used figure or whether shedding keeps it out), not for every new figure."""
        before = self._loads.get(key)
        self._loads = self._loads.evolve(((key, state),))
        if before is not None and (before.used, before.out) == (state.used, state.out):
            return False
        self._touch(key[0])
        return True

    def set_peer_loads(self, loads: Mapping[EndpointKey, LoadState]) -> None:
        """The load figures of the endpoints learned from peer sites (exchange/peerbook.py `loads`):
        kept with this site's own (their keys never meet: a peer site's endpoints are not fetched
        here); a service whose peer figures changed what its answers use is touched."""
        before = self._peer_loads
        gone = [k for k in before if k not in loads]
        came = [(k, v) for k, v in loads.items() if before.get(k) != v]
        if not gone and not came:
            return
        self._loads = self._loads.evolve(came, removals=gone)
        for key in gone:
            self._touch(key[0])
        for key, state in came:
            old = before.get(key)
            if old is None or (old.used, old.out) != (state.used, state.out):
                self._touch(key[0])
        self._peer_loads = MappingProxyType(dict(loads))

    def load(self, key: EndpointKey) -> LoadState | None:
        return self._loads.get(key)

    def retain_loads(self, keys: Collection[EndpointKey]) -> None:
        """Forget the load state of every endpoint not in `keys` (a reload removed it or its load);
        the peers' figures stay (the exchange replaces them)."""
        peers = self._peer_loads
        gone = [k for k in self._loads if k not in keys and k not in peers]
        if gone:
            self._loads = self._loads.evolve(removals=gone)
            for key in gone:
                self._touch(key[0])

    @property
    def admin(self) -> Mapping[EndpointKey, AdminState]:
        """Run-time admin overrides (an endpoint without one uses the admin state of its config)."""
        return self._admin

    def set_admin(self, key: EndpointKey, state: AdminState) -> bool:
        """Override an endpoint's admin state; True when the stored override changed."""
        changed = self._admin.get(key) is not state
        if changed:
            self._admin = self._admin.evolve(((key, state),))
            self._touch(key[0])
        return changed

    def set_peer_endpoints(self, peers: Mapping[str, tuple[Endpoint, ...]]) -> None:
        """Endpoints learned from peer sites, per service fqdn (carried into every next snapshot)."""
        before = self._peers
        if self._touched is not None:
            for service in before.keys() | peers.keys():
                if before.get(service) != peers.get(service):
                    self._touched.add(service)
        self._peers = MappingProxyType(dict(peers))

    def set_holds(self, holds: Mapping[str, tuple[Hold, ...]]) -> None:
        """The delays holding services' answers now (app/delays.py), carried into every next snapshot;
        the services whose holds changed count as touched."""
        before = self._holds
        if self._touched is not None:
            for service in before.keys() | holds.keys():
                if before.get(service) != holds.get(service):
                    self._touched.add(service)
        self._holds = MappingProxyType(dict(holds))

    @property
    def holds(self) -> Mapping[str, tuple[Hold, ...]]:
        return self._holds

    @property
    def health(self) -> Mapping[EndpointKey, bool]:
        """The verdict of every endpoint that has one (a copy-on-write map: cheap to hold on to)."""
        return self._health

    @property
    def peer_endpoints(self) -> Mapping[str, tuple[Endpoint, ...]]:
        return self._peers

    def set_evaluated(self, when: float) -> None:
        """Record the wall-clock time of this site's latest health evaluation (its heartbeat)."""
        self._evaluated_at = max(self._evaluated_at, when)

    @property
    def evaluated_at(self) -> float:
        return self._evaluated_at

    def snapshot(self, keep: Collection[EndpointKey] | None = None, taken_at: float = 0.0) -> Snapshot:
        """The next snapshot: every verdict, every override, the holds, and the statuses (a read-only
        view: read when answers are built, at `taken_at`); its version is one more than the last.
        With `keep`, the verdicts of other endpoints are left out of it (what `retain(keep)` would
        leave; the book itself does not change: a reload commits that only once its build worked)."""
        self._version += 1
        raw = self.own_votes if self._votes is not None else self._health
        health = self.answering_health()
        if keep is not None:
            raw = raw.evolve(removals=[k for k in raw if k not in keep])
            health = health.evolve(removals=[k for k in health if k not in keep])
        return Snapshot(
            version=self._version,
            health=health,
            admin=self._admin,
            peer_endpoints=self._peers,
            evaluated_at=self._evaluated_at,
            holds=self._holds,
            taken_at=taken_at,
            statuses=MappingProxyType(self._statuses),
            votes=raw if self._votes is not None else _NO_VOTES,
            loads=self._loads,
        )
