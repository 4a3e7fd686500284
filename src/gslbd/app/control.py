"""The running instance as the HTTP API sees it: `api.control.Control`, implemented over an App.

A separate object because `Control.reload()` (re-read the file) and `App.reload(config)` (apply a
Config) are different operations with the same name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gslbd.api.control import (
    DnsCounters,
    EndpointView,
    PeerView,
    ServiceStatus,
    endpoint_view,
    service_status,
)
from gslbd.model.service import Service
from gslbd.server.stats import CounterReport
from gslbd.types import AdminState

if TYPE_CHECKING:
    from gslbd.app.core import App


# Header rcodes (4 bits) by mnemonic, for the metric's label.
_RCODE_NAMES = {
    0: "NOERROR",
    1: "FORMERR",
    2: "SERVFAIL",
    3: "NXDOMAIN",
    4: "NOTIMP",
    5: "REFUSED",
}


class AppControl:
    """`api.control.Control` for one App."""

    def __init__(self, app: App) -> None:
        self._app = app

    @property
    def ready(self) -> bool:
        return self._app.ready

    def services(self) -> Sequence[ServiceStatus]:
        return [self._status(svc) for svc in self._app.config.services]

    def service(self, name: str) -> ServiceStatus | None:
        svc = self._app.generation.resolved.services.get(name)
        return self._status(svc) if svc is not None else None

    async def set_admin(self, service: str, address: str, state: AdminState) -> None:
        await self._app.set_admin(service, address, state)

    async def reload(self) -> list[str]:
        return await self._app.reload_file()

    def dns_counters(self) -> DnsCounters:
        """The listeners' counters of this process, or with worker processes the sum of what they last
        reported (at most a second old)."""
        workers = self._app.workers
        if workers is not None:
            report = workers.counters()
        else:
            report = CounterReport.of(self._app.stats, self._app.responder.policy_answers())
        queries = {
            (transport, _RCODE_NAMES.get(rcode, str(rcode))): count
            for (transport, rcode), count in report.responses_by_rcode().items()
        }
        return DnsCounters(queries=queries, policy_answers=report.policy, events=report.events)

    def peers(self) -> Sequence[PeerView]:
        """The exchange's peer sites (app.exchange.book), with ages at this moment."""
        exchange = self._app.exchange
        now = self._app.clock.monotonic()
        sites = {p.name: p for p in self._app.config.peers.sites} if self._app.config.peers else {}
        out: list[PeerView] = []
        for state in exchange.peers():
            site = sites.get(state.name)
            age = state.answer_age(now)
            out.append(
                PeerView(
                    name=state.name,
                    state=state.freshness.value,
                    nameservers=tuple(str(n) for n in site.nameservers) if site is not None else (),
                    last_answer=state.last_answer_wall,
                    last_answer_age=age,
                    endpoints=state.endpoint_count,
                    errors=state.errors,
                    polls=state.polls,
                    failing=state.failing,
                    detail=state.detail,
                    heartbeat=state.heartbeat,
                )
            )
        return out

    def _status(self, svc: Service) -> ServiceStatus:
        generation = self._app.generation
        snapshot = generation.snapshot
        book = self._app.book
        # What counts is the generation's (the rule the answers use), not derived again here.
        count = generation.counts.get(svc.name)
        up = count.up_addresses if count is not None else frozenset()
        learned = snapshot.peer_endpoints.get(svc.name, ())
        views: list[EndpointView] = [
            endpoint_view(ep, book.known(ep.key), snapshot.admin_state(ep), ep.address in up)
            for ep in svc.endpoints
        ]
        configured = {ep.address for ep in svc.endpoints}
        views += [
            endpoint_view(ep, None, snapshot.admin_state(ep), ep.address in up)
            for ep in learned
            if ep.address not in configured
        ]
        return service_status(svc, views)
