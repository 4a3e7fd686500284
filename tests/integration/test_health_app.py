"""The App with real health checks: HTTP backends on loopback fail and recover, the verdict reaches the
DNS answers within 100 ms, admin states persist across a restart, reloads carry health over."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from health_app_support import APP, EU, US, ZONE, addresses, dns_port, health_config, wait_for

from gslbd.api.control import Health
from gslbd.app import App
from gslbd.cli.demo_backends import Backend
from gslbd.clock import SystemClock
from gslbd.config import load_config, load_config_text
from gslbd.metrics import REGISTRY, SERVICE_REGISTRY
from gslbd.state.store import FileStateStore
from gslbd.types import AdminState

INTERVAL = 0.2


@asynccontextmanager
async def backends() -> AsyncIterator[tuple[Backend, Backend]]:
    eu, us = Backend("eu", "1"), Backend("us", "2")
    await eu.start()
    await us.start()
    try:
        yield eu, us
    finally:
        await eu.stop()
        await us.stop()


def sample(name: str, labels: dict[str, str] | None = None) -> float:
    """A sample of the shared registry, or of the per-service gauges' (metrics.SERVICE_REGISTRY)."""
    registry = SERVICE_REGISTRY if name.startswith("gslbd_health_endpoints") else REGISTRY
    return registry.get_sample_value(name, labels or {}) or 0.0


def test_a_failing_backend_changes_the_answer_after_fall_probes_within_100ms_of_the_verdict() -> None:
    async def body() -> None:
        async with backends() as (eu, us):
            config = load_config_text(health_config('["127.0.0.1:0"]', eu.port, us.port))
            app = App(config, SystemClock(), random.Random(5))
            await app.start()
            try:
                port = dns_port(app.bound)
                assert app.ready
                await wait_for(lambda: app.book.known(EU) is not None and app.book.known(US) is not None)
                assert app.book.status(EU).last_change_reason == "first check: HTTP 200"
                assert await addresses(port) == ["192.0.2.10"]
                downs = sample("gslbd_health_transitions_total", {"to": "down"})
                rebuilds = sample("gslbd_answer_table_rebuilds_total")

                eu.healthy = False
                failed_at = time.time()
                changed_at = 0.0
                while time.time() - failed_at < 5:
                    if await addresses(port) == ["198.51.100.10"]:
                        changed_at = time.time()
                        break
                    await asyncio.sleep(0.005)
                status = app.book.status(EU)
                assert status.healthy is False
                assert status.failures >= 2
                assert status.last_change_reason == "2 consecutive failures: HTTP 503 (expected 200)"
                assert status.last_change is not None
                # The verdict is answered within 100 ms ...
                assert 0 <= changed_at - status.last_change < 0.1
                # ... and it came after two failed probes: at most 2 x interval (+10 % jitter) + slack.
                assert changed_at - failed_at < 2 * INTERVAL * 1.1 + 0.5
                assert sample("gslbd_health_transitions_total", {"to": "down"}) == downs + 1
                assert sample("gslbd_answer_table_rebuilds_total") > rebuilds
                assert sample("gslbd_health_endpoints_up", {"service": APP}) == 1
                assert sample("gslbd_health_endpoints", {"service": APP}) == 2

                view = app.control.service(APP)
                assert view is not None
                eu_view = next(e for e in view.endpoints if e.address == "192.0.2.10")
                assert (eu_view.health, eu_view.admin, eu_view.effective_up) == (
                    Health.DOWN,
                    AdminState.OBEY,
                    False,
                )
                assert eu_view.last_detail == "HTTP 503 (expected 200)"

                # Recovery: rise 1, failback to eu.
                eu.healthy = True
                await wait_for(lambda: app.book.status(EU).healthy is True, timeout=3)
                await asyncio.sleep(0.05)
                assert await addresses(port) == ["192.0.2.10"]
                assert app.book.status(EU).last_change_reason == "1 consecutive success: HTTP 200"
            finally:
                await app.stop()
            assert not app.ready

    asyncio.run(body())


