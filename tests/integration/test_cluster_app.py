"""Whole Apps in cluster mode on one real redis-server, probing a real HTTP backend and answering DNS:
one probe per endpoint and interval for all of them together, verdicts that agree, admin changes that
reach every instance within 100 ms, the start-up sync, and Redis killed and restarted under queries."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

from cluster_support import (
    ADDRESSES,
    APP,
    ZONE,
    CountingBackend,
    captured,
    cluster_config,
    counting_backend,
    with_port,
)
from health_app_support import addresses as answer
from health_app_support import dns_port, wait_for
from redis_support import RedisProcess, running_redis

from gslbd.app import App
from gslbd.clock import SystemClock
from gslbd.config import load_config_text
from gslbd.metrics import REGISTRY
from gslbd.model.selector import Selector
from gslbd.types import AdminState

A, B, C = ADDRESSES
KEY_A = (APP, A)


@contextlib.asynccontextmanager
async def apps(text: str, count: int) -> AsyncIterator[list[App]]:
    """`count` Apps of one config (each on its own DNS port), started one after the other."""
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


def test_three_instances_probe_each_endpoint_once_per_interval_and_agree_within_one_interval(
    tmp_path: Path,
) -> None:
    interval = 0.5

    async def body(server: RedisProcess, backend: CountingBackend) -> None:
        config = cluster_config(server.url, backend.port, interval="500ms", fall=2)
        async with apps(config, 3) as members:
            ports = [dns_port(app.bound) for app in members]
            await asyncio.sleep(2 * interval)  # the first cycles (they may fall back to local probes)
            before = {a: backend.count(a) for a in ADDRESSES}
            began = time.monotonic()
            await asyncio.sleep(8 * interval)
            spent = time.monotonic() - began
            rates = {a: (backend.count(a) - before[a]) / (spent / interval) for a in ADDRESSES}
            # Three instances, yet about one probe per endpoint and interval (3 without the lock).
            assert all(0.7 <= rate <= 1.25 for rate in rates.values()), rates

            backend.failing.add(A)
            await wait_for(lambda: all(app.book.status(KEY_A).healthy is False for app in members), 5.0)
            changes = [app.book.status(KEY_A).last_change or 0.0 for app in members]
            assert max(changes) - min(changes) < interval
            for app in members:
                status = app.book.status(KEY_A)
                assert status.failures == 2
                assert status.last_change_reason in (
                    "2 consecutive failures: HTTP 503 (expected 200)",
                    "2 consecutive failures: via redis: down",
                )
            assert sum("HTTP 503" in app.book.status(KEY_A).last_change_reason for app in members) == 1
            await asyncio.sleep(0.05)
            for port in ports:
                assert await answer(port) == [B, C]

            backend.failing.clear()
            await wait_for(lambda: all(app.book.status(KEY_A).healthy for app in members), 5.0)
            changes = [app.book.status(KEY_A).last_change or 0.0 for app in members]
            assert max(changes) - min(changes) < interval
            await asyncio.sleep(0.1)
            for port in ports:
                assert await answer(port) == [A, B, C]

    with running_redis(tmp_path) as server, counting_backend() as backend:
        asyncio.run(body(server, backend))


def test_an_admin_change_through_one_instance_reaches_the_others_answers_within_100ms(tmp_path: Path) -> None:
    async def body(server: RedisProcess, backend: CountingBackend) -> None:
        # Admin state is what this test is about: probes get time to spare and one slow probe on a
        # loaded machine does not take C down.
        config = cluster_config(server.url, backend.port, interval="1s", timeout="900ms", fall=3)
        async with apps(config, 3) as members:
            others = [dns_port(app.bound) for app in members[1:]]
            for port in others:
                assert await answer(port) == [A, B, C]
            began = time.monotonic()
            await members[0].set_admin(APP, A, AdminState.DOWN)
            pending = set(others)
            while pending:
                for port in list(pending):
                    if await answer(port) == [B, C]:
                        pending.discard(port)
                elapsed = time.monotonic() - began
                assert elapsed < 0.1, f"not answered at {sorted(pending)} after {elapsed * 1000:.0f} ms"
            assert server.client().hgetall("gslb:admin") == {f"{APP}|{A}": "down"}
            for app in members[1:]:
                assert app.book.admin == {KEY_A: AdminState.DOWN}
        # A restart (a new instance) finds the state in Redis.
        async with apps(config, 1) as [later]:
            assert later.book.admin == {KEY_A: AdminState.DOWN}
            assert await answer(dns_port(later.bound)) == [B, C]
            await later.set_admin(APP, A, AdminState.OBEY)
            assert server.client().hget("gslb:admin", f"{APP}|{A}") == "obey"

    with running_redis(tmp_path) as server, counting_backend() as backend:
        asyncio.run(body(server, backend))


def test_a_bulk_admin_change_at_one_instance_is_in_redis_when_it_returns_and_reaches_the_other(
    tmp_path: Path,
) -> None:
    async def body(server: RedisProcess, backend: CountingBackend) -> None:
        config = cluster_config(server.url, backend.port, interval="1s", timeout="900ms", fall=3)
        async with apps(config, 2) as members:
            other = dns_port(members[1].bound)
            assert await answer(other) == [A, B, C]
            done = await members[0].set_admin_bulk(Selector(address="192.0.2.10/31"), AdminState.DOWN)
            assert done.plan.changes == {KEY_A: AdminState.DOWN, (APP, B): AdminState.DOWN}
            assert server.client().hgetall("gslb:admin") == {f"{APP}|{A}": "down", f"{APP}|{B}": "down"}
            await wait_for(lambda: members[1].book.admin == done.plan.changes)
            assert await answer(other) == [C]

    with running_redis(tmp_path) as server, counting_backend() as backend:
        asyncio.run(body(server, backend))


def test_an_instance_starts_from_the_shared_health_before_it_answers(tmp_path: Path) -> None:
    async def body(server: RedisProcess, backend: CountingBackend) -> None:
        config = cluster_config(server.url, backend.port, interval="10s")
        client = server.client()
        client.set(f"gslb:health:{ZONE}:{APP}:{A}", "0", px=20_000)
        client.set(f"gslb:health:{ZONE}:{APP}:{B}", "1", px=20_000)
        async with apps(config, 1) as [app]:
            # Answering already reflects what Redis holds: A is down though it was never probed here.
            assert await answer(dns_port(app.bound)) == [B, C]
            assert app.book.status(KEY_A).last_change_reason == "first check: via redis: down"
            assert app.book.status((APP, B)).last_change_reason == "first check: via redis: up"
            assert backend.count(A) == 0

    with running_redis(tmp_path) as server, counting_backend() as backend:
        asyncio.run(body(server, backend))


def _readyz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_readyz_is_503_until_the_start_up_sync_is_done(tmp_path: Path) -> None:
    async def body(backend: CountingBackend) -> None:
        # A "Redis" that accepts connections and never answers: the start-up waits for the timeout.
        silent = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = silent.sockets[0].getsockname()[1]
        extra = 'api: {listen: "127.0.0.1:0"}'
        text = cluster_config(f"redis://127.0.0.1:{port}/0", backend.port, interval="1s", extra=extra)
        config = load_config_text(with_port(text))
        app = App(config, SystemClock(), random.Random(1))
        starting = asyncio.create_task(app.start())
        try:
            await wait_for(lambda: app.api is not None, timeout=5.0)
            assert app.api is not None
            assert await asyncio.to_thread(_readyz, app.api.port) == 503
            assert not app.bound
            await starting
            assert await asyncio.to_thread(_readyz, app.api.port) == 200
            assert app.cluster is not None and not app.cluster.connected
        finally:
            await app.stop()
            silent.close()

    with counting_backend() as backend:
        asyncio.run(body(backend))


def sample(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


def test_redis_killed_and_restarted_under_queries(tmp_path: Path) -> None:
    interval = 0.3

    async def body(server: RedisProcess, backend: CountingBackend) -> None:
        config = cluster_config(server.url, backend.port, interval="300ms")
        failures: list[str] = []
        answered = 0
        stop = asyncio.Event()

        async def query(ports: list[int]) -> None:
            nonlocal answered
            while not stop.is_set():
                for port in ports:
                    try:
                        await answer(port)
                        answered += 1
                    except Exception as exc:
                        failures.append(repr(exc))
                await asyncio.sleep(0.01)

        with captured("gslbd.cluster") as logs:
            async with apps(config, 2) as members:
                ports = [dns_port(app.bound) for app in members]
                querying = asyncio.create_task(query(ports))
                await asyncio.sleep(3 * interval)
                assert all(app.cluster is not None and app.cluster.connected for app in members)

                await asyncio.to_thread(server.kill)
                await wait_for(lambda: all(not app.cluster.connected for app in members if app.cluster), 3.0)
                assert sample("gslbd_redis_connected") == 0
                probes, began = backend.count(A), time.monotonic()
                backend.failing.add(A)  # each instance finds out by its own probes now
                await wait_for(lambda: all(app.book.status(KEY_A).healthy is False for app in members), 3.0)
                await asyncio.sleep(4 * interval)
                rate = (backend.count(A) - probes) / ((time.monotonic() - began) / interval)
                assert rate > 1.3  # both instances probe (about 2 per interval)
                for port in ports:
                    assert await answer(port) == [B, C]

                await asyncio.to_thread(server.start)
                await wait_for(lambda: all(app.cluster.connected for app in members if app.cluster), 5.0)
                assert sample("gslbd_redis_connected") == 1
                backend.failing.clear()
                await wait_for(lambda: all(app.book.status(KEY_A).healthy for app in members), 3.0)
                await wait_for(lambda: server.client().get(f"gslb:lock:{ZONE}:{APP}:{A}") is not None, 3.0)
                stop.set()
                await querying
        assert failures == []
        assert answered > 100
        warnings = [m for m in logs.messages(logging.WARNING) if m.startswith("cluster: lost Redis")]
        assert len(warnings) == 2  # one per instance for the whole outage
        assert len([m for m in logs.messages() if "is reachable again" in m]) == 2

    with running_redis(tmp_path) as server, counting_backend() as backend:
        asyncio.run(body(server, backend))


def test_a_reload_follows_the_new_endpoints_and_keeps_sharing(tmp_path: Path) -> None:
    async def body(server: RedisProcess, backend: CountingBackend) -> None:
        text = cluster_config(server.url, backend.port, interval="300ms")
        async with apps(text, 2) as members:
            await asyncio.sleep(0.7)
            smaller = text.replace(f"      - {{address: {C}, check: c2, probe_address: 127.0.0.1}}\n", "")
            assert smaller != text
            for app in members:
                app.reload(load_config_text(with_port(smaller)))
            await asyncio.sleep(0.4)  # a probe of C already under way may still finish
            probes_c, probes_a = backend.count(C), backend.count(A)
            await asyncio.sleep(1.2)
            assert backend.count(C) == probes_c  # nobody probes it any more
            assert 2 <= backend.count(A) - probes_a <= 6  # one probe per 0.3 s for both instances together
            for app in members:
                assert await answer(dns_port(app.bound)) == [A, B]

    with running_redis(tmp_path) as server, counting_backend() as backend:
        asyncio.run(body(server, backend))
