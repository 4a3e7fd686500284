"""Which sites a service answers now, and its failover events, from the committed generation.

    gslbd_service_answer_site_info{service,site}   1 for every site whose endpoints an A or AAAA answer
                                                    of the service can hold now (any client, any variant)
    gslbd_service_failovers_total{service,direction}
                                                    the preferred site (failover_order's first, else the
                                                    site of the first endpoint) left the answer (`away`)
                                                    or came back to it (`back`)

Only services with endpoints in more than one site (configured, or learned from peers) are followed:
a one-site service has nothing to fail over to. A service whose names a large view defers
(answer/build.py) is followed from its first change after they are built. The sites come from the
outcomes the answers are compiled from, so they are what a client gets.
"""

from __future__ import annotations

from collections.abc import Iterable

from gslbd.answer.view import Dynamic, View
from gslbd.app.generation import Generation
from gslbd.metrics import SERVICE_ANSWER_SITE, SERVICE_FAILOVERS
from gslbd.model.service import Endpoint, Service

AWAY = "away"
BACK = "back"


def service_sites(service: Service, learned: Iterable[Endpoint]) -> tuple[str, ...]:
    """The sites of a service's endpoints, configured first (in order), then learned."""
    return tuple(dict.fromkeys([*(e.site for e in service.endpoints), *(e.site for e in learned)]))


def preferred_site(service: Service, sites: tuple[str, ...]) -> str | None:
    if service.failover_order:
        return service.failover_order[0]
    return sites[0] if sites else None


def answered_sites(service: Service, view: View) -> frozenset[str] | None:
    """The sites the service's A and AAAA answers can hold now; None when its names are not built."""
    data = view.names.get(service.name)
    if data is None:
        return None
    sites: set[str] = set()
    for rtype in ("A", "AAAA"):
        outcome = data.outcomes.get(rtype)
        if isinstance(outcome, Dynamic):
            for variant in outcome.plan.variants:
                sites.update(e.site for e in variant[: service.max_answers])
    return frozenset(sites)


def failover_event(preferred: str | None, before: frozenset[str], after: frozenset[str]) -> str | None:
    """`away` when the preferred site left the answer, `back` when it returned, else None."""
    if preferred is None or (preferred in before) == (preferred in after):
        return None
    return BACK if preferred in after else AWAY


class AnsweredSites:
    """Keeps the two metrics above in step with every committed generation (only the services the
    generation says changed are looked at)."""

    def __init__(self) -> None:
        self._sites: dict[str, frozenset[str]] = {}

    def update(self, generation: Generation) -> None:
        services = generation.resolved.services
        changed = generation.changed
        if changed is None:
            for gone in [name for name in self._sites if name not in services]:
                self._forget(gone)
        names = services.keys() if changed is None else changed
        peers = generation.snapshot.peer_endpoints
        for name in list(names):
            service = services.get(name)
            if service is None:
                self._forget(name)
                continue
            sites = service_sites(service, peers.get(name, ()))
            now = answered_sites(service, generation.view) if len(sites) > 1 else None
            if now is None:
                self._forget(name)
                continue
            before = self._sites.get(name)
            self._sites[name] = now
            if before is not None:
                event = failover_event(preferred_site(service, sites), before, now)
                if event is not None:
                    SERVICE_FAILOVERS.labels(name, event).inc()
                for site in before - now:
                    SERVICE_ANSWER_SITE.remove(name, site)
            for site in now - (before or frozenset()):
                SERVICE_ANSWER_SITE.labels(name, site).set(1)

    def _forget(self, name: str) -> None:
        for site in self._sites.pop(name, frozenset()):
            SERVICE_ANSWER_SITE.remove(name, site)

    def clear(self) -> None:
        for name in list(self._sites):
            self._forget(name)
