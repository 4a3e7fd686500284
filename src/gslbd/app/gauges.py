"""Keeping the per-service endpoint gauges in step with the snapshot in force."""

from __future__ import annotations

from gslbd.answer.exchange_names import peer_site_names
from gslbd.metrics import ENDPOINTS, ENDPOINTS_UP
from gslbd.model.config import Config
from gslbd.state.snapshot import Snapshot, effective_up


class ServiceGauges:
    """Sets gslbd_health_endpoints{_up} per configured service; drops services that went away."""

    def __init__(self) -> None:
        self._labelled: set[str] = set()

    def update(self, config: Config, snapshot: Snapshot) -> None:
        names = set()
        peer_sites = peer_site_names(config)
        for svc in config.services:
            # Configured endpoints of peer sites count as up only through what their site publishes.
            peers = snapshot.peer_endpoints.get(svc.name, ())
            local = [ep for ep in svc.endpoints if ep.site not in peer_sites]
            up = sum(1 for ep in local if effective_up(ep, snapshot)) + len(peers)
            ENDPOINTS_UP.labels(service=svc.name).set(up)
            known = {ep.address for ep in svc.endpoints} | {ep.address for ep in peers}
            ENDPOINTS.labels(service=svc.name).set(len(known))
            names.add(svc.name)
        for gone in self._labelled - names:
            ENDPOINTS_UP.remove(gone)
            ENDPOINTS.remove(gone)
        self._labelled = names

    def clear(self) -> None:
        for name in self._labelled:
            ENDPOINTS_UP.remove(name)
            ENDPOINTS.remove(name)
        self._labelled = set()
