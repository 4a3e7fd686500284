"""Which sites a service answers now, and its failover events, from the committed generation.

    gslbd_service_answer_site_info{service,site}   1 for every site whose endpoints an A or AAAA answer
                                                    of the service can hold now (any client, any variant)
    gslbd_service_failovers_total{service,direction}
                                                    the preferred site (failover_order's first, else the
                                                    site of the first endpoint) left the answer (`away`)
                                                    or came back to it (`back`)

Only services of the failover policy with endpoints in more than one site (configured, or learned from
peers) are followed: the other policies answer every healthy site (or, geo, a site per client), and a
one-site service has nothing to fail over to. That also bounds the cost: the first generation of 10,000
such services costs about 0.1 s here, a verdict's generation only its service (no labelled gauge is set:
the sites are read at scrape time). A service whose names a large view defers (answer/build.py) is
followed from its first change after they are built. The sites come from the outcomes the answers are
compiled from, so they are what a client gets.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter

from gslbd.answer.view import Dynamic, View
from gslbd.app.generation import Generation
from gslbd.metrics import SERVICE_ANSWER_SITE, SERVICE_FAILOVERS
from gslbd.model.service import Endpoint, Service
from gslbd.types import PolicyName

_SITE = attrgetter("site")
AWAY = "away"
BACK = "back"


def several_sites(service: Service, learned: Iterable[Endpoint]) -> bool:
    """Whether a service's endpoints (configured, or learned from peers) are in more than one site."""
    sites = set(map(_SITE, service.endpoints))
    sites.update(map(_SITE, learned))
    return len(sites) > 1


def preferred_site(service: Service, learned: Iterable[Endpoint]) -> str | None:
    """The first of `failover_order`, else the site of the first endpoint (configured, then learned)."""
    if service.failover_order:
        return service.failover_order[0]
    first = next(iter((*service.endpoints, *learned)), None)
    return None if first is None else first.site


def answered_sites(service: Service, view: View) -> frozenset[str] | None:
    """The sites the service's A and AAAA answers can hold now; None when its names are not built."""
    data = view.names.get(service.name)
    if data is None:
        return None
    sites: set[str] = set()
    for rtype in ("A", "AAAA"):
        outcome = data.outcomes.get(rtype)
        if isinstance(outcome, Dynamic):
            for variant in outcome.plan.variants:  # each already at most max_answers long
                sites.update(map(_SITE, variant))
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
        SERVICE_ANSWER_SITE.source = self._sites.items  # read at scrape time (metrics.AnswerSites)
        services = generation.resolved.services
        changed = generation.changed
        if changed is None:
            for gone in [name for name in self._sites if name not in services]:
                self._forget(gone)
        names = services.keys() if changed is None else changed
        peers = generation.snapshot.peer_endpoints
        for name in list(names):
            service = services.get(name)
            if service is None or service.policy is not PolicyName.FAILOVER:
                self._forget(name)
                continue
            learned = peers.get(name, ())
            now = answered_sites(service, generation.view) if several_sites(service, learned) else None
            if now is None:
                self._forget(name)
                continue
            before = self._sites.get(name)
            self._sites[name] = now
            if before is not None and before != now:
                event = failover_event(preferred_site(service, learned), before, now)
                if event is not None:
                    SERVICE_FAILOVERS.labels(name, event).inc()

    def _forget(self, name: str) -> None:
        self._sites.pop(name, None)

    def clear(self) -> None:
        self._sites.clear()
        SERVICE_ANSWER_SITE.source = None