def test_admin_state_set_at_run_time_survives_a_restart_with_a_state_file(tmp_path: Path) -> None:
    state = tmp_path / "admin.json"
    extra = f"state: {{file: {state}}}"

    async def body() -> None:
        async with backends() as (eu, us):
            config = load_config_text(health_config('["127.0.0.1:0"]', eu.port, us.port, extra=extra))
            assert config.state.file == str(state)
            first = App(config, SystemClock(), random.Random(1))
            assert isinstance(first.store, FileStateStore)
            await first.start()
            try:
                port = dns_port(first.bound)
                assert await addresses(port, f"drained.{ZONE}") == ["192.0.2.98"]
                await first.set_admin("App.Gslb.Example.Com", "192.0.2.10", AdminState.DOWN)
                # Live before set_admin returned:
                assert await addresses(port) == ["198.51.100.10"]
                # An explicit obey is stored and overrides the config's `admin: down`.
                await first.set_admin(f"drained.{ZONE}", "192.0.2.99", AdminState.OBEY)
                assert await addresses(port, f"drained.{ZONE}") == ["192.0.2.98", "192.0.2.99"]
                with pytest.raises(KeyError):
                    await first.set_admin(APP, "192.0.2.77", AdminState.DOWN)
                with pytest.raises(KeyError):
                    await first.set_admin(f"nope.{ZONE}", "192.0.2.10", AdminState.DOWN)
            finally:
                await first.stop()
            assert json.loads(state.read_text())["admin"] == {
                f"{APP}|192.0.2.10": "down",
                f"drained.{ZONE}|192.0.2.99": "obey",
            }

            second = App(config, SystemClock(), random.Random(2))
            await second.start()
            try:
                port = dns_port(second.bound)
                assert await addresses(port) == ["198.51.100.10"]
                assert await addresses(port, f"drained.{ZONE}") == ["192.0.2.98", "192.0.2.99"]
                view = second.control.service(APP)
                assert view is not None
                assert [(e.address, e.admin) for e in view.endpoints] == [
                    ("192.0.2.10", AdminState.DOWN),
                    ("198.51.100.10", AdminState.OBEY),
                ]
            finally:
                await second.stop()

    asyncio.run(body())


def test_reload_carries_the_health_of_unchanged_endpoints_and_resets_rechecked_ones(tmp_path: Path) -> None:
    async def body() -> None:
        async with backends() as (eu, us):
            path = tmp_path / "gslbd.yaml"
            path.write_text(health_config('["127.0.0.1:0"]', eu.port, us.port))
            app = App(load_config(path), SystemClock(), random.Random(9))
            await app.start()
            try:
                port = dns_port(app.bound)
                await wait_for(lambda: app.book.known(EU) is not None and app.book.known(US) is not None)
                eu.healthy = False
                await wait_for(lambda: app.book.status(EU).healthy is False, timeout=3)
                before = app.book.status(EU)
                applied = sample("gslbd_config_reloads_total", {"result": "applied"})
                refused = sample("gslbd_config_reloads_total", {"result": "refused"})

                # Same checks, new TXT: eu stays down without waiting for a probe.
                path.write_text(health_config('["127.0.0.1:0"]', eu.port, us.port, txt="two"))
                assert await app.reload_file() == []
                assert app.book.known(EU) is not None
                assert app.book.known(EU).healthy is False  # type: ignore[union-attr]
                assert app.book.status(EU).last_change == before.last_change
                assert await addresses(port) == ["198.51.100.10"]
                assert sample("gslbd_config_reloads_total", {"result": "applied"}) == applied + 1

                # A broken file is refused with every error; the old config keeps answering.
                path.write_text("version: 1\nservices: [{name: x, policy: sideways}]\n")
                errors = await app.reload_file()
                assert errors
                assert all(line.startswith(f"{path}:") for line in errors)
                assert any("sideways" in line for line in errors)
                assert await addresses(port) == ["198.51.100.10"]
                assert sample("gslbd_config_reloads_total", {"result": "refused"}) == refused + 1

                # eu's check changes: its health starts over (unknown counts as up) until probed.
                path.write_text(health_config('["127.0.0.1:0"]', eu.port, us.port, eu_path="/other"))
                assert await app.reload_file() == []
                view = app.control.service(APP)
                assert view is not None
                assert [e.health for e in view.endpoints] == [Health.UNKNOWN, Health.UP]
                assert app.book.known(US) is not None
            finally:
                await app.stop()

    asyncio.run(body())


