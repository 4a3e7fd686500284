"""PUT /api/v1/admin on a running App: a bulk change by selector is applied in one generation, saved in
the state file and seen in DNS; a dry run answers the same and changes nothing; bad bodies get 400 and a
change that breaks a safety rule 409, with nothing changed."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
from health_app_support import addresses, dns_port

from gslbd.app import App
from gslbd.clock import SystemClock
from gslbd.config import load_config

TOKEN = "bulk-token"
ALL_APP = ["192.0.2.10", "192.0.2.11", "198.51.100.10"]
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ZONE = "gslb.example.com."
CONFIG = f"""
version: 1
site: {{name: eu}}
dns: {{listen: ["127.0.0.1:0"], lame_duck: 0s}}
api: {{listen: "127.0.0.1:0", token: {TOKEN}}}
state: {{file: state.json}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
services:
  - name: app.{ZONE}
    check: none
    endpoints:
      - {{address: 192.0.2.10, site: eu, tags: [canary]}}
      - {{address: 192.0.2.11, site: eu}}
      - {{address: 198.51.100.10, site: us}}
  - name: web.{ZONE}
    check: none
    endpoints:
      - {{address: 192.0.2.20, site: eu}}
      - {{address: 198.51.100.20, site: us, tags: [canary]}}
  - name: other.{ZONE}
    check: none
    endpoints:
      - {{address: 203.0.113.1, site: us}}
{{extra}}
"""


def run(tmp_path: Path, extra: str, body: Any) -> None:
    path = tmp_path / "gslbd.yaml"
    path.write_text(CONFIG.replace("{extra}", extra))

    async def main() -> None:
        app = App(load_config(str(path)), SystemClock(), random.Random(7))
        await app.start()
        try:
            # a first answer: the generation the start schedules is committed before the body counts them
            assert await addresses(dns_port(app.bound), f"app.{ZONE}") == ALL_APP
            async with aiohttp.ClientSession() as http:
                await body(app, http)
        finally:
            await app.stop()

    asyncio.run(main())


async def put(http: aiohttp.ClientSession, url: str, doc: object) -> tuple[int, Any]:
    async with http.put(url, json=doc, headers=AUTH) as r:
        return r.status, await r.json()


def test_a_bulk_down_of_a_site_changes_dns_in_one_generation_and_is_saved(tmp_path: Path) -> None:
    async def body(app: App, http: aiohttp.ClientSession) -> None:
        assert app.api is not None
        url, port = f"{app.api.url}/api/v1/admin", dns_port(app.bound)
        assert await addresses(port, f"app.{ZONE}") == ALL_APP
        number = app.generation.number
        status, doc = await put(
            http, url, {"selector": {"site": "eu", "service": "*.gslb.example.com"}, "state": "down"}
        )
        assert status == 200, doc
        # one generation for the three endpoints of two services
        assert app.generation.number == doc["generation"] == number + 1
        assert app.generation.changed == {f"app.{ZONE}", f"web.{ZONE}"}
        assert doc["changed"] == [
            {"service": f"app.{ZONE}", "address": "192.0.2.10", "state": "down"},
            {"service": f"app.{ZONE}", "address": "192.0.2.11", "state": "down"},
            {"service": f"web.{ZONE}", "address": "192.0.2.20", "state": "down"},
        ]
        app_answer = next(a for a in doc["answers"] if a["service"] == f"app.{ZONE}")
        assert app_answer["type"] == "A"
        assert len(app_answer["before"]["answer"]) == 3
        assert [rr.split()[-1] for rr in app_answer["after"]["answer"]] == ["198.51.100.10"]
        assert await addresses(port, f"app.{ZONE}") == ["198.51.100.10"]
        assert await addresses(port, f"web.{ZONE}") == ["198.51.100.20"]
        saved = json.loads((tmp_path / "state.json").read_text())
        assert sum(1 for v in saved["admin"].values() if v == "down") == 3, saved
        # the same again changes nothing and builds nothing
        status, doc = await put(http, url, {"selector": {"site": "eu"}, "state": "down"})
        assert (status, doc["changed"], doc["answers"]) == (200, [], [])
        assert app.generation.number == number + 1

    run(tmp_path, "", body)


def test_a_dry_run_answers_the_same_and_changes_nothing(tmp_path: Path) -> None:
    async def body(app: App, http: aiohttp.ClientSession) -> None:
        assert app.api is not None
        url, port = f"{app.api.url}/api/v1/admin", dns_port(app.bound)
        number = app.generation.number
        status, doc = await put(http, f"{url}?dry_run=1", {"selector": {"tags": ["canary"]}, "state": "down"})
        assert status == 200, doc
        assert doc["dry_run"] is True
        assert [c["address"] for c in doc["changed"]] == ["192.0.2.10", "198.51.100.20"]
        assert {a["service"] for a in doc["answers"]} == {f"app.{ZONE}", f"web.{ZONE}"}
        status, same = await put(
            http, url, {"selector": {"tags": ["canary"]}, "state": "down", "dry_run": True}
        )
        assert (status, same) == (200, doc)
        assert app.generation.number == number
        assert await addresses(port, f"app.{ZONE}") == ALL_APP
        assert not (tmp_path / "state.json").exists() or "down" not in (tmp_path / "state.json").read_text()

    run(tmp_path, "", body)


def test_bad_bulk_bodies_get_400_and_change_nothing(tmp_path: Path) -> None:
    async def body(app: App, http: aiohttp.ClientSession) -> None:
        assert app.api is not None
        url = f"{app.api.url}/api/v1/admin"
        number = app.generation.number
        cases = [
            (
                {"selector": {}, "state": "down"},
                "not changed: an empty selector would change every endpoint; name a key",
            ),
            (
                {"selector": {"site": "ap"}, "state": "down"},
                "not changed: selector site=ap matches no endpoint",
            ),
            (
                {"selector": {"rack": "1"}, "state": "down"},
                "not changed: selector: unknown key 'rack' (keys: site, region, service, address, tags)",
            ),
            (
                {"selector": {"site": "eu"}, "state": "down", "now": 1},
                "unknown key 'now' (keys: selector, state, force, dry_run)",
            ),
            (
                {"selector": {"site": "eu"}, "state": "off"},
                "unknown state 'off'; valid states: obey | up | down",
            ),
            (
                {"state": "down"},
                'no selector: the body must be JSON like {"selector": {"site": "eu"}, "state": "down"}',
            ),
        ]
        for doc, error in cases:
            status, answer = await put(http, url, doc)
            assert (status, answer["error"]) == (400, error)
        assert app.generation.number == number
        async with http.put(url, json={"selector": {"site": "eu"}, "state": "down"}) as r:
            assert r.status == 401

    run(tmp_path, "", body)


def test_a_bulk_change_that_breaks_a_safety_rule_gets_409_unless_forced(tmp_path: Path) -> None:
    async def body(app: App, http: aiohttp.ClientSession) -> None:
        assert app.api is not None
        url, port = f"{app.api.url}/api/v1/admin", dns_port(app.bound)
        number = app.generation.number
        change = {"selector": {"site": "eu", "service": "app.*"}, "state": "down"}
        status, doc = await put(http, url, change)
        assert status == 409, doc
        assert doc["rules"][0]["rule"] == "safety[0]"
        assert 'safety[0] (min_sites_up: 2, services: "app.*") would be broken' in doc["error"]
        assert app.generation.number == number
        status, doc = await put(http, f"{url}?dry_run=1", change)
        assert status == 409
        assert await addresses(port, f"app.{ZONE}") == ALL_APP
        status, doc = await put(http, url, {**change, "force": True})
        assert status == 200, doc
        assert await addresses(port, f"app.{ZONE}") == ["198.51.100.10"]

    run(tmp_path, 'safety:\n  - {min_sites_up: 2, services: "app.*"}\n', body)


def gslbd(*args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "GSLBD_API_TOKEN"}
    command = [sys.executable, "-m", "gslbd", *args]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=30, env=environ)


def test_the_cli_sets_a_site_down_with_a_dry_run_first_and_keeps_the_one_endpoint_form(
    tmp_path: Path,
) -> None:
    async def body(app: App, http: aiohttp.ClientSession) -> None:
        assert app.api is not None
        base, port = app.api.url, dns_port(app.bound)
        flags = ("--api", base, "--token", TOKEN)
        dry = await asyncio.to_thread(
            gslbd, "admin", "set", "--site", "eu", "--tag", "canary", "--dry-run", "down", *flags
        )
        assert (dry.returncode, dry.stderr) == (0, "")
        assert dry.stdout == (
            "would set 1 of 1 matched endpoints down\n"
            f"  app.{ZONE} 192.0.2.10\n"
            f"app.{ZONE} A:\n"
            "  before: 192.0.2.10, 192.0.2.11, 198.51.100.10\n"
            "  after:  192.0.2.11, 198.51.100.10\n"
        ), dry.stdout
        assert await addresses(port, f"app.{ZONE}") == ALL_APP
        done = await asyncio.to_thread(gslbd, "admin", "set", "--site", "eu", "down", *flags)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("set 3 of 3 matched endpoints down\n")
        assert await addresses(port, f"app.{ZONE}") == ["198.51.100.10"]
        none = await asyncio.to_thread(gslbd, "admin", "set", "--site", "ap", "down", *flags)
        assert (none.returncode, none.stderr) == (
            1,
            "gslbd admin set: 400 not changed: selector site=ap matches no endpoint\n",
        )
        bad = await asyncio.to_thread(gslbd, "admin", "set", "--site", "eu", f"app.{ZONE}", "down", *flags)
        assert bad.returncode == 2
        assert "with a selector give only the STATE" in bad.stderr
        one = await asyncio.to_thread(gslbd, "admin", "set", f"app.{ZONE}", "192.0.2.10", "obey", *flags)
        assert (one.returncode, one.stdout) == (0, f"app.{ZONE} 192.0.2.10: admin obey (now answered: yes)\n")
        assert await addresses(port, f"app.{ZONE}") == ["192.0.2.10", "198.51.100.10"]

    run(tmp_path, "", body)
