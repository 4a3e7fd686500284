"""Keeping the per-service endpoint gauges in step with the snapshot in force."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from gslbd.answer.exchange_names import peer_site_names
from gslbd.metrics import ENDPOINTS, ENDPOINTS_UP
from gslbd.model.config import Config
from gslbd.model.service import Service
from gslbd.state.snapshot import Snapshot, effective_up


class ServiceGauges:
    """Sets gslbd_health_endpoints{_up} per configured service; drops services that went away."""

    def __init__(self) -> None:
        self._labelled: dict[str, tuple[int, int]] = {}  # service -> (up, known) last set

    def update(self, config: Config, snapshot: Snapshot, only: Collection[str] | None = None) -> None:
        """Set the gauges of the services in `only` (all when None) whose figures changed: a rebuild
        after one verdict touches one service, and setting a labelled gauge costs a lock and a lookup."""
        if only is not None and len(only) < len(config.services):
            names = dict(self._labelled)
            services: Iterable[Service] = (s for s in config.services if s.name in only)
        else:
            names = {}
            services = config.services
        peer_sites = peer_site_names(config)
        for svc in services:
            # Configured endpoints of peer sites count as up only through what their site publishes.
            peers = snapshot.peer_endpoints.get(svc.name, ())
            local = [ep for ep in svc.endpoints if ep.site not in peer_sites]
            up = sum(1 for ep in local if effective_up(ep, snapshot)) + len(peers)
            known = len({ep.address for ep in svc.endpoints} | {ep.address for ep in peers})
            names[svc.name] = figures = (up, known)
            if self._labelled.get(svc.name) != figures:
                ENDPOINTS_UP.labels(service=svc.name).set(up)
                ENDPOINTS.labels(service=svc.name).set(known)
        for gone in self._labelled.keys() - names.keys():
            ENDPOINTS_UP.remove(gone)
            ENDPOINTS.remove(gone)
        self._labelled = names

    def clear(self) -> None:
        for name in self._labelled:
            ENDPOINTS_UP.remove(name)
            ENDPOINTS.remove(name)
        self._labelled = {}
