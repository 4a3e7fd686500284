"""A small in-memory Control for the API tests, built from real model values and the control helpers.

It is not a mock of the API: it is the other side of the Control protocol, as App implements it.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from types import MappingProxyType
from typing import Any

from gslbd.api.changes import ChangeLog
from gslbd.api.control import (
    AnswerView,
    ClusterView,
    DnsCounters,
    PeerView,
    ServiceRow,
    ServiceStatus,
    WhatIfRefused,
    endpoint_view,
    service_row,
    service_status,
)
from gslbd.api.server import ApiServer
from gslbd.model.check import Check
from gslbd.model.config import ListenAddress
from gslbd.model.overlay import OverlayOp
from gslbd.model.service import Endpoint, EndpointKey, Service
from gslbd.model.topology import Locality
from gslbd.state.snapshot import Snapshot, effective_up
from gslbd.state.status import EndpointStatus
from gslbd.types import AdminState, CheckType, EndpointKind, PolicyName

ZONE = "gslb.example.com."
APP = f"app.{ZONE}"
API = f"api.{ZONE}"
TOKEN = "s3cret-token"
T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z

WEB = Check(name="web", type=CheckType.HTTP, port=8080, path="/healthz")


def _services() -> tuple[Service, ...]:
    app = Service(
        name=APP,
        zone=ZONE,
        label="app",
        policy=PolicyName.FAILOVER,
        endpoints=(
            Endpoint(APP, "192.0.2.1", EndpointKind.IPV4, "eu", Locality("eu-west", "eu-west-1a"), check=WEB),
            Endpoint(APP, "2001:db8::1", EndpointKind.IPV6, "us", Locality("us-east"), check=WEB),
            Endpoint(APP, "backup.example.net.", EndpointKind.HOSTNAME, "eu"),
        ),
    )
    api = Service(
        name=API,
        zone=ZONE,
        label="api",
        endpoints=(Endpoint(API, "198.51.100.7", EndpointKind.IPV4, "us", admin=AdminState.DOWN),),
    )
    return (app, api)


def _statuses() -> dict[EndpointKey, EndpointStatus]:
    return {
        (APP, "192.0.2.1"): EndpointStatus(
            healthy=True,
            successes=4,
            last_check=T0 + 20,
            last_ok=True,
            last_detail="HTTP 200",
            last_change=T0,
            last_change_reason="first check: HTTP 200",
        ),
        (APP, "2001:db8::1"): EndpointStatus(
            healthy=False,
            failures=3,
            last_check=T0 + 21,
            last_ok=False,
            last_detail="timeout after 2s",
            last_change=T0 + 11,
            last_change_reason="3 consecutive failures: timeout after 2s",
        ),
    }


class FakeControl:
    """Services with fixed health; admin changes and reloads are recorded."""

    def __init__(self) -> None:
        self.ready = True
        self.whatifs: list[tuple[list[str], int]] = []
        self.config_services = _services()
        self.statuses = _statuses()
        self.admin: dict[EndpointKey, AdminState] = {}
        self.reload_errors: list[str] = []
        self.reloads = 0
        self.log = ChangeLog(capacity=50)
        self._rows_version = 0
        self.peer_views: list[PeerView] = []
        self.cluster_view: ClusterView | None = None
        self.answers: list[tuple[str, str, str, str | None]] = []
        self.endpoint_changes: list[tuple[str, str, str, dict[str, Any] | None, bool]] = []
        self.counters = DnsCounters(
            queries=MappingProxyType({("udp", "NOERROR"): 12, ("udp", "NXDOMAIN"): 3, ("tcp", "NOERROR"): 2}),
            policy_answers=MappingProxyType({"failover": 9, "round_robin": 5}),
            events=MappingProxyType({"udp_dropped": 1, "tcp_connections": 2}),
        )

    def _status_of(self, service: Service) -> ServiceStatus:
        snapshot = Snapshot(
            health=MappingProxyType(
                {k: s.healthy for k, s in self.statuses.items() if s.healthy is not None}
            ),
            admin=MappingProxyType(dict(self.admin)),
        )
        views = [
            endpoint_view(e, self.statuses.get(e.key), snapshot.admin_state(e), effective_up(e, snapshot))
            for e in service.endpoints
        ]
        return service_status(service, views)

    def services(self) -> Sequence[ServiceStatus]:
        return [self._status_of(s) for s in self.config_services]

    def rows(self) -> Sequence[ServiceRow]:
        return [service_row(s) for s in self.services()]

    def service(self, name: str) -> ServiceStatus | None:
        for s in self.config_services:
            if s.name == name:
                return self._status_of(s)
        return None

    async def set_admin(self, service: str, address: str, state: AdminState, force: bool = False) -> None:
        for s in self.config_services:
            if s.name == service and any(e.address == address for e in s.endpoints):
                self.admin[(service, address)] = state
                return
        raise KeyError((service, address))

    async def change_endpoints(
        self, op: OverlayOp, service: str, address: str, value: Mapping[str, Any] | None, force: bool
    ) -> Mapping[str, Any]:
        """Records the change (validation and merging are App's, tested in the integration tests)."""
        self.endpoint_changes.append(
            (op.value, service, address, None if value is None else dict(value), force)
        )
        return {"service": service, "address": address, "op": op.value, "generation": 1, "warnings": []}

    async def reload(self, force: bool = False) -> list[str]:
        self.reloads += 1
        return list(self.reload_errors)

    async def whatif(self, admin: Sequence[str], seed: int) -> Mapping[str, Any]:
        self.whatifs.append((list(admin), seed))
        if admin[0] == "refuse":
            raise WhatIfRefused(409, "nothing to replay")
        return {"replayed": 0}

    def dns_counters(self) -> DnsCounters:
        return self.counters

    def peers(self) -> Sequence[PeerView]:
        return self.peer_views

    @property
    def rows_version(self) -> int:
        """Never the same twice: the API rebuilds its service list at every request (tests change
        health and admin states between requests without telling)."""
        self._rows_version += 1
        return self._rows_version

    @property
    def changes(self) -> ChangeLog:
        return self.log

    def answer(self, service: str, rtype: str, client_ip: str, ecs: str | None) -> AnswerView:
        """Records the question; answers with the first endpoint's address (the real resolution is
        App's, tested in the integration tests)."""
        self.answers.append((service, rtype, client_ip, ecs))
        found = next(s for s in self.config_services if s.name == service)
        first = found.endpoints[0].address
        return AnswerView(
            name=service,
            rtype=rtype,
            client=ecs or client_ip,
            rcode="NOERROR",
            answer=(f"{service} 30 IN {rtype} {first}",),
            explanation=f"question: {service} {rtype}\n",
        )

    async def cluster(self) -> ClusterView | None:
        return self.cluster_view


@asynccontextmanager
async def serving(control: FakeControl, token: str | None = TOKEN) -> AsyncIterator[ApiServer]:
    """An ApiServer on a free loopback port, stopped afterwards."""
    server = ApiServer(control, ListenAddress("127.0.0.1", 0), token)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def port_is_closed(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) != 0
