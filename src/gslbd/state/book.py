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
from gslbd.model.service import Endpoint, EndpointKey
from gslbd.state.hold import Hold
from gslbd.state.snapshot import Snapshot
from gslbd.state.status import EndpointStatus
from gslbd.types import AdminState

_UNKNOWN = EndpointStatus()


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
        health = self._health
        if keep is not None:
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
        )
