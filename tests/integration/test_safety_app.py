"""Safety rules in a running App with its admin API: real HTTP probes, real admin calls and reloads.
An admin change or a reload that would break a rule is refused (409 / 422) with the rule named; forced,
it is applied and logged; a probe failure that breaks a rule is not refused but sets the gauge."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from health_app_support import APP, ThreadedBackend, addresses, dns_port, health_config

from gslbd.app import App
from gslbd.clock import SystemClock
from gslbd.config import load_config

TOKEN = "safety-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SAFETY = f"""api: {{listen: "127.0.0.1:0", token: {TOKEN}}}
safety:
  - {{min_sites_up: 2, services: "app.*"}}
  - {{min_endpoints_up: 1}}
"""
REFUSAL = (
    'not changed: safety[0] (min_sites_up: 2, services: "app.*") would be broken: '
    'app.gslb.example.com. would have 1 site up (2 now); send {"state": ..., "force": true} '
    "to apply it anyway"
)


def broken_gauge(scrape: str, rule: str) -> float | None:
    found = re.search(rf'^gslbd_safety_rule_broken\{{rule="{re.escape(rule)}"\}} (\S+)$', scrape, re.M)
    return None if found is None else float(found.group(1))


async def until(check: Any, timeout: float = 10.0) -> None:
    """Until the coroutine function `check` returns true (it polls the API: no fixed sleep)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


