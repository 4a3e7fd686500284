"""Keeping the per-service endpoint gauges in step with the snapshot in force."""

from __future__ import annotations

from gslbd.answer.exchange_names import peer_site_names
from gslbd.metrics import ENDPOINTS, ENDPOINTS_UP
from gslbd.model.config import Config
from gslbd.state.snapshot import Snapshot, effective_up


class ServiceGauges:
    """Sets gslbd_health_endpoints{_up} per configured service; drops services that went away."""

    def __init__(self) -> None:
        self._labelled: dict[str, tuple[int, int]] = {}  # service -> (up, known) last set

    def update(self, config: Config, snapshot: Snapshot) -> None:
        """Set the gauges of every service whose figures changed (a rebuild after one verdict touches
        one service; setting a labelled gauge costs a lock and a lookup, so the others are skipped)."""
        names: dict[str, tuple[int, int]] = {}
        peer_sites = peer_site_names(config)
        for svc in config.services:
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
