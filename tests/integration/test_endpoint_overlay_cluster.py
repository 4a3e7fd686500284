"""The endpoint overlay in cluster mode, on a real redis-server with two Apps of the same site: a change
at one instance is in Redis when it returns and the other applies it; an instance that starts later
reads it from Redis."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import AsyncIterator
from pathlib import Path

from cluster_support import ADDRESSES, APP, CountingBackend, cluster_config, counting_backend, with_port
from health_app_support import addresses as answer
from health_app_support import dns_port, wait_for
from redis_support import RedisProcess, running_redis

from gslbd.app import App
from gslbd.clock import SystemClock
from gslbd.config import load_config_text
from gslbd.model.overlay import OverlayOp

A, B, C = ADDRESSES
NEW = "203.0.113.7"


@contextlib.asynccontextmanager
async def started(text: str, seed: int) -> AsyncIterator[App]:
    app = App(load_config_text(with_port(text)), SystemClock(), random.Random(seed))
    await app.start()
    try:
        yield app
    finally:
        await app.stop()


def test_an_overlay_change_at_one_instance_reaches_the_other_and_a_later_start(tmp_path: Path) -> None:
    async def body(server: RedisProcess, backend: CountingBackend) -> None:
        config = cluster_config(server.url, backend.port, interval="1s", timeout="900ms", fall=3)
        async with started(config, 1) as one, started(config, 2) as two:
            other = dns_port(two.bound)
            assert await answer(other) == [A, B, C]
            await one.change_endpoints(OverlayOp.ADD, APP, "", {"address": NEW, "check": "none"})
            await one.change_endpoints(OverlayOp.REMOVE, APP, A, None)
            stored = server.client().hgetall("gslb:endpoints")
            assert {k: json.loads(v) for k, v in stored.items()} == {
                f"{APP}|{NEW}": {"op": "add", "endpoint": {"address": NEW, "check": "none"}},
                f"{APP}|{A}": {"op": "remove"},
            }
            await wait_for(lambda: two.endpoints.entries == one.endpoints.entries)
            assert await answer(other) == [B, C, NEW]
            assert two.endpoints.source_of((APP, NEW)) == "overlay"
            await one.change_endpoints(OverlayOp.REMOVE, APP, NEW, None)
            assert server.client().hgetall("gslb:endpoints") == {f"{APP}|{A}": '{"op": "remove"}'}
            await wait_for(lambda: (APP, NEW) not in two.endpoints.entries)
            assert await answer(other) == [B, C]
        # an instance started afterwards (its own state file empty) takes the overlay from Redis
        async with started(config, 3) as three:
            assert await answer(dns_port(three.bound)) == [B, C]

    with running_redis(tmp_path) as server, counting_backend() as backend:
        asyncio.run(body(server, backend))


def test_a_change_made_while_redis_is_down_is_written_when_it_returns_and_reaches_the_other(
    tmp_path: Path,
) -> None:
    async def body(server: RedisProcess, backend: CountingBackend) -> None:
        config = cluster_config(server.url, backend.port, interval="1s", timeout="900ms", fall=3)
        async with started(config, 1) as one, started(config, 2) as two:
            assert await answer(dns_port(two.bound)) == [A, B, C]
            await asyncio.to_thread(server.kill)
            await wait_for(lambda: not one.cluster.connected if one.cluster else False, 5.0)
            key, _ = await one.change_endpoints(OverlayOp.PATCH, APP, A, {"weight": 3})
            assert await answer(dns_port(one.bound)) == [A, B, C]  # applied here at once
            assert one.cluster is not None and one.cluster.store.overlay_pending() == {
                key: one.endpoints.entries[key]
            }
            await asyncio.to_thread(server.start)  # back, empty: the pending change is written again
            await wait_for(lambda: two.endpoints.entries == one.endpoints.entries, 10.0)
            assert two.endpoints.patched(key) == ("weight",)
            assert server.client().hgetall("gslb:endpoints") == {
                f"{APP}|{A}": '{"op": "patch", "set": {"weight": 3}}'
            }

    with running_redis(tmp_path) as server, counting_backend() as backend:
        asyncio.run(body(server, backend))
