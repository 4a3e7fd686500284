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
