"""The running instance as the HTTP API sees it: `api.control.Control`, implemented over an App.

A separate object because `Control.reload()` (re-read the file) and `App.reload(config)` (apply a
Config) are different operations with the same name.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from gslbd.answer.exchange_names import peer_site_names
from gslbd.api.changes import ChangeLog
from gslbd.api.control import (
    AnswerView,
    ClusterView,
    DnsCounters,
    EndpointView,
    PeerView,
    ServiceRow,
    ServiceStatus,
    endpoint_view,
    service_status,
)
from gslbd.explain import RCODE_NAMES, client_lines, explain, rr_text
from gslbd.model.service import Service
from gslbd.server.stats import CounterReport
from gslbd.state.snapshot import effective_up
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
        self._generation = 0
        self._seen: tuple[object, ...] | None = None  # what that generation was read from

    @property
    def ready(self) -> bool:
        return self._app.ready

    def services(self) -> Sequence[ServiceStatus]:
        return [self._status(svc) for svc in self._app.config.services]

    def service(self, name: str) -> ServiceStatus | None:
        for svc in self._app.config.services:
            if svc.name == name:
                return self._status(svc)
        return None

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
                    heartbeat_age=(
                        None
                        if state.heartbeat is None
                        else max(0.0, self._app.clock.wall() - state.heartbeat)
                    ),
                )
            )
        return out

    def rows(self) -> Sequence[ServiceRow]:
        """Like `service_row(self._status(svc))` for every service, straight from the snapshot (no
        endpoint views: at 10,000 services this is what the console's list costs)."""
        config, snapshot = self._app.config, self._app.snapshot
        peers = peer_site_names(config)
        health, admin = snapshot.health, snapshot.admin
        out: list[ServiceRow] = []
        for svc in config.services:
            learned = snapshot.peer_endpoints.get(svc.name, ())
            published = {ep.address for ep in learned}
            configured = {ep.address for ep in svc.endpoints}
            extra = [ep for ep in learned if ep.address not in configured]
            up = unhealthy = admin_down = admin_up = 0
            shown = (*svc.endpoints, *extra)
            for ep in shown:
                key = ep.key
                verdict = health.get(key)
                state = admin.get(key, ep.admin)
                if verdict is False:
                    unhealthy += 1
                if state is AdminState.DOWN:
                    admin_down += 1
                elif state is AdminState.UP:
                    admin_up += 1
                answers = state is AdminState.UP or (state is AdminState.OBEY and verdict is not False)
                if answers and (ep.site not in peers or ep.address in published):
                    up += 1
            out.append(
                ServiceRow(
                    name=svc.name,
                    policy=svc.policy,
                    endpoints=len(svc.endpoints) + len(extra),
                    up=up,
                    unhealthy=unhealthy,
                    admin_down=admin_down,
                    admin_up=admin_up,
                    words=" ".join([svc.name, *(e.address for e in shown), *(e.site for e in shown)]).lower(),
                )
            )
        return out

    @property
    def generation(self) -> int:
        """Counts the different (health, admin, peer endpoints, config) seen. A new snapshot from the
        book brings new mappings and a reload a new config object; the heartbeat's snapshot (every
        2.5 s, only `evaluated_at` differs) keeps the mappings and so the generation. References are
        kept, so identities are never reused."""
        snapshot, config = self._app.snapshot, self._app.config
        now = (snapshot.health, snapshot.admin, snapshot.peer_endpoints, config)
        seen = self._seen
        if seen is None or any(a is not b for a, b in zip(seen, now, strict=True)):
            self._seen = now
            self._generation += 1
        return self._generation

    @property
    def changes(self) -> ChangeLog:
        return self._app.changes.log

    def answer(self, service: str, rtype: str, client_ip: str, ecs: str | None) -> AnswerView:
        """`gslbd explain`'s answer and text, from the view being served now."""
        app = self._app
        if not any(svc.name == service for svc in app.config.services):
            raise KeyError(service)
        view = app.view
        text = explain(app.config, view, app.env, service, rtype, client_ip, ecs)
        client, _, _ = client_lines(app.config, client_ip, ecs)  # ECS as explain (and DNS) takes it
        answer = view.resolve(service, rtype, client.ip, client.v6, random.Random(0), 0)
        rcode = RCODE_NAMES.get(answer.rcode, str(answer.rcode))
        return AnswerView(
            name=service,
            rtype=rtype,
            client=ecs if ecs is not None else client_ip,
            rcode=rcode,
            answer=tuple(rr_text(rr) for rr in answer.answer),
            authority=tuple(rr_text(rr) for rr in answer.authority),
            additional=tuple(rr_text(rr) for rr in answer.additional),
            location_dependent=answer.location_dependent,
            explanation=text,
        )

    async def cluster(self) -> ClusterView | None:
        """The Redis link; members = subscribers of the shared health channel (PUBSUB NUMSUB), which
        every instance of the cluster holds while it is connected."""
        node = self._app.cluster
        if node is None:
            return None
        members: int | None = None
        client, _ = node.link.current()
        if client is not None:
            try:
                async with node.link.deadline():
                    counts = await client.pubsub_numsub(node.keys.updates)
                members = int(counts[0][1]) if counts else 0
            except (OSError, TimeoutError, RedisError):
                members = None
        return ClusterView(
            redis=node.link.target.display,
            connected=node.connected,
            instance_id=node.instance_id,
            sync_mode=node.config.sync_mode.value,
            members=members,
        )

    def _status(self, svc: Service) -> ServiceStatus:
        snapshot = self._app.snapshot
        book = self._app.book
        # Endpoints of peer sites count only while their site publishes them (answer/exchange_names.py).
        peers = peer_site_names(self._app.config)
        learned = snapshot.peer_endpoints.get(svc.name, ())
        published = {ep.address for ep in learned}
        views: list[EndpointView] = [
            endpoint_view(
                ep,
                book.known(ep.key),
                snapshot.admin_state(ep),
                effective_up(ep, snapshot) and (ep.site not in peers or ep.address in published),
            )
            for ep in svc.endpoints
        ]
        configured = {ep.address for ep in svc.endpoints}
        views += [
            endpoint_view(ep, None, snapshot.admin_state(ep), effective_up(ep, snapshot))
            for ep in learned
            if ep.address not in configured
        ]
        return service_status(svc, views)
