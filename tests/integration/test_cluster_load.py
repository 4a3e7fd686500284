"""Load feedback in cluster mode on a real redis-server (cluster/loads.py): two Apps fetch each endpoint's
load about once per interval together (not once each), both answer from the same figures, and a new
figure reaches the instance that did not fetch it."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from cluster_support import with_port
from health_app_support import ThreadedBackend, wait_for
from redis_support import RedisProcess, running_redis

from gslbd.app import App
from gslbd.clock import SystemClock
from gslbd.config import load_config_text

ZONE = "gslb.example.com."
APP = f"app.{ZONE}"
EVERY = 0.5


def config_text(redis_url: str, backend: ThreadedBackend) -> str:
    load = f'{{url: "http://127.0.0.1:{backend.port}/load", every: {EVERY}s, timeout: 400ms}}'
    return f"""
version: 1
site: {{name: eu}}
dns: {{listen: @LISTEN@, lame_duck: 0s}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
services:
  - name: {APP}
    policy: weighted
    weight_from: load
    endpoints:
      - {{address: 192.0.2.1, load: {load}}}
      - {{address: 192.0.2.2}}
cluster:
  redis: {{url: "{redis_url}", sync_mode: lock}}
"""


def used(app: App) -> float | None:
    state = app.book.load((APP, "192.0.2.1"))
    return None if state is None else state.used


def weights(members: list[App]) -> list[int]:
    return [
        next(e.load_weight for e in app.control.service(APP).endpoints if e.address == "192.0.2.1")  # type: ignore[union-attr]
        for app in members
    ]


def test_two_instances_fetch_each_load_once_per_interval_and_answer_from_the_same_figures(
    tmp_path: Path,
) -> None:
    async def body(server: RedisProcess, backend: ThreadedBackend) -> None:
        text = config_text(server.url, backend)
        members = [App(load_config_text(with_port(text)), SystemClock(), random.Random(i)) for i in range(2)]
        try:
            for app in members:
                await app.start()
            await wait_for(lambda: all(used(app) == 0.25 for app in members), 5.0)
            before, began = backend.load_fetches, time.monotonic()
            await asyncio.sleep(8 * EVERY)
            rate = (backend.load_fetches - before) / ((time.monotonic() - began) / EVERY)
            assert 0.7 <= rate <= 1.4, rate  # about 2 without the lock
            backend.load = b"0.5"
            # 0.25 -> 0.5: smoothed (half_life 1.5 s) and at most MAX_STEP per interval; within the dead band
            await wait_for(lambda: all(abs((used(app) or 0) - 0.5) < 0.01 for app in members), 8.0)
            # the weights follow at each instance's next rebuild of the service: both come to the same
            # figure (the weights' agreement, not the moment, is what sharing promises)
            await wait_for(lambda: len(set(weights(members))) == 1, 5.0)
            assert all(abs(w - 500) <= 10 for w in weights(members)), weights(members)
        finally:
            for app in members:
                await app.stop()

    backend = ThreadedBackend()
    backend.load = b"0.25"
    try:
        with running_redis(tmp_path) as server:
            asyncio.run(body(server, backend))
    finally:
        backend.close()
