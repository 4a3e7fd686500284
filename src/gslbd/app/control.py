"""The running instance as the HTTP API sees it: `api.control.Control`, implemented over an App.

A separate object because `Control.reload()` (re-read the file) and `App.reload(config)` (apply a
Config) are different operations with the same name.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from gslbd.answer import View
from gslbd.answer.view import Dynamic
from gslbd.api.changes import ChangeLog
from gslbd.api.control import (
    AnswerView,
    ClusterView,
    DnsCounters,
    EndpointView,
    PeerView,
    ServiceRow,
    ServiceStatus,
    WhatIfRefused,
    endpoint_view,
    service_status,
)
from gslbd.app.checksets import check_statuses
from gslbd.app.whatif import NothingToReplay, SelectorMatchesNothing, whatif_running
from gslbd.config.overlay import problem_text
from gslbd.explain import RCODE_NAMES, client_lines, explain, rr_text
from gslbd.model.overlay import OverlayOp
from gslbd.model.selector import Selector, parse_admin
from gslbd.model.service import Service
from gslbd.policy.load import endpoint_shares, load_weight, uses_load
from gslbd.server.dnstap.capture import CaptureError
from gslbd.server.stats import CounterReport
from gslbd.state.snapshot import Snapshot
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


def with_load(views: list[EndpointView], svc: Service, snapshot: Snapshot, view: View) -> list[EndpointView]:
    """The endpoint views with their load figure, the weight drawn by and their share of the answers
    (docs/policies/load.md); unchanged for a service without load feedback."""
    if not uses_load(svc):
        return views
    shares: dict[str, float] = {}
    data = view.get(svc.name)
    for rtype in ("A", "AAAA"):
        outcome = data.outcomes.get(rtype) if data is not None else None
        if isinstance(outcome, Dynamic):
            found = endpoint_shares(outcome.plan)
            shares.update(found or {})
    # endpoints learned from peer sites (answered with their site's figure), configured ones over them
    by_address = {e.address: e for e in snapshot.peer_endpoints.get(svc.name, ())}
    by_address.update((e.address, e) for e in svc.endpoints)
    out = []
    for v in views:
        endpoint = by_address.get(v.address)
        state = snapshot.loads.get(endpoint.endpoint_key) if endpoint is not None else None
        weight = load_weight(endpoint, state, svc) if endpoint is not None and state is not None else None
        used = state.used if state is not None else None
        out.append(
            replace(v, load=used, load_weight=weight, share=shares.get(v.address, 0.0 if shares else None))
        )
    return out


class AppControl:
    """`api.control.Control` for one App."""

    def __init__(self, app: App) -> None:
        self._app = app
        self._version = 0
        self._seen: tuple[object, ...] | None = None  # what the rows of that version were read from

    @property
    def ready(self) -> bool:
        return self._app.ready

    def services(self) -> Sequence[ServiceStatus]:
        return [self._status(svc) for svc in self._app.config.services]

    def service(self, name: str) -> ServiceStatus | None:
        svc = self._app.generation.resolved.services.get(name)
        return self._status(svc) if svc is not None else None

    async def set_admin(self, service: str, address: str, state: AdminState, force: bool = False) -> None:
        await self._app.set_admin(service, address, state, force)

    async def set_admin_bulk(
        self, selector: Selector, state: AdminState, force: bool, dry_run: bool
    ) -> Mapping[str, Any]:
        done = await self._app.set_admin_bulk(selector, state, force, dry_run)
        return done.json(self._app.generation.resolved.services, dry_run)

    async def change_endpoints(
        self, op: OverlayOp, service: str, address: str, value: Mapping[str, Any] | None, force: bool
    ) -> Mapping[str, Any]:
        key, warnings = await self._app.change_endpoints(op, service, address, value, force)
        return {
            "service": key[0],
            "address": key[1],
            "op": op.value,
            "generation": self._app.generation.number,
            "warnings": [problem_text(p) for p in warnings if p.severity != "error"],
        }

    async def reload(self, force: bool = False) -> list[str]:
        return await self._app.reload_file(force)

    async def whatif(self, admin: Sequence[str], seed: int) -> Mapping[str, Any]:
        """Replayed in a thread of its own on the committed generation (DNS keeps answering, sharing the
        interpreter with it: a large capture slows answers for as long as it runs)."""
        try:
            changes = [parse_admin(text) for text in admin]
        except ValueError as exc:
            raise WhatIfRefused(400, f"admin: {exc}") from None
        generation = self._app.generation
        try:
            return await asyncio.to_thread(
                whatif_running, generation.resolved, generation.snapshot, changes, seed
            )
        except SelectorMatchesNothing as exc:
            raise WhatIfRefused(400, str(exc).replace("--admin ", "admin ")) from None
        except (NothingToReplay, CaptureError) as exc:
            raise WhatIfRefused(409, str(exc)) from None

    def push_health(
        self, service: str, address: str, ok: bool, detail: str, check: str | None = None
    ) -> None:
        self._app.push_health(service, address, ok, detail, check)

    def dns_counters(self) -> DnsCounters:
        """The listeners' counters of this process, or with worker processes the sum of what they last
        reported (at most a second old)."""
        workers = self._app.workers
        if workers is not None:
            report = workers.counters()
        else:
            responder = self._app.responder
            events = {**responder.guard_counts(), **responder.geo_cache_counts()}
            report = CounterReport.of(self._app.stats, responder.policy_answers(), events)
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
                    heard=state.heard,
                    partitioned=exchange.book.partitioned,
                    heartbeat_age=(
                        None
                        if state.heartbeat is None
                        else max(0.0, self._app.clock.wall() - state.heartbeat)
                    ),
                )
            )
        return out

    def rows(self) -> Sequence[ServiceRow]:
        """Like `service_row(self._status(svc))` for every service, from the committed generation's
        counts and snapshot (no endpoint views: at 10,000 services this is what the console's list
        costs)."""
        generation = self._app.generation
        snapshot = generation.snapshot
        health, admin = snapshot.health, snapshot.admin
        out: list[ServiceRow] = []
        for svc in generation.config.services:
            count = generation.count(svc.name)
            up_addresses = count.up_addresses if count is not None else ()
            learned = snapshot.peer_endpoints.get(svc.name, ())
            configured = {ep.address for ep in svc.endpoints}
            shown = (*svc.endpoints, *(ep for ep in learned if ep.address not in configured))
            up = unhealthy = admin_down = admin_up = 0
            for ep in shown:
                key = ep.key
                if ep.address in up_addresses:
                    up += 1
                if health.get(key) is False:
                    unhealthy += 1
                state = admin.get(key, ep.admin)
                if state is AdminState.DOWN:
                    admin_down += 1
                elif state is AdminState.UP:
                    admin_up += 1
            out.append(
                ServiceRow(
                    name=svc.name,
                    policy=svc.policy,
                    endpoints=len(shown),
                    up=up,
                    unhealthy=unhealthy,
                    admin_down=admin_down,
                    admin_up=admin_up,
                    words=" ".join([svc.name, *(e.address for e in shown), *(e.site for e in shown)]).lower(),
                )
            )
        return out

    @property
    def rows_version(self) -> int:
        """Counts the different (counts, health, admin, peer endpoints, config) seen. A verdict, an
        admin change or a peer change brings new maps from the health book and the generation builder,
        a reload a new config; the heartbeat's generation (every 2.5 s, only `evaluated_at` differs)
        keeps them, and so the version. References are kept, so identities are never reused."""
        generation = self._app.generation
        snapshot = generation.snapshot
        now = (generation.counts, snapshot.health, snapshot.admin, snapshot.peer_endpoints, generation.config)
        seen = self._seen
        if seen is None or any(a is not b for a, b in zip(seen, now, strict=True)):
            self._seen = now
            self._version += 1
        return self._version

    @property
    def changes(self) -> ChangeLog:
        return self._app.changes.log

    def answer(self, service: str, rtype: str, client_ip: str, ecs: str | None) -> AnswerView:
        """`gslbd explain`'s answer and text, from the view being served now."""
        app = self._app
        if not any(svc.name == service for svc in app.config.services):
            raise KeyError(service)
        view = app.view
        book = app.book
        text = explain(
            app.config, view, app.env, service, rtype, client_ip, ecs, lambda k: book.status(k).healthy
        )
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
        generation = self._app.generation
        snapshot = generation.snapshot
        book = self._app.book
        # What counts is the generation's (the rule the answers use), not derived again here.
        count = generation.count(svc.name)
        up = count.up_addresses if count is not None else ()
        learned = snapshot.peer_endpoints.get(svc.name, ())
        overlay = self._app.endpoints
        views: list[EndpointView] = [
            endpoint_view(
                ep,
                book.known(ep.key),
                snapshot.admin_state(ep),
                ep.address in up,
                overlay.source_of(ep.key),
                overlay.patched(ep.key),
                check_statuses(book, ep),
            )
            for ep in svc.endpoints
        ]
        configured = {ep.address for ep in svc.endpoints}
        views += [
            endpoint_view(ep, None, snapshot.admin_state(ep), ep.address in up, "peer")
            for ep in learned
            if ep.address not in configured
        ]
        removed = [
            endpoint_view(ep, None, snapshot.admin_state(ep), False) for ep in overlay.removed(svc.name)
        ]
        return service_status(svc, with_load(views, svc, snapshot, generation.view), removed)