@contextlib.contextmanager
def silent_port() -> Iterator[int]:
    """A TCP port that accepts connections (the kernel's backlog) and never answers: a probe of it
    ends only at its timeout, so the verdict an endpoint starts from is what the answers show."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


def test_a_restart_starts_from_the_kept_verdicts_until_the_first_results(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    extra = f"state: {{file: {state}}}"

    async def body() -> None:
        async with backends() as (eu, us):
            eu.healthy = False  # eu answers 503: down at its first result
            text = health_config('["127.0.0.1:0"]', eu.port, us.port, extra=extra)
            first = App(load_config_text(text), SystemClock(), random.Random(1))
            await first.start()
            try:
                port = dns_port(first.bound)
                await wait_for(lambda: first.book.status(EU).healthy is False)
                assert await addresses(port) == ["198.51.100.10"]
            finally:
                await first.stop()  # saves the verdicts once more
            kept = json.loads(state.read_text())["verdicts"]
            assert kept[f"{APP}|192.0.2.10"]["up"] is False
            assert kept[f"{APP}|198.51.100.10"]["up"] is True

            with silent_port() as quiet:  # eu's probes now hang: no result for 10 s
                text = health_config('["127.0.0.1:0"]', quiet, us.port, extra=extra)
                text = text.replace("interval: 200ms", "interval: 20s").replace(
                    "timeout: 100ms", "timeout: 10s"
                )
                second = App(load_config_text(text), SystemClock(), random.Random(2))
                await second.start()
                try:
                    assert await addresses(dns_port(second.bound)) == ["198.51.100.10"]  # eu still down
                    status = second.book.status(EU)
                    assert status.provisional and status.last_change_reason.startswith(
                        "kept from before the restart: down"
                    )
                finally:
                    await second.stop()

                # Verdicts older than a few intervals are not used: eu counts as up (no verdict) again.
                aged = json.loads(state.read_text())
                for verdict in aged["verdicts"].values():
                    verdict["checked"] -= 3600
                state.write_text(json.dumps(aged))
                third = App(load_config_text(text), SystemClock(), random.Random(3))
                await third.start()
                try:
                    assert await addresses(dns_port(third.bound)) == ["192.0.2.10"]
                    assert third.book.known(EU) is None
                finally:
                    await third.stop()

    asyncio.run(body())


def test_initial_down_keeps_an_endpoint_out_of_the_answers_until_its_first_success() -> None:
    async def body() -> None:
        async with backends() as (eu, us):
            with silent_port() as quiet:
                text = health_config('["127.0.0.1:0"]', quiet, us.port)
                text = text.replace(
                    f"eu: {{type: http, port: {quiet},", f"eu: {{type: http, initial: down, port: {quiet},"
                )
                config = load_config_text(
                    text.replace("interval: 200ms", "interval: 20s", 1).replace(
                        "timeout: 100ms", "timeout: 10s", 1
                    )
                )
                app = App(config, SystemClock(), random.Random(1))
                await app.start()
                try:
                    port = dns_port(app.bound)
                    assert await addresses(port) == ["198.51.100.10"]  # eu held down, no result yet
                    assert app.book.status(EU).last_change_reason == "initial: down (no check result yet)"
                finally:
                    await app.stop()
            # The same check answering: the first success decides at once.
            text = health_config('["127.0.0.1:0"]', eu.port, us.port).replace(
                f"eu: {{type: http, port: {eu.port},", f"eu: {{type: http, initial: down, port: {eu.port},"
            )
            app = App(load_config_text(text), SystemClock(), random.Random(2))
            await app.start()
            try:
                port = dns_port(app.bound)
                await wait_for(
                    lambda: app.book.status(EU).healthy is True and not app.book.status(EU).provisional
                )
                assert await addresses(port) == ["192.0.2.10"]
            finally:
                await app.stop()

    asyncio.run(body())
