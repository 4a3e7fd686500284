"""The health book: what is known about every endpoint now, and the snapshots built from it.

The book is the one mutable holder of health: each probe result makes a new `EndpointStatus` that the
book records; admin overrides set at run time live here too. `snapshot()` turns both into the next
immutable `Snapshot` that the answers are built from.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from types import MappingProxyType

from gslbd.model.service import Endpoint, EndpointKey
from gslbd.state.snapshot import Snapshot
from gslbd.state.status import EndpointStatus
from gslbd.types import AdminState

_UNKNOWN = EndpointStatus()


class HealthBook:
    """Endpoint statuses and run-time admin overrides by endpoint key (not a value: updated in place)."""

    def __init__(self, admin: Mapping[EndpointKey, AdminState] | None = None, version: int = 0) -> None:
        self._statuses: dict[EndpointKey, EndpointStatus] = {}
        self._admin: dict[EndpointKey, AdminState] = dict(admin or {})
        self._version = version
        self._peers: Mapping[str, tuple[Endpoint, ...]] = MappingProxyType({})
        self._evaluated_at = 0.0

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
        return status.healthy != before

    def retain(self, keys: Collection[EndpointKey]) -> None:
        """Forget the status of every endpoint not in `keys` (they start over as unknown)."""
        for key in [k for k in self._statuses if k not in keys]:
            del self._statuses[key]

    @property
    def admin(self) -> Mapping[EndpointKey, AdminState]:
        """Run-time admin overrides (an endpoint without one uses the admin state of its config)."""
        return MappingProxyType(self._admin)

    def set_admin(self, key: EndpointKey, state: AdminState) -> bool:
        """Override an endpoint's admin state; True when the stored override changed."""
        changed = self._admin.get(key) is not state
        self._admin[key] = state
        return changed

    def set_peer_endpoints(self, peers: Mapping[str, tuple[Endpoint, ...]]) -> None:
        """Endpoints learned from peer sites, per service fqdn (carried into every next snapshot)."""
        self._peers = MappingProxyType(dict(peers))

    def set_evaluated(self, when: float) -> None:
        """Record the wall-clock time of this site's latest health evaluation (its heartbeat)."""
        self._evaluated_at = max(self._evaluated_at, when)

    @property
    def evaluated_at(self) -> float:
        return self._evaluated_at

    def snapshot(self) -> Snapshot:
        """The next snapshot: every verdict, every override; its version is one more than the last."""
        self._version += 1
        health = {k: s.healthy for k, s in self._statuses.items() if s.healthy is not None}
        return Snapshot(
            version=self._version,
            health=MappingProxyType(health),
            admin=MappingProxyType(dict(self._admin)),
            peer_endpoints=self._peers,
            evaluated_at=self._evaluated_at,
        )
