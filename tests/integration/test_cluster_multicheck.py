"""Two Apps in cluster mode on a real redis-server sharing an endpoint with two checks: each check has
its own lock and health key in Redis (`<address>#<check>`, next to the single-check key that stays as
it was), is probed about once per interval for both instances together, and every instance runs each
check's verdict machine and combines them (health all) to the same answer."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cluster_support import CountingBackend, counting_backend, with_port
from health_app_support import APP, ZONE, dns_port, wait_for
from health_app_support import addresses as answer
from redis_support import RedisProcess, running_redis

from gslbd.app import App
from gslbd.clock import SystemClock
from gslbd.config import load_config_text

pytestmark = pytest.mark.integration

A, B = "192.0.2.10", "192.0.2.11"
INTERVAL = 0.5


def config(redis_url: str, port: int) -> str:
    check = f"type: http, port: {port}, interval: 500ms, timeout: 200ms, rise: 1, fall: 2"
    return f"""
version: 1
site: {{name: eu}}
dns: {{listen: @LISTEN@, lame_duck: 0s}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
checks:
  web: {{{check}, path: /health/web}}
  api: {{{check}, path: /health/api}}
  plain: {{{check}, path: /health/plain}}
services:
  - name: {APP}
    endpoints:
      - {{address: {A}, checks: [web, api], probe_address: 127.0.0.1}}
      - {{address: {B}, check: plain, probe_address: 127.0.0.1}}
cluster:
  redis: {{url: "{redis_url}", key_prefix: "gslb:", sync_mode: lock}}
"""


def up(app: App) -> tuple[str, ...]:
    """The addresses that count (and are answered) at one instance now."""
    count = app.generation.count(APP)
    return () if count is None else count.up_addresses


@contextlib.asynccontextmanager
async def apps(text: str, count: int) -> AsyncIterator[list[App]]:
    started: list[App] = []
    try:
        for i in range(count):
            app = App(load_config_text(with_port(text)), SystemClock(), random.Random(i))
            await app.start()
            started.append(app)
        yield started
    finally:
        for app in started:
            await app.stop()


def test_two_instances_share_each_check_of_a_two_check_endpoint_and_agree_on_the_combined_verdict(
    tmp_path: Path,
) -> None:
    async def body(server: RedisProcess, backend: CountingBackend) -> None:
        async with apps(config(server.url, backend.port), 2) as members:
            await asyncio.sleep(2 * INTERVAL)  # the first cycles
            keys = sorted(str(k) for k in server.client().keys("gslb:health:*"))
            assert keys == [
                f"gslb:health:{ZONE}:{APP}:{A}#api",
                f"gslb:health:{ZONE}:{APP}:{A}#web",
                f"gslb:health:{ZONE}:{APP}:{B}",  # a single check's key is as it was
            ]
            before = {p: backend.count(p) for p in ("web", "api", "plain")}
            began = time.monotonic()
            await asyncio.sleep(6 * INTERVAL)
            rounds = (time.monotonic() - began) / INTERVAL
            rates = {p: (backend.count(p) - n) / rounds for p, n in before.items()}
            assert all(0.7 <= rate <= 1.3 for rate in rates.values()), rates  # not twice: one lock each

            backend.failing.add("web")
            await wait_for(lambda: all(app.book.status((APP, A)).healthy is False for app in members), 5.0)
            for app in members:
                assert app.book.status((APP, f"{A}#web")).healthy is False  # each instance's own machine
                assert app.book.status((APP, f"{A}#api")).healthy is True
                assert app.book.status((APP, A)).last_change_reason.startswith("health all: web down (")
            await wait_for(
                lambda: all(app.generation.count(APP).up_addresses == (B,) for app in members), 2.0
            )
            for app in members:
                assert await answer(dns_port(app.bound)) == [B]

            backend.failing.clear()
            await wait_for(lambda: all(app.book.status((APP, A)).healthy for app in members), 5.0)
            await wait_for(
                lambda: all(app.generation.count(APP).up_addresses == (A, B) for app in members), 2.0
            )
            for app in members:
                assert await answer(dns_port(app.bound)) == [A, B]

    with running_redis(tmp_path) as server, counting_backend() as backend:
        asyncio.run(body(server, backend))