def test_admin_changes_and_reloads_that_break_a_rule_are_refused_unless_forced_and_health_sets_the_gauge(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    eu, us = ThreadedBackend(), ThreadedBackend()
    path = tmp_path / "gslbd.yaml"
    text = health_config('["127.0.0.1:0"]', eu.port, us.port, extra=SAFETY)
    path.write_text(text)

    async def body() -> None:
        app = App(load_config(str(path)), SystemClock(), random.Random(7))
        await app.start()
        try:
            assert app.api is not None
            base, port = app.api.url, dns_port(app.bound)
            admin = f"{base}/api/v1/services/{APP}/endpoints/192.0.2.10/admin"
            async with aiohttp.ClientSession() as http:

                async def gauge(rule: str) -> float | None:
                    async with http.get(f"{base}/metrics") as r:
                        return broken_gauge(await r.text(), rule)

                async def health() -> list[str]:
                    async with http.get(f"{base}/api/v1/services/{APP}") as r:
                        return [e["health"] for e in (await r.json())["endpoints"]]

                async def both_up() -> bool:
                    return await health() == ["up", "up"]

                await until(both_up)
                assert (await gauge("safety[0]"), await gauge("safety[1]")) == (0.0, 0.0)

                # Taking eu down would leave app one site: refused, the rule named, nothing changed.
                async with http.put(admin, json={"state": "down"}, headers=AUTH) as r:
                    assert r.status == 409
                    refused = await r.json()
                assert refused == {
                    "error": REFUSAL,
                    "rules": [
                        {
                            "rule": "safety[0]",
                            "message": REFUSAL.removeprefix("not changed: ").split("; send")[0],
                            "services": [APP],
                        }
                    ],
                }
                assert await addresses(port) == ["192.0.2.10"]

                # The only answerable endpoint of drained: safety[1] (services "*") refuses it.
                drained = f"{base}/api/v1/services/drained.gslb.example.com/endpoints/192.0.2.98/admin"
                async with http.put(drained, json={"state": "down"}, headers=AUTH) as r:
                    assert r.status == 409
                    assert [rule["rule"] for rule in (await r.json())["rules"]] == ["safety[1]"]

                # Forced: applied, answered, logged at WARNING with the rule; the gauge shows it broken.
                with caplog.at_level(logging.WARNING, logger="gslbd.app.safety"):
                    async with http.put(admin, json={"state": "down", "force": True}, headers=AUTH) as r:
                        assert r.status == 200
                        assert (await r.json())["state"] == "down"
                forced = [rec for rec in caplog.records if rec.name == "gslbd.app.safety"]
                assert [rec.levelno for rec in forced] == [logging.WARNING]
                assert "forced although safety[0]" in forced[0].getMessage()
                assert await addresses(port) == ["198.51.100.10"]
                assert await gauge("safety[0]") == 1.0

                # Obey again repairs it: never refused.
                async with http.put(admin, json={"state": "obey"}, headers=AUTH) as r:
                    assert r.status == 200
                assert await gauge("safety[0]") == 0.0

                # A probe failure breaks the rule: a fact, not refused; the gauge says so, then clears.
                us.healthy = False

                async def us_down() -> bool:
                    return await health() == ["up", "down"]

                await until(us_down)
                assert await gauge("safety[0]") == 1.0
                assert await gauge("safety[1]") == 0.0
                us.healthy = True
                await until(both_up)
                assert await gauge("safety[0]") == 0.0

                # A reload that drops the us endpoint is refused with the rule at its line ...
                path.write_text(
                    text.replace("      - {address: 198.51.100.10", "      # - {address: 198.51.100.10")
                )
                async with http.post(f"{base}/api/v1/reload", headers=AUTH) as r:
                    assert r.status == 422
                    errors = (await r.json())["errors"]
                line = next(n for n, row in enumerate(path.read_text().splitlines(), 1) if "app.*" in row)
                assert errors == [
                    f'{path}:{line}: safety: safety[0] (min_sites_up: 2, services: "app.*") would be '
                    "broken: app.gslb.example.com. would have 1 site up (2 now); reload refused; "
                    'send {"force": true} to apply it anyway'
                ]
                assert await addresses(port) == ["192.0.2.10"]
                # ... and applied when forced.
                async with http.post(f"{base}/api/v1/reload", json={"force": True}, headers=AUTH) as r:
                    assert (r.status, await r.json()) == (200, {"applied": True, "errors": []})
                assert await health() == ["up"]
                assert await gauge("safety[0]") == 1.0
        finally:
            await app.stop()

    try:
        asyncio.run(body())
    finally:
        eu.close()
        us.close()


def test_gslbd_admin_set_is_refused_with_the_rule_and_applies_with_force(tmp_path: Path) -> None:
    eu, us = ThreadedBackend(), ThreadedBackend()
    path = tmp_path / "gslbd.yaml"
    path.write_text(health_config('["127.0.0.1:0"]', eu.port, us.port, extra=SAFETY))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        environ = {k: v for k, v in os.environ.items() if k != "GSLBD_API_TOKEN"}
        command = [sys.executable, "-m", "gslbd", "admin", "set", APP, "192.0.2.10", "down", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=30, env=environ, check=False)

    async def body() -> None:
        app = App(load_config(str(path)), SystemClock(), random.Random(7))
        await app.start()
        try:
            assert app.api is not None
            base, port = app.api.url, dns_port(app.bound)
            async with aiohttp.ClientSession() as http:

                async def both_up() -> bool:
                    async with http.get(f"{base}/api/v1/services/{APP}") as r:
                        return [e["health"] for e in (await r.json())["endpoints"]] == ["up", "up"]

                await until(both_up)
            refused = await asyncio.to_thread(cli, "--api", base, "--token", TOKEN)
            assert (refused.returncode, refused.stdout) == (1, "")
            assert refused.stderr == (
                f"gslbd admin set: 409 {REFUSAL} (gslbd admin set --force applies it anyway)\n"
            )
            assert await addresses(port) == ["192.0.2.10"]
            forced = await asyncio.to_thread(cli, "--api", base, "--token", TOKEN, "--force")
            assert (forced.returncode, forced.stderr) == (0, "")
            assert forced.stdout == f"{APP} 192.0.2.10: admin down (now answered: no)\n"
            assert await addresses(port) == ["198.51.100.10"]
        finally:
            await app.stop()

    try:
        asyncio.run(body())
    finally:
        eu.close()
        us.close()
