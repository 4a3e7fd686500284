"""An immutable picture of endpoint health; a change makes a new snapshot that replaces the old whole."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from gslbd.model.load import LoadState
from gslbd.model.service import Endpoint, EndpointKey
from gslbd.state.hold import Hold
from gslbd.state.status import EndpointStatus
from gslbd.types import AdminState

_EMPTY_HEALTH: Mapping[EndpointKey, bool] = MappingProxyType({})
_EMPTY_ADMIN: Mapping[EndpointKey, AdminState] = MappingProxyType({})
_EMPTY_PEERS: Mapping[str, tuple[Endpoint, ...]] = MappingProxyType({})
_EMPTY_HOLDS: Mapping[str, tuple[Hold, ...]] = MappingProxyType({})
_EMPTY_STATUSES: Mapping[EndpointKey, EndpointStatus] = MappingProxyType({})
_EMPTY_LOADS: Mapping[EndpointKey, LoadState] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Health of every endpoint at one moment.

    `health`: the probed verdict per endpoint; an endpoint without a verdict yet counts as up.
    `admin`: run-time admin overrides; an endpoint without one uses the admin state of its config.
    `peer_endpoints`: endpoints learned from peer sites per service fqdn (already healthy as published).
    `version` grows with every new snapshot.
    `votes`: with `peers.quorum`, this site's own raw verdicts (`health` is then the quorum's).
    `evaluated_at`: wall-clock Unix seconds of this site's last health evaluation (0 = none yet), published
    to peer sites as the heartbeat (answer/exchange_names.py).
    `holds`: per service fqdn, the failover/failback delays holding its answers now (answer/delays.py
    `Hold`s, kept by app/delays.py). `taken_at`: wall-clock Unix seconds the snapshot was taken (0:
    unknown), and `statuses` the endpoints' statuses then (a read-only view of the health book's): what
    a health-driven TTL is computed from (answer/ttl.py) when a service's answers are built.
    """

    version: int = 0
    health: Mapping[EndpointKey, bool] = field(default_factory=lambda: _EMPTY_HEALTH)
    admin: Mapping[EndpointKey, AdminState] = field(default_factory=lambda: _EMPTY_ADMIN)
    peer_endpoints: Mapping[str, tuple[Endpoint, ...]] = field(default_factory=lambda: _EMPTY_PEERS)
    evaluated_at: float = 0.0
    holds: Mapping[str, tuple[Hold, ...]] = field(default_factory=lambda: _EMPTY_HOLDS)
    taken_at: float = field(default=0.0, compare=False)
    statuses: Mapping[EndpointKey, EndpointStatus] = field(
        default_factory=lambda: _EMPTY_STATUSES, compare=False, repr=False
    )
    # peers.quorum: this site's raw verdicts (its votes, published to the peers); `health` then holds
    # the quorum's verdicts (state/quorum.py). Empty without a quorum.
    votes: Mapping[EndpointKey, bool] = field(default_factory=lambda: _EMPTY_HEALTH)
    # Load feedback (policy/load.py): the load state of every endpoint that reported (or failed to).
    loads: Mapping[EndpointKey, LoadState] = field(default_factory=lambda: _EMPTY_LOADS)
    # No verdict and no override yet (a first build): every endpoint is what its config says.
    plain: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "plain", not self.health and not self.admin)

    def admin_state(self, endpoint: Endpoint) -> AdminState:
        return self.admin.get(endpoint.key, endpoint.admin)


def effective_up(endpoint: Endpoint, snapshot: Snapshot) -> bool:
    """Is this endpoint a candidate? Admin `up`/`down` force; `obey` follows health (up until a verdict)."""
    if snapshot.plain:  # a first build: the hot loop of it (a dozen calls per service)
        return endpoint.admin is not AdminState.DOWN
    overrides, health = snapshot.admin, snapshot.health
    admin = overrides.get(endpoint.key, endpoint.admin) if overrides else endpoint.admin
    if admin is AdminState.OBEY:
        return health.get(endpoint.key, True) if health else True
    return admin is AdminState.UP
