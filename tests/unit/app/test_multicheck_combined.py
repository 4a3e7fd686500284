"""An App with `endpoints[].checks`: each check is probed as its own unit with its own verdict machine,
and the combined verdict (health all|any) is what the answers and the counts use."""

from __future__ import annotations

import asyncio
import random

from gslbd.app.core import App
from gslbd.app.generation import resolve
from gslbd.app.verdicts import current, seed
from gslbd.clock import FakeClock
from gslbd.config import load_config_text
from gslbd.errors import NotPushed
from gslbd.metrics import ENDPOINT_CHECK_UP
from gslbd.model.service import Endpoint
from gslbd.state.book import HealthBook
from gslbd.state.status import ProbeResult
from gslbd.state.store import KeptVerdict

CONFIG = """\
zones: [{origin: gslb.example.com., nameservers: [{name: ns1, address: 127.0.0.2}]}]
checks:
  web: {type: http, port: 1, rise: 1, fall: 1}
  db: {type: tcp, port: 1, rise: 1, fall: 2}
  beat: {type: push, ttl: 60s}
services:
  - name: app
    endpoints:
      - {address: 192.0.2.1, checks: [web, db]}
      - {address: 192.0.2.2, checks: [web, db], health: any}
      - {address: 192.0.2.3, checks: [web, beat]}
"""
APP = "app.gslb.example.com."


def _up(app: App) -> tuple[str, ...]:
    count = app.generation.count(APP)
    assert count is not None
    return count.up_addresses


def _unit(app: App, address: str, check: str) -> Endpoint:
    return app.generation.resolved.probed[(APP, f"{address}#{check}")]


def _gauge(address: str, check: str) -> float:
    return ENDPOINT_CHECK_UP.labels(APP, address, check)._value.get()


def test_each_check_is_a_probed_unit_and_all_or_any_decides_the_answer() -> None:
    async def scenario() -> None:
        app = App(load_config_text(CONFIG), FakeClock(), random.Random(1))
        probed = app.generation.resolved.probed
        assert sorted(k[1] for k in probed) == [
            "192.0.2.1#db",
            "192.0.2.1#web",
            "192.0.2.2#db",
            "192.0.2.2#web",
            "192.0.2.3#beat",
            "192.0.2.3#web",
        ]
        assert sorted(app._probes(), key=lambda e: e.key) == sorted(
            (e for e in probed.values() if e.check is not None and e.check.name != "beat"),
            key=lambda e: e.key,
        )
        for address in ("192.0.2.1", "192.0.2.2"):
            app._on_result(_unit(app, address, "db"), ProbeResult(True, "connected"))
            app._on_result(_unit(app, address, "web"), ProbeResult(False, "HTTP 503"))  # fall 1: down
        app._rebuild()
        assert _up(app) == ("192.0.2.2", "192.0.2.3")  # all: out with web down; any: db still up
        status = app.book.status((APP, "192.0.2.1"))
        assert status.healthy is False
        assert status.last_change_reason.startswith("health all: web down (first check: HTTP 503)")
        assert _gauge("192.0.2.1", "web") == 0 and _gauge("192.0.2.1", "db") == 1
        kept = current(app.book)  # what the state file keeps: each check's verdict and the combined one
        assert [kept[(APP, a)].up for a in ("192.0.2.1#web", "192.0.2.1#db", "192.0.2.1")] == [
            False,
            True,
            False,
        ]
        app._on_result(_unit(app, "192.0.2.2", "db"), ProbeResult(False, "refused"))  # db's fall is 2
        app._rebuild()
        assert _up(app) == ("192.0.2.2", "192.0.2.3")
        app._on_result(_unit(app, "192.0.2.2", "db"), ProbeResult(False, "refused"))
        app._rebuild()
        assert _up(app) == ("192.0.2.3",)  # any: out once both are down
        assert app.book.status((APP, "192.0.2.2")).last_change_reason.startswith(
            "health any: every check down ("
        )

    asyncio.run(scenario())


def test_a_push_check_among_several_is_fed_by_the_push_api_and_a_plain_check_is_not() -> None:
    async def scenario() -> None:
        app = App(load_config_text(CONFIG), FakeClock(), random.Random(1))
        app._push.update(app.generation.resolved.probed.values())
        app.push_health(APP, "192.0.2.3", False, "disk full")
        app._rebuild()
        assert "192.0.2.3" not in _up(app)
        assert app.book.status((APP, "192.0.2.3#beat")).last_detail == "push: disk full"
        try:
            app.push_health(APP, "192.0.2.1", True, "")
        except NotPushed as exc:
            assert str(exc) == f"{APP} 192.0.2.1 has no push check among its checks (web, db) here"
        else:
            raise AssertionError("a push for an endpoint without a push check was taken")

    asyncio.run(scenario())


def test_each_check_starts_from_its_own_kept_verdict_and_the_endpoint_is_combined_from_them() -> None:
    clock = FakeClock()
    now = clock.wall()
    resolved = resolve(load_config_text(CONFIG), random.Random(1), wall=now)
    book = HealthBook()
    kept = {
        (APP, "192.0.2.1#db"): KeptVerdict(False, now - 2),
        (APP, "192.0.2.2#db"): KeptVerdict(False, now - 2),
        (APP, "192.0.2.1#web"): KeptVerdict(True, now - 2),
    }
    seed(book, resolved, kept, now)
    assert (
        book.status((APP, "192.0.2.1#db")).last_change_reason
        == "kept from before the restart: down, checked 2s before"
    )
    assert book.status((APP, "192.0.2.1")).healthy is False  # all: db kept down
    assert book.status((APP, "192.0.2.2")).healthy is True  # any: web has no verdict yet, counts as up


def test_a_reload_that_adds_a_check_keeps_the_verdict_of_the_check_that_stayed() -> None:
    async def scenario() -> None:
        app = App(load_config_text(CONFIG), FakeClock(), random.Random(1))
        app._on_result(_unit(app, "192.0.2.1", "db"), ProbeResult(False, "refused"))
        app._on_result(_unit(app, "192.0.2.1", "db"), ProbeResult(False, "refused"))  # fall 2: down
        app._rebuild()
        assert "192.0.2.1" not in _up(app)
        app.reload(load_config_text(CONFIG.replace("checks: [web, db]}", "checks: [db, beat]}", 1)))
        assert app.book.status((APP, "192.0.2.1#db")).healthy is False
        assert app.book.known((APP, "192.0.2.1#web")) is None  # a check the endpoint no longer has
        assert app.book.status((APP, "192.0.2.1")).healthy is False
        assert "192.0.2.1" not in _up(app)
        app.reload(load_config_text(CONFIG.replace("checks: [web, db]}", "checks: [web]}", 1)))
        assert app.book.status((APP, "192.0.2.1")).healthy is None  # web alone, no result yet: up
        assert "192.0.2.1" in _up(app)

    asyncio.run(scenario())
