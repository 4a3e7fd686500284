"""Peers as the API and `gslbd status` show them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import aiohttp

from gslbd.api.changes import ChangeLog
from gslbd.api.control import AnswerView, ClusterView, DnsCounters, PeerView, ServiceRow, ServiceStatus
from gslbd.api.server import ApiServer
from gslbd.cli.admin import PEER_COLUMNS, format_table, peer_rows
from gslbd.model.config import ListenAddress
from gslbd.types import AdminState

T0 = 1_700_000_000.0
PEERS = (
    PeerView("us", "fresh", ("127.0.0.3:53",), T0, 1.25, endpoints=62, errors=0, polls=9, heartbeat=T0 - 1),
    PeerView(
        "ap",
        "stale",
        ("127.0.0.4:53",),
        None,
        None,
        errors=41,
        polls=41,
        failing=True,
        detail="no answer yet: heartbeat-ap.gslb.test. from 127.0.0.4:53: timeout after 1s",
    ),
)


class PeersControl:
    """The Control protocol with two peers and no services."""

    ready = True

    def services(self) -> Sequence[ServiceStatus]:
        return []

    def service(self, name: str) -> ServiceStatus | None:
        return None

    async def set_admin(self, service: str, address: str, state: AdminState, force: bool = False) -> None:
        raise KeyError(service)

    async def reload(self, force: bool = False) -> list[str]:
        return []

    def dns_counters(self) -> DnsCounters:
        return DnsCounters()

    def peers(self) -> Sequence[PeerView]:
        return PEERS

    # The console's part of the protocol: nothing to show.
    changes = ChangeLog()
    rows_version = 0

    def rows(self) -> Sequence[ServiceRow]:
        return []

    def answer(self, service: str, rtype: str, client_ip: str, ecs: str | None) -> AnswerView:
        raise KeyError(service)

    async def cluster(self) -> ClusterView | None:
        return None


def test_the_peers_route_returns_every_peer_as_json() -> None:
    async def body() -> object:
        server = ApiServer(PeersControl(), ListenAddress("127.0.0.1", 0), None)
        await server.start()
        try:
            async with aiohttp.ClientSession() as session, session.get(f"{server.url}/api/v1/peers") as r:
                assert r.status == 200
                return await r.json()
        finally:
            await server.stop()

    doc = asyncio.run(body())
    assert doc == {
        "peers": [
            {
                "name": "us",
                "state": "fresh",
                "nameservers": ["127.0.0.3:53"],
                "last_answer": T0,
                "last_answer_at": "2023-11-14T22:13:20.000Z",
                "last_answer_age": 1.25,
                "endpoints": 62,
                "errors": 0,
                "polls": 9,
                "failing": False,
                "detail": "",
                "heartbeat": T0 - 1,
                "heard": False,
            },
            {
                "name": "ap",
                "state": "stale",
                "nameservers": ["127.0.0.4:53"],
                "last_answer": None,
                "last_answer_at": None,
                "last_answer_age": None,
                "endpoints": 0,
                "errors": 41,
                "polls": 41,
                "failing": True,
                "detail": "no answer yet: heartbeat-ap.gslb.test. from 127.0.0.4:53: timeout after 1s",
                "heartbeat": None,
                "heard": False,
            },
        ],
        "partitioned": False,
    }


def test_gslbd_status_prints_a_row_per_peer() -> None:
    keys = ("name", "state", "last_answer_age", "endpoints", "errors", "detail")
    doc = [
        dict(zip(keys, ("us", "fresh", 1.25, 62, 0, ""), strict=True)),
        dict(zip(keys, ("ap", "stale", None, 0, 41, "x"), strict=True)),
        dict(zip(keys, ("sa", "stale", 312.0, 0, 7, "y"), strict=True)),
    ]
    assert format_table(peer_rows(doc), PEER_COLUMNS).splitlines() == [
        "PEER  STATE  LAST ANSWER  ENDPOINTS  ERRORS  DETAIL",
        "us    fresh  1.2s ago     62         0       -",
        "ap    stale  never        0          41      x",
        "sa    stale  5.2min ago   0          7       y",
    ]
